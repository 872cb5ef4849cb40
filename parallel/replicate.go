package parallel

import (
	"reflect"
	"sync"
	"unsafe"

	"github.com/gamp-ml/gamp/nn"
	"github.com/gamp-ml/gamp/tensor"
)

// Replicating a module means copying its tree — the module structs, their nn.Base and
// their *nn.Param values — so that each replica has Params of its own whose T can be
// pointed at tensors on the replica's device, while everything else (sizes, options,
// hooks, closures, unregistered tensors) is shared with the original, as PyTorch's
// replicate does with a shallow __dict__ copy. Go offers no generic copy, so this walks
// the structs with reflect. nn.Base keeps its children and parameters in unexported
// fields, and user modules hold sub-modules in unexported fields (models.Transformer
// does), so fields are read and written through unsafe.Pointer: the only way to
// rewrite a pointer inside an unexported field.

var (
	paramType   = reflect.TypeFor[nn.Param]()
	baseType    = reflect.TypeFor[nn.Base]()
	basePtrType = reflect.TypeFor[*nn.Base]()
	moduleType  = reflect.TypeFor[nn.Module]()
	// Types that never hold a module even though reflect could walk into them.
	opaqueTypes = map[reflect.Type]bool{
		reflect.TypeFor[tensor.Tensor]():    true,
		reflect.TypeFor[tensor.Context]():   true,
		reflect.TypeFor[tensor.Generator](): true,
	}
)

// holdsCache remembers, per type, whether a value of it can reach a module or a Param.
var holdsCache sync.Map // reflect.Type → bool

// holds reports whether values of t can reach an nn.Param or an nn.Base (through
// fields, pointers, slices, arrays, maps, or interfaces whose type embeds nn.Module):
// only those are copied; everything else is shared.
func holds(t reflect.Type) bool {
	if v, ok := holdsCache.Load(t); ok {
		return v.(bool)
	}
	// A fresh walk for each type asked: an answer computed while a type on a cycle was
	// still open may be too small for an inner type, but is right for the outer one.
	h := holdsWalk(t, map[reflect.Type]bool{})
	holdsCache.Store(t, h)
	return h
}

func holdsWalk(t reflect.Type, seen map[reflect.Type]bool) bool {
	if t == paramType || t == baseType {
		return true
	}
	if seen[t] || opaqueTypes[t] {
		return false
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsWalk(t.Elem(), seen)
	case reflect.Map:
		return holdsWalk(t.Key(), seen) || holdsWalk(t.Elem(), seen)
	case reflect.Interface:
		return t.Implements(moduleType)
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsWalk(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// objKey identifies an object of the original tree: an address and the type stored
// there (a struct and its first field share an address).
type objKey struct {
	addr uintptr
	typ  reflect.Type
}

// replicator copies one module tree.
type replicator struct {
	copies  map[objKey]reflect.Value // original object → pointer to its copy
	parents []parentFix
}

// parentFix is an nn.Base parent pointer of a copy, resolved once the whole tree is
// copied: to the parent's copy when the parent was copied, else nil (the replica's
// root is detached from whatever tree the original sits in).
type parentFix struct {
	dst reflect.Value // the *nn.Base field in the copy
	src uintptr       // the original parent
}

// replicate returns a copy of m's module tree in which every module struct and every
// *nn.Param is new (Params keep their original T until the caller replaces it), and
// everything else is shared with m. A Param or module reached twice (weight tying, a
// sub-module held in a field and registered as a child) is copied once.
func replicate(m nn.Module) nn.Module {
	r := &replicator{copies: map[objKey]reflect.Value{}}
	v := reflect.ValueOf(m)
	var out reflect.Value
	if v.Kind() == reflect.Pointer {
		out = r.pointer(v)
	} else {
		out = reflect.New(v.Type()).Elem()
		out.Set(v)
		r.fix(out)
	}
	for _, f := range r.parents {
		if c, ok := r.copies[objKey{f.src, baseType}]; ok {
			f.dst.Set(c)
		} else {
			f.dst.SetZero()
		}
	}
	return out.Interface().(nn.Module)
}

// writable returns field i of the addressable struct v as a value that can be read
// and set whether or not the field is exported.
func writable(v reflect.Value, i int) reflect.Value {
	f := v.Field(i)
	if f.CanSet() {
		return f
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

// pointer returns the copy of the object p points to, making it on first sight.
func (r *replicator) pointer(p reflect.Value) reflect.Value {
	elem := p.Type().Elem()
	if p.IsNil() || !holds(elem) {
		return p
	}
	k := objKey{p.Pointer(), elem}
	if c, ok := r.copies[k]; ok {
		return c
	}
	n := reflect.New(elem)
	n.Elem().Set(p.Elem())
	r.register(p.Elem(), n.Elem())
	r.fix(n.Elem())
	if n.Type() != p.Type() {
		n = n.Convert(p.Type())
	}
	return n
}

// register records dst as the copy of src and of each struct nested in it, so that
// pointers into the original object (a child's parent pointer to an embedded nn.Base)
// find their counterpart.
func (r *replicator) register(src, dst reflect.Value) {
	r.copies[objKey{src.UnsafeAddr(), src.Type()}] = dst.Addr()
	if src.Kind() != reflect.Struct {
		return
	}
	for i := range src.NumField() {
		if src.Field(i).Kind() == reflect.Struct {
			r.register(writable(src, i), writable(dst, i))
		}
	}
}

// fix rewrites v, a shallow copy, so that what it reaches of the module tree is copied.
func (r *replicator) fix(v reflect.Value) {
	t := v.Type()
	if !holds(t) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if t == basePtrType {
			if !v.IsNil() {
				r.parents = append(r.parents, parentFix{dst: v, src: v.Pointer()})
			}
			return
		}
		v.Set(r.pointer(v))
	case reflect.Interface:
		if v.IsNil() {
			return
		}
		e := v.Elem()
		if e.Kind() == reflect.Pointer {
			v.Set(r.pointer(e))
		} else if holds(e.Type()) {
			n := reflect.New(e.Type()).Elem()
			n.Set(e)
			r.fix(n)
			v.Set(n)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			r.fix(writable(v, i))
		}
	case reflect.Array:
		for i := range v.Len() {
			r.fix(v.Index(i))
		}
	case reflect.Slice:
		if v.IsNil() {
			return
		}
		n := reflect.MakeSlice(t, v.Len(), v.Len())
		reflect.Copy(n, v)
		for i := range n.Len() {
			r.fix(n.Index(i))
		}
		v.Set(n)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		n := reflect.MakeMapWithSize(t, v.Len())
		it := v.MapRange()
		for it.Next() {
			k := reflect.New(t.Key()).Elem()
			k.Set(it.Key())
			r.fix(k)
			e := reflect.New(t.Elem()).Elem()
			e.Set(it.Value())
			r.fix(e)
			n.SetMapIndex(k, e)
		}
		v.Set(n)
	}
}
