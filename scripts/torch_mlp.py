#!/usr/bin/python3
"""Times PyTorch on the step gamp's BenchmarkMLPStep times, for scripts/mlp-vs-torch.sh.

The step: MLP 784-1024-1024-10 (ReLU), batch 256 of Gaussian inputs with random labels,
cross-entropy, backward, SGD (lr 0.01, momentum 0.9), zero_grad; in FP32 and under
torch.autocast("cpu", dtype=torch.bfloat16) (the BF16 O1 of gamp's amp.Trainer).

Prints one JSON object per precision on stdout:
  {"impl": "torch", "precision": "fp32", "median_ms": ..., "repeat_medians_ms": [...]}
where each repeat is the median of -steps timed steps after -warmup untimed ones.

Meant for Debian's python3-torch (1.13) with /usr/bin/python3. Run it with OpenBLAS,
or FP32 runs on the reference BLAS at a few GFLOP/s and BF16 may crash:
  LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp OPENBLAS_CORETYPE=SKYLAKEX \\
  DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 /usr/bin/python3 scripts/torch_mlp.py
"""

import argparse
import json
import statistics
import time

import torch


def build(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10),
    )


def run(precision, args):
    model = build(args.seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(args.seed)
    x = torch.randn(args.batch, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (args.batch,), generator=g)
    bf16 = precision == "bf16"

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    medians = []
    for _ in range(args.repeats):
        for _ in range(args.warmup):
            step()
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
        medians.append(statistics.median(times))
    return {
        "impl": "torch",
        "precision": precision,
        "median_ms": statistics.median(medians),
        "repeat_medians_ms": medians,
        "threads": torch.get_num_threads(),
        "version": torch.__version__,
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--precision", default="fp32,bf16", help="comma-separated: fp32, bf16")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=30, help="timed steps per repeat")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps before each repeat")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    for precision in args.precision.split(","):
        print(json.dumps(run(precision.strip(), args)), flush=True)


if __name__ == "__main__":
    main()
