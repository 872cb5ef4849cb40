package autocast

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gamp-ml/gamp/backend"
	"github.com/gamp-ml/gamp/tensor"
)

// Policy decides the dtype each op runs in. The zero Policy is disabled. It implements
// tensor.Autocaster; attach it to a Context with Enter or Run.
type Policy struct {
	// Enabled turns casting on. A disabled Policy still marks a region: ops in it run
	// in their inputs' dtypes (cast them to float32 yourself, as in PyTorch).
	Enabled bool
	// Low is the dtype LowerPrecision ops run in: Float16 or BFloat16.
	Low tensor.DType
	// Kinds limits the policy to devices of these kinds (empty: every device), as
	// PyTorch's autocast(device_type=…).
	Kinds []backend.Kind
	// Overrides force an op (by registry name) into a category: e.g. keep "matmul"
	// in FP32 with Overrides{"matmul": tensor.FP32}, or run "softmax" in low
	// precision with tensor.LowerPrecision.
	Overrides map[string]tensor.CastCategory

	// Param and Output are the jmp-style parts of a policy string: the dtype the
	// model's parameters are kept in and the dtype its outputs are cast to. Autocast
	// itself only uses Low; the amp package applies these two.
	Param, Output tensor.DType
}

// Default returns the policy PyTorch users expect for a device: float16 on CUDA,
// bfloat16 on the CPU.
func Default(dev tensor.Device) Policy {
	low := tensor.BFloat16
	if dev.Kind == backend.KindCUDA {
		low = tensor.Float16
	}
	return Policy{Enabled: true, Low: low, Param: tensor.Float32, Output: tensor.Float32}
}

// Half returns an enabled policy running LowerPrecision ops in low.
func Half(low tensor.DType) Policy {
	return Policy{Enabled: true, Low: low, Param: tensor.Float32, Output: tensor.Float32}
}

// Disabled returns a policy that casts nothing (a locally disabled region).
func Disabled() Policy { return Policy{} }

// Override returns a copy of p with op forced into category c.
func (p Policy) Override(op string, c tensor.CastCategory) Policy {
	m := make(map[string]tensor.CastCategory, len(p.Overrides)+1)
	for k, v := range p.Overrides {
		m[k] = v
	}
	m[op] = c
	p.Overrides = m
	return p
}

// Validate checks the policy: Low must be a half type when enabled, and overrides must
// name registered ops.
func (p Policy) Validate() error {
	if p.Enabled && !p.Low.IsHalf() {
		return fmt.Errorf("autocast: low-precision dtype must be float16 or bfloat16, not %s", p.Low)
	}
	for name := range p.Overrides {
		if _, ok := tensor.LookupOp(name); !ok {
			return fmt.Errorf("autocast: override names unknown op %q (see tensor.Ops)", name)
		}
	}
	for _, d := range []tensor.DType{p.Param, p.Output} {
		if d != backend.Invalid && !d.IsFloat() {
			return fmt.Errorf("autocast: param/output dtype must be floating, not %s", d)
		}
	}
	return nil
}

// Category implements tensor.Autocaster.
func (p Policy) Category(op *tensor.Op, dev tensor.Device) tensor.CastCategory {
	if !p.Enabled || !p.applies(dev) {
		if op.Category() == tensor.Promote {
			return tensor.Promote
		}
		return tensor.Passthrough
	}
	if c, ok := p.Overrides[op.Name()]; ok {
		return c
	}
	return op.Category()
}

// LowDType implements tensor.Autocaster.
func (p Policy) LowDType() tensor.DType { return p.Low }

func (p Policy) applies(dev tensor.Device) bool {
	if len(p.Kinds) == 0 {
		return true
	}
	for _, k := range p.Kinds {
		if k == dev.Kind {
			return true
		}
	}
	return false
}

// String formats the policy in jmp's syntax.
func (p Policy) String() string {
	compute := tensor.Float32
	if p.Enabled {
		compute = p.Low
	}
	param, out := p.Param, p.Output
	if param == backend.Invalid {
		param = tensor.Float32
	}
	if out == backend.Invalid {
		out = compute
	}
	s := fmt.Sprintf("params=%s,compute=%s,output=%s", param, compute, out)
	if len(p.Overrides) > 0 {
		keys := make([]string, 0, len(p.Overrides))
		for k := range p.Overrides {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, k+":"+p.Overrides[k].String())
		}
		s += " overrides=" + strings.Join(parts, ";")
	}
	return s
}

// Parse reads a jmp-style policy string: "params=float32,compute=float16,output=float32",
// "half" (float16 everywhere: params, compute and output), "bfloat16"/"bf16" likewise,
// "mixed_float16"/"mixed_bfloat16" (float32 params and output, half compute), or
// "float32"/"full" (disabled). Any dtype name tensor.ParseDType knows is accepted.
func Parse(s string) (Policy, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch s {
	case "float32", "full", "fp32", "f32":
		return Policy{Param: tensor.Float32, Output: tensor.Float32}, nil
	case "half", "float16", "fp16", "f16":
		return Policy{Enabled: true, Low: tensor.Float16, Param: tensor.Float16, Output: tensor.Float16}, nil
	case "bfloat16", "bf16":
		return Policy{Enabled: true, Low: tensor.BFloat16, Param: tensor.BFloat16, Output: tensor.BFloat16}, nil
	case "mixed_float16", "mixed_fp16":
		return Half(tensor.Float16), nil
	case "mixed_bfloat16", "mixed_bf16":
		return Half(tensor.BFloat16), nil
	}
	p := Policy{Param: tensor.Float32, Output: tensor.Float32}
	compute := tensor.Float32
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Policy{}, fmt.Errorf("autocast: bad policy %q: %q is not key=dtype (keys: params, compute, output)", s, part)
		}
		dt, err := tensor.ParseDType(v)
		if err != nil {
			return Policy{}, fmt.Errorf("autocast: bad policy %q: %w", s, err)
		}
		if !dt.IsFloat() {
			return Policy{}, fmt.Errorf("autocast: bad policy %q: %s is not a floating dtype", s, dt)
		}
		if seen[k] {
			return Policy{}, fmt.Errorf("autocast: bad policy %q: %s given twice", s, k)
		}
		seen[k] = true
		switch k {
		case "params", "param", "p":
			p.Param = dt
		case "compute", "c":
			compute = dt
		case "output", "o":
			p.Output = dt
		default:
			return Policy{}, fmt.Errorf("autocast: bad policy %q: unknown key %q (want params, compute or output)", s, k)
		}
	}
	if compute.IsHalf() {
		p.Enabled, p.Low = true, compute
	} else if compute != tensor.Float32 {
		return Policy{}, fmt.Errorf("autocast: bad policy %q: compute must be float32, float16 or bfloat16", s)
	}
	return p, nil
}

// Enter starts an autocast region under c: ops on tensors of the returned Context run
// under p. Close the returned Context at region exit (it drops the weight-cast cache);
// bring results back with c.Bind so that later ops run under the outer state again.
func Enter(c *tensor.Context, p Policy) *tensor.Context {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return c.WithAutocast(p)
}

// Run runs fn in an autocast region under c and returns fn's result bound back to c,
// so the outer state (an enclosing policy, or none) applies again after the region —
// the nesting rule of PyTorch's `with autocast():`.
func Run(c *tensor.Context, p Policy, fn func(ac *tensor.Context) *tensor.Tensor) *tensor.Tensor {
	ac := Enter(c, p)
	defer ac.Close()
	out := fn(ac)
	if out == nil {
		return nil
	}
	return c.Bind(out)
}
