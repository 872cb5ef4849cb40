package nn

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/gamp-ml/gamp/tensor"
)

// all returns m's parameters followed by its buffers.
func all(m Module) []*Param { return append(m.Params(), m.Buffers()...) }

// replace swaps p's tensor for convert(p's tensor), converting its gradient the same
// way, and releases the old tensor and gradient. The new tensor is a leaf with p's
// name and requires-grad flag. Gradient hooks registered on the old tensor are not
// carried over.
func replace(p *Param, convert func(*tensor.Tensor) *tensor.Tensor) {
	old := p.T
	n := convertDetached(old, convert)
	n.SetRequiresGrad(old.RequiresGrad())
	n.SetName(p.Name)
	if g := old.Grad(); g != nil {
		n.SetGrad(convertDetached(g, convert))
	}
	old.ZeroGrad()
	old.Release()
	p.T = n
}

// convertDetached applies convert to a history-free view of t, so the conversion is
// not recorded and yields a fresh leaf outside any Context.
func convertDetached(t *tensor.Tensor, convert func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	d := t.Detach()
	n := convert(d)
	if n == d {
		// No conversion was needed: give the caller a handle of its own.
		return d
	}
	d.Release()
	return n
}

// To moves every parameter, buffer and existing gradient of m to dev, releasing the
// old storage. Parameters keep their names and requires-grad flags; the *Param values
// stay the same (their T changes), so an optimizer built on m.Params() keeps working,
// but gradient hooks registered on the old tensors are dropped.
func To(m Module, dev tensor.Device) {
	for _, p := range all(m) {
		if p.T.Device() != dev {
			replace(p, func(t *tensor.Tensor) *tensor.Tensor { return t.To(dev) })
		}
	}
}

// Cast converts every floating parameter and buffer of m to dt, except those marked
// KeepFP32 (BatchNorm's): a model prepared for opt level O2. Gradients are converted
// too; integer buffers are left alone.
func Cast(m Module, dt tensor.DType) { cast(m, dt, false) }

// CastAll converts every floating parameter and buffer of m to dt, KeepFP32 ones
// included: a pure half-precision model (opt level O3), in which BatchNorm runs in
// half and keeps half running statistics.
func CastAll(m Module, dt tensor.DType) { cast(m, dt, true) }

func cast(m Module, dt tensor.DType, everything bool) {
	if !dt.IsFloat() {
		panic(fmt.Sprintf("nn: cannot cast a model to %s; parameters are floating point", dt))
	}
	for _, p := range all(m) {
		if !p.T.DType().IsFloat() || p.T.DType() == dt || (p.KeepFP32 && !everything) {
			continue
		}
		replace(p, func(t *tensor.Tensor) *tensor.Tensor { return t.Cast(dt) })
	}
}

// NumParams returns the number of trainable parameter elements of m (buffers are not
// counted).
func NumParams(m Module) int {
	n := 0
	for _, p := range m.Params() {
		n += p.T.Numel()
	}
	return n
}

// ZeroGrad releases the gradients of m's parameters (PyTorch's
// zero_grad(set_to_none=True)); the next backward allocates fresh ones.
func ZeroGrad(m Module) {
	for _, p := range m.Params() {
		p.T.ZeroGrad()
	}
}

// Summary returns a table of m's parameters and buffers — name, kind, shape, dtype,
// device, element count — followed by totals.
func Summary(m Module) string {
	var sb strings.Builder
	w := tabwriter.NewWriter(&sb, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "name\tkind\tshape\tdtype\tdevice\tnumel")
	var nParams, nBuf, bytes int
	for _, p := range all(m) {
		kind := "param"
		if p.Buffer {
			kind = "buffer"
			nBuf += p.T.Numel()
		} else {
			nParams += p.T.Numel()
		}
		if p.KeepFP32 {
			kind += " (fp32)"
		}
		bytes += p.T.Numel() * p.T.DType().Size()
		fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%d\n", p.Name, kind, p.T.Shape(), p.T.DType(), p.T.Device(), p.T.Numel())
	}
	w.Flush()
	fmt.Fprintf(&sb, "%d trainable parameters, %d buffer elements, %s\n", nParams, nBuf, formatBytes(bytes))
	return sb.String()
}

func formatBytes(n int) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
