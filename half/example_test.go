package half_test

import (
	"fmt"

	"github.com/gamp-ml/gamp/half"
)

func ExampleFloat16() {
	h := half.Float16FromFloat32(0.1)
	fmt.Println(h, h.Float32())
	fmt.Printf("%#04x\n", h.Bits())
	fmt.Println(half.Float16FromFloat32(65519), half.Float16FromFloat32(65520))
	fmt.Println(half.Float16FromFloat32(1e-8), half.Float16FromFloat32(3e-8).Float64())
	// Output:
	// 0.1 0.099975586
	// 0x2e66
	// 65504 +Inf
	// 0 5.960464477539063e-08
}

func ExampleBFloat16() {
	b := half.BFloat16FromFloat32(3.14159)
	fmt.Println(b, b.Float32())
	fmt.Printf("%#04x\n", b.Bits())
	// bfloat16 has float32's range: no overflow at 65520.
	fmt.Println(half.BFloat16FromFloat32(1e30), half.BFloat16FromFloat32(1e30).IsFinite())
	// Output:
	// 3.14 3.140625
	// 0x4049
	// 1e+30 true
}

func ExampleFloat32ToFloat16() {
	w := []float32{0.1, 1, 65504, 1e6, -2.5e-8}
	h := make([]half.Float16, len(w))
	half.Float32ToFloat16(h, w)
	back := make([]float32, len(h))
	half.Float16ToFloat32(back, h)
	fmt.Println(h)
	fmt.Println(back)
	fmt.Println(half.AllFinite32(back))
	// Output:
	// [0.1 1 65504 +Inf -0]
	// [0.099975586 1 65504 +Inf -0]
	// false
}

func ExampleFloat32ToBFloat16() {
	w := []float32{0.1, 1, 65504, 1e6}
	b := make([]half.BFloat16, len(w))
	half.Float32ToBFloat16(b, w)
	back := make([]float32, len(b))
	half.BFloat16ToFloat32(back, b)
	fmt.Println(b)
	fmt.Println(back)
	// Output:
	// [0.1 1 65536 1e+06]
	// [0.100097656 1 65536 999424]
}
