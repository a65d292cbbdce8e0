"""PyTorch side of bench/attention.ts: reads a JSON list of cases on stdin and prints a JSON list of
{key, ms}: torch.nn.functional.scaled_dot_product_attention in bf16 on CUDA, causal prefill
(forward, or forward + backward) at (1, H, T, D), and one-query decode over (1, Hkv, T, D) with
enable_gqa (the reference of FON's contiguous and paged decode alike: one tensor here) (kv heads expanded once, outside the timing, where this torch lacks it). Each timing is
bench/torch_timing.py's timed: the median of 3 CUDA-event-timed batches of back-to-back calls, each
batch >= 250 ms of GPU work."""
import json
import sys

import torch
import torch.nn.functional as F

from torch_timing import timed  # bench/torch_timing.py (the script's folder is on sys.path)

cases = json.load(sys.stdin)
out = []
if not torch.cuda.is_available():
    print(json.dumps(out))
    sys.exit(0)

dev = "cuda"
bf = torch.bfloat16


for c in cases:
    t, h, hkv, d = c["t"], c["h"], c["hkv"], c["d"]
    if c["op"] in ("decode", "decode_paged"):
        q = torch.randn(1, h, 1, d, device=dev, dtype=bf)
        k = torch.randn(1, hkv, t, d, device=dev, dtype=bf)
        v = torch.randn(1, hkv, t, d, device=dev, dtype=bf)
        try:
            F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
            ms = timed(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True))
            name = "SDPA enable_gqa"
        except TypeError:
            ke, ve = k.repeat_interleave(h // hkv, 1), v.repeat_interleave(h // hkv, 1)
            ms = timed(lambda: F.scaled_dot_product_attention(q, ke, ve))
            name = "SDPA expanded kv"
    else:
        grad = c["op"] == "prefill_fwd_bwd"
        q = torch.randn(1, h, t, d, device=dev, dtype=bf, requires_grad=grad)
        k = torch.randn(1, h, t, d, device=dev, dtype=bf, requires_grad=grad)
        v = torch.randn(1, h, t, d, device=dev, dtype=bf, requires_grad=grad)
        if grad:
            g = torch.randn(1, h, t, d, device=dev, dtype=bf)

            def step():
                q.grad = k.grad = v.grad = None
                F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)

            ms = timed(step)
        else:
            with torch.no_grad():
                ms = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        name = "SDPA causal"
    out.append({"key": c["key"], "ms": ms, "name": name})
    del q, k, v
    torch.cuda.empty_cache()

print(json.dumps(out))
