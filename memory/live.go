package memory

import (
	"fmt"
	"io"
	"strings"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// WriteLiveTensors writes tensor.LiveTensors as a table, largest group first:
//
//	|      BYTES | COUNT | LARGEST                | CREATED AT
//	|   1.00 MiB |    16 | [64 256] float32 cpu   | /src/train/loop.go:42
//
// With debug tracking off it says how to turn it on.
func WriteLiveTensors(w io.Writer) error {
	gs := tensor.LiveTensors()
	var sb strings.Builder
	if len(gs) == 0 {
		if !tensor.DebugTracking() {
			sb.WriteString("no live tensors recorded: debug tracking is off (call tensor.SetDebugTracking(true) before the code under suspicion)\n")
		} else {
			sb.WriteString("no live tensors created since debug tracking was turned on\n")
		}
		_, err := io.WriteString(w, sb.String())
		return err
	}
	ex := len("LARGEST")
	for _, g := range gs {
		ex = max(ex, len(g.Example))
	}
	fmt.Fprintf(&sb, "| %10s | %5s | %-*s | %s\n", "BYTES", "COUNT", ex, "LARGEST", "CREATED AT")
	var total int64
	var count int
	for _, g := range gs {
		fmt.Fprintf(&sb, "| %10s | %5d | %-*s | %s\n", backend.FormatBytes(g.Bytes), g.Count, ex, g.Example, g.Origin)
		total += g.Bytes
		count += g.Count
	}
	lines := "lines"
	if len(gs) == 1 {
		lines = "line"
	}
	fmt.Fprintf(&sb, "| %10s | %5d | %-*s | %d %s\n", backend.FormatBytes(total), count, ex, "total", len(gs), lines)
	_, err := io.WriteString(w, sb.String())
	return err
}
