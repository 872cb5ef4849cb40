package cpu

// gemmBlocks is the blocking loop that Gemm and GemmBF16 share (Goto/BLIS):
// for each column block [jc, jc+nc) of C (nc ≤ NC) and each k slice [pc,
// pc+kc), the driver's packFn packs the NR-column micro-panels of op(B) in
// parallel, then taskFn runs tm×tn tasks, each owning a disjoint block of C
// (about MC rows by a share of the block's columns) in parallel: it packs
// its rows of op(A) and runs the micro-kernel over its tiles. The k slices
// are equal, at most KC, and depend on k alone, so every element of C sees
// the same operations in the same order whatever the number of workers.
//
// A driver embeds gemmBlocks, calls plan, sizes its buffers from kcMax and
// ncMax, sets onBlock, packFn and taskFn once (bound when its call state is
// pooled, so that a call allocates nothing) and calls loop.
type gemmBlocks struct {
	m, n, k int
	mr, nr  int
	workers int

	// kcMax and ncMax bound the k slices and column blocks; sliced is set
	// when k has more than one slice.
	kcMax, ncMax int
	sliced       bool
	// target is the number of row tasks wanted: enough to keep each task's
	// A block within MC rows, a multiple of the worker count so that the
	// workers finish together.
	target int

	// Current block: columns [jc, jc+nc), depth [pc, pc+kc); last is set
	// on the last k slice.
	jc, nc, pc, kc int
	last           bool
	// Task grid: tm×tn tasks over mPanels×nPanels micro-tiles.
	tm, tn           int
	mPanels, nPanels int
	// packGrain is the number of B panels a worker packs at a time; onBlock
	// may change it.
	packGrain int

	// ownPack is set when each task packs the B panels it uses: the loop
	// then runs no packing phase.
	ownPack bool

	onBlock func()
	packFn  func(lo, hi int)
	taskFn  func(lo, hi int)
}

// gemmSizes are a driver's blocking sizes in elements: KC, MC, NC, and
// whether k slices but the last must have even length (bf16 pairs).
type gemmSizes struct {
	kc, mc, nc int
	evenK      bool
}

// plan fixes the blocking of an m×n×k product with mr×nr micro-tiles on
// workers workers.
func (g *gemmBlocks) plan(m, n, k, mr, nr, workers int, sz gemmSizes) {
	g.m, g.n, g.k, g.mr, g.nr, g.workers = m, n, k, mr, nr, max(workers, 1)
	kSlices := gemmCeilDiv(k, sz.kc)
	g.kcMax = gemmCeilDiv(k, kSlices)
	if sz.evenK {
		g.kcMax += g.kcMax & 1
	}
	g.sliced = g.kcMax < k
	g.ncMax = min(n, sz.nc)
	g.mPanels = gemmCeilDiv(m, mr)
	g.target = gemmCeilDiv(gemmCeilDiv(m, sz.mc), g.workers) * g.workers
	g.tm = min(g.target, g.mPanels)
	g.packGrain = 1
}

// loop runs every block: onBlock, then packFn over the B panels and taskFn
// over the tasks, each in parallel when there is more than one worker.
func (g *gemmBlocks) loop() {
	for jc := 0; jc < g.n; jc += g.ncMax {
		g.jc, g.nc = jc, min(g.ncMax, g.n-jc)
		g.nPanels = gemmCeilDiv(g.nc, g.nr)
		// Too few row blocks to occupy every worker (small m): split n too.
		g.tn = min(g.nPanels, gemmCeilDiv(g.target, g.tm))
		for pc := 0; pc < g.k; pc += g.kcMax {
			g.pc, g.kc = pc, min(g.kcMax, g.k-pc)
			g.last = pc+g.kc == g.k
			g.onBlock()
			switch {
			case g.workers > 1:
				if !g.ownPack {
					ParallelFor(g.nPanels, g.packGrain, g.packFn)
				}
				ParallelFor(g.tm*g.tn, 1, g.taskFn)
			default:
				if !g.ownPack {
					g.packFn(0, g.nPanels)
				}
				g.taskFn(0, g.tm*g.tn)
			}
		}
	}
}

// taskPanels returns the micro-panel ranges of task t: rows [mp0, mp1) and
// columns [np0, np1) of the current block.
func (g *gemmBlocks) taskPanels(t int) (mp0, mp1, np0, np1 int) {
	ti, tj := t/g.tn, t%g.tn
	return ti * g.mPanels / g.tm, (ti + 1) * g.mPanels / g.tm, tj * g.nPanels / g.tn, (tj + 1) * g.nPanels / g.tn
}
