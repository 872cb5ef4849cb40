package cpu

import (
	"sync"

	"github.com/gamp-ml/gamp/backend"
)

// A batch-norm group is the run of tiles (see bnTile; in memory order) that
// covers whole channels: one tile of several channels when S < chunk, else the tiles of
// one channel. The kernels finish a group — statistics, then output — before the next,
// so that a group's data can be kept converted to float32 between its passes
// (bnCache) instead of being converted from half again for each pass. Per-channel sums
// still add each position's per-sample accumulator in ascending position order, so
// they do not depend on the grouping, nor on the worker count.
type bnGroup struct {
	c0, c1 int      // channels [c0, c1), relative to the worker's first one
	tiles  []bnTile // in memory order
	base   []int    // base[i]: offset of tiles[i] within the group's positions
	size   int      // positions per sample
	ch     []int    // backing of the tiles' ch slices
	all    []bnTile // backing of tiles
	bases  []int    // backing of base
}

// bnGroups calls fn with each group of channels [lo, hi), in order; the group and
// its slices are reused between calls.
func bnGroups(a *backend.NormArgs, lo, hi int, fn func(g *bnGroup)) {
	if a.S == 0 {
		return
	}
	g := &bnGroup{ch: make([]int, chunk)}
	if a.S >= chunk {
		nt := (a.S + chunk - 1) / chunk
		g.all, g.bases = make([]bnTile, nt), make([]int, nt)
		for c := lo; c < hi; c++ {
			for j := range g.ch {
				g.ch[j] = c - lo
			}
			for i := range nt {
				s0 := i * chunk
				g.all[i] = bnTile{c*a.S + s0, g.ch[:min(chunk, a.S-s0)]}
				g.bases[i] = s0
			}
			g.c0, g.c1, g.tiles, g.base, g.size = c-lo, c-lo+1, g.all, g.bases, a.S
			fn(g)
		}
		return
	}
	per := chunk / a.S
	g.all, g.bases = make([]bnTile, 1), []int{0}
	for c0 := lo; c0 < hi; c0 += per {
		c1 := min(hi, c0+per)
		ch := g.ch[:0]
		for c := c0; c < c1; c++ {
			for range a.S {
				ch = append(ch, c-lo)
			}
		}
		g.all[0] = bnTile{c0 * a.S, ch}
		g.c0, g.c1, g.tiles, g.base, g.size = c0-lo, c1-lo, g.all, g.bases, len(ch)
		fn(g)
	}
}

// bnCacheElems bounds the float32 elements of one group cache (N × group positions):
// 512 KiB, so that a backward pass's two caches stay in a core's L2.
const bnCacheElems = 1 << 17

var bnCachePool = sync.Pool{New: func() any {
	b := make([]float32, bnCacheElems)
	return &b
}}

// bnCache holds a group's tiles for every sample, converted to the compute type, so
// that later passes over the group read them without converting again. With ok false
// (native storage, which reads without a copy, or a group too large) it holds nothing
// and the passes read the storage each time.
type bnCache[C numeric] struct {
	ok   bool
	data []C
	buf  *[]float32
}

// bnGroupMax is the most positions per sample a group of a has.
func bnGroupMax(a *backend.NormArgs) int {
	if a.S >= chunk || a.S == 0 {
		return a.S
	}
	return min(chunk/a.S, a.C) * a.S
}

// newBNCache returns a cache for a's groups from storage r, or one that does not cache.
func newBNCache[C numeric](r elemRun[C], a *backend.NormArgs) bnCache[C] {
	var z C
	if _, f32 := any(z).(float32); !f32 || r.ok || a.N*bnGroupMax(a) > bnCacheElems {
		return bnCache[C]{}
	}
	b := bnCachePool.Get().(*[]float32)
	return bnCache[C]{ok: true, data: any(*b).([]C), buf: b}
}

// newBNCacheNative is newBNCache for a storage read in place, whose reads do not fill
// the cache: the caller writes each slot itself (the masked gy of bnSums).
func newBNCacheNative[C numeric](a *backend.NormArgs) bnCache[C] {
	var z C
	if _, f32 := any(z).(float32); !f32 || a.N*bnGroupMax(a) > bnCacheElems {
		return bnCache[C]{}
	}
	b := bnCachePool.Get().(*[]float32)
	return bnCache[C]{ok: true, data: any(*b).([]C), buf: b}
}

// release returns the cache's buffer to the pool.
func (k *bnCache[C]) release() {
	if k.buf != nil {
		bnCachePool.Put(k.buf)
		k.buf, k.data = nil, nil
	}
}

// slot returns where sample n of tile i of g lies in the cache.
func (k *bnCache[C]) slot(g *bnGroup, i, n int) []C {
	m := len(g.tiles[i].ch)
	o := n*g.size + g.base[i]
	return k.data[o : o+m]
}
