package backend

import (
	"fmt"
	"strings"
	"sync"
)

// Factory opens the backend for one device index of a kind.
type Factory func(index int) (Backend, error)

var (
	regMu     sync.Mutex
	factories = map[Kind]Factory{}
	opened    = map[Device]Backend{}
)

// Register makes a device kind available. Backends call it from init.
func Register(k Kind, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	factories[k] = f
}

// pkg is the import path of the package that registers kind k.
func (k Kind) pkg() string {
	if k == KindCUDA {
		return "github.com/gamp-ml/gamp/cuda"
	}
	return "github.com/gamp-ml/gamp/backend/" + k.String()
}

// Get returns the backend for d, opening it on first use. The error wraps ErrNoDevice
// when the kind is not registered or the device is absent.
func Get(d Device) (Backend, error) {
	regMu.Lock()
	defer regMu.Unlock()
	if b, ok := opened[d]; ok {
		return b, nil
	}
	f, ok := factories[d.Kind]
	if !ok {
		return nil, fmt.Errorf("backend: %s: %w: no %s backend is linked into this program (add import _ %q)", d, ErrNoDevice, d.Kind, d.Kind.pkg())
	}
	b, err := f(d.Index)
	if err != nil {
		return nil, err
	}
	opened[d] = b
	return b, nil
}

// MustGet is Get for devices the caller already checked; it panics on error.
func MustGet(d Device) Backend {
	b, err := Get(d)
	if err != nil {
		panic(err)
	}
	return b
}

// Opened lists the backends opened so far.
func Opened() []Backend {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Backend, 0, len(opened))
	for _, b := range opened {
		out = append(out, b)
	}
	return out
}

// MemorySummary formats a backend's statistics as a table in the spirit of
// torch.cuda.memory_summary.
func MemorySummary(b Backend) string {
	s := b.MemoryStats()
	var sb strings.Builder
	line := strings.Repeat("=", 75) + "\n"
	sep := strings.Repeat("-", 75) + "\n"
	sb.WriteString(line)
	fmt.Fprintf(&sb, "|%s|\n", center(fmt.Sprintf("gamp memory summary, device %s", b.Device()), 73))
	sb.WriteString(sep)
	fmt.Fprintf(&sb, "| %-24s| %14s | %14s | %14s |\n", "Metric", "Cur Usage", "Peak Usage", "Tot Alloc")
	sb.WriteString(sep)
	fmt.Fprintf(&sb, "| %-24s| %14s | %14s | %14s |\n", "Allocated memory", FormatBytes(s.Allocated), FormatBytes(s.PeakAllocated), FormatBytes(s.TotalAllocated))
	fmt.Fprintf(&sb, "| %-24s| %14s | %14s | %14s |\n", "Active memory (blocks)", FormatBytes(s.Active), FormatBytes(s.PeakActive), "")
	fmt.Fprintf(&sb, "| %-24s| %14s | %14s | %14s |\n", "Reserved memory", FormatBytes(s.Reserved), FormatBytes(s.PeakReserved), "")
	for dt := 1; dt < NumDTypes; dt++ {
		d := s.ByDType[dt]
		if d.NumAllocs == 0 {
			continue
		}
		fmt.Fprintf(&sb, "| %-24s| %14s | %14s | %14s |\n", "  "+DType(dt).String(), FormatBytes(d.Allocated), FormatBytes(d.PeakAllocated), fmt.Sprintf("%d allocs", d.NumAllocs))
	}
	sb.WriteString(sep)
	fmt.Fprintf(&sb, "| %-24s| %14d | %14s | %14s |\n", "Allocations", s.NumAllocs, "", "")
	fmt.Fprintf(&sb, "| %-24s| %14d | %14s | %14s |\n", "Frees", s.NumFrees, "", "")
	fmt.Fprintf(&sb, "| %-24s| %14d | %14s | %14s |\n", "OOMs", s.NumOOMs, "", "")
	fmt.Fprintf(&sb, "| %-24s| %14d | %14s | %14s |\n", "Alloc retries", s.NumRetries, "", "")
	limit := "none"
	if s.Limit > 0 {
		limit = FormatBytes(s.Limit)
	}
	fmt.Fprintf(&sb, "| %-24s| %14s | %14s | %14s |\n", "Limit", limit, "", "")
	sb.WriteString(line)
	return sb.String()
}

func center(s string, w int) string {
	if len(s) >= w {
		return s
	}
	l := (w - len(s)) / 2
	return strings.Repeat(" ", l) + s + strings.Repeat(" ", w-len(s)-l)
}
