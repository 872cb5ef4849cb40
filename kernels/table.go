package kernels

import (
	"unsafe"

	"github.com/gamp-ml/gamp/backend"
)

// The signature table. Each family is written once, instantiated per dtype exactly as
// the macros at the end of its source instantiate it; the tests check it against the
// preprocessed sources, the PTX and a compile-time assertion per kernel.

var (
	floatDTypes = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Float64}
	allDTypes   = []backend.DType{backend.Float32, backend.Float16, backend.BFloat16, backend.Float64,
		backend.Int32, backend.Int64, backend.Bool}
	indexDTypes = []backend.DType{backend.Int32, backend.Int64}
)

// ctype is the C type that stores dt.
func ctype(dt backend.DType) string {
	switch dt {
	case backend.Float32:
		return "float"
	case backend.Float16, backend.BFloat16:
		return "unsigned short"
	case backend.Float64:
		return "double"
	case backend.Int32:
		return "int"
	case backend.Int64:
		return "long long"
	case backend.Bool:
		return "unsigned char"
	}
	panic("kernels: no C type for " + dt.String())
}

func pc(name, ct string) Param                 { return Param{name, Ptr, ct, 8, 8} }
func ptr(name string, dt backend.DType) Param  { return pc(name, ctype(dt)+"*") }
func cptr(name string, dt backend.DType) Param { return pc(name, "const "+ctype(dt)+"*") }
func i32(name string) Param                    { return Param{name, I32, "int", 4, 4} }
func i64(name string) Param                    { return Param{name, I64, "long long", 8, 8} }
func u64(name string) Param                    { return Param{name, I64, "unsigned long long", 8, 8} }
func f32(name string) Param                    { return Param{name, F32, "float", 4, 4} }
func f64(name string) Param                    { return Param{name, F64, "double", 8, 8} }
func layout(name string) Param {
	return Param{name, Struct, "Layout", int(unsafe.Sizeof(Layout{})), int(unsafe.Alignof(Layout{}))}
}
func conv(name string) Param {
	return Param{name, Struct, "Conv2d", int(unsafe.Sizeof(Conv2d{})), int(unsafe.Alignof(Conv2d{}))}
}
func pool(name string) Param {
	return Param{name, Struct, "Pool2d", int(unsafe.Sizeof(Pool2d{})), int(unsafe.Alignof(Pool2d{}))}
}

func buildTable() []Kernel {
	var t []Kernel
	add := func(family, file string, launch Launch, work string, dts []backend.DType, ps ...Param) {
		t = append(t, Kernel{Name(family, dts...), family, dts, file, launch, work, ps})
	}
	one := func(dt backend.DType) []backend.DType { return []backend.DType{dt} }
	two := func(a, b backend.DType) []backend.DType { return []backend.DType{a, b} }

	// elementwise.cu
	const ew = "elementwise.cu"
	for _, d := range allDTypes {
		for _, s := range allDTypes {
			add("copy", ew, GridStride, "n", two(d, s),
				ptr("dst", d), cptr("src", s), i64("n"), layout("dl"), layout("sl"))
		}
		add("fill", ew, GridStride, "n", one(d), ptr("dst", d), i64("n"), layout("dl"), f64("v"))
		add("arange", ew, GridStride, "n", one(d), ptr("dst", d), i64("n"), f64("start"), f64("step"))
		add("binary", ew, GridStride, "n", one(d), ptr("dst", d), cptr("a", d), cptr("b", d), i64("n"),
			layout("dl"), layout("al"), layout("bl"), i32("op"))
		add("compare", ew, GridStride, "n", one(d), pc("dst", "unsigned char*"), cptr("a", d), cptr("b", d),
			i64("n"), layout("dl"), layout("al"), layout("bl"), i32("op"))
		add("where", ew, GridStride, "n", one(d), ptr("dst", d), pc("cond", "const unsigned char*"),
			cptr("a", d), cptr("b", d), i64("n"), layout("dl"), layout("cl"), layout("al"), layout("bl"))
		for _, ix := range indexDTypes {
			add("one_hot", ew, GridStride, "n*classes", two(d, ix), ptr("dst", d), cptr("labels", ix),
				i64("n"), i64("classes"), f64("on"), f64("off"), pc("bad", "int*"))
		}
	}
	for _, d := range floatDTypes {
		add("rand_uniform", ew, GridStride, "n", one(d), ptr("dst", d), i64("n"), u64("seed"), u64("offset"),
			f64("lo"), f64("hi"))
		add("rand_normal", ew, GridStride, "n", one(d), ptr("dst", d), i64("n"), u64("seed"), u64("offset"),
			f64("mean"), f64("std"))
		add("bernoulli", ew, GridStride, "n", one(d), ptr("dst", d), i64("n"), u64("seed"), u64("offset"),
			f64("p"), f64("scale"))
	}

	// unary.cu
	for _, d := range floatDTypes {
		add("unary", "unary.cu", GridStride, "n", one(d), ptr("y", d), cptr("x", d), i64("n"), i32("op"),
			f64("p0"), f64("p1"))
		add("unary_backward", "unary.cu", GridStride, "n", one(d), ptr("gx", d), cptr("gy", d), cptr("a", d),
			i64("n"), i32("op"), f64("p0"), f64("p1"), i32("recompute"))
	}

	// reduce.cu
	const rd = "reduce.cu"
	for _, d := range allDTypes {
		add("reduce_rows", rd, PerRow, "outer", one(d), ptr("dst", d), pc("idx", "long long*"), cptr("src", d),
			i64("outer"), i64("n"), i32("op"))
		add("reduce_cols", rd, GridStride, "outer*inner", one(d), ptr("dst", d), pc("idx", "long long*"),
			cptr("src", d), i64("outer"), i64("n"), i64("inner"), i32("op"))
	}
	for _, d := range floatDTypes {
		add("reduce_cols_partial", rd, GridStride, "nbw*outer*inner", one(d), pc("part", "double*"), cptr("src", d),
			i64("outer"), i64("n"), i64("inner"), i64("rows"), i64("b0"), i64("nbw"))
		add("reduce_cols_fold", rd, GridStride, "oi", one(d), ptr("dst", d), pc("total", "double*"),
			pc("part", "const double*"), i64("oi"), i64("n"), i64("nbw"), i32("first"), i32("last"), i32("mean"))
	}
	for _, d := range floatDTypes {
		add("softmax", rd, PerRow, "outer", one(d), ptr("y", d), cptr("x", d), i64("outer"), i64("n"), i32("lg"))
		add("softmax_backward", rd, PerRow, "outer", one(d), ptr("gx", d), cptr("gy", d), cptr("y", d),
			i64("outer"), i64("n"), i32("lg"))
	}

	// norm.cu
	const nm = "norm.cu"
	fp, cfp := func(n string) Param { return pc(n, "float*") }, func(n string) Param { return pc(n, "const float*") }
	for _, d := range floatDTypes {
		add("layer_norm", nm, PerRow, "rows", one(d), ptr("y", d), fp("save_mean"), fp("save_invstd"),
			cptr("x", d), cfp("w"), cfp("b"), i64("rows"), i64("cols"), f64("eps"))
		add("layer_norm_backward", nm, PerRow, "rows", one(d), ptr("gx", d), cptr("gy", d), cptr("x", d),
			cfp("w"), cfp("mean"), cfp("invstd"), i64("rows"), i64("cols"))
		add("layer_norm_backward_params", nm, GridStride, "cols", one(d), fp("gw"), fp("gb"), cptr("gy", d),
			cptr("x", d), cfp("mean"), cfp("invstd"), i64("rows"), i64("cols"))
		add("layer_norm_params_partial", nm, GridStride, "nbw*cols", one(d), pc("pw", "double*"), pc("pb", "double*"),
			cptr("gy", d), cptr("x", d), cfp("mean"), cfp("invstd"), i64("rows"), i64("cols"), i64("per"), i64("b0"),
			i64("nbw"))
		add("batch_norm", nm, PerRow, "c", one(d), ptr("y", d), fp("running_mean"), fp("running_var"),
			fp("save_mean"), fp("save_invstd"), cptr("x", d), cfp("w"), cfp("b"), i64("n"), i64("c"), i64("s"),
			f64("momentum"), f64("eps"), i32("training"))
		add("batch_norm_backward", nm, PerRow, "c", one(d), ptr("gx", d), fp("gw"), fp("gb"), cptr("gy", d),
			cptr("x", d), cfp("w"), cfp("save_mean"), cfp("save_invstd"), cfp("running_mean"),
			cfp("running_var"), i64("n"), i64("c"), i64("s"), f64("eps"), i32("training"))
	}

	add("layer_norm_params_fold", nm, GridStride, "cols", nil, fp("gw"), fp("gb"), pc("sw", "double*"),
		pc("sb", "double*"), pc("pw", "const double*"), pc("pb", "const double*"), i64("cols"), i64("nbw"),
		i32("first"), i32("last"))

	// attention.cu: the log-sum-exp and delta rows are float (double for f64).
	for _, d := range floatDTypes {
		lt := "float"
		if d == backend.Float64 {
			lt = "double"
		}
		at := []Param{cptr("q", d), cptr("k", d), cptr("v", d)}
		geom := []Param{i64("bh"), i64("t"), i64("d"), f64("scale"), i32("causal")}
		add("attention_forward", "attention.cu", GridStride, "bh*t", one(d),
			append(append([]Param{ptr("o", d), pc("lse", lt+"*")}, at...), geom...)...)
		add("attention_backward_dq", "attention.cu", GridStride, "bh*t", one(d),
			append(append([]Param{ptr("gq", d), pc("delta", lt+"*"), cptr("go", d)}, at...),
				append([]Param{cptr("o", d), pc("lse", "const "+lt+"*")}, geom...)...)...)
		add("attention_backward_dkv", "attention.cu", GridStride, "bh*t", one(d),
			append(append([]Param{ptr("gk", d), ptr("gv", d), cptr("go", d)}, at...),
				append([]Param{pc("lse", "const "+lt+"*"), pc("delta", "const "+lt+"*")}, geom...)...)...)
	}

	// conv.cu
	for _, d := range floatDTypes {
		add("im2col", "conv.cu", GridStride, "n*c*kh*kw*oh*ow", one(d), ptr("col", d), cptr("img", d), conv("g"))
		add("col2im", "conv.cu", GridStride, "n*c*h*w", one(d), ptr("img", d), cptr("col", d), conv("g"))
		add("pool_forward", "conv.cu", GridStride, "n*c*oh*ow", one(d), ptr("y", d), pc("idx", "long long*"),
			cptr("x", d), pool("g"))
		add("pool_backward", "conv.cu", GridStride, "n*c*h*w", one(d), ptr("gx", d), cptr("gy", d),
			pc("idx", "const long long*"), pool("g"))
	}

	// index.cu
	for _, ix := range indexDTypes {
		for _, d := range allDTypes {
			add("index_select", "index.cu", GridStride, "outer*m*inner", two(d, ix), ptr("dst", d), cptr("src", d),
				cptr("idx", ix), i64("outer"), i64("n"), i64("inner"), i64("m"), pc("bad", "int*"))
		}
		for _, d := range floatDTypes {
			add("index_add", "index.cu", GridStride, "outer*m*inner", two(d, ix), ptr("dst", d), cptr("src", d),
				cptr("idx", ix), i64("outer"), i64("n"), i64("inner"), i64("m"), pc("bad", "int*"))
			add("index_add_sorted", "index.cu", GridStride, "outer*groups*inner", two(d, ix), ptr("dst", d),
				cptr("src", d), cptr("idx", ix), pc("order", "const long long*"), pc("starts", "const long long*"),
				i64("groups"), i64("outer"), i64("n"), i64("inner"), i64("m"))
		}
	}

	// optim.cu
	const op = "optim.cu"
	for _, d := range floatDTypes {
		add("unscale_check", op, GridStride, "the largest lens[k]", one(d), pc("ptrs", "const unsigned long long*"),
			pc("lens", "const long long*"), i32("count"), f32("inv"), pc("found", "int*"))
		add("count_nonfinite", op, GridStride, "n", one(d), cptr("src", d), i64("n"), pc("out", "unsigned long long*"))
		m := d // master/state dtype
		var half []Param
		if d.IsHalf() {
			m = backend.Float32
			half = []Param{ptr("p", d)}
		}
		sgd := []Param{ptr("w", m), cptr("g", m), ptr("buf", m)}
		sgd = append(append(sgd, half...), i64("n"), f64("lr"), f64("momentum"), f64("dampening"),
			f64("weight_decay"), i32("flags"), pc("found_inf", "const int*"))
		add("sgd", op, GridStride, "n", one(d), sgd...)
		adam := []Param{ptr("w", m), cptr("g", m), ptr("m", m), ptr("v", m), ptr("vmax", m)}
		adam = append(append(adam, half...), i64("n"), f64("lr"), f64("beta1"), f64("beta2"), f64("eps"),
			f64("weight_decay"), f64("step_size"), f64("bc2_sqrt"), i32("flags"), pc("found_inf", "const int*"))
		add("adam", op, GridStride, "n", one(d), adam...)
		if d.IsHalf() {
			// Half weights without an FP32 master (backend.HalfWeights).
			hw := []Param{ptr("p", d), pc("lo", "unsigned short*"), cptr("g", m)}
			tail := []Param{i32("flags"), i32("rounding"), u64("seed"), u64("offset"), pc("found_inf", "const int*")}
			add("sgd_hw", op, GridStride, "n", one(d), append(append(hw, ptr("buf", m), i64("n"), f64("lr"),
				f64("momentum"), f64("dampening"), f64("weight_decay")), tail...)...)
			add("adam_hw", op, GridStride, "n", one(d), append(append(hw, ptr("m", m), ptr("v", m), ptr("vmax", m),
				i64("n"), f64("lr"), f64("beta1"), f64("beta2"), f64("eps"), f64("weight_decay"), f64("step_size"),
				f64("bc2_sqrt")), tail...)...)
		}
	}
	return sortTable(t)
}
