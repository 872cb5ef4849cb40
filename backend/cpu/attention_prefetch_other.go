//go:build !amd64 || purego

package cpu

// attnPrefetchRows is the amd64 prefetch hint's twin: it does nothing, as the hint
// changes nothing.
func attnPrefetchRows(p *byte, stride, rows, lines int) {}

// attnPrefetchRowsL1 is the amd64 prefetch hint's twin: it does nothing.
func attnPrefetchRowsL1(p *byte, stride, rows, lines int) {}
