#!/usr/bin/env python3
"""PyTorch counterpart of examples/chargpt: the same character-level GPT (models/gpt.go),
started from the weights gamp wrote (chargpt -export-init FILE, a safetensors file), trained
on the same batches (the same text, vocabulary, 90/10 split and SplitMix64 block offsets as
data.Blocks), with the same AdamW, warm-up + cosine schedule and clipping, in FP32 or under
BF16 autocast. It prints one JSON object with the training loss of every step and the
validation losses, for scripts/chargpt-vs-torch.sh and the Go comparison test.

    chargpt -text t.txt -steps 50 -export-init init.safetensors -json > gamp.json
    python3 scripts/torch_chargpt.py --init init.safetensors --text t.txt --steps 50

With --bench it times training steps of a freshly initialised model instead (median ms per
step, both precisions unless --precision says otherwise):

    python3 scripts/torch_chargpt.py --bench --steps 20 --warmup-steps 5

The safetensors file is parsed here (the format is an 8-byte header length, a JSON header
and raw little-endian data), so the `safetensors` module is not needed.
"""
import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

FORTUNES = "/usr/share/games/fortunes"
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] != "F32":
            sys.exit(f"torch_chargpt: {path}: tensor {name} is {e['dtype']}; want F32 initial weights")
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=torch.float32)
        out[name] = t.reshape(e["shape"]).clone()
    return out


def fortunes_text(d):
    """The corpus exactly as data.LoadFortunes builds it."""
    names = []
    for n in sorted(os.listdir(d)):
        p = os.path.join(d, n)
        if os.path.islink(p) or not os.path.isfile(p) or n.endswith(".dat") or n.endswith(".u8") or n.startswith("."):
            continue
        names.append(n)
    if not names:
        sys.exit(f"torch_chargpt: no fortune files in {d} (apt-get install fortunes)")
    out = []
    for n in names:
        with open(os.path.join(d, n), "rb") as f:
            try:
                s = f.read().decode("utf-8")
            except UnicodeDecodeError:
                sys.exit(f"torch_chargpt: {n} is not valid UTF-8; pass --text with the corpus gamp trained on")
        lines = s.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        cur = []
        for line in lines:
            line = line.rstrip("\r")
            if line == "%":
                if cur:
                    out.append("\n".join(cur) + "\n\n")
                cur = []
                continue
            cur.append(line)
        if cur:
            out.append("\n".join(cur) + "\n\n")
    return "".join(out)


def splitmix64(x):
    x = (x + GAMMA) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


class Blocks:
    """data.Blocks: draw n starts at splitmix64(seed + n·γ) mod (len − block)."""

    def __init__(self, tokens, block, seed):
        self.tokens, self.block, self.seed, self.draws = tokens, block, seed, 0

    def next(self, n):
        starts = len(self.tokens) - self.block
        offs = []
        for _ in range(n):
            offs.append(splitmix64((self.seed + self.draws * GAMMA) & M64) % starts)
            self.draws += 1
        x = torch.stack([self.tokens[o : o + self.block] for o in offs])
        y = torch.stack([self.tokens[o + 1 : o + self.block + 1] for o in offs])
        return x, y


class Attention(nn.Module):
    def __init__(self, dim, heads, dropout, block):
        super().__init__()
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.heads, self.dropout = heads, dropout
        self.register_buffer("mask", torch.ones(block, block, dtype=torch.bool).triu(1), persistent=False)

    def forward(self, x):
        n, t, d = x.shape
        dh = d // self.heads
        q, k, v = self.qkv(x).reshape(n, t, 3, self.heads, dh).permute(2, 0, 3, 1, 4)
        s = (q @ k.transpose(-1, -2)) * (1 / math.sqrt(dh))
        s = s.masked_fill(self.mask[:t, :t], float("-inf"))
        y = torch.softmax(s, dim=-1) @ v
        y = y.permute(0, 2, 1, 3).reshape(n, t, d)
        return F.dropout(self.proj(y), self.dropout, self.training)


class Block(nn.Module):
    def __init__(self, dim, heads, dropout, block):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, dropout, block)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.dropout = dropout

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), self.dropout, self.training)


class GPT(nn.Module):
    """models.GPT, with the same parameter names."""

    def __init__(self, vocab, block, dim, heads, layers, dropout=0.0, tie=False):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(block, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, dropout, block) for _ in range(layers))
        self.lnf = nn.LayerNorm(dim)
        self.head = None if tie else nn.Linear(dim, vocab, bias=False)
        self.dropout = dropout
        # nanoGPT's initialisation, as NewGPT (used when no --init file is given).
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * layers))
            elif p.dim() == 2:
                nn.init.normal_(p, 0, 0.02)

    def forward(self, ids):
        t = ids.shape[1]
        x = F.dropout(self.tok(ids) + self.pos[:t], self.dropout, self.training)
        for b in self.blocks:
            x = b(x)
        x = self.lnf(x)
        return self.head(x) if self.head is not None else F.linear(x, self.tok.weight)


def lr_at(step, a):
    if step < a.warmup:
        return a.lr * (step + 1) / a.warmup
    if a.schedule == "constant":
        return a.lr
    tmax, eta = a.steps - a.warmup, a.lr / 10
    return eta + (a.lr - eta) * (1 + math.cos(math.pi * (step - a.warmup) / tmax)) / 2


def lm_loss(logits, y):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


def train(a, model, train_b, val_b, bf16):
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.99), eps=1e-8, weight_decay=a.weight_decay)
    micro = a.batch // a.accum
    curve, val_curve, times = [], [], []

    def evaluate():
        model.eval()
        val_b.draws = 0
        total = 0.0
        with torch.no_grad():
            for _ in range(a.eval_batches):
                x, y = val_b.next(micro)
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                    out = model(x)
                total += lm_loss(out, y).item()
        model.train()
        return total / a.eval_batches

    model.train()
    for step in range(a.steps):
        start = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = lr_at(step, a)
        total = 0.0
        for _ in range(a.accum):
            x, y = train_b.next(micro)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(x)
            loss = lm_loss(out, y)
            (loss / a.accum).backward()
            total += loss.item()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - start) * 1e3)
        curve.append({"step": step + 1, "loss": total / a.accum})
        if (a.eval_every > 0 and (step + 1) % a.eval_every == 0) or step + 1 == a.steps:
            val_curve.append({"step": step + 1, "loss": evaluate()})
    return curve, val_curve, times


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--init", help="initial weights written by chargpt -export-init")
    p.add_argument("--text", help="the UTF-8 text file chargpt -text trained on (default: the fortunes corpus)")
    p.add_argument("--fortunes", default=FORTUNES)
    p.add_argument("--precision", default="fp32", help="fp32, bf16, or (with --bench) fp32,bf16")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--context", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--tie", action="store_true")
    p.add_argument("--lr", type=float, default=6e-3)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--schedule", default="cosine")
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-batches", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bench", action="store_true", help="time training steps (median ms) instead")
    p.add_argument("--warmup-steps", type=int, default=5, help="--bench: untimed steps first")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    text = open(a.text, encoding="utf-8").read() if a.text else fortunes_text(a.fortunes)
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.int64)
    cut = len(ids) * 9 // 10
    train_ids, val_ids = ids[:cut], ids[cut:]
    mk = lambda: GPT(len(vocab), a.context, a.dim, a.heads, a.layers, tie=a.tie)

    if a.bench:
        rows = []
        for prec in a.precision.split(","):
            model = mk()
            b = Blocks(train_ids, a.context, a.seed)
            steps, warm = a.steps, a.warmup
            a.steps, a.warmup = steps + a.warmup_steps, 0
            a.eval_every, a.eval_batches = 0, 1
            _, _, times = train(a, model, b, Blocks(val_ids, a.context, a.seed + 1), prec == "bf16")
            a.steps, a.warmup = steps, warm
            rows.append({"precision": prec, "median_ms": statistics.median(times[a.warmup_steps : a.warmup_steps + steps])})
        print(json.dumps({"model": "chargpt", "torch": torch.__version__, "threads": a.threads, "rows": rows}))
        return

    if a.precision not in ("fp32", "bf16"):
        sys.exit(f"torch_chargpt: --precision {a.precision}: want fp32 or bf16")
    model = mk()
    if a.init:
        state = read_safetensors(a.init)
        missing, unexpected = model.load_state_dict(state, strict=False)
        if missing or unexpected:
            sys.exit(f"torch_chargpt: {a.init} does not fit the model: missing {missing}, unexpected {unexpected}")
    curve, val_curve, times = train(a, model, Blocks(train_ids, a.context, a.seed), Blocks(val_ids, a.context, a.seed + 1),
                                    a.precision == "bf16")
    print(json.dumps({"precision": a.precision, "vocab": len(vocab), "train_curve": curve, "val_curve": val_curve,
                      "median_step_ms": statistics.median(times), "torch": torch.__version__}))


if __name__ == "__main__":
    main()
