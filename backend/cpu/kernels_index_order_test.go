package cpu

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gamp-ml/gamp/backend"
)

// indexOrderRef is the stable sort indexOrder must reproduce.
func indexOrderRef[I indexInt](idx []I) []int {
	order := make([]int, len(idx))
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(idx[a], idx[b]) })
	return order
}

// TestIndexOrder checks that indexOrder gives the stable sort's order, ties in
// ascending position, on both of its paths (counting for small n, the comparison
// sort for large n) and on sorted input.
func TestIndexOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, m := range []int{0, 1, 2, 7, 100, 2048, 5000} {
		for _, n := range []int{1, 3, 65, 1000, 50000, 1 << 22} {
			for _, sorted := range []bool{false, true} {
				idx := make([]int64, m)
				for j := range idx {
					idx[j] = rng.Int64N(int64(n))
				}
				if sorted {
					slices.Sort(idx)
				}
				idx32 := make([]int32, m)
				for j, v := range idx {
					idx32[j] = int32(v)
				}
				name := fmt.Sprintf("m%d/n%d/sorted=%v", m, n, sorted)
				want := indexOrderRef(idx)
				if got := indexOrder(idx, n); !slices.Equal(got, want) {
					t.Fatalf("%s: int64 order differs from the stable sort", name)
				}
				if got := indexOrder(idx32, n); !slices.Equal(got, want) {
					t.Fatalf("%s: int32 order differs from the stable sort", name)
				}
			}
		}
	}
}

// TestIndexAddOrderBits runs IndexAdd through both orderings' paths (a small table
// and one too large for counting) on float32 data with many repeated indices, and
// compares each with the sums taken in the stable sort's order.
func TestIndexAddOrderBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{50, 1 << 16} {
		const m, inner = 3000, 24
		idx := make([]int64, m)
		for j := range idx {
			idx[j] = rng.Int64N(int64(min(n, 60)))
		}
		src := make([]float32, m*inner)
		for i := range src {
			src[i] = float32(rng.NormFloat64()) * float32(1+rng.IntN(1000))
		}
		dst := make([]float32, n*inner)
		for i := range dst {
			dst[i] = float32(rng.NormFloat64())
		}
		// Each row: its value plus its sources in the stable order, summed in float64
		// and rounded once.
		acc := make([]float64, n*inner)
		for i, v := range dst {
			acc[i] = float64(v)
		}
		for _, j := range indexOrderRef(idx) {
			r := int(idx[j])
			for c := range inner {
				acc[r*inner+c] += float64(src[j*inner+c])
			}
		}
		want := make([]float32, n*inner)
		for i, v := range acc {
			want[i] = float32(v)
		}
		b, err := New(0)
		if err != nil {
			t.Fatal(err)
		}
		d, s := geluTableStorage(t, b, backend.Float32, n*inner), geluTableStorage(t, b, backend.Float32, m*inner)
		copy(d.f32(), dst)
		copy(s.f32(), src)
		indexAdd(d, s, idx, 1, n, inner)
		if got := d.f32()[:n*inner]; !slices.Equal(got, want) {
			t.Fatalf("n=%d: IndexAdd differs from the sums in the stable order", n)
		}
	}
}
