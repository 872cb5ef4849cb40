package profiler

import "github.com/gamp-ml/gamp/tensor"

// The product ops whose floating-point operations a Record counts (the ops autocast
// runs in the low dtype): what their kernels multiply and add, 2 operations per
// multiply-add, estimated from the shapes, as torch.profiler's with_flops does for
// its matrix products and convolutions. Elementwise work, reductions, the bias and the
// softmax are not counted: the figure is the arithmetic that a matrix unit or an FMA
// pipe does, to set against that unit's peak.
const (
	opLinear     = "linear"
	opLinearReLU = "linear_relu"
	opLinearGELU = "linear_gelu"
	opMatMul     = "matmul"
	opConv2d     = "conv2d"
	opSelfAttn   = "self_attention"
	opAttention  = "scaled_dot_product_attention"
)

// forwardFLOPs is the forward pass's count for op with inputs of shapes in (nil for an
// absent one) and an output of shape out; 0 for an op that is not a product or shapes
// it does not recognise.
func forwardFLOPs(op string, in []tensor.Shape, out tensor.Shape) int64 {
	switch op {
	case opLinear, opLinearReLU, opLinearGELU:
		// x [..., in] · wᵀ, w [out, in]: every output element is in multiply-adds.
		if w := at(in, 1); len(w) == 2 && out != nil {
			return 2 * numel(out) * int64(w[1])
		}
	case opMatMul:
		// a [..., m, k] · b [..., k, n] (a 1-D a is [k]): k multiply-adds an output
		// element, broadcast batches included.
		if a := at(in, 0); len(a) > 0 && out != nil {
			return 2 * max(numel(out), 1) * int64(a[len(a)-1])
		}
	case opConv2d:
		// Every output element of channel o is C/groups·KH·KW multiply-adds, the
		// size of one filter: numel(w)/O.
		if w := at(in, 1); len(w) == 4 && w[0] > 0 && out != nil {
			return 2 * numel(out) * (numel(w) / int64(w[0]))
		}
	case opSelfAttn:
		// qkv [N, T, 3·D] → [N, T, D]: Q·Kᵀ and P·V, each N·T²·D multiply-adds
		// whatever the number of heads.
		if q := at(in, 0); len(q) == 3 {
			n, t, d := int64(q[0]), int64(q[1]), int64(q[2]/3)
			return 4 * n * t * t * d
		}
	case opAttention:
		if b, tq, tk, dk, dv, ok := attnDims(in); ok {
			return 2 * b * tq * tk * (dk + dv)
		}
	}
	return 0
}

// backwardFLOPs is the backward pass's count for the op application whose forward had
// inputs in and output out; grad[i] says whether the backward returned a gradient for
// input i. A product's gradient with respect to each of its two operands is one more
// product of the forward's size. The fused attention recomputes its scores: Q·Kᵀ and
// dO·Vᵀ always, P ᵀ·dO for dV, dS·K for dQ, dSᵀ·Q for dK.
func backwardFLOPs(op string, in []tensor.Shape, out tensor.Shape, grad []bool) int64 {
	has := func(i int) bool { return i < len(grad) && grad[i] }
	switch op {
	case opLinear, opLinearReLU, opLinearGELU, opMatMul, opConv2d:
		f := forwardFLOPs(op, in, out)
		var n int64
		for i := range 2 {
			if has(i) {
				n += f
			}
		}
		return n
	case opSelfAttn:
		if !has(0) {
			return 0
		}
		// Five products of the forward's half: 2.5 times the forward.
		return forwardFLOPs(op, in, out) / 2 * 5
	case opAttention:
		b, tq, tk, dk, dv, ok := attnDims(in)
		if !ok || !has(0) && !has(1) && !has(2) {
			return 0
		}
		mac := tq * tk * (dk + dv) // the recomputed scores and dP
		if has(0) {
			mac += tq * tk * dk
		}
		if has(1) {
			mac += tq * tk * dk
		}
		if has(2) {
			mac += tq * tk * dv
		}
		return 2 * b * mac
	}
	return 0
}

// attnDims reads q [..., Tq, Dk], k [..., Tk, Dk] and v [..., Tk, Dv]: the batch (the
// leading dimensions of q multiplied out) and the four sizes.
func attnDims(in []tensor.Shape) (b, tq, tk, dk, dv int64, ok bool) {
	q, k, v := at(in, 0), at(in, 1), at(in, 2)
	if len(q) < 2 || len(k) < 2 || len(v) < 2 {
		return 0, 0, 0, 0, 0, false
	}
	tq, dk = int64(q[len(q)-2]), int64(q[len(q)-1])
	tk, dv = int64(k[len(k)-2]), int64(v[len(v)-1])
	if tq == 0 || dk == 0 {
		return 0, 0, 0, 0, 0, true
	}
	return numel(q) / (tq * dk), tq, tk, dk, dv, true
}

func at(in []tensor.Shape, i int) tensor.Shape {
	if i < len(in) {
		return in[i]
	}
	return nil
}

func numel(s tensor.Shape) int64 { return int64(s.Numel()) }
