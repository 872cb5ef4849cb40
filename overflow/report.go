package overflow

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Event names one op application: the op, the module path it ran in (and the module's
// type, so that a path of Sequential indices such as "4" still says what ran there),
// the pass and the step.
type Event struct {
	Module     string `json:"module"`
	ModuleType string `json:"module_type,omitempty"`
	Op         string `json:"op"`
	Pass       Pass   `json:"pass"`
	Step       int    `json:"step"`
}

func (e Event) String() string {
	return fmt.Sprintf("%s %s (%s) at step %d", moduleLabel(e.Module, e.ModuleType), e.Op, e.Pass, e.Step)
}

// Row is what a Watcher measured for one (module, op, pass) over every call and step.
// Fractions are of all the elements measured.
type Row struct {
	Module string `json:"module"`
	// ModuleType is the type of the module at Module, e.g. "Conv2d" ("" outside the
	// model).
	ModuleType string `json:"module_type,omitempty"`
	Op         string `json:"op"`
	Pass       Pass   `json:"pass"`
	// DTypes names the dtypes of the values measured, e.g. "float16" or
	// "float16+float32": the fractions say what float16 would make of values held in a
	// wider type (the scaled loss is float32 by design).
	DTypes string `json:"-"`
	// MaxAbs is the largest finite |x| (0 when none).
	MaxAbs float64 `json:"max_abs"`
	Inf    int64   `json:"inf"`
	NaN    int64   `json:"nan"`
	// OverflowFraction: finite values with |x| > 65504, which float16 cannot hold.
	OverflowFraction float64 `json:"overflow_fraction"`
	// UnderflowFraction: values with 0 < |x| < 2^-24, which float16 flushes to zero.
	UnderflowFraction float64 `json:"underflow_fraction"`
	// SubnormalFraction: values with 2^-24 ≤ |x| < 2^-14, float16 subnormals (few bits
	// of precision left).
	SubnormalFraction float64 `json:"-"`
	// ZeroFraction: exact zeros (for half outputs, the values that flushed already).
	ZeroFraction float64 `json:"-"`
	Elements     int64   `json:"-"`
	Calls        int64   `json:"-"`
	// FirstNonFiniteStep is the step of the row's first Inf or NaN (-1: none).
	FirstNonFiniteStep int `json:"-"`
	// Hist counts the finite non-zero magnitudes by power of two.
	Hist Histogram `json:"-"`

	order  int
	badSeq uint64
}

// NonFinite returns the number of Inf and NaN values.
func (r *Row) NonFinite() int64 { return r.Inf + r.NaN }

// Report is a Watcher's findings. It marshals to
//
//	{"steps", "skipped_steps", "first_nonfinite": {"module", "op", "pass", "step"} or null,
//	 "ops": [{"module", "op", "pass", "max_abs", "inf", "nan", "overflow_fraction", "underflow_fraction"}]}
type Report struct {
	// Steps is the number of steps recorded (Watcher.Record), or else the number of
	// steps in which an op was observed.
	Steps int `json:"steps"`
	// SkippedSteps lists the recorded steps the scaler skipped.
	SkippedSteps []int `json:"skipped_steps"`
	// FirstNonFinite is the first op, in execution order (forward ops in order, then
	// backward ops in the order backward ran them, step after step), whose output
	// (forward) or input gradients (backward) held an Inf or NaN; nil when none did.
	FirstNonFinite *Event `json:"first_nonfinite"`
	// Ops holds the rows by risk: rows with Inf/NaN first (earliest first), then by
	// overflow fraction, underflow fraction and max |x|, all descending.
	Ops []Row `json:"ops"`
	// NonFiniteSteps holds the first non-finite op of every step that had one, in
	// execution order.
	NonFiniteSteps []Event `json:"-"`
}

// Report returns what the Watcher has measured so far.
func (w *Watcher) Report() Report {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := Report{
		Steps:          w.recorded,
		SkippedSteps:   append([]int{}, w.skipped...),
		NonFiniteSteps: append([]Event(nil), w.perStep...),
		Ops:            make([]Row, 0, len(w.rows)),
	}
	if r.Steps == 0 {
		r.Steps = len(w.seenSteps)
	}
	if w.first != nil {
		ev := *w.first
		r.FirstNonFinite = &ev
	}
	for _, a := range w.rows {
		row := a.row()
		row.ModuleType = w.types[row.Module]
		r.Ops = append(r.Ops, row)
	}
	SortByRisk(r.Ops)
	return r
}

func (a *acc) row() Row {
	s := &a.st
	frac := func(k int64) float64 {
		if s.n == 0 {
			return 0
		}
		return float64(k) / float64(s.n)
	}
	r := Row{
		Module: a.key.module, Op: a.key.op, Pass: a.key.pass, DTypes: dtypeNames(s.dtypes),
		MaxAbs: s.maxAbs(), Inf: s.inf, NaN: s.nan,
		OverflowFraction: frac(s.over), UnderflowFraction: frac(s.flush),
		SubnormalFraction: frac(s.sub), ZeroFraction: frac(s.zero),
		Elements: s.n, Calls: a.calls, FirstNonFiniteStep: -1, Hist: s.hist,
		order: a.order, badSeq: a.badSeq,
	}
	if a.badSeq != 0 {
		r.FirstNonFiniteStep = a.badStep
	}
	return r
}

// SortByRisk orders rows as Report does: rows with Inf/NaN first (the earliest first
// non-finite first: it is the cause, later ones propagate it), then by overflow
// fraction, underflow fraction and max |x| (how close to 65504), descending; ties
// keep execution order.
func SortByRisk(rows []Row) {
	slices.SortStableFunc(rows, func(x, y Row) int {
		xb, yb := x.NonFinite() > 0, y.NonFinite() > 0
		switch {
		case xb != yb:
			if xb {
				return -1
			}
			return 1
		case xb:
			if c := cmp.Compare(x.badSeq, y.badSeq); c != 0 {
				return c
			}
		}
		if c := cmp.Compare(y.OverflowFraction, x.OverflowFraction); c != 0 {
			return c
		}
		if c := cmp.Compare(y.UnderflowFraction, x.UnderflowFraction); c != 0 {
			return c
		}
		if c := cmp.Compare(y.MaxAbs, x.MaxAbs); c != 0 {
			return c
		}
		return cmp.Compare(x.order, y.order)
	})
}

// Table writes the report as a table, riskiest rows first.
func (r Report) Table(w io.Writer) error {
	return r.table(w, 0)
}

// TableTop writes the report's first n rows as a table (all for n ≤ 0), with a line
// saying how many were left out.
func (r Report) TableTop(w io.Writer, n int) error { return r.table(w, n) }

func (r Report) table(w io.Writer, top int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "steps: %d, skipped: %d", r.Steps, len(r.SkippedSteps))
	if len(r.SkippedSteps) > 0 {
		fmt.Fprintf(&b, " %v", r.SkippedSteps)
	}
	b.WriteString("\nfirst non-finite: ")
	if r.FirstNonFinite == nil {
		b.WriteString("none")
	} else {
		b.WriteString(r.FirstNonFinite.String())
	}
	b.WriteString("\n\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	rows := r.Ops
	if top > 0 && top < len(rows) {
		rows = rows[:top]
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tOP\tPASS\tDTYPE\tCALLS\tMAX |X|\tINF\tNAN\t>65504\t<2^-24\tSUBNORMAL\tLOG2 |X|")
	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n",
			moduleLabel(row.Module, row.ModuleType), row.Op, row.Pass, row.DTypes, row.Calls, strconv.FormatFloat(row.MaxAbs, 'g', 4, 64),
			row.Inf, row.NaN, percent(row.OverflowFraction), percent(row.UnderflowFraction),
			percent(row.SubnormalFraction), log2Range(&row.Hist))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rows) < len(r.Ops) {
		_, err := fmt.Fprintf(w, "… %d more rows\n", len(r.Ops)-len(rows))
		return err
	}
	return nil
}

// moduleLabel is a module path with its type, as "layers.2 (Conv2d)" or "(root)
// (Sequential)".
func moduleLabel(m, typ string) string {
	if m == "" {
		m = "(root)"
	}
	if typ != "" {
		m += " (" + typ + ")"
	}
	return m
}

// moduleType is the name of m's type without package or pointer: "Conv2d".
func moduleType(m any) string {
	s := fmt.Sprintf("%T", m)
	s = strings.TrimLeft(s, "*")
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

func percent(f float64) string {
	if f == 0 {
		return "0"
	}
	return strconv.FormatFloat(100*f, 'g', 3, 64) + "%"
}

func log2Range(h *Histogram) string {
	lo, hi, ok := h.Range()
	if !ok {
		return "-"
	}
	return fmt.Sprintf("[%d, %d]", lo, hi)
}
