#!/usr/bin/env python3
"""Golden values from PyTorch for gamp's layer and training tests.

Regenerate from the repository root with a Python that has PyTorch:

    python3 testdata/golden/gen.py

(on Debian the python3-torch package provides it; run /usr/bin/python3 if another
python3 comes first on PATH). The committed files were made with PyTorch 1.13.1
(Debian python3-torch 1.13.1+dfsg-4, torch.__version__ "1.13.0a0") and NumPy 1.24,
on the CPU with torch.set_num_threads(2). Every run writes the same files.

Everything runs in float32, as the engine does. Numbers are written as the shortest
decimal that reads back (as a float64, rounded to float32) to the exact float32 value,
so inputs and parameters copied into gamp are bit-identical to the ones PyTorch used.

layers.json: one case per layer, loss or activation configuration: the inputs, the
state dict before the forward (parameters and buffers), the output, the upstream
gradient it was back-propagated with (0.75 for a scalar loss), the gradients of every
input and parameter, the buffers after the forward (BatchNorm's running statistics),
and "noise": for each compared quantity, the largest difference between PyTorch's
float32 result and the same computation in float64 from the same values, which the Go
test uses as the floor of its tolerance for values that float32 cannot resolve better.
Read by nn/golden_test.go.

mlp_sgd.json, mlp_adamw.json: 20 steps of a 784-64-32-10 ReLU MLP with cross entropy
on one fixed batch of 64. The batch and the initial weights (100k values) are not
stored: they come from the small exact generator below (splitmix64 → 24-bit uniforms),
which optim/golden_test.go repeats bit for bit; the files hold SHA-256 digests of them
so that a drift shows up as such. The labels, the loss at every step and the final
weights (base64 of little-endian float32, to keep the files small) are stored. Read by
optim/golden_test.go.
"""

import base64
import copy
import hashlib
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_num_threads(2)
torch.use_deterministic_algorithms(True)

HERE = os.path.dirname(os.path.abspath(__file__))


# ---------------------------------------------------------------------------
# Encoding


def f32(v):
    """The shortest decimal of the float32 value v, as a Python float (whose repr is
    that decimal). Rounding it to float32, as a reader does, gives v back exactly."""
    r = float(str(np.float32(v)))
    assert np.float32(r) == np.float32(v), (v, r)
    return r


def enc(t):
    """A float tensor as {"shape", "data"} with float32-exact numbers."""
    t = t.detach().to(torch.float32).contiguous()
    return {"shape": list(t.shape), "data": [f32(v) for v in t.flatten().tolist()]}


def enc_int(t):
    return {"shape": list(t.shape), "data": [int(v) for v in t.flatten().tolist()]}


def b64(t):
    a = t.detach().to(torch.float32).contiguous().numpy().astype("<f4")
    return base64.b64encode(a.tobytes()).decode("ascii")


def sha(t):
    a = t.detach().to(torch.float32).contiguous().numpy().astype("<f4")
    return hashlib.sha256(a.tobytes()).hexdigest()


# ---------------------------------------------------------------------------
# Layer cases

gen = torch.Generator().manual_seed(20240611)


def randn(*shape, scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(torch.float32)


def rand(*shape, lo=0.0, hi=1.0):
    return (torch.rand(*shape, generator=gen) * (hi - lo) + lo).to(torch.float32)


CASES = []


def run_module(module, x, gy=None):
    """Forward and backward of module on x; the upstream gradient is drawn when gy is
    None. Returns the upstream gradient and every quantity the Go test compares: "out",
    "grad.<input or parameter>", "state.<buffer>" (after the forward)."""
    x = x.clone().requires_grad_(x.is_floating_point())
    y = module(x)
    if gy is None:
        gy = randn(*y.shape)
    y.backward(gy.to(y.dtype))
    q = {"out": y}
    if x.is_floating_point():
        q["grad.x"] = x.grad
    for k, p in module.named_parameters():
        q["grad." + k] = p.grad
    for k, b in module.named_buffers():
        q["state." + k] = b
    return gy, q


def run_func(fn, inputs, int_inputs, gy):
    ins = {k: v.clone().requires_grad_(True) for k, v in inputs.items()}
    y = fn(**ins, **int_inputs)
    y.backward(gy.to(y.dtype))
    q = {"out": y}
    for k, v in ins.items():
        q["grad." + k] = v.grad
    return q


def noise(q32, q64):
    """PyTorch's own float32 error on each quantity: the largest difference from the
    same computation in float64 (from the same float32 inputs and parameters)."""
    return {k: float((q32[k].double() - q64[k].double()).abs().max()) if q32[k].is_floating_point() else 0.0
            for k in q32}


def record(name, kind, cfg, train, inputs, int_inputs, params, gy, q32, q64):
    def enc_any(v):
        return enc(v) if v.is_floating_point() else enc_int(v)

    CASES.append({
        "name": name,
        "kind": kind,
        "cfg": cfg,
        "train": train,
        "inputs": {k: enc(v) for k, v in inputs.items()},
        "int_inputs": {k: enc_int(v) for k, v in int_inputs.items()},
        "params": params,
        "out": enc(q32["out"]),
        "grad_out": enc(gy),
        "grads": {k[5:]: enc(v) for k, v in q32.items() if k.startswith("grad.")},
        # The buffers after the forward: updated in training, unchanged in evaluation.
        "state_after": {k[6:]: enc_any(v) for k, v in q32.items() if k.startswith("state.")},
        "noise": noise(q32, q64),
    })


def module_case(name, kind, cfg, module, x, train=True, state=None):
    """Runs module on x, back-propagates a random upstream gradient, records all."""
    if state:
        with torch.no_grad():
            sd = module.state_dict()
            for k, v in state.items():
                sd[k].copy_(v)
    module.train(train)
    m64 = copy.deepcopy(module).double()
    params = {k: (enc_int(v) if not v.is_floating_point() else enc(v)) for k, v in module.state_dict().items()}
    gy, q32 = run_module(module, x)
    _, q64 = run_module(m64, x.double() if x.is_floating_point() else x, gy.double())
    fl = x.is_floating_point()
    record(name, kind, cfg, train, {"x": x} if fl else {}, {} if fl else {"x": x}, params, gy, q32, q64)


def func_case(name, kind, cfg, fn, inputs, int_inputs=None, scalar=False):
    """Runs fn(**inputs, **int_inputs); inputs are float tensors that get gradients.
    A scalar output is back-propagated from 0.75, others from a random gradient."""
    iins = int_inputs or {}
    y = fn(**inputs, **iins)
    gy = torch.tensor(0.75, dtype=torch.float32) if scalar else randn(*y.shape)
    q32 = run_func(fn, inputs, iins, gy)
    q64 = run_func(fn, {k: v.double() for k, v in inputs.items()}, iins, gy.double())
    record(name, kind, cfg, True, inputs, iins, {}, gy, q32, q64)


def linear_cases():
    for name, shape, bias in [("linear/bias", (4, 6), True), ("linear/no_bias", (4, 6), False),
                              ("linear/3d_input", (2, 3, 6), True)]:
        m = nn.Linear(6, 5, bias=bias)
        st = {"weight": randn(5, 6, scale=0.5)}
        if bias:
            st["bias"] = randn(5, scale=0.5)
        module_case(name, "linear", {"in": 6, "out": 5, "bias": bias}, m, randn(*shape), state=st)


def conv_cases():
    specs = [
        # name, in, out, kernel, stride, padding, dilation, groups, bias, input shape
        ("conv/3x3_pad1", 4, 6, (3, 3), (1, 1), (1, 1), (1, 1), 1, True, (2, 4, 5, 5)),
        ("conv/stride2_pad1", 4, 6, (3, 3), (2, 2), (1, 1), (1, 1), 1, True, (2, 4, 6, 6)),
        ("conv/dilation2_pad2", 4, 6, (3, 3), (1, 1), (2, 2), (2, 2), 1, True, (2, 4, 5, 5)),
        ("conv/groups2", 4, 6, (3, 3), (1, 1), (1, 1), (1, 1), 2, True, (2, 4, 5, 5)),
        ("conv/no_bias", 4, 6, (3, 3), (1, 1), (1, 1), (1, 1), 1, False, (2, 4, 5, 5)),
        ("conv/all_rect_no_bias", 4, 6, (3, 2), (2, 1), (1, 2), (2, 1), 2, False, (2, 4, 7, 5)),
        ("conv/depthwise", 4, 4, (3, 3), (1, 2), (1, 1), (1, 1), 4, True, (1, 4, 6, 7)),
    ]
    for name, cin, cout, k, s, p, d, g, bias, shape in specs:
        m = nn.Conv2d(cin, cout, k, stride=s, padding=p, dilation=d, groups=g, bias=bias)
        st = {"weight": randn(cout, cin // g, *k, scale=0.4)}
        if bias:
            st["bias"] = randn(cout, scale=0.5)
        cfg = {"in": cin, "out": cout, "kernel": list(k), "stride": list(s), "padding": list(p),
               "dilation": list(d), "groups": g, "bias": bias}
        module_case(name, "conv2d", cfg, m, randn(*shape), state=st)


def norm_state(c, running):
    st = {"weight": rand(c, lo=0.5, hi=1.5), "bias": randn(c, scale=0.3)}
    if running:
        st["running_mean"] = randn(c, scale=0.5)
        st["running_var"] = rand(c, lo=0.5, hi=2.0)
    return st


def batchnorm_cases():
    # Training from the default statistics, training from non-trivial ones with another
    # momentum and eps, and evaluation with non-trivial running statistics.
    for cls, kind, shape in [(nn.BatchNorm1d, "batchnorm1d", (8, 5)),
                             (nn.BatchNorm1d, "batchnorm1d", (4, 5, 3)),
                             (nn.BatchNorm2d, "batchnorm2d", (3, 5, 3, 2))]:
        rank = "%dd" % len(shape)
        x = randn(*shape, scale=2.0) + 0.7
        module_case("%s/%s_train" % (kind, rank), kind, {"features": 5}, cls(5), x, train=True,
                    state=norm_state(5, False))
        module_case("%s/%s_train_momentum" % (kind, rank), kind, {"features": 5, "momentum": 0.3, "eps": 1e-3},
                    cls(5, momentum=0.3, eps=1e-3), randn(*shape, scale=1.5) - 0.4, train=True,
                    state=norm_state(5, True))
        module_case("%s/%s_eval" % (kind, rank), kind, {"features": 5}, cls(5), randn(*shape, scale=1.5),
                    train=False, state=norm_state(5, True))


def layernorm_cases():
    for name, norm, shape in [("layernorm/last", [6], (4, 6)), ("layernorm/last2", [3, 4], (2, 3, 4))]:
        st = {"weight": rand(*norm, lo=0.5, hi=1.5), "bias": randn(*norm, scale=0.3)}
        module_case(name, "layernorm", {"shape": norm}, nn.LayerNorm(norm), randn(*shape, scale=2.0) + 0.5, state=st)


def embedding_cases():
    idx = torch.tensor([[1, 3, 3, 0], [6, 1, 1, 1]], dtype=torch.int64)
    module_case("embedding/repeated", "embedding", {"num": 7, "dim": 4}, nn.Embedding(7, 4), idx,
                state={"weight": randn(7, 4)})


def pool_cases():
    for name, k, s, p, shape in [("maxpool/2x2", (2, 2), (2, 2), (0, 0), (2, 2, 4, 6)),
                                 ("maxpool/3x3_s2_p1", (3, 3), (2, 2), (1, 1), (2, 2, 5, 5)),
                                 ("maxpool/rect_default_stride", (2, 3), None, (1, 1), (1, 2, 6, 7))]:
        m = nn.MaxPool2d(k, stride=s, padding=p)
        cfg = {"kernel": list(k), "stride": list(s) if s else [0, 0], "padding": list(p)}
        module_case(name, "maxpool2d", cfg, m, randn(*shape))
    for name, k, s, p, inc, shape in [("avgpool/2x2", (2, 2), (2, 2), (0, 0), True, (2, 2, 4, 6)),
                                      ("avgpool/3x3_s2_p1_include_pad", (3, 3), (2, 2), (1, 1), True, (2, 2, 5, 5)),
                                      ("avgpool/3x3_s2_p1_exclude_pad", (3, 3), (2, 2), (1, 1), False, (2, 2, 5, 5)),
                                      ("avgpool/rect_s1_p1_exclude_pad", (2, 3), (1, 1), (1, 1), False, (1, 2, 5, 6))]:
        m = nn.AvgPool2d(k, stride=s, padding=p, count_include_pad=inc)
        cfg = {"kernel": list(k), "stride": list(s), "padding": list(p), "count_include_pad": inc}
        module_case(name, "avgpool2d", cfg, m, randn(*shape))


def activation_cases():
    x = randn(3, 4, 5, scale=2.5)
    # Exact zeros (ReLU's kink: PyTorch's gradient there is 0), large magnitudes and
    # tiny ones.
    special = torch.tensor([0.0, -0.0, 1e-6, -1e-6, 8.0, -8.0, 20.0, -20.0, 3.5, -3.5])
    x.view(-1)[:10] = special
    for name, kind, cfg, m in [("relu", "relu", {}, nn.ReLU()),
                               ("gelu/exact", "gelu", {"approximate": "none"}, nn.GELU()),
                               ("gelu/tanh", "gelu", {"approximate": "tanh"}, nn.GELU(approximate="tanh")),
                               ("tanh", "tanh", {}, nn.Tanh()),
                               ("sigmoid", "sigmoid", {}, nn.Sigmoid())]:
        module_case(name, kind, cfg, m, x)
    module_case("flatten", "flatten", {}, nn.Flatten(), randn(2, 3, 2, 2))


def softmax_cases():
    for name, kind, fn, shape, dim in [("softmax/last", "softmax", F.softmax, (4, 7), -1),
                                       ("softmax/dim1_3d", "softmax", F.softmax, (2, 3, 4), 1),
                                       ("log_softmax/last", "log_softmax", F.log_softmax, (4, 7), -1),
                                       ("log_softmax/dim1_3d", "log_softmax", F.log_softmax, (2, 3, 4), 1)]:
        func_case(name, kind, {"dim": dim}, lambda x, fn=fn, dim=dim: fn(x, dim=dim), {"x": randn(*shape, scale=3.0)})


def loss_cases():
    labels = torch.tensor([0, 4, 2, 2, 1, 3], dtype=torch.int64)
    for name, sm, red in [("cross_entropy/mean", 0.0, "mean"), ("cross_entropy/smooth0.1", 0.1, "mean"),
                          ("cross_entropy/sum_smooth0.1", 0.1, "sum"), ("cross_entropy/none", 0.0, "none")]:
        func_case(name, "cross_entropy", {"smoothing": sm, "reduction": red},
                  lambda x, labels, sm=sm, red=red: F.cross_entropy(x, labels, label_smoothing=sm, reduction=red),
                  {"x": randn(6, 5, scale=2.0)}, {"labels": labels}, scalar=red != "none")
    lab3 = torch.tensor([[0, 4, 1], [2, 2, 3]], dtype=torch.int64)
    func_case("cross_entropy/spatial_smooth0.1", "cross_entropy", {"smoothing": 0.1, "reduction": "mean"},
              lambda x, labels: F.cross_entropy(x, labels, label_smoothing=0.1),
              {"x": randn(2, 5, 3, scale=2.0)}, {"labels": lab3}, scalar=True)
    for red in ["mean", "sum", "none"]:
        func_case("mse/" + red, "mse", {"reduction": red},
                  lambda x, y, red=red: F.mse_loss(x, y, reduction=red),
                  {"x": randn(4, 5), "y": randn(4, 5)}, scalar=red != "none")
    for red in ["mean", "none"]:
        x = randn(4, 5, scale=3.0)
        x.view(-1)[:4] = torch.tensor([30.0, -30.0, 0.0, 90.0])
        func_case("bce_with_logits/" + red, "bce_with_logits", {"reduction": red},
                  lambda x, y, red=red: F.binary_cross_entropy_with_logits(x, y, reduction=red),
                  {"x": x, "y": rand(4, 5)}, scalar=red != "none")


def sequential_case():
    m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Flatten(), nn.Linear(4 * 3 * 3, 5), nn.GELU())
    st = {"0.weight": randn(4, 3, 3, 3, scale=0.3), "0.bias": randn(4, scale=0.2),
          "1.weight": rand(4, lo=0.5, hi=1.5), "1.bias": randn(4, scale=0.3),
          "5.weight": randn(5, 36, scale=0.2), "5.bias": randn(5, scale=0.2)}
    module_case("sequential/conv_bn_relu_pool_linear_gelu", "sequential", {}, m, randn(2, 3, 6, 6), state=st)


def layers():
    torch.manual_seed(0)  # module constructors draw weights; every one is overwritten
    linear_cases()
    conv_cases()
    batchnorm_cases()
    layernorm_cases()
    embedding_cases()
    pool_cases()
    activation_cases()
    softmax_cases()
    loss_cases()
    sequential_case()
    return {"torch": torch.__version__, "cases": CASES}


# ---------------------------------------------------------------------------
# Training runs
#
# The generator, which optim/golden_test.go repeats: value i (from 0) of stream s is
# splitmix64(s + (i+1)·0x9E3779B97F4A7C15); its top 24 bits k give u = k/2^24 in [0, 1).
# Weights and biases of a Linear(in, out) are float32((2u-1)·(1/√in)), PyTorch's default
# U(±1/√in); an input is float32(u_1 + … + u_12 - 6) from 12 consecutive values
# (Irwin–Hall: mean 0, variance 1, close to N(0, 1)). Every step is exact in float64,
# so both languages get the same float32 bits.

GAMMA = np.uint64(0x9E3779B97F4A7C15)
MLP_SIZES = [784, 64, 32, 10]
MLP_BATCH = 64
MLP_STEPS = 20
SEED_X = 1
SEED_PARAM = 100  # parameter j of the state dict (0.weight, 0.bias, 2.weight, …) uses 100+j


def uniform24(seed, n):
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + np.arange(1, n + 1, dtype=np.uint64) * GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)


def mlp_inputs():
    u = uniform24(SEED_X, MLP_BATCH * MLP_SIZES[0] * 12).reshape(-1, 12)
    x = (u.sum(axis=1) - 6.0).astype(np.float32)  # the sums are exact
    return torch.from_numpy(x.reshape(MLP_BATCH, MLP_SIZES[0]))


def mlp_model():
    layers = []
    for i in range(len(MLP_SIZES) - 1):
        layers.append(nn.Linear(MLP_SIZES[i], MLP_SIZES[i + 1]))
        if i < len(MLP_SIZES) - 2:
            layers.append(nn.ReLU())
    m = nn.Sequential(*layers)
    with torch.no_grad():
        for j, (name, p) in enumerate(m.named_parameters()):
            fan_in = MLP_SIZES[int(name.split(".")[0]) // 2]
            u = uniform24(SEED_PARAM + j, p.numel())
            v = ((2.0 * u - 1.0) * (1.0 / math.sqrt(fan_in))).astype(np.float32)
            p.copy_(torch.from_numpy(v.reshape(tuple(p.shape))))
    return m


def mlp_run(name, make_opt, cfg):
    x = mlp_inputs()
    labels = torch.from_numpy((uniform24(SEED_X + 1, MLP_BATCH) * 10).astype(np.int64))
    m = mlp_model()
    init = {k: sha(v) for k, v in m.state_dict().items()}
    opt = make_opt(m.parameters())
    losses = []
    for _ in range(MLP_STEPS):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(m(x), labels)
        loss.backward()
        opt.step()
        losses.append(f32(loss.item()))
    return {
        "torch": torch.__version__,
        "optimizer": name,
        "config": cfg,
        "sizes": MLP_SIZES,
        "batch": MLP_BATCH,
        "steps": MLP_STEPS,
        "seed_x": SEED_X,
        "seed_param": SEED_PARAM,
        "input_sha256": sha(x),
        "init_sha256": init,
        "labels": [int(v) for v in labels.tolist()],
        "losses": losses,
        "final_f32le_base64": {k: b64(v) for k, v in m.state_dict().items()},
        "final_shape": {k: list(v.shape) for k, v in m.state_dict().items()},
    }


def write(name, obj):
    path = os.path.join(HERE, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
        f.write("\n")
    print("wrote %s (%d bytes)" % (path, os.path.getsize(path)), file=sys.stderr)


def main():
    write("layers.json", layers())
    sgd = {"lr": 0.1, "momentum": 0.9, "nesterov": False, "weight_decay": 1e-4}
    write("mlp_sgd.json", mlp_run("sgd", lambda ps: torch.optim.SGD(ps, **sgd), sgd))
    adamw = {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}
    write("mlp_adamw.json", mlp_run("adamw", lambda ps: torch.optim.AdamW(
        ps, lr=adamw["lr"], betas=tuple(adamw["betas"]), eps=adamw["eps"], weight_decay=adamw["weight_decay"]),
        adamw))


if __name__ == "__main__":
    main()
