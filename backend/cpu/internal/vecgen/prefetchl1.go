package main

// prefetchRowsL1 emits attnPrefetchRowsL1(p *byte, stride, rows, lines int):
// prefetchRows' loop with PREFETCHT0 (to L1), the attention products' hint for
// the next row panel of an A operand they read in place, issued while the
// current one computes.
func (g *gen) prefetchRowsL1() { g.prefetchRowsInsn("attnPrefetchRowsL1", "PREFETCHT0") }
