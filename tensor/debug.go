package tensor

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

var (
	debugTracking atomic.Bool
	liveMu        sync.Mutex
	live          = map[*Tensor]struct{}{}
)

// SetDebugTracking turns on recording of the source line that creates each tensor, so
// LiveTensors can group the tensors still alive by where they came from. It costs a
// stack walk per tensor: use it to hunt leaks, not in production.
func SetDebugTracking(on bool) { debugTracking.Store(on) }

func callerLine() string {
	var pcs [16]uintptr
	n := runtime.Callers(3, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		if !strings.Contains(f.File, "/gamp/tensor/") || strings.HasSuffix(f.File, "_test.go") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if !more {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
	}
}

func trackLive(t *Tensor) {
	liveMu.Lock()
	live[t] = struct{}{}
	liveMu.Unlock()
}

func untrackLive(t *Tensor) {
	if t.origin == "" {
		return
	}
	liveMu.Lock()
	delete(live, t)
	liveMu.Unlock()
}

// LiveGroup is the tensors still alive that were created at one source line.
type LiveGroup struct {
	Origin string
	Count  int
	Bytes  int64
}

// LiveTensors reports the tensors created while debug tracking was on and not yet
// released, grouped by creating line, largest first.
func LiveTensors() []LiveGroup {
	liveMu.Lock()
	defer liveMu.Unlock()
	m := map[string]*LiveGroup{}
	for t := range live {
		g := m[t.origin]
		if g == nil {
			g = &LiveGroup{Origin: t.origin}
			m[t.origin] = g
		}
		g.Count++
		g.Bytes += int64(t.Numel() * t.dtype.Size())
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
