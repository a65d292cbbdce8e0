"""PyTorch side of bench/generate.ts: FON's decoder (model/decoder.ts) rebuilt in eager PyTorch,
a prompt prefilled into a preallocated KV cache, then greedy steps of one token, each reading the
logits row back to the host and taking its argmax there (as FON's generate does). Prints
{variant: {prefillMs, msPerToken, tokensPerSecond, device}} for fp32 (TF32 off, as FON computes)
and bf16 weights and cache. On a machine without CUDA it runs on the CPU (a check of the script)."""
import json
import sys
import time

import torch
import torch.nn.functional as F

spec = json.load(sys.stdin)
cfg, prompt_len, tokens = spec["config"], spec["prompt"], spec["tokens"]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda" if torch.cuda.is_available() else "cpu"
C, H, K, D, M = cfg["dModel"], cfg["nHeads"], cfg["nKvHeads"], cfg["headDim"], cfg["mlpHidden"]
V, L, EPS = cfg["vocabSize"], cfg["nLayers"], cfg["normEps"]
SDPA = getattr(F, "scaled_dot_product_attention", None)  # torch ≥ 2.0; the fallback below only checks the script
GQA_ARG = SDPA is not None and "enable_gqa" in (SDPA.__doc__ or "")


def rmsnorm(x, w):
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + EPS).to(x.dtype) * w


def rope(x, cos, sin):  # x (B, H, T, D), pairs (j, j + D/2)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


def attend(q, k, v, causal):
    if K != H and not GQA_ARG:
        k, v = k.repeat_interleave(H // K, dim=1), v.repeat_interleave(H // K, dim=1)
    if SDPA is None:
        s = (q @ k.transpose(-1, -2)).float() / D ** 0.5
        if causal:
            s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        return (s.softmax(-1).to(v.dtype)) @ v
    extra = {"enable_gqa": True} if K != H and GQA_ARG else {}
    return SDPA(q, k, v, is_causal=causal, **extra)


def build(dtype):
    g = torch.Generator().manual_seed(0)
    w = lambda *s: (torch.randn(*s, generator=g) * 0.02).to(dev, dtype)
    layers = [dict(an=torch.ones(C, device=dev, dtype=dtype), mn=torch.ones(C, device=dev, dtype=dtype), q=w(H * D, C), k=w(K * D, C),
                   v=w(K * D, C), o=w(C, H * D), gate=w(M, C), up=w(M, C), down=w(C, M)) for _ in range(L)]
    inv = cfg["ropeTheta"] ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    ang = torch.arange(cfg["contextLength"], dtype=torch.float32)[:, None] * inv[None, :]
    return dict(embed=w(V, C), norm=torch.ones(C, device=dev, dtype=dtype), layers=layers, cos=ang.cos().to(dev, dtype), sin=ang.sin().to(dev, dtype))


@torch.no_grad()
def forward(m, ids, pos, ck, cv):
    T = ids.shape[1]
    x = m["embed"][ids]
    cos, sin = m["cos"][pos:pos + T], m["sin"][pos:pos + T]
    for i, p in enumerate(m["layers"]):
        h = rmsnorm(x, p["an"])
        q = rope(F.linear(h, p["q"]).view(1, T, H, D).transpose(1, 2), cos, sin)
        k = rope(F.linear(h, p["k"]).view(1, T, K, D).transpose(1, 2), cos, sin)
        ck[i][:, :, pos:pos + T] = k
        cv[i][:, :, pos:pos + T] = F.linear(h, p["v"]).view(1, T, K, D).transpose(1, 2)
        a = attend(q, ck[i][:, :, :pos + T], cv[i][:, :, :pos + T], causal=T > 1)
        x = x + F.linear(a.transpose(1, 2).reshape(1, T, H * D), p["o"])
        h = rmsnorm(x, p["mn"])
        x = x + F.linear(F.silu(F.linear(h, p["gate"])) * F.linear(h, p["up"]), p["down"])
    return F.linear(rmsnorm(x[:, -1:], m["norm"]), m["embed"])  # (1, 1, V), tied embeddings


def sync():
    if dev == "cuda":
        torch.cuda.synchronize()


def run(dtype, n):
    m = build(dtype)
    ids = torch.randint(0, V, (1, prompt_len), generator=torch.Generator().manual_seed(7)).to(dev)
    ck = [torch.zeros(1, K, prompt_len + n, D, device=dev, dtype=dtype) for _ in range(L)]
    cv = [torch.zeros(1, K, prompt_len + n, D, device=dev, dtype=dtype) for _ in range(L)]
    sync()
    t0 = time.perf_counter()
    row = forward(m, ids, 0, ck, cv)[0, -1].float().cpu()
    t1 = time.perf_counter()
    for i in range(n):
        nxt = torch.tensor([[int(row.argmax())]], device=dev)
        row = forward(m, nxt, prompt_len + i, ck, cv)[0, -1].float().cpu()
    t2 = time.perf_counter()
    return {"prefillMs": (t1 - t0) * 1000, "msPerToken": (t2 - t1) / n * 1000, "tokensPerSecond": n / (t2 - t1), "device": dev}


# bf16 twice: with PyTorch's default SDPA backends, and with the cuDNN backend off. On the H200
# (torch 2.x) the default bf16 run took 56.8 ms a token against 3.8 for fp32: cuDNN's attention
# seems to build a new graph for every new key length, which a decode loop meets at every step.
CUDNN_SDP = getattr(torch.backends.cuda, "enable_cudnn_sdp", None) if dev == "cuda" else None
variants = [("fp32", torch.float32, True), ("bf16", torch.bfloat16, True)]
if CUDNN_SDP is not None:
    variants.append(("bf16 without cuDNN attention", torch.bfloat16, False))
out = {}
for name, dtype, cudnn in variants:
    if CUDNN_SDP is not None:
        CUDNN_SDP(cudnn)
    run(dtype, 4)  # warm-up
    out[name] = run(dtype, tokens)
print(json.dumps(out))
