// Package tensor is gamp's eager tensor library with autograd: dtypes (float32,
// float16, bfloat16, float64, int32, int64, bool), strided views, devices, a registry of
// ops each carrying its forward, backward and autocast category, and the Context that
// carries grad mode, the autocast policy, the random generator and the memory scope
// explicitly (Go has no goroutine-local storage).
//
//	ctx := tensor.NewContext()          // one scope per training step
//	defer ctx.Close()                   // releases every intermediate of the step
//	x := tensor.Randn(tensor.Shape{64, 784}, tensor.WithContext(ctx))
//	loss := tensor.Linear(x, w, b).Relu().Square().Mean()
//	loss.Backward()                     // w.Grad(), b.Grad() now hold gradients
//
// An op runs in the innermost Context of its inputs. An op none of whose inputs carries
// a Context (say, casting a parameter that lives outside every step) gives an untracked
// result: Release it, or Bind the input into the step's Context first so the result is
// released with the step. Untracked tensors are freed by the GC as a last resort.
//
// The pure-Go CPU backend is always linked in. A program opts into GPUs by importing
// the CUDA backend, which registers itself and finds its libraries at run time:
//
//	import _ "github.com/gamp-ml/gamp/cuda"
//
// Then OpenDevice("cuda:0") and BestDevice use the GPU when one is present and report
// why not otherwise; without the import, opening cuda:0 is an error that names it.
//
// Misuse (shape, dtype or device mismatch) panics with *OpError. Out of memory panics
// with an error wrapping ErrOutOfMemory; CatchOOM turns it back into an error.
package tensor

// The CPU backend always works, so it is always there.
import _ "github.com/gamp-ml/gamp/backend/cpu"
