#!/usr/bin/env python3
"""PyTorch's float32 GEMM rate on the linear layers' shapes of cmd/ampbench's MLP and
transformer-large: forward Y = X·Wᵀ, input gradient dX = dY·W and weight gradient
dW = dYᵀ·X for X [rows, in], W [out, in], median of 15 calls, GFLOP/s counting
2·rows·in·out. The gamp side is `go test -run '^$' -bench GemmLinear ./backend/cpu/`
(same shapes, same names); scripts/gemm-vs-torch.sh alternates the two and prints
the ratios. THREADS sets torch's threads (default 2). Give PyTorch its best BLAS here:

    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp /usr/bin/python3 scripts/torch_gemm_rates.py
"""
import os
import time

import torch

torch.set_num_threads(int(os.environ.get("THREADS", "2")))
for rows, inf, outf in [(2048, 512, 2048), (2048, 2048, 512), (2048, 512, 1536), (256, 784, 1024), (256, 1024, 1024)]:
    x, w, dy = torch.randn(rows, inf), torch.randn(outf, inf), torch.randn(rows, outf)
    for name, f in [("fwd", lambda: x @ w.t()), ("dx", lambda: dy @ w), ("dw", lambda: dy.t() @ x)]:
        for _ in range(3):
            f()
        ts = []
        for _ in range(15):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        med = sorted(ts)[len(ts) // 2]
        print(f"{rows}x{inf}x{outf}/{name}: {med * 1e3:.3f} ms {2 * rows * inf * outf / med / 1e9:.1f} GFLOP/s")
