package cpu

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/half"
)

// storage is CPU memory for one tensor buffer. The words slice keeps 8-byte alignment
// for every dtype; typed accessors reinterpret it.
type storage struct {
	owner *Backend
	dt    backend.DType
	n     int
	bytes int64
	words []uint64
	freed atomic.Bool
}

func (s *storage) Device() backend.Device { return s.owner.dev }
func (s *storage) DType() backend.DType   { return s.dt }
func (s *storage) Len() int               { return s.n }

func (s *storage) ptr() unsafe.Pointer {
	if s.freed.Load() {
		panic(fmt.Sprintf("cpu: use of freed %s storage of %d elements", s.dt, s.n))
	}
	if len(s.words) == 0 {
		return nil
	}
	return unsafe.Pointer(&s.words[0])
}

func (s *storage) f32() []float32 { return unsafe.Slice((*float32)(s.ptr()), s.n) }
func (s *storage) f64() []float64 { return unsafe.Slice((*float64)(s.ptr()), s.n) }
func (s *storage) u16() []uint16  { return unsafe.Slice((*uint16)(s.ptr()), s.n) }
func (s *storage) i32() []int32   { return unsafe.Slice((*int32)(s.ptr()), s.n) }
func (s *storage) i64() []int64   { return unsafe.Slice((*int64)(s.ptr()), s.n) }
func (s *storage) b8() []bool     { return unsafe.Slice((*bool)(s.ptr()), s.n) }

func (s *storage) f16() []half.Float16 {
	return unsafe.Slice((*half.Float16)(s.ptr()), s.n)
}
func (s *storage) bf16() []half.BFloat16 {
	return unsafe.Slice((*half.BFloat16)(s.ptr()), s.n)
}

// st converts a backend.Storage to this backend's type, panicking with a clear
// message when a storage from another device is passed.
func st(s backend.Storage) *storage {
	if s == nil {
		return nil
	}
	c, ok := s.(*storage)
	if !ok {
		panic(fmt.Sprintf("cpu: storage on %s passed to the CPU backend; move it with To first", s.Device()))
	}
	return c
}

// loadF32 converts src[off:off+len(dst)] to float32 into dst.
func (s *storage) loadF32(dst []float32, off int) {
	n := len(dst)
	switch s.dt {
	case backend.Float32:
		copy(dst, s.f32()[off:off+n])
	case backend.Float16:
		half.Float16ToFloat32(dst, s.f16()[off:off+n])
	case backend.BFloat16:
		half.BFloat16ToFloat32(dst, s.bf16()[off:off+n])
	case backend.Float64:
		for i, v := range s.f64()[off : off+n] {
			dst[i] = float32(v)
		}
	case backend.Int32:
		for i, v := range s.i32()[off : off+n] {
			dst[i] = float32(v)
		}
	case backend.Int64:
		for i, v := range s.i64()[off : off+n] {
			dst[i] = float32(v)
		}
	case backend.Bool:
		for i, v := range s.b8()[off : off+n] {
			dst[i] = b2f[float32](v)
		}
	default:
		panic("cpu: bad dtype " + s.dt.String())
	}
}

// storeF32 converts src to s's dtype into s[off:off+len(src)] (round to nearest even).
func (s *storage) storeF32(off int, src []float32) {
	n := len(src)
	switch s.dt {
	case backend.Float32:
		copy(s.f32()[off:off+n], src)
	case backend.Float16:
		half.Float32ToFloat16(s.f16()[off:off+n], src)
	case backend.BFloat16:
		half.Float32ToBFloat16(s.bf16()[off:off+n], src)
	case backend.Float64:
		d := s.f64()[off : off+n]
		for i, v := range src {
			d[i] = float64(v)
		}
	case backend.Int32:
		d := s.i32()[off : off+n]
		for i, v := range src {
			d[i] = int32(v)
		}
	case backend.Int64:
		d := s.i64()[off : off+n]
		for i, v := range src {
			d[i] = int64(v)
		}
	case backend.Bool:
		d := s.b8()[off : off+n]
		for i, v := range src {
			d[i] = v != 0
		}
	default:
		panic("cpu: bad dtype " + s.dt.String())
	}
}

// loadF64 converts src[off:off+len(dst)] to float64 into dst.
func (s *storage) loadF64(dst []float64, off int) {
	n := len(dst)
	switch s.dt {
	case backend.Float64:
		copy(dst, s.f64()[off:off+n])
	case backend.Int64:
		for i, v := range s.i64()[off : off+n] {
			dst[i] = float64(v)
		}
	case backend.Int32:
		for i, v := range s.i32()[off : off+n] {
			dst[i] = float64(v)
		}
	case backend.Bool:
		for i, v := range s.b8()[off : off+n] {
			dst[i] = b2f[float64](v)
		}
	default:
		if n <= 64 {
			// Short rows: a stack buffer would cost more to clear than the work.
			for i := range dst {
				dst[i] = float64(scalarF32(s, off+i))
			}
			return
		}
		var buf [256]float32
		for lo := 0; lo < n; lo += len(buf) {
			m := min(len(buf), n-lo)
			s.loadF32(buf[:m], off+lo)
			for i := 0; i < m; i++ {
				dst[lo+i] = float64(buf[i])
			}
		}
	}
}

// storeF64 converts src to s's dtype into s[off:off+len(src)]. float64 → half rounds
// once, directly from float64.
func (s *storage) storeF64(off int, src []float64) {
	n := len(src)
	switch s.dt {
	case backend.Float64:
		copy(s.f64()[off:off+n], src)
	case backend.Float32:
		vecNarrow(narrowCopy, s.f32()[off:off+n], src, nil, nil, 0, 0)
	case backend.Float16:
		half.Float64ToFloat16(s.f16()[off:off+n], src)
	case backend.BFloat16:
		half.Float64ToBFloat16(s.bf16()[off:off+n], src)
	case backend.Int32:
		d := s.i32()[off : off+n]
		for i, v := range src {
			d[i] = int32(v)
		}
	case backend.Int64:
		d := s.i64()[off : off+n]
		for i, v := range src {
			d[i] = int64(v)
		}
	case backend.Bool:
		d := s.b8()[off : off+n]
		for i, v := range src {
			d[i] = v != 0
		}
	default:
		panic("cpu: bad dtype " + s.dt.String())
	}
}

func b2f[T float32 | float64](b bool) T {
	if b {
		return 1
	}
	return 0
}

// rawBytes exposes the storage's bytes (for byte-wise copies between equal dtypes).
func (s *storage) rawBytes() []byte {
	return unsafe.Slice((*byte)(s.ptr()), int(s.bytes))
}
