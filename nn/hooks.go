package nn

import (
	"slices"
	"sync/atomic"

	"github.com/gamp-ml/gamp/tensor"
)

// ForwardPreHook runs before a module's Forward when the module is called through
// Call; a non-nil result replaces the input (torch's register_forward_pre_hook).
type ForwardPreHook func(m Module, in *tensor.Tensor) *tensor.Tensor

// ForwardHook runs after a module's Forward when the module is called through Call,
// with the input Forward got and its output; a non-nil result replaces the output
// (torch's register_forward_hook).
type ForwardHook func(m Module, in, out *tensor.Tensor) *tensor.Tensor

// hookState holds a module's forward hooks. The list is immutable: registering or
// removing a hook swaps in a new one, so Call reads it with one atomic load and no
// lock, and it is nil whenever no hook is registered.
type hookState struct {
	set atomic.Pointer[hookSet]
	ids atomic.Uint64
}

type hookSet struct {
	pre  []preHook
	post []postHook
}

type preHook struct {
	id uint64
	fn ForwardPreHook
}

type postHook struct {
	id uint64
	fn ForwardHook
}

// Call runs m on x with its hooks: the forward pre-hooks in registration order, then
// m.Forward, then the forward hooks in registration order. Containers call their
// children through Call, so a hook on any module of a tree fires whenever the tree
// runs. With no hook registered Call is m.Forward(x) plus one atomic load.
func Call(m Module, x *tensor.Tensor) *tensor.Tensor {
	if h, ok := m.(hooked); ok {
		m = h.Module
	}
	hs := m.base().hooks.set.Load()
	if hs == nil {
		return m.Forward(x)
	}
	for _, h := range hs.pre {
		if r := h.fn(m, x); r != nil {
			x = r
		}
	}
	out := m.Forward(x)
	for _, h := range hs.post {
		if r := h.fn(m, x, out); r != nil {
			out = r
		}
	}
	return out
}

// RegisterForwardPreHook adds fn to the hooks run before m's Forward and returns a
// function that removes it (calling it again does nothing).
func RegisterForwardPreHook(m Module, fn ForwardPreHook) (remove func()) {
	hs := &m.base().hooks
	id := hs.ids.Add(1)
	hs.update(func(s *hookSet) { s.pre = append(s.pre, preHook{id, fn}) })
	return func() {
		hs.update(func(s *hookSet) { s.pre = slices.DeleteFunc(s.pre, func(h preHook) bool { return h.id == id }) })
	}
}

// RegisterForwardHook adds fn to the hooks run after m's Forward and returns a
// function that removes it (calling it again does nothing).
func RegisterForwardHook(m Module, fn ForwardHook) (remove func()) {
	hs := &m.base().hooks
	id := hs.ids.Add(1)
	hs.update(func(s *hookSet) { s.post = append(s.post, postHook{id, fn}) })
	return func() {
		hs.update(func(s *hookSet) { s.post = slices.DeleteFunc(s.post, func(h postHook) bool { return h.id == id }) })
	}
}

// update applies edit to a copy of the hook set and publishes it (nil when no hook is
// left, which puts Call back on its fast path).
func (h *hookState) update(edit func(*hookSet)) {
	for {
		old := h.set.Load()
		var s hookSet
		if old != nil {
			s = hookSet{pre: slices.Clone(old.pre), post: slices.Clone(old.post)}
		}
		edit(&s)
		nw := &s
		if len(s.pre) == 0 && len(s.post) == 0 {
			nw = nil
		}
		if h.set.CompareAndSwap(old, nw) {
			return
		}
	}
}

// Hooked returns m as a Module whose Forward is Call(m, x), for code that calls
// Forward on a model directly (amp.Trainer does) when m's own hooks must run. It is
// m in every other respect: the same parameters, buffers, mode and hooks (a hook
// registered on it is registered on m), and Call on it runs the hooks once.
func Hooked(m Module) Module {
	if h, ok := m.(hooked); ok {
		return h
	}
	return hooked{m}
}

type hooked struct{ Module }

// Forward implements Module.
func (h hooked) Forward(x *tensor.Tensor) *tensor.Tensor { return Call(h.Module, x) }

// Walk calls fn for m and every module below it, parents before children in
// registration order, with the module's dotted path relative to m ("" for m itself,
// "features.0" for child "0" of child "features"). A module registered in two places
// is visited once, under its first path.
func Walk(m Module, fn func(path string, m Module)) {
	seen := map[*Base]bool{}
	var visit func(path string, m Module)
	visit = func(path string, m Module) {
		b := m.base()
		if seen[b] {
			return
		}
		seen[b] = true
		fn(path, m)
		for _, c := range b.children {
			p := c.name
			if path != "" {
				p = path + "." + c.name
			}
			visit(p, c.m)
		}
	}
	visit("", m)
}
