package kernels_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/kernels"
)

func ExampleKernel_Pack() {
	k, _ := kernels.Lookup(kernels.Name("unary", backend.Float16))
	fmt.Println(k)
	var y, x uint64 = 0x7f0000000000, 0x7f0000100000 // device pointers
	args, err := k.Pack(y, x, int64(1000), int32(backend.Gelu), 0.0, 0.0)
	fmt.Println(len(args.Bytes()), len(args.Pointers()), err)
	grid, block := k.Grid(1000)
	fmt.Println(grid, block, k.Launch)
	_, err = k.Pack(y, x, int32(1000), int32(backend.Gelu), 0.0, 0.0)
	fmt.Println(err)
	// Output:
	// extern "C" __global__ void unary_f16(unsigned short* y, const unsigned short* x, long long n, int op, double p0, double p1)
	// 48 6 <nil>
	// 4 256 grid-stride
	// kernels: unary_f16: argument 2 (long long n) is int32; want int64 or uint64
}
