package cpu

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gamp-ml/gamp/backend"
)

// indexInt is the element type of label and index storages.
type indexInt interface{ int32 | int64 }

// indexCheck panics at the first entry of idx outside [0, n).
func indexCheck[I indexInt](kernel, what string, idx []I, n int) {
	for j, v := range idx {
		if v < 0 || int64(v) >= int64(n) {
			panic(fmt.Sprintf("cpu: %s: %s %d at position %d is out of range for size %d", kernel, what, v, j, n))
		}
	}
}

// OneHot implements backend.Backend. on and off are rounded once to dst's dtype, as Fill
// rounds; dst may be any dtype.
func (b *Backend) OneHot(dst, labels backend.Storage, n, classes int, on, off float64) {
	d, l := st(dst), st(labels)
	if n < 0 || classes < 0 {
		panic(fmt.Sprintf("cpu: OneHot: negative shape [%d, %d]", n, classes))
	}
	elemCheckLen("OneHot", "dst", d, n*classes)
	elemCheckLen("OneHot", "labels", l, n)
	switch l.dt {
	case backend.Int32:
		oneHot(d, l.i32()[:n], classes, on, off)
	case backend.Int64:
		oneHot(d, l.i64()[:n], classes, on, off)
	default:
		panic("cpu: OneHot: labels must be Int32 or Int64, got " + l.dt.String())
	}
}

func oneHot[I indexInt](d *storage, labels []I, classes int, on, off float64) {
	indexCheck("OneHot", "label", labels, classes)
	ParallelFor(len(labels)*classes, grainElems, func(lo, hi int) {
		var buf [chunk]float64
		for i := range buf {
			buf[i] = off
		}
		for c := lo; c < hi; c += chunk {
			m := min(chunk, hi-c)
			// Mark the hot positions inside [c, c+m), store, and unmark them.
			r0, r1 := c/classes, (c+m-1)/classes
			for r := r0; r <= r1; r++ {
				if p := r*classes + int(labels[r]) - c; p >= 0 && p < m {
					buf[p] = on
				}
			}
			d.storeF64(c, buf[:m])
			for r := r0; r <= r1; r++ {
				if p := r*classes + int(labels[r]) - c; p >= 0 && p < m {
					buf[p] = off
				}
			}
		}
	})
}

// indexOperands checks the storages and shapes shared by IndexSelect and IndexAdd:
// sel [outer, m, inner] and full [outer, n, inner].
func indexOperands(kernel string, sel, full, idx *storage, selName, fullName string, outer, n, inner, m int) {
	if outer < 0 || n < 0 || inner < 0 || m < 0 {
		panic(fmt.Sprintf("cpu: %s: negative shape (outer %d, n %d, inner %d, m %d)", kernel, outer, n, inner, m))
	}
	elemCheckLen(kernel, selName, sel, outer*m*inner)
	elemCheckLen(kernel, fullName, full, outer*n*inner)
	elemCheckLen(kernel, "idx", idx, m)
	if idx.dt != backend.Int32 && idx.dt != backend.Int64 {
		panic(fmt.Sprintf("cpu: %s: idx must be Int32 or Int64, got %s", kernel, idx.dt))
	}
}

// IndexSelect implements backend.Backend. dst and src share a dtype (any dtype); rows are
// copied as bytes.
func (b *Backend) IndexSelect(dst, src, idx backend.Storage, outer, n, inner, m int) {
	d, s, ix := st(dst), st(src), st(idx)
	indexOperands("IndexSelect", d, s, ix, "dst", "src", outer, n, inner, m)
	if d.dt != s.dt {
		panic(fmt.Sprintf("cpu: IndexSelect: dst is %s but src is %s; they must match", d.dt, s.dt))
	}
	if ix.dt == backend.Int32 {
		indexSelect(d, s, ix.i32()[:m], outer, n, inner)
	} else {
		indexSelect(d, s, ix.i64()[:m], outer, n, inner)
	}
}

func indexSelect[I indexInt](d, s *storage, idx []I, outer, n, inner int) {
	indexCheck("IndexSelect", "index", idx, n)
	m := len(idx)
	if outer*m*inner == 0 {
		return
	}
	row := inner * d.dt.Size() // bytes per gathered row
	db, sb := d.rawBytes(), s.rawBytes()
	ParallelFor(outer*m, max(1, grainElems/inner), func(lo, hi int) {
		for r := lo; r < hi; r++ {
			o, j := r/m, r%m
			so := (o*n + int(idx[j])) * row
			copy(db[r*row:(r+1)*row], sb[so:so+row])
		}
	})
}

// IndexAdd implements backend.Backend. Positions are grouped by target (a stable sort,
// so each target sees its sources in index order) and every target row accumulates
// dst + Σ src in float64 and is rounded once. Distinct targets, outer and column chunks
// are independent, so the result does not depend on how the work is split.
func (b *Backend) IndexAdd(dst, src, idx backend.Storage, outer, n, inner, m int) {
	d, s, ix := st(dst), st(src), st(idx)
	indexOperands("IndexAdd", s, d, ix, "src", "dst", outer, n, inner, m)
	if ix.dt == backend.Int32 {
		indexAdd(d, s, ix.i32()[:m], outer, n, inner)
	} else {
		indexAdd(d, s, ix.i64()[:m], outer, n, inner)
	}
}

func indexAdd[I indexInt](d, s *storage, idx []I, outer, n, inner int) {
	indexCheck("IndexAdd", "index", idx, n)
	m := len(idx)
	if outer*m*inner == 0 {
		return
	}
	order := indexOrder(idx, n)
	starts := []int{0} // group g is order[starts[g]:starts[g+1]]
	for k := 1; k < m; k++ {
		if idx[order[k]] != idx[order[k-1]] {
			starts = append(starts, k)
		}
	}
	starts = append(starts, m)
	if computeF64(d.dt, s.dt) {
		indexAddGroups[float64](d, s, idx, order, starts, outer, n, inner)
	} else {
		indexAddGroups[float32](d, s, idx, order, starts, outer, n, inner)
	}
}

// indexOrder returns the positions 0..len(idx)-1 sorted by idx[j], ties in ascending
// j (a stable sort); every idx[j] is in [0, n). Where n is small against len(idx) (an
// embedding's backward: a few thousand tokens into a vocabulary of about as many rows)
// it counts the values instead of comparing them, which gives the same order in
// O(len(idx) + n) rather than the stable sort's O(len(idx)·log²len(idx)).
func indexOrder[I indexInt](idx []I, n int) []int {
	m := len(idx)
	order := make([]int, m)
	if slices.IsSorted(idx) {
		for j := range order {
			order[j] = j
		}
		return order
	}
	if n <= 4*m+1024 {
		next := make([]int, n+1) // next[v]: where the next position with value v goes
		for _, v := range idx {
			next[v+1]++
		}
		for v := 1; v <= n; v++ {
			next[v] += next[v-1]
		}
		for j, v := range idx {
			order[next[v]] = j
			next[v]++
		}
		return order
	}
	for j := range order {
		order[j] = j
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(idx[a], idx[b]) })
	return order
}

// indexAddGroups runs one task per (outer, target, column chunk): the target row's
// current values plus its sources, in order, summed in float64 and stored once.
func indexAddGroups[C numeric, I indexInt](d, s *storage, idx []I, order, starts []int, outer, n, inner int) {
	m, groups := len(idx), len(starts)-1
	ncol := (inner + chunk - 1) / chunk
	dr, sr := elemRunOf[C](d), elemRunOf[C](s)
	work := max(1, m/groups) * min(inner, chunk)
	ParallelFor(outer*groups*ncol, max(1, grainElems/work), func(lo, hi int) {
		var buf [chunk]C
		var acc [chunk]float64
		for it := lo; it < hi; it++ {
			col, rest := it%ncol, it/ncol
			g, o := rest%groups, rest/groups
			c0 := col * chunk
			w := min(chunk, inner-c0)
			a := acc[:w]
			doff := (o*n+int(idx[order[starts[g]]]))*inner + c0
			for c, v := range dr.read(buf[:w], doff) {
				a[c] = float64(v)
			}
			for _, j := range order[starts[g]:starts[g+1]] {
				x := sr.read(buf[:w], (o*m+j)*inner+c0)
				if xf, ok := any(x).([]float32); ok {
					vecAccF64(a, xf) // the loop below, on the vector layer
					continue
				}
				for c, v := range x {
					a[c] += float64(v)
				}
			}
			d.storeF64(doff, a)
		}
	})
}
