package tensor

import (
	"fmt"
	"sort"
	"sync"
)

// CastCategory is how autocast treats an op's floating inputs.
type CastCategory uint8

// Autocast categories, as PyTorch's autocast lists.
const (
	// Passthrough ops run in their inputs' dtype (shape ops, relu, dropout, …).
	Passthrough CastCategory = iota
	// LowerPrecision ops run in the policy's low dtype (matmul, linear, conv, bmm).
	LowerPrecision
	// FP32 ops run in float32 (softmax, log_softmax, exp, log, pow, norms, losses).
	FP32
	// Promote ops run in the widest floating dtype among their inputs (cat, stack,
	// binary ops on mixed dtypes).
	Promote
)

func (c CastCategory) String() string {
	return [...]string{"passthrough", "lower_precision", "fp32", "promote"}[c]
}

// Op is one row of the op registry: the op's name and its autocast category. The op's
// forward and backward live together in the function that defines it, next to the row.
// Rows are read-only outside this package: callers get a pointer (the identity observers
// and autocast policies key on) whose fields they cannot change.
type Op struct {
	name           string
	cast           CastCategory
	differentiable bool
}

// Name is the op's registry name ("matmul", "conv2d", …).
func (o *Op) Name() string { return o.name }

// Category is the op's autocast category.
func (o *Op) Category() CastCategory { return o.cast }

// Differentiable is false for ops with no gradient (argmax, comparisons).
func (o *Op) Differentiable() bool { return o.differentiable }

var (
	regMu    sync.Mutex
	registry = map[string]*Op{}
)

func defOp(name string, cat CastCategory) *Op {
	return defOpDiff(name, cat, true)
}

func defOpDiff(name string, cat CastCategory, diff bool) *Op {
	regMu.Lock()
	defer regMu.Unlock()
	if _, ok := registry[name]; ok {
		panic(fmt.Sprintf("tensor: op %q defined twice", name))
	}
	op := &Op{name: name, cast: cat, differentiable: diff}
	registry[name] = op
	return op
}

// Ops returns the registry, sorted by name.
func Ops() []*Op {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]*Op, 0, len(registry))
	for _, op := range registry {
		out = append(out, op)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// LookupOp returns the registry row of the named op.
func LookupOp(name string) (*Op, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	op, ok := registry[name]
	return op, ok
}

// Autocaster decides the dtype an op's floating inputs are cast to. The autocast
// package implements it with PyTorch's op lists and per-op overrides; the tensor package
// only asks it, at one hook point (Context.autocast), before every op.
type Autocaster interface {
	// Category returns how op is treated for inputs on dev (Passthrough when the
	// policy does not apply to dev).
	Category(op *Op, dev Device) CastCategory
	// LowDType is the dtype LowerPrecision ops run in.
	LowDType() DType
}
