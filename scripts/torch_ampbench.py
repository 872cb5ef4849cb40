#!/usr/bin/env python3
"""PyTorch counterpart of `ampbench`: the same networks (models/models.go), the same batch
sizes, SGD (lr 0.01, momentum 0.9) with cross-entropy, FP32 and AMP (fp16 + GradScaler on
CUDA, bf16 autocast on the CPU) side by side: median step time and peak memory.

    python3 scripts/torch_ampbench.py --device cuda --model cnn
    python3 scripts/torch_ampbench.py --device cpu --model transformer --steps 10

On the CPU it sets torch.set_num_threads(2) unless --threads says otherwise.
"""
import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def cnn():
    def block(i, o):
        return [nn.Conv2d(i, o, 5, padding=2), nn.BatchNorm2d(o), nn.ReLU(), nn.MaxPool2d(2, 2)]

    return nn.Sequential(*block(1, 16), *block(16, 32), nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.q, self.k, self.v, self.out = (nn.Linear(dim, dim) for _ in range(4))
        self.heads = heads

    def forward(self, x):
        n, t, d = x.shape
        dh = d // self.heads

        def split(y):
            return y.reshape(n, t, self.heads, dh).permute(0, 2, 1, 3)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = torch.softmax(q @ k.transpose(-1, -2) * (1 / math.sqrt(dh)), dim=-1)
        y = (att @ v).permute(0, 2, 1, 3).reshape(n, t, d)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    """gamp's models.Transformer defaults: vocab 1000, 64 tokens, width 128, 4 heads, 2 blocks."""

    def __init__(self, vocab=1000, seq=64, dim=128, heads=4, layers=2, classes=10):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.randn(seq, dim) * 0.02)
        self.blocks = nn.Sequential(*(Block(dim, heads) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, ids):
        x = self.tok(ids) + self.pos[: ids.shape[1]]
        return self.head(self.norm(self.blocks(x).mean(1)))


BATCH = {"mlp": 256, "cnn": 128, "transformer": 32, "transformer-large": 16, "transformer-base": 16}


def transformer_large():
    """ampbench's transformer-large: width 512, 8 heads, 4 blocks, 128 tokens."""
    return Transformer(seq=128, dim=512, heads=8, layers=4)


def transformer_base():
    """ampbench's transformer-base: width 768, 12 heads, 12 blocks, 512 tokens (a GPU-sized model)."""
    return Transformer(seq=512, dim=768, heads=12, layers=12)


SEQ = {"transformer": 64, "transformer-large": 128, "transformer-base": 512}


def batches(model, n, batch, device, seed):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        if model.startswith("transformer"):
            seq = SEQ[model]
            x = torch.randint(0, 1000, (batch, seq), generator=g)
        else:
            x = torch.randn(batch, 1, 28, 28, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        out.append((x.to(device), y.to(device)))
    return out


def run(args, precision):
    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    net = {"mlp": mlp, "cnn": cnn, "transformer": Transformer, "transformer-large": transformer_large,
           "transformer-base": transformer_base}[args.model]().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    cuda = device.type == "cuda"
    low = None
    if precision == "fp16":
        low = torch.float16
    elif precision == "bf16":
        low = torch.bfloat16
    enabled = cuda and low == torch.float16
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):  # PyTorch ≥ 2.3
        scaler = torch.amp.GradScaler("cuda", enabled=enabled)
    else:  # Debian's 1.13
        scaler = torch.cuda.amp.GradScaler(enabled=enabled)
    data = batches(args.model, 8, args.batch or BATCH[args.model], device, args.seed)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=low or (torch.float16 if cuda else torch.bfloat16), enabled=low is not None):
            loss = F.cross_entropy(net(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    for i in range(args.warmup):
        step(*data[i % len(data)])
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    times = []
    for i in range(args.steps):
        x, y = data[i % len(data)]
        if cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            loss = step(x, y)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            loss = step(x, y)
            times.append(time.perf_counter() - t0)
    res = {"precision": precision, "median_ms": statistics.median(times) * 1e3, "loss": loss.item()}
    if cuda:
        res["peak_mib"] = (torch.cuda.max_memory_allocated() - base) / 2**20
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--model", default="cnn", choices=sorted(BATCH))
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    low = "fp16" if args.device.startswith("cuda") else "bf16"
    rows = [run(args, "fp32"), run(args, low)]
    if args.json:
        print(json.dumps({"torch": torch.__version__, "device": args.device, "model": args.model, "rows": rows}))
        return
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu"
    print(f"PyTorch {torch.__version__} on {name}, model {args.model}, batch {args.batch or BATCH[args.model]}")
    for r in rows:
        mem = f"  peak {r['peak_mib']:.1f} MiB above the model" if "peak_mib" in r else ""
        print(f"  {r['precision']:5s} {r['median_ms']:8.3f} ms/step{mem}")
    print(f"  speed-up {rows[0]['median_ms'] / rows[1]['median_ms']:.2f}x")


if __name__ == "__main__":
    main()
