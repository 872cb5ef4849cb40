//go:build amd64 && !purego

package cpu

// attnPrefetchRows issues a PREFETCHT1 (to L2) for each of the first lines 64-byte lines of
// rows rows, row r at p + r·stride bytes (vecgen's prefetchRows). It changes nothing.
//
//go:noescape
func attnPrefetchRows(p *byte, stride, rows, lines int)

// attnPrefetchRowsL1 is attnPrefetchRows with PREFETCHT0 (to L1) (vecgen's
// prefetchRowsL1). It changes nothing.
//
//go:noescape
func attnPrefetchRowsL1(p *byte, stride, rows, lines int)
