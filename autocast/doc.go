// Package autocast chooses the precision each op runs in, as torch.autocast does: ops
// that gain from tensor cores / AMX (matmul, linear, conv) run in a half type, ops
// whose accuracy needs range (softmax, exp, log, pow, norms, every loss and every
// reduction used as a loss) run in float32, ops that combine inputs (add, cat, stack)
// promote to the widest input, and the rest run in whatever their inputs are.
// Float64 and integer tensors are never cast.
//
//	ctx := tensor.NewContext()
//	defer ctx.Close()
//	out := autocast.Run(ctx, autocast.Default(tensor.CPU), func(ac *tensor.Context) *tensor.Tensor {
//		return model.Forward(ac.Bind(x)) // linear/conv in bf16, softmax and losses in fp32
//	})
//
// The policy lives in the Context that the tensors carry, never in a global: two
// goroutines training two models, one under FP16 autocast and one in FP32, do not
// affect each other. A nested region (Enter/Run with another policy, or Disabled())
// applies to the tensors bound into it, and Run binds its result back to the outer
// Context, so the outer state applies again after the region. Each region casts every
// FP32 parameter at most once (the weight-cast cache) and drops the cache at exit.
// Backward never runs under autocast: each backward op runs in its forward's dtype, and
// gradients flowing into FP32 parameters arrive in FP32.
//
// Default low dtype: float16 on CUDA, bfloat16 on the CPU (Default). Policies can be
// written jmp-style: Parse("params=float32,compute=float16,output=float32"),
// Parse("half"), Parse("float32"). Overrides force single ops into another category.
//
// # The op table
//
// The category of every registered op (checked against tensor.Ops by the tests):
//
//	| op                               | category        |
//	|----------------------------------|-----------------|
//	| abs                              | passthrough     |
//	| add                              | promote         |
//	| add_scalar                       | passthrough     |
//	| argmax                           | passthrough     |
//	| argmin                           | passthrough     |
//	| avg_pool2d                       | passthrough     |
//	| batch_norm                       | passthrough     |
//	| batch_norm_relu                  | passthrough     |
//	| binary_cross_entropy_with_logits | fp32            |
//	| bind                             | passthrough     |
//	| cast                             | passthrough     |
//	| cat                              | promote         |
//	| clamp                            | passthrough     |
//	| compare                          | promote         |
//	| contiguous                       | passthrough     |
//	| conv2d                           | lower_precision |
//	| cross_entropy                    | fp32            |
//	| div                              | promote         |
//	| dropout                          | passthrough     |
//	| embedding                        | passthrough     |
//	| exp                              | fp32            |
//	| expand                           | passthrough     |
//	| gelu                             | passthrough     |
//	| gelu_tanh                        | passthrough     |
//	| index_select                     | passthrough     |
//	| layer_norm                       | fp32            |
//	| linear                           | lower_precision |
//	| linear_gelu                      | lower_precision |
//	| linear_relu                      | lower_precision |
//	| log                              | fp32            |
//	| log_softmax                      | fp32            |
//	| masked_fill                      | passthrough     |
//	| matmul                           | lower_precision |
//	| max                              | passthrough     |
//	| max_pool2d                       | passthrough     |
//	| maximum                          | promote         |
//	| mean                             | fp32            |
//	| min                              | passthrough     |
//	| minimum                          | promote         |
//	| mse_loss                         | fp32            |
//	| mul                              | promote         |
//	| mul_scalar                       | passthrough     |
//	| neg                              | passthrough     |
//	| permute                          | passthrough     |
//	| pow                              | fp32            |
//	| pow_scalar                       | fp32            |
//	| reciprocal                       | fp32            |
//	| relu                             | passthrough     |
//	| reshape                          | passthrough     |
//	| rsqrt                            | fp32            |
//	| rsub_scalar                      | passthrough     |
//	| scaled_dot_product_attention     | lower_precision |
//	| self_attention                   | lower_precision |
//	| sigmoid                          | passthrough     |
//	| slice                            | passthrough     |
//	| softmax                          | fp32            |
//	| sqrt                             | passthrough     |
//	| square                           | passthrough     |
//	| squeeze                          | passthrough     |
//	| stack                            | promote         |
//	| sub                              | promote         |
//	| sum                              | fp32            |
//	| tanh                             | passthrough     |
//	| to                               | passthrough     |
//	| unsqueeze                        | passthrough     |
//	| where                            | passthrough     |
//
// batch_norm is passthrough here because nn.BatchNorm keeps itself in FP32 (FP32
// parameters and statistics, input cast to FP32 at its boundary, output cast back):
// PyTorch runs it in the input dtype, and users report NaN running statistics under
// FP16 (pytorch#115500). Composed attention is built from matmul and softmax, so it runs
// its products in low precision and its softmax in FP32; the fused
// scaled_dot_product_attention runs in the low dtype as PyTorch's does, with its
// softmax statistics kept in FP32 inside the kernel.
package autocast
