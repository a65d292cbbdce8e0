"""PyTorch (CUDA) or numpy (CPU) side of bench/ops.ts: reads a JSON list of cases on stdin and
prints a JSON list of {key, ms} with the median time of each case. Run by bench/ops.ts."""
import json
import sys
import time

cases = json.load(sys.stdin)
out = []

try:
    import torch
    have_cuda = torch.cuda.is_available()
except Exception:
    torch = None
    have_cuda = False

if have_cuda:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = "cuda"
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}

    def timed(fn, iters):
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        times.sort()
        return times[len(times) // 2]

    for c in cases:
        op, shape, iters = c["op"], c["shape"], c.get("iters", 10)
        dtype = c.get("refDtype", c["dtype"])
        t = dt[dtype]
        if op == "gemm":
            m, n, k = shape
            a = torch.randn(m, k, device=dev, dtype=t)
            b = torch.randn(k, n, device=dev, dtype=t)
            ms = timed(lambda: torch.matmul(a, b), iters)
        elif op == "copy":
            x = torch.randn(shape, device=dev, dtype=t)
            y = torch.empty_like(x)
            ms = timed(lambda: y.copy_(x), iters)
        elif op == "add":
            x = torch.randn(shape, device=dev, dtype=t)
            y = torch.randn(shape, device=dev, dtype=t)
            ms = timed(lambda: x + y, iters)
        elif op == "softmax":
            x = torch.randn(shape, device=dev, dtype=t)
            ms = timed(lambda: torch.softmax(x, -1), iters)
        elif op == "sum":
            x = torch.randn(shape, device=dev, dtype=t)
            ms = timed(lambda: x.sum(-1), iters)
        else:
            continue
        out.append({"key": c["key"], "ms": ms, "name": "PyTorch " + dtype})
        torch.cuda.empty_cache()
else:
    import numpy as np

    for c in cases:
        if c["op"] != "gemm" or c["dtype"] != "f32":
            continue
        m, n, k = c["shape"]
        a = np.random.rand(m, k).astype(np.float32)
        b = np.random.rand(k, n).astype(np.float32)
        a @ b
        times = []
        for _ in range(c.get("iters", 5)):
            t0 = time.perf_counter()
            a @ b
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        out.append({"key": c["key"], "ms": times[len(times) // 2], "name": "numpy"})

print(json.dumps(out))
