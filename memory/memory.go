package memory

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// open returns dev's backend, opening it on first use, with an error that names the
// function asked.
func open(fn string, dev tensor.Device) (backend.Backend, error) {
	b, err := backend.Get(dev)
	if err != nil {
		return nil, fmt.Errorf("memory.%s: %w", fn, err)
	}
	return b, nil
}

// Stats returns dev's allocator statistics (torch.cuda.memory_stats). The error wraps
// backend.ErrNoDevice when dev is absent.
func Stats(dev tensor.Device) (backend.MemoryStats, error) {
	b, err := open("Stats", dev)
	if err != nil {
		return backend.MemoryStats{}, err
	}
	return b.MemoryStats(), nil
}

// Allocated returns the bytes in use by live tensors on dev (torch.cuda.memory_allocated).
func Allocated(dev tensor.Device) (int64, error) {
	s, err := Stats(dev)
	return s.Allocated, err
}

// MaxAllocated returns the peak of Allocated since the device was opened or since
// ResetPeak (torch.cuda.max_memory_allocated).
func MaxAllocated(dev tensor.Device) (int64, error) {
	s, err := Stats(dev)
	return s.PeakAllocated, err
}

// Reserved returns the bytes the allocator holds on dev: in use plus cached
// (torch.cuda.memory_reserved).
func Reserved(dev tensor.Device) (int64, error) {
	s, err := Stats(dev)
	return s.Reserved, err
}

// MaxReserved returns the peak of Reserved (torch.cuda.max_memory_reserved).
func MaxReserved(dev tensor.Device) (int64, error) {
	s, err := Stats(dev)
	return s.PeakReserved, err
}

// ResetPeak makes the peaks equal the current values, so MaxAllocated and
// MaxReserved measure from now on (torch.cuda.reset_peak_memory_stats).
func ResetPeak(dev tensor.Device) error {
	b, err := open("ResetPeak", dev)
	if err != nil {
		return err
	}
	b.ResetPeak()
	return nil
}

// EmptyCache returns dev's cached, unused blocks to the system
// (torch.cuda.empty_cache). Memory held by live tensors is untouched.
func EmptyCache(dev tensor.Device) error {
	b, err := open("EmptyCache", dev)
	if err != nil {
		return err
	}
	b.EmptyCache()
	return nil
}

// SetLimit caps the bytes dev's allocator may reserve (0 removes the cap);
// allocations past it fail with an error wrapping tensor.ErrOutOfMemory. On the CPU
// this is the per-device form of GAMP_CPU_MEMORY_LIMIT.
func SetLimit(dev tensor.Device, bytes int64) error {
	if bytes < 0 {
		return fmt.Errorf("memory.SetLimit: negative limit %d for %s (use 0 to remove the cap)", bytes, dev)
	}
	b, err := open("SetLimit", dev)
	if err != nil {
		return err
	}
	b.SetMemoryLimit(bytes)
	return nil
}

// Summary returns dev's statistics as a table, like torch.cuda.memory_summary.
func Summary(dev tensor.Device) (string, error) {
	b, err := open("Summary", dev)
	if err != nil {
		return "", err
	}
	return backend.MemorySummary(b), nil
}
