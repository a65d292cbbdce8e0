"""PyTorch side of bench/fox_fpa.ts: reads a JSON list of cases on stdin and prints a JSON list of
{key, sdpa, plain_fox, errors}: ms of torch.nn.functional.scaled_dot_product_attention in bf16 on
CUDA — causal prefill at (1, H, T, D), forward or forward + backward, and one-query decode over
(1, H, T, D) — and, where the case asks (small T only: it materialises H·T² scores), a plain
PyTorch FoX forward (+ backward): scores q·kᵀ/√d + c_i − c_j in f32, causal mask, softmax, ·v.
A case that fails (out of memory, anything else) leaves its figure out and says why in errors.
Timing: bench/torch_timing.py (median of 3 CUDA-event-timed batches of back-to-back calls,
each batch >= 250 ms of GPU work, after 3 warm-up calls)."""
import json
import math
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


def plain_fox(q, k, v, c):
    """FoX by its definition (specs/fpa_depth.md §1.1): softmax(q·kᵀ/√d + c_i − c_j, causal)·v."""
    t, d = q.shape[-2], q.shape[-1]
    s = torch.matmul(q, k.transpose(-1, -2)).float() / math.sqrt(d) + (c[..., :, None] - c[..., None, :])
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    s = s.masked_fill(mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1).to(q.dtype), v)


def run_case(c):
    t, h, d = c["t"], c["h"], c["d"]
    res = {"key": c["key"], "errors": []}
    if c["op"] == "decode":
        q = torch.randn(1, h, 1, d, device=dev, dtype=bf)
        k = torch.randn(1, h, t, d, device=dev, dtype=bf)
        v = torch.randn(1, h, t, d, device=dev, dtype=bf)
        with torch.no_grad():
            res["sdpa"] = timed(lambda: F.scaled_dot_product_attention(q, k, v))
        return res
    grad = c["op"] == "prefill_fwd_bwd"
    q = torch.randn(1, h, t, d, device=dev, dtype=bf, requires_grad=grad)
    k = torch.randn(1, h, t, d, device=dev, dtype=bf, requires_grad=grad)
    v = torch.randn(1, h, t, d, device=dev, dtype=bf, requires_grad=grad)
    g = torch.randn(1, h, t, d, device=dev, dtype=bf) if grad else None
    # FoX-like cumulative log forget gates, as bench/fox_fpa.ts makes them: log σ(a), a ~ N(3, 1).
    cgate = torch.cumsum(F.logsigmoid(torch.randn(1, h, t, device=dev) + 3), dim=-1).requires_grad_(grad)

    def step(fn):
        if not grad:
            with torch.no_grad():
                fn()
            return
        for x in (q, k, v, cgate):
            x.grad = None
        fn().backward(g)

    for name, fn, wanted in (
        ("sdpa", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), True),
        ("plain_fox", lambda: plain_fox(q, k, v, cgate), c.get("plain", False)),
    ):
        if not wanted:
            continue
        try:
            res[name] = timed(lambda: step(fn))
        except Exception as e:  # out of memory or an unsupported shape: reported, the run goes on
            res["errors"].append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        torch.cuda.empty_cache()
    return res


for c in cases:
    try:
        out.append(run_case(c))
    except Exception as e:
        out.append({"key": c["key"], "errors": [f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"]})
    torch.cuda.empty_cache()

print(json.dumps(out))
