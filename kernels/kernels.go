package kernels

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/gamp-ml/gamp/backend"
)

//go:embed common.cuh *.cu
var files embed.FS

// HeaderName is the name the sources include the prelude by (#include "common.cuh");
// pass Header under this name to NVRTC as an in-memory header.
const HeaderName = "common.cuh"

// Header returns the text of the prelude every source includes.
func Header() string { return read(HeaderName) }

// Sources returns the kernel sources by file name ("elementwise.cu", …). Compile each
// as its own NVRTC program with Header and CompileOptions; Kernel.File says which
// module holds a kernel.
func Sources() map[string]string {
	out := map[string]string{}
	names, err := fs.Glob(files, "*.cu")
	if err != nil {
		panic(err)
	}
	for _, n := range names {
		out[n] = read(n)
	}
	return out
}

func read(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		panic("kernels: embedded file missing: " + name)
	}
	return string(b)
}

// CompileOptions returns the NVRTC options the kernels need, without the architecture
// (add --gpu-architecture=sm_XY for the device). --fmad=false keeps a·b+c from fusing
// into one rounding, so results equal the CPU backend's bit for bit; do not add
// --use_fast_math, -ftz=true, -prec-div=false or -prec-sqrt=false.
func CompileOptions() []string { return []string{"--std=c++17", "--fmad=false"} }

// BlockSize is the block the launcher uses for GridStride kernels (any block works),
// and RowBlock the block PerRow kernels require: exactly 256 threads.
const (
	BlockSize = 256
	RowBlock  = 256
	// MaxGrid caps the grid Grid returns; grid-stride and row loops cover the rest.
	MaxGrid = 1 << 16
)

// Launch is how a kernel's work maps onto a grid.
type Launch uint8

// Launch styles. Neither uses dynamic shared memory (sharedMemBytes = 0).
const (
	// GridStride kernels loop i = blockIdx.x·blockDim.x + threadIdx.x, i += gridDim.x·
	// blockDim.x over Work elements; any 1-D grid and block are correct.
	GridStride Launch = iota + 1
	// PerRow kernels give block b the rows b, b+gridDim.x, … of Work rows and reduce
	// within the block through static shared memory; blockDim.x must be RowBlock.
	PerRow
)

func (l Launch) String() string {
	switch l {
	case GridStride:
		return "grid-stride"
	case PerRow:
		return "per-row"
	}
	return fmt.Sprintf("launch(%d)", uint8(l))
}

// Kind is the kind of a kernel parameter, which fixes the Go values Pack accepts.
type Kind uint8

// Parameter kinds.
const (
	Ptr    Kind = iota + 1 // a device pointer (any C pointer type): Go uint64 (CUdeviceptr) or uintptr
	I32                    // int or unsigned int: Go int32 or uint32
	I64                    // long long or unsigned long long: Go int64 or uint64
	F32                    // float: Go float32
	F64                    // double: Go float64
	Struct                 // a struct by value: Go Layout, Conv2d or Pool2d, named by CType
)

func (k Kind) String() string {
	switch k {
	case Ptr:
		return "Ptr"
	case I32:
		return "I32"
	case I64:
		return "I64"
	case F32:
		return "F32"
	case F64:
		return "F64"
	case Struct:
		return "Struct"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Param is one kernel parameter.
type Param struct {
	Name  string // the name in the source
	Kind  Kind
	CType string // the C type exactly as declared: "const float*", "long long", "Layout"
	Size  int    // bytes the value occupies in the parameter buffer
	Align int    // its alignment there
}

// Kernel describes one extern "C" __global__ function of the sources.
type Kernel struct {
	Name   string          // the symbol: Family, then one suffix per DTypes entry ("copy_f16_f32")
	Family string          // "copy", "unary", …
	DTypes []backend.DType // the dtypes the name encodes, in suffix order
	File   string          // the source (module) that defines it
	Launch Launch
	Work   string // what Grid's work argument counts, in the kernel's parameter names
	Params []Param
}

// String returns the kernel's C declaration.
func (k Kernel) String() string {
	ps := make([]string, len(k.Params))
	for i, p := range k.Params {
		ps[i] = p.CType + " " + p.Name
	}
	return fmt.Sprintf(`extern "C" __global__ void %s(%s)`, k.Name, strings.Join(ps, ", "))
}

// Grid returns the launch geometry for work items (elements for GridStride, rows for
// PerRow, as k.Work says): block BlockSize or RowBlock and enough blocks to give each
// item a thread (a row a block), at most MaxGrid and at least 1.
func (k Kernel) Grid(work int64) (grid, block uint32) {
	block = BlockSize
	per := int64(BlockSize)
	if k.Launch == PerRow {
		block, per = RowBlock, 1
	}
	g := (work + per - 1) / per
	return uint32(max(1, min(g, MaxGrid))), block
}

// ArgOffsets returns where each parameter lives in the kernel's parameter buffer
// (CUDA's ABI: every value at its natural alignment) and the buffer's size, the
// figures cuFuncGetParamInfo reports on a GPU.
func (k Kernel) ArgOffsets() (offsets []int, size int) {
	offsets = make([]int, len(k.Params))
	off := 0
	for i, p := range k.Params {
		off = (off + p.Align - 1) / p.Align * p.Align
		offsets[i] = off
		off += p.Size
	}
	return offsets, off
}

// Kernels returns every kernel of the sources, sorted by name.
func Kernels() []Kernel {
	out := make([]Kernel, len(table))
	for i, k := range table {
		out[i] = k.clone()
	}
	return out
}

// Lookup returns the kernel with the given symbol name.
func Lookup(name string) (Kernel, bool) {
	i, ok := byName[name]
	if !ok {
		return Kernel{}, false
	}
	return table[i].clone(), true
}

// clone copies k's slices, so that callers cannot change the table.
func (k Kernel) clone() Kernel {
	k.DTypes = slices.Clone(k.DTypes)
	k.Params = slices.Clone(k.Params)
	return k
}

// Name returns the symbol of a family instantiated for dts, in the family's suffix
// order: Name("unary", backend.Float16) is "unary_f16", Name("copy", dst, src)
// "copy_f32_bf16". It does not check that the kernel exists; Lookup does.
func Name(family string, dts ...backend.DType) string {
	var b strings.Builder
	b.WriteString(family)
	for _, dt := range dts {
		b.WriteByte('_')
		b.WriteString(Suffix(dt))
	}
	return b.String()
}

// Suffix is a dtype's part of a kernel name: f32, f16, bf16, f64, i32, i64, b8.
func Suffix(dt backend.DType) string {
	switch dt {
	case backend.Float32:
		return "f32"
	case backend.Float16:
		return "f16"
	case backend.BFloat16:
		return "bf16"
	case backend.Float64:
		return "f64"
	case backend.Int32:
		return "i32"
	case backend.Int64:
		return "i64"
	case backend.Bool:
		return "b8"
	}
	return "invalid"
}

var (
	table  = buildTable()
	byName = func() map[string]int {
		m := make(map[string]int, len(table))
		for i, k := range table {
			if _, dup := m[k.Name]; dup {
				panic("kernels: duplicate kernel " + k.Name)
			}
			m[k.Name] = i
		}
		return m
	}()
)

func sortTable(t []Kernel) []Kernel {
	sort.Slice(t, func(i, j int) bool { return t[i].Name < t[j].Name })
	return t
}
