package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/profiler"
)

// report is the JSON document -json prints.
type report struct {
	Model     string   `json:"model"`
	Device    string   `json:"device"`
	Batch     int      `json:"batch"`
	Steps     int      `json:"steps"`
	Optimizer string   `json:"optimizer"`
	Results   []result `json:"results"`

	plan    plan
	backend string // the device's backend description
}

// result is one configuration's row.
type result struct {
	Precision        string   `json:"precision"`
	OptLevel         string   `json:"opt_level"`
	Checkpoint       bool     `json:"checkpoint"`
	Accum            int      `json:"accum"`
	MedianMS         float64  `json:"median_ms"`
	MinMS            float64  `json:"min_ms"`
	MaxMS            float64  `json:"max_ms"`
	SamplesPerSecond float64  `json:"samples_per_second"`
	SpeedupVsFP32    *float64 `json:"speedup_vs_fp32"` // null when fp32 was not measured
	PeakMemory       int64    `json:"peak_memory_bytes"`
	ActivationMemory int64    `json:"activation_memory_bytes"`
	ParamOptimMemory int64    `json:"param_optimizer_memory_bytes"`
	SkippedSteps     int      `json:"skipped_steps"`
	FinalLoss        *float64 `json:"final_loss"` // null when the loss is not finite
	// With -ops: the product ops' FLOPs a timed step (profiler.Record.FLOPs, in
	// GFLOP), the median over the timed steps of their self time in a step, and the
	// median of the rest of a step (its time less its products'); absent otherwise.
	ProductGFLOP *float64 `json:"products_gflop_per_step,omitempty"`
	ProductMS    *float64 `json:"products_ms_per_step,omitempty"`
	OtherMS      *float64 `json:"other_ms_per_step,omitempty"`
	label        string
	loss         float64 // the raw final loss, for the table
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// median returns the middle value of ds (the mean of the two middle ones for an even
// count).
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func newReport(p plan, benches []*bench) *report {
	r := &report{Model: p.model, Device: p.dev.String(), Batch: p.batch, Steps: p.steps, Optimizer: p.optimizer, plan: p}
	if len(benches) > 0 && benches[0].be != nil {
		r.backend = benches[0].be.Name()
	}
	var fp32 float64
	for _, b := range benches {
		if b.low == 0 {
			fp32 = ms(median(b.times))
		}
	}
	for _, b := range benches {
		med := ms(median(b.times))
		res := result{
			Precision: b.precision, OptLevel: b.levelName(), Checkpoint: p.checkpoint, Accum: p.accum,
			MedianMS: med, MinMS: ms(slices.Min(b.times)), MaxMS: ms(slices.Max(b.times)),
			SamplesPerSecond: float64(p.batch) / (med / 1000),
			PeakMemory:       b.peak, ActivationMemory: b.act, ParamOptimMemory: b.held,
			SkippedSteps: b.skipped, label: b.variant.String(), loss: b.loss,
		}
		if fp32 > 0 {
			s := fp32 / med
			if b.low == 0 {
				s = 1 // exactly, not fp32/fp32 rounded
			}
			res.SpeedupVsFP32 = &s
		}
		if l := b.loss; !math.IsNaN(l) && !math.IsInf(l, 0) {
			res.FinalLoss = &l
		}
		if b.prof != nil && len(b.times) > 0 && len(b.prodTimes) == len(b.times) {
			flops, _ := productTotals(b.prof.Rows(false))
			other := make([]time.Duration, len(b.times))
			for i, t := range b.times {
				other[i] = t - b.prodTimes[i]
			}
			g, m, o := float64(flops)/float64(len(b.times))/1e9, ms(median(b.prodTimes)), ms(median(other))
			res.ProductGFLOP, res.ProductMS, res.OtherMS = &g, &m, &o
		}
		r.Results = append(r.Results, res)
	}
	return r
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeTable prints the header and an aligned table.
func (r *report) writeTable(w io.Writer) {
	p := r.plan
	ck := "off"
	if p.checkpoint {
		ck = "on (√n segments)"
	}
	fmt.Fprintf(w, "model:  %s — %s\n", p.model, describe(p.model))
	fmt.Fprintf(w, "device: %s — %s", p.dev, r.backend)
	if p.dev.Kind == backend.KindCPU {
		fmt.Fprintf(w, "; one logical device per configuration")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "host:   %s %s/%s, %s, %d logical CPUs, GOMAXPROCS %d\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "run:    batch %d (%d×%d), %d timed steps after %d warm-up, interleaved; %s; checkpointing %s; seed %d\n\n",
		p.batch, p.accum, p.micro, p.steps, p.warmup, optimizers[p.optimizer].desc, ck, p.seed)
	rows := [][]string{{"precision", "median ms", "min ms", "max ms", "samples/s", "speedup", "peak mem", "activations", "params+optim", "skipped", "final loss"}}
	for _, s := range r.Results {
		speed := "-"
		if s.SpeedupVsFP32 != nil {
			speed = fmt.Sprintf("%.2fx", *s.SpeedupVsFP32)
		}
		rows = append(rows, []string{
			s.label,
			fmt.Sprintf("%.2f", s.MedianMS), fmt.Sprintf("%.2f", s.MinMS), fmt.Sprintf("%.2f", s.MaxMS),
			fmt.Sprintf("%.0f", s.SamplesPerSecond), speed,
			mib(s.PeakMemory), mib(s.ActivationMemory), mib(s.ParamOptimMemory),
			strconv.Itoa(s.SkippedSteps), fmt.Sprintf("%.4f", s.loss),
		})
	}
	writeAligned(w, rows)
}

// mib formats bytes in MiB with two decimals, so a column compares at a glance.
func mib(n int64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// writeAligned prints rows with the first column left-aligned and the others right-
// aligned, two spaces apart.
func writeAligned(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, row := range rows {
		var sb strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i == 0 {
				sb.WriteString(c + pad)
			} else {
				sb.WriteString("  " + pad + c)
			}
		}
		fmt.Fprintln(w, sb.String())
	}
}

// cpuModel returns the CPU's model name from /proc/cpuinfo, or the architecture.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// writeOps prints b's n most expensive ops over its timed steps (-ops): per step, the
// calls, the self time (nested ops left out, so the column adds up to the time in ops)
// and its share of the mean step, the total time with nested ops, and for the product
// ops (linear, matmul, conv2d, attention) the rate of their multiply-adds in their self
// time (profiler.Record.FLOPs). A line under the table gives the products' FLOPs a step
// and their rate over the whole mean step: set against the CPU's peak, how far the step
// is from the arithmetic floor. The rest of a step (the optimizer update, unscaling,
// the autograd bookkeeping) is in no op.
//
// A row is an op and pass, and with byShape its input shapes too (-op-shapes: the
// layers' rows apart). With ref, the FP32 configuration of the same run, a ÷fp32
// column sets each row's self time a step against the same row's there: which ops
// keep a half-precision step from half the FP32 one (empty for a row FP32 does not
// have, such as a cast).
func writeOps(w io.Writer, b, ref *bench, n int, byShape bool) {
	if b.prof == nil || len(b.times) == 0 {
		return
	}
	group := profiler.Grouping{Shapes: byShape}
	rows := opRows(b, group)
	steps := float64(len(b.times))
	var sum time.Duration
	for _, t := range b.times {
		sum += t
	}
	step := ms(sum) / steps // the mean, as the op times are
	var self time.Duration
	for _, r := range rows {
		self += r.Self
	}
	// refMS: each of ref's rows' self ms per timed step.
	var refMS map[string]float64
	if ref != nil && ref.prof != nil && len(ref.times) > 0 {
		refMS = map[string]float64{}
		for _, r := range opRows(ref, group) {
			refMS[opKey(r)] = ms(r.Self) / float64(len(ref.times))
		}
	}
	fmt.Fprintf(w, "\nops of %s, per timed step (%d steps): %.2f ms in ops of a %.2f ms mean step\n",
		b.variant, len(b.times), ms(self)/steps, step)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "op\tpass\tcalls\tself ms\tof step\ttotal ms\tGFLOP/s\t"
	if refMS != nil {
		head += "÷fp32\t"
	}
	if byShape {
		head += "  input shapes" // the last column, left-aligned after the others
	}
	fmt.Fprintln(tw, head)
	flops, prodSelf := productTotals(rows)
	for i, r := range rows {
		if i == n {
			fmt.Fprintf(tw, "(%d more)\t\t\t%.2f\t\t\t\t", len(rows)-n, ms(self-sumSelf(rows[:n]))/steps)
			if refMS != nil {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprintln(tw)
			break
		}
		rate := ""
		if g := r.GFLOPS(); g >= 100 {
			rate = fmt.Sprintf("%.0f", g)
		} else if g > 0 {
			rate = fmt.Sprintf("%.3g", g) // never "0" for a rate there is
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.1f %%\t%.2f\t%s\t", r.Op, r.Pass, float64(r.Calls)/steps,
			ms(r.Self)/steps, 100*ms(r.Self)/steps/step, ms(r.Total)/steps, rate)
		if refMS != nil {
			vs := ""
			if base := refMS[opKey(r)]; base > 0 {
				vs = fmt.Sprintf("%.2f", ms(r.Self)/steps/base)
			}
			fmt.Fprintf(tw, "%s\t", vs)
		}
		if byShape {
			fmt.Fprint(tw, "  "+r.ShapesString())
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
	if flops > 0 && step > 0 {
		perStep := float64(flops) / steps
		fmt.Fprintf(w, "products: %.3f GFLOP a step (multiply-adds ×2, profiler.Record.FLOPs) in %.2f ms of their ops; %.1f GFLOP/s over the mean step\n",
			perStep/1e9, ms(prodSelf)/steps, perStep/1e6/step)
	}
}

// opRows is b's profiler rows grouped by g, most self time first.
func opRows(b *bench, g profiler.Grouping) []profiler.Row {
	rows := b.prof.RowsGrouped(g)
	slices.SortStableFunc(rows, func(x, y profiler.Row) int { return cmp.Compare(y.Self, x.Self) })
	return rows
}

// opKey names a row across configurations: op, pass and (when grouped so) input shapes.
func opKey(r profiler.Row) string {
	return r.Op + " " + r.Pass.String() + " " + r.ShapesString()
}

// productTotals adds up the FLOPs and the self time of the rows that have FLOPs (the
// product ops).
func productTotals(rows []profiler.Row) (flops int64, self time.Duration) {
	for _, r := range rows {
		if r.FLOPs > 0 {
			flops += r.FLOPs
			self += r.Self
		}
	}
	return flops, self
}

// sumSelf is the self time of rows.
func sumSelf(rows []profiler.Row) (d time.Duration) {
	for _, r := range rows {
		d += r.Self
	}
	return d
}
