package profiler

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// Row is the records of one op (and pass, and with ByDType dtype, with ByShape input
// shapes) added up, like a line of torch.profiler's key_averages().
type Row struct {
	Op    string
	Pass  Pass
	DType tensor.DType // Invalid unless grouped by dtype (see Record.DType)
	// Shapes, when grouped by shape, are the input shapes of the op's forward (nil
	// without that grouping; see Grouping.Shapes).
	Shapes []tensor.Shape
	Calls  int
	// Total is the time in the op including nested ops; Self without them.
	Total, Self time.Duration
	Bytes       int64
	// FLOPs adds up the records' FLOPs (the products' floating-point operations).
	FLOPs int64
}

// GFLOPS is the rate of the row's products in its own time: FLOPs per second of Self,
// in billions (0 without FLOPs or time).
func (r Row) GFLOPS() float64 {
	if r.FLOPs == 0 || r.Self <= 0 {
		return 0
	}
	return float64(r.FLOPs) / r.Self.Seconds() / 1e9
}

// Mean is Total/Calls.
func (r Row) Mean() time.Duration {
	if r.Calls == 0 {
		return 0
	}
	return r.Total / time.Duration(r.Calls)
}

// Rows aggregates the records by op and pass (and by the dtype the op ran in when
// byDType is set), sorted by total time, longest first.
func (p *Profiler) Rows(byDType bool) []Row {
	return aggregate(p.Records(), Grouping{DType: byDType})
}

// Grouping says what besides op and pass splits the records into rows.
type Grouping struct {
	// DType splits by the dtype the op ran in (Record.DType).
	DType bool
	// Shapes splits by input shapes, torch.profiler's group_by_input_shape: a forward
	// record's InShapes, and for a backward record the InShapes of its forward
	// (ForwardIndex), so that a layer's backward lines up with its forward; a
	// backward whose forward was not recorded goes by its incoming gradient's shape.
	Shapes bool
}

// RowsGrouped aggregates the records by op, pass and what g adds, sorted by total
// time, longest first.
func (p *Profiler) RowsGrouped(g Grouping) []Row {
	return aggregate(p.Records(), g)
}

type rowKey struct {
	op     string
	pass   Pass
	dt     tensor.DType
	shapes string
}

// shapesKey spells shapes as torch.profiler's Input Shapes column does:
// [[32, 64, 128], [384, 128], []] (an absent optional input is []).
func shapesKey(shapes []tensor.Shape) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i, s := range shapes {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteByte('[')
		for j, d := range s {
			if j > 0 {
				sb.WriteString(", ")
			}
			sb.WriteString(strconv.Itoa(d))
		}
		sb.WriteByte(']')
	}
	sb.WriteByte(']')
	return sb.String()
}

// ShapesString is Row.Shapes as the table prints them: [[32, 64, 128], [384, 128]].
func (r Row) ShapesString() string {
	if r.Shapes == nil {
		return ""
	}
	return shapesKey(r.Shapes)
}

func aggregate(recs []Record, g Grouping) []Row {
	m := map[rowKey]*Row{}
	var order []rowKey
	for _, r := range recs {
		k := rowKey{r.Op, r.Pass, backend.Invalid, ""}
		if g.DType {
			k.dt = r.DType()
		}
		var shapes []tensor.Shape
		if g.Shapes {
			shapes = r.InShapes
			if r.Pass == Backward && r.ForwardIndex >= 0 && r.ForwardIndex < len(recs) {
				shapes = recs[r.ForwardIndex].InShapes
			}
			if shapes == nil {
				shapes = []tensor.Shape{}
			}
			k.shapes = shapesKey(shapes)
		}
		row := m[k]
		if row == nil {
			row = &Row{Op: k.op, Pass: k.pass, DType: k.dt, Shapes: shapes}
			m[k] = row
			order = append(order, k)
		}
		row.Calls++
		row.Total += r.Dur
		row.Self += r.Self
		row.Bytes += r.Bytes
		row.FLOPs += r.FLOPs
	}
	out := make([]Row, 0, len(order))
	for _, k := range order {
		out = append(out, *m[k])
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Total != b.Total {
			return a.Total > b.Total
		}
		if a.Op != b.Op {
			return a.Op < b.Op
		}
		if a.Pass != b.Pass {
			return a.Pass < b.Pass
		}
		if a.DType != b.DType {
			return a.DType < b.DType
		}
		return a.ShapesString() < b.ShapesString()
	})
	return out
}

// TableOption configures Table.
type TableOption func(*tableOptions)

type tableOptions struct {
	group Grouping
	flops bool
	limit int
}

// ByDType splits each op's rows by the dtype it ran in.
func ByDType() TableOption { return func(o *tableOptions) { o.group.DType = true } }

// ByShape splits each op's rows by input shapes and adds an Input Shapes column —
// torch.profiler's key_averages(group_by_input_shape=True); see Grouping.Shapes.
func ByShape() TableOption { return func(o *tableOptions) { o.group.Shapes = true } }

// WithFLOPs adds two columns: each row's FLOPs (Record.FLOPs added up) and their rate
// in the row's self time, GFLOP/s — torch.profiler's with_flops.
func WithFLOPs() TableOption { return func(o *tableOptions) { o.flops = true } }

// Limit prints only the n rows with the longest total time (n ≤ 0: all).
func Limit(n int) TableOption { return func(o *tableOptions) { o.limit = n } }

// Summary returns Table's output with the default options.
func (p *Profiler) Summary() string {
	var sb strings.Builder
	_ = p.Table(&sb)
	return sb.String()
}

// Table writes the records aggregated by op and pass, sorted by total time, longest
// first, in the layout of torch.profiler's key_averages().table(): calls, self time
// and its share, total time (nested ops included) and its share, mean total time, and
// bytes allocated. Shares are of the sum of self times, the time spent in ops.
func (p *Profiler) Table(w io.Writer, opts ...TableOption) error {
	var o tableOptions
	for _, f := range opts {
		f(&o)
	}
	rows := p.RowsGrouped(o.group)
	var selfSum time.Duration
	for _, r := range rows {
		selfSum += r.Self
	}
	if o.limit > 0 && len(rows) > o.limit {
		rows = rows[:o.limit]
	}
	head := []string{"Name", "Pass"}
	if o.group.DType {
		head = append(head, "DType")
	}
	head = append(head, "Calls", "Self", "Self %", "Total", "Total %", "Mean", "Bytes")
	if o.flops {
		head = append(head, "FLOPs", "GFLOP/s")
	}
	if o.group.Shapes {
		head = append(head, "Input Shapes")
	}
	cells := [][]string{head}
	for _, r := range rows {
		c := []string{r.Op, r.Pass.String()}
		if o.group.DType {
			c = append(c, r.DType.String())
		}
		c = append(c, strconv.Itoa(r.Calls), formatDur(r.Self), share(r.Self, selfSum),
			formatDur(r.Total), share(r.Total, selfSum), formatDur(r.Mean()), backend.FormatBytes(r.Bytes))
		if o.flops {
			c = append(c, formatFLOPs(r.FLOPs), formatRate(r.GFLOPS()))
		}
		if o.group.Shapes {
			c = append(c, r.ShapesString())
		}
		cells = append(cells, c)
	}
	widths := make([]int, len(head))
	for _, row := range cells {
		for i, s := range row {
			widths[i] = max(widths[i], len(s))
		}
	}
	left := 2 // Name, Pass (and DType) are left-aligned, and so is Input Shapes
	if o.group.DType {
		left = 3
	}
	var sb strings.Builder
	line := func(row []string) {
		for i, s := range row {
			if i > 0 {
				sb.WriteString("  ")
			}
			switch {
			case o.group.Shapes && i == len(row)-1:
				sb.WriteString(s) // the last column, left-aligned: no padding after it
			case i < left:
				fmt.Fprintf(&sb, "%-*s", widths[i], s)
			default:
				fmt.Fprintf(&sb, "%*s", widths[i], s)
			}
		}
		sb.WriteString("\n")
	}
	dashes := make([]string, len(widths))
	for i, n := range widths {
		dashes[i] = strings.Repeat("-", n)
	}
	line(dashes)
	line(cells[0])
	line(dashes)
	for _, row := range cells[1:] {
		line(row)
	}
	line(dashes)
	fmt.Fprintf(&sb, "Self time total: %s\n", formatDur(selfSum))
	_, err := io.WriteString(w, sb.String())
	return err
}

func share(d, total time.Duration) string {
	if total <= 0 {
		return "-"
	}
	return strconv.FormatFloat(100*float64(d)/float64(total), 'f', 2, 64) + "%"
}

// formatDur prints a duration with three decimals in the largest fitting unit, ASCII
// only so that columns align ("12.345ms", "56.000us", "800ns").
func formatDur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 3, 64) + "us"
	case d < time.Second:
		return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) + "ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) + "s"
}

// formatFLOPs prints a count with an SI suffix and three decimals ("1.234G"), "-" for
// none.
func formatFLOPs(n int64) string {
	if n == 0 {
		return "-"
	}
	v, unit := float64(n), ""
	for _, u := range []string{"K", "M", "G", "T", "P"} {
		if v < 1000 {
			break
		}
		v, unit = v/1000, u
	}
	if unit == "" {
		return strconv.FormatInt(n, 10)
	}
	return strconv.FormatFloat(v, 'f', 3, 64) + unit
}

// formatRate prints GFLOP/s with one decimal, "-" for none.
func formatRate(g float64) string {
	if g == 0 {
		return "-"
	}
	return strconv.FormatFloat(g, 'f', 1, 64)
}
