// Package nn builds networks: the Module interface and the Base every layer embeds,
// the layers (Linear, Conv2d, BatchNorm1d/2d, LayerNorm, activations, Dropout, pools,
// Flatten, Embedding, Sequential), the losses, the initialisers, the utilities that
// move and cast a whole model (To, Cast, CastAll), and the state dict, saved as
// safetensors files that PyTorch and Hugging Face tools read.
//
//	model := nn.NewSequential(nn.NewLinear(784, 128, nn.Seeded(1)), nn.NewReLU(), nn.NewLinear(128, 10, nn.Seeded(2)))
//	ctx := tensor.NewContext()                    // one Context per training step
//	logits := model.Forward(ctx.Bind(x))          // x [64, 784], labels [64] Int64
//	nn.CrossEntropyLoss{}.Loss(logits, ctx.Bind(labels)).Backward()
//	ctx.Close()                                   // model.Params()[i].Grad() now hold the gradients
//
// Parameters are leaves created outside any Context and named by their path in the
// module tree ("0.weight", "block.1.bias"); constructors draw initial values from the
// generator of their Init (PyTorch's default schemes), so a seed reproduces a model.
// Under mixed precision BatchNorm stays FP32 (its parameters are marked KeepFP32 and
// Forward casts half inputs at its boundary); see BatchNorm and Cast.
//
// Call runs a module with its hooks. Where a model knows that one layer's output goes
// to the next alone, CallPair (a Linear or BatchNorm then a ReLU, a Linear then an
// exact GELU) and CallInto (a LayerNorm whose output a Linear reads under autocast)
// run the pair as fewer passes over memory with the same results, bit for bit, and
// leave hooked layers alone; Sequential does both for adjacent layers.
package nn
