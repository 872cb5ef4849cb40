package tensor

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"weak"
)

var (
	debugTracking atomic.Bool
	liveMu        sync.Mutex
	// live holds weak pointers so that turning tracking on does not keep untracked
	// tensors (which the GC cleans up as a last resort) alive.
	live = map[weak.Pointer[Tensor]]struct{}{}
)

// SetDebugTracking turns on recording of the source line that creates each tensor, so
// LiveTensors can group the tensors still alive by where they came from. It costs a
// stack walk per tensor: use it to hunt leaks, not in production.
func SetDebugTracking(on bool) { debugTracking.Store(on) }

// DebugTracking reports whether SetDebugTracking is on.
func DebugTracking() bool { return debugTracking.Load() }

// Origin returns the source line ("file.go:42") that created t, or "" when debug
// tracking was off at the time. The line is the caller's: frames inside gamp's
// library packages are skipped, test files and main packages are not.
func (t *Tensor) Origin() string { return t.origin }

// gampPrefix is the import-path prefix of gamp's packages ("github.com/gamp-ml/gamp/"),
// derived from this package's own path so that a fork or a vendored copy still works.
var gampPrefix = func() string {
	pc, _, _, _ := runtime.Caller(0)
	name := runtime.FuncForPC(pc).Name() // ".../gamp/tensor.init" or similar
	if i := strings.LastIndex(name, "/tensor."); i >= 0 {
		return name[:i+1]
	}
	return "github.com/gamp-ml/gamp/"
}()

// internalFrame reports whether a frame belongs to gamp's library code (tensor, nn,
// amp, autocast, memory, …) and so is not the line a user wants to see. Test files
// count as user code (that is where leak tests live); main packages (examples, cmd)
// have function names starting with "main." and count as user code too.
func internalFrame(f runtime.Frame) bool {
	if strings.HasSuffix(f.File, "_test.go") {
		return false
	}
	return strings.HasPrefix(f.Function, gampPrefix) || strings.HasPrefix(f.Function, "runtime.")
}

// callerLine returns the first frame outside gamp's library packages above the
// allocation, or, when there is none (a tensor made by a goroutine gamp started), the
// innermost frame outside package tensor.
func callerLine() string {
	var pcs [64]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	var fallback, first string
	for {
		f, more := frames.Next()
		line := fmt.Sprintf("%s:%d", f.File, f.Line)
		if first == "" {
			first = line
		}
		if !internalFrame(f) {
			return line
		}
		if fallback == "" && !strings.HasPrefix(f.Function, gampPrefix+"tensor.") && !strings.HasPrefix(f.Function, "runtime.") {
			fallback = line
		}
		if !more {
			break
		}
	}
	if fallback != "" {
		return fallback
	}
	return first
}

func trackLive(t *Tensor) {
	liveMu.Lock()
	live[weak.Make(t)] = struct{}{}
	liveMu.Unlock()
}

func untrackLive(t *Tensor) {
	if t.origin == "" {
		return
	}
	liveMu.Lock()
	delete(live, weak.Make(t))
	liveMu.Unlock()
}

// LiveGroup is the tensors still alive that were created at one source line.
type LiveGroup struct {
	Origin string
	Count  int
	// Bytes is the size of the tensors' elements; views of one storage each count.
	Bytes int64
	// Example describes the largest tensor of the group ("[64 784] float32 cpu").
	Example string
}

// LiveTensors reports the tensors created while debug tracking was on and not yet
// released, grouped by creating line, largest first. Tensors the GC has collected
// (untracked ones whose cleanup ran) are not alive and are not reported.
func LiveTensors() []LiveGroup {
	liveMu.Lock()
	defer liveMu.Unlock()
	m := map[string]*LiveGroup{}
	biggest := map[string]int64{}
	for wp := range live {
		t := wp.Value()
		if t == nil || t.released.Load() {
			delete(live, wp)
			continue
		}
		g := m[t.origin]
		if g == nil {
			g = &LiveGroup{Origin: t.origin}
			m[t.origin] = g
		}
		b := int64(t.Numel() * t.dtype.Size())
		g.Count++
		g.Bytes += b
		desc := fmt.Sprintf("%v %s %s", t.shape, t.dtype, t.device)
		if prev, ok := biggest[t.origin]; !ok || b > prev || (b == prev && desc < g.Example) {
			biggest[t.origin] = b
			g.Example = desc
		}
	}
	out := make([]LiveGroup, 0, len(m))
	for _, g := range m {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Bytes != out[j].Bytes {
			return out[i].Bytes > out[j].Bytes
		}
		return out[i].Origin < out[j].Origin
	})
	return out
}
