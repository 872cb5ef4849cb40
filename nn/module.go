package nn

import (
	"fmt"

	"github.com/gamp-ml/gamp/tensor"
)

// Param is a named, trainable tensor of a module (or a buffer such as BatchNorm's
// running statistics when Buffer is true). The tensor is a leaf: moving or casting the
// module replaces T, so hold the *Param, not the tensor.
type Param struct {
	Name   string // dotted path in the module tree, e.g. "features.0.weight"
	T      *tensor.Tensor
	Buffer bool // a buffer: saved in the state dict, never trained
	// KeepFP32 marks parameters that stay float32 when a model is cast to half
	// (BatchNorm's affine parameters and statistics under opt level O2).
	KeepFP32 bool

	local string // the name inside the module that registered it
}

// Grad returns the parameter's gradient (nil if none).
func (p *Param) Grad() *tensor.Tensor { return p.T.Grad() }

// Module is a layer or a network of layers.
type Module interface {
	// Forward computes the module's output; x's Context carries grad mode and the
	// autocast policy.
	Forward(x *tensor.Tensor) *tensor.Tensor
	// Params returns the trainable parameters, own and children's, in registration
	// order, with dotted names.
	Params() []*Param
	// Buffers returns the non-trainable state (running statistics).
	Buffers() []*Param
	// SetTraining switches train/eval mode for the module and its children.
	SetTraining(on bool)
	// Training reports the mode.
	Training() bool
	base() *Base
}

// Base holds what every module has: its own parameters and buffers, its children and
// the training flag. Layers embed it and register their parts in their constructor.
// A zero Base is ready to use and in training mode.
//
// Names compose from the root: a parameter registered as "weight" in a module that is
// child "1" of a child "block" of the root is named "block.1.weight", whenever the
// modules were put together (appending to a Sequential that is already inside another
// module names the new parameters correctly).
type Base struct {
	params   []*Param
	buffers  []*Param
	children []child
	parent   *Base
	name     string // the name under which parent registered this module
	training bool
	inited   bool
	hooks    hookState // forward hooks (hooks.go)
}

type child struct {
	name string
	m    Module
}

func (b *Base) base() *Base { return b }

func (b *Base) init() {
	if !b.inited {
		b.inited, b.training = true, true
	}
}

// prefix is the dotted path of b from the root, with a trailing dot ("" at the root).
func (b *Base) prefix() string {
	p := ""
	for x := b; x.parent != nil; x = x.parent {
		p = x.name + "." + p
	}
	return p
}

// rename refreshes the full names of b's parameters and buffers and of its children's.
func (b *Base) rename() {
	pre := b.prefix()
	for _, p := range append(append([]*Param(nil), b.params...), b.buffers...) {
		p.Name = pre + p.local
		p.T.SetName(p.Name)
	}
	for _, c := range b.children {
		c.m.base().rename()
	}
}

// checkName panics if name is empty, contains a dot, or is taken in b.
func (b *Base) checkName(kind, name string) {
	if name == "" {
		panic(fmt.Sprintf("nn: %s name is empty", kind))
	}
	for _, r := range name {
		if r == '.' {
			panic(fmt.Sprintf("nn: %s name %q contains a dot; dots separate module levels", kind, name))
		}
	}
	for _, p := range b.params {
		if p.local == name {
			panic(fmt.Sprintf("nn: %s name %q is already a parameter of this module", kind, name))
		}
	}
	for _, p := range b.buffers {
		if p.local == name {
			panic(fmt.Sprintf("nn: %s name %q is already a buffer of this module", kind, name))
		}
	}
	for _, c := range b.children {
		if c.name == name {
			panic(fmt.Sprintf("nn: %s name %q is already a child module of this module", kind, name))
		}
	}
}

// AddParam registers a trainable parameter under name and returns it. The tensor is
// made a leaf that requires grad.
func (b *Base) AddParam(name string, t *tensor.Tensor) *Param {
	b.init()
	b.checkName("parameter", name)
	t.SetRequiresGrad(true)
	p := &Param{Name: b.prefix() + name, T: t, local: name}
	t.SetName(p.Name)
	b.params = append(b.params, p)
	return p
}

// AddBuffer registers a non-trainable tensor under name and returns it.
func (b *Base) AddBuffer(name string, t *tensor.Tensor) *Param {
	b.init()
	b.checkName("buffer", name)
	p := &Param{Name: b.prefix() + name, T: t, Buffer: true, local: name}
	t.SetName(p.Name)
	b.buffers = append(b.buffers, p)
	return p
}

// AddModule registers a child module under name; the child's parameters and buffers
// are named "name.<their name>" below b's own path. A module registered in two places
// (weight sharing) has its parameters listed once, named after the last registration.
func (b *Base) AddModule(name string, m Module) {
	b.init()
	b.checkName("module", name)
	mb := m.base()
	for x := b; x != nil; x = x.parent {
		if x == mb {
			panic(fmt.Sprintf("nn: adding module %q would make the module tree a cycle", name))
		}
	}
	mb.parent, mb.name = b, name
	b.children = append(b.children, child{name, m})
	mb.rename()
}

// Params implements Module.
func (b *Base) Params() []*Param { return b.collect(false, map[*Param]bool{}) }

// Buffers implements Module.
func (b *Base) Buffers() []*Param { return b.collect(true, map[*Param]bool{}) }

// collect lists b's parameters (or buffers) then its children's, each once.
func (b *Base) collect(buffers bool, seen map[*Param]bool) []*Param {
	var out []*Param
	own := b.params
	if buffers {
		own = b.buffers
	}
	for _, p := range own {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, c := range b.children {
		out = append(out, c.m.base().collect(buffers, seen)...)
	}
	return out
}

// SetTraining implements Module.
func (b *Base) SetTraining(on bool) {
	b.init()
	b.training = on
	for _, c := range b.children {
		c.m.SetTraining(on)
	}
}

// Training implements Module.
func (b *Base) Training() bool { b.init(); return b.training }

// Children returns the registered child modules with their names.
func (b *Base) Children() (names []string, mods []Module) {
	for _, c := range b.children {
		names = append(names, c.name)
		mods = append(mods, c.m)
	}
	return names, mods
}

// Train puts m and its children in training mode and returns m.
func Train[M Module](m M) M { m.SetTraining(true); return m }

// Eval puts m and its children in evaluation mode (dropout off, BatchNorm using its
// running statistics) and returns m.
func Eval[M Module](m M) M { m.SetTraining(false); return m }

// State returns every parameter and buffer of m by dotted name.
func State(m Module) map[string]*Param {
	out := map[string]*Param{}
	for _, p := range append(m.Params(), m.Buffers()...) {
		if _, dup := out[p.Name]; dup {
			panic(fmt.Sprintf("nn: two parameters named %q", p.Name))
		}
		out[p.Name] = p
	}
	return out
}
