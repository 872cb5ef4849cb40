// Package cpu is gamp's pure-Go CPU backend: the reference oracle every other backend is
// compared with, and a backend that always works. Half-precision data is stored as
// 16-bit values and computed in float32 (float32 accumulation for GEMM and reductions);
// large kernels run on a fixed worker pool. The GEMMs and the float32 loops under the
// elementwise, reduction, softmax and norm kernels (vec.go) have AVX-512 and AVX2
// assembly chosen at run time, each with a pure-Go twin that gives the same bits and
// runs under the purego build tag and off amd64.
//
// Importing the package registers it for backend.KindCPU. Several logical CPU devices
// (cpu:0, cpu:1, …) can be opened, each with its own allocator and statistics, so
// multi-device code is tested without a GPU.
package cpu

import (
	"fmt"
	"math"
	"runtime"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// MaxDevices is the number of logical CPU devices that can be opened.
const MaxDevices = 64

func init() {
	backend.Register(backend.KindCPU, func(index int) (backend.Backend, error) {
		if index < 0 || index >= MaxDevices {
			return nil, fmt.Errorf("cpu:%d: %w (logical CPU devices are cpu:0 … cpu:%d)", index, backend.ErrNoDevice, MaxDevices-1)
		}
		return New(index)
	})
}

// Backend is one logical CPU device.
type Backend struct {
	dev   backend.Device
	alloc *allocator
}

// New opens logical CPU device index with its own allocator. The memory cap starts at
// GAMP_CPU_MEMORY_LIMIT when that is set. Most code uses backend.Get instead.
func New(index int) (*Backend, error) {
	limit, err := limitFromEnv()
	if err != nil {
		return nil, err
	}
	dev := backend.Device{Kind: backend.KindCPU, Index: index}
	return &Backend{dev: dev, alloc: newAllocator(dev, limit)}, nil
}

// Device implements backend.Backend.
func (b *Backend) Device() backend.Device { return b.dev }

// Name implements backend.Backend.
func (b *Backend) Name() string {
	return fmt.Sprintf("cpu (%d workers, %s/%s)", Workers(), runtime.GOOS, runtime.GOARCH)
}

// Alloc implements backend.Backend.
func (b *Backend) Alloc(dt backend.DType, n int) (backend.Storage, error) {
	if dt == backend.Invalid || dt.Size() == 0 {
		panic("cpu: Alloc with invalid dtype")
	}
	s, err := b.alloc.alloc(b, dt, n, true)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// AllocUninit is Alloc without the zeroing: a block from the allocator's cache keeps the
// values it held. It is for outputs that a kernel overwrites entirely (the tensor
// package uses it for those), so the zeroing would be a wasted pass over memory.
func (b *Backend) AllocUninit(dt backend.DType, n int) (backend.Storage, error) {
	if dt == backend.Invalid || dt.Size() == 0 {
		panic("cpu: AllocUninit with invalid dtype")
	}
	s, err := b.alloc.alloc(b, dt, n, false)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Free implements backend.Backend.
func (b *Backend) Free(s backend.Storage) { b.alloc.free(st(s)) }

// MemoryStats implements backend.Backend.
func (b *Backend) MemoryStats() backend.MemoryStats { return b.alloc.snapshot() }

// ResetPeak implements backend.Backend.
func (b *Backend) ResetPeak() { b.alloc.resetPeak() }

// EmptyCache implements backend.Backend.
func (b *Backend) EmptyCache() { b.alloc.empty() }

// SetMemoryLimit implements backend.Backend.
func (b *Backend) SetMemoryLimit(n int64) { b.alloc.setLimit(n) }

// Synchronize implements backend.Backend; CPU kernels finish before they return.
func (b *Backend) Synchronize() error { return nil }

// Upload implements backend.Backend.
func (b *Backend) Upload(dst backend.Storage, off int, src any) {
	d := st(dst)
	switch v := src.(type) {
	case []float32:
		mustDT(d, backend.Float32)
		copy(d.f32()[off:off+len(v)], v)
	case []float64:
		mustDT(d, backend.Float64)
		copy(d.f64()[off:off+len(v)], v)
	case []uint16:
		if !d.dt.IsHalf() {
			panic("cpu: Upload of []uint16 into " + d.dt.String())
		}
		copy(d.u16()[off:off+len(v)], v)
	case []half.Float16:
		mustDT(d, backend.Float16)
		copy(d.f16()[off:off+len(v)], v)
	case []half.BFloat16:
		mustDT(d, backend.BFloat16)
		copy(d.bf16()[off:off+len(v)], v)
	case []int32:
		mustDT(d, backend.Int32)
		copy(d.i32()[off:off+len(v)], v)
	case []int64:
		mustDT(d, backend.Int64)
		copy(d.i64()[off:off+len(v)], v)
	case []bool:
		mustDT(d, backend.Bool)
		copy(d.b8()[off:off+len(v)], v)
	default:
		panic(fmt.Sprintf("cpu: Upload of unsupported %T", src))
	}
}

// Download implements backend.Backend.
func (b *Backend) Download(dst any, src backend.Storage, off int) {
	s := st(src)
	switch v := dst.(type) {
	case []float32:
		mustDT(s, backend.Float32)
		copy(v, s.f32()[off:off+len(v)])
	case []float64:
		mustDT(s, backend.Float64)
		copy(v, s.f64()[off:off+len(v)])
	case []uint16:
		if !s.dt.IsHalf() {
			panic("cpu: Download of " + s.dt.String() + " into []uint16")
		}
		copy(v, s.u16()[off:off+len(v)])
	case []half.Float16:
		mustDT(s, backend.Float16)
		copy(v, s.f16()[off:off+len(v)])
	case []half.BFloat16:
		mustDT(s, backend.BFloat16)
		copy(v, s.bf16()[off:off+len(v)])
	case []int32:
		mustDT(s, backend.Int32)
		copy(v, s.i32()[off:off+len(v)])
	case []int64:
		mustDT(s, backend.Int64)
		copy(v, s.i64()[off:off+len(v)])
	case []bool:
		mustDT(s, backend.Bool)
		copy(v, s.b8()[off:off+len(v)])
	default:
		panic(fmt.Sprintf("cpu: Download into unsupported %T", dst))
	}
}

func mustDT(s *storage, dt backend.DType) {
	if s.dt != dt {
		panic(fmt.Sprintf("cpu: host slice of %s used with %s storage", dt, s.dt))
	}
}

// Arange implements backend.Backend.
func (b *Backend) Arange(dst backend.Storage, n int, start, step float64) {
	d := st(dst)
	ParallelFor(n, grainElems, func(lo, hi int) {
		var buf [chunk]float64
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			for i := 0; i < m; i++ {
				buf[i] = start + float64(c+i)*step
			}
			d.storeF64(c, buf[:m])
		}
	})
}

// The counter-based generator: element i of a draw hashes (seed, offset+i) with
// SplitMix64's finaliser, so draws are reproducible, parallel and replayable, and the
// CUDA kernels compute the same numbers.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// uniformAt returns the i-th uniform draw in [0, 1) with 53 random bits.
func uniformAt(r backend.RNG, i uint64) float64 {
	return float64(mix64(r.Seed*0x9e3779b97f4a7c15^mix64(r.Offset+i))>>11) * (1.0 / (1 << 53))
}

// RandUniform implements backend.Backend.
func (b *Backend) RandUniform(dst backend.Storage, n int, r backend.RNG, lo, hi float64) {
	genRows(st(dst), n, func(i int) float64 { return lo + (hi-lo)*uniformAt(r, uint64(i)) })
}

// RandNormal implements backend.Backend (Box–Muller on two draws per element).
func (b *Backend) RandNormal(dst backend.Storage, n int, r backend.RNG, mean, std float64) {
	genRows(st(dst), n, func(i int) float64 {
		u1 := uniformAt(r, 2*uint64(i))
		u2 := uniformAt(r, 2*uint64(i)+1)
		z := math.Sqrt(-2*math.Log(1-u1)) * math.Cos(2*math.Pi*u2)
		return mean + std*z
	})
}

// Bernoulli implements backend.Backend.
func (b *Backend) Bernoulli(dst backend.Storage, n int, r backend.RNG, p, scale float64) {
	genRows(st(dst), n, func(i int) float64 {
		if uniformAt(r, uint64(i)) >= p {
			return scale
		}
		return 0
	})
}

func genRows(d *storage, n int, f func(i int) float64) {
	ParallelFor(n, grainElems/4, func(lo, hi int) {
		var buf [chunk]float64
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			for i := 0; i < m; i++ {
				buf[i] = f(c + i)
			}
			d.storeF64(c, buf[:m])
		}
	})
}
