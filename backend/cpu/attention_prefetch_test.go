package cpu

import (
	"bytes"
	"testing"
)

// TestAttnPrefetchRows runs the prefetch hints (to L2 and to L1) over rows of a
// buffer, empty counts and lines past a row's end included, and checks that they
// changed nothing: their twins do nothing.
func TestAttnPrefetchRows(t *testing.T) {
	buf := make([]byte, 64<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	want := append([]byte(nil), buf...)
	for _, c := range []struct{ stride, rows, lines int }{
		{0, 0, 0}, {256, 0, 3}, {256, 4, 0}, {256, 16, 3}, {3072, 20, 3}, {64, 1, 1}, {1024, 63, 17},
	} {
		attnPrefetchRows(&buf[0], c.stride, c.rows, c.lines)
		attnPrefetchRows(&buf[100], c.stride, c.rows, c.lines)
		attnPrefetchRowsL1(&buf[0], c.stride, c.rows, c.lines)
		attnPrefetchRowsL1(&buf[100], c.stride, c.rows, c.lines)
	}
	if !bytes.Equal(buf, want) {
		t.Fatal("attnPrefetchRows or attnPrefetchRowsL1 changed its buffer")
	}
}
