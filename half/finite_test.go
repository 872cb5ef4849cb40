package half

import (
	"math"
	"testing"
)

func TestFinite32(t *testing.T) {
	for _, n := range []int{0, 1, 255, 256, 257, 1000} {
		for _, bad := range []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff} {
			for _, pos := range []int{0, n / 2, n - 1} {
				x := float32Inputs(n, 9)
				for i := range x {
					if u := math.Float32bits(x[i]); u&0x7f800000 == 0x7f800000 {
						x[i] = 1
					}
				}
				if !AllFinite32(x) {
					t.Fatalf("n=%d: AllFinite32 false on finite input", n)
				}
				if inf, nan := CountNonFinite32(x); inf != 0 || nan != 0 {
					t.Fatalf("n=%d: CountNonFinite32 = %d, %d on finite input", n, inf, nan)
				}
				if n == 0 {
					continue
				}
				x[pos] = f32(bad)
				if AllFinite32(x) {
					t.Fatalf("n=%d: AllFinite32 missed %#08x at %d", n, bad, pos)
				}
				inf, nan := CountNonFinite32(x)
				isInf := math.IsInf(float64(f32(bad)), 0)
				if (isInf && (inf != 1 || nan != 0)) || (!isInf && (inf != 0 || nan != 1)) {
					t.Fatalf("n=%d, %#08x at %d: CountNonFinite32 = %d, %d", n, bad, pos, inf, nan)
				}
			}
		}
	}
	x := float32Inputs(100000, 10)
	var inf, nan int
	for _, f := range x {
		switch {
		case math.IsInf(float64(f), 0):
			inf++
		case f != f:
			nan++
		}
	}
	if gi, gn := CountNonFinite32(x); gi != inf || gn != nan {
		t.Errorf("CountNonFinite32 = %d, %d, want %d, %d", gi, gn, inf, nan)
	}
	if AllFinite32(x) != (inf+nan == 0) {
		t.Errorf("AllFinite32 disagrees with the count")
	}
}

// TestFinite32EveryPosition puts each kind of non-finite value at every position of
// runs that end in each part of AllFinite32's loop (four words a step, single elements)
// and start on and off an 8-byte boundary.
func TestFinite32EveryPosition(t *testing.T) {
	for _, n := range []int{1, 7, 8, 9, 16, 23, 40, 263} {
		for _, off := range []int{0, 1} {
			x := make([]float32, off+n)[off:]
			for i := range x {
				x[i] = float32(i) - 3.5
			}
			if !AllFinite32(x) {
				t.Fatalf("n=%d off=%d: false on finite input", n, off)
			}
			for pos := range n {
				for _, bad := range []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0xff800001} {
					keep := x[pos]
					x[pos] = f32(bad)
					if AllFinite32(x) {
						t.Fatalf("n=%d off=%d: missed %#08x at %d", n, off, bad, pos)
					}
					x[pos] = keep
				}
			}
		}
	}
}

// TestAllFinite16 checks AllFiniteBF16 and AllFiniteF16 on every bit pattern at each
// position of runs that end in each part of the loop (four words a step, one word,
// single elements), on and off an 8-byte boundary.
func TestAllFinite16(t *testing.T) {
	for _, r := range []struct{ n, off int }{{1, 0}, {5, 0}, {16, 0}, {21, 0}, {35, 1}, {24, 3}} {
		x := make([]Float16, r.off+r.n)[r.off:]
		y := make([]BFloat16, r.off+r.n)[r.off:]
		for p := range 1 << 16 {
			v, w := Float16(p), BFloat16(p)
			i := p % r.n
			x[i], y[i] = v, w
			if got, want := AllFiniteF16(x), !v.IsNaN() && !v.IsInf(); got != want {
				t.Fatalf("n=%d: %#04x at %d: AllFiniteF16 = %v, want %v", r.n, p, i, got, want)
			}
			if got, want := AllFiniteBF16(y), w.IsFinite(); got != want {
				t.Fatalf("n=%d: %#04x at %d: AllFiniteBF16 = %v, want %v", r.n, p, i, got, want)
			}
			x[i], y[i] = 0, 0
		}
	}
}
