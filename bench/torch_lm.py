"""PyTorch side of bench/train_lm.ts: FON's decoder (model/decoder.ts) rebuilt in eager PyTorch with
scaled_dot_product_attention, trained on random tokens with AdamW and clipping; prints
{variant: {msPerStep, tokensPerSecond}} for fp32 (TF32 off, as FON computes) and bf16 autocast."""
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

spec = json.load(sys.stdin)
cfg, batch, context, steps = spec["config"], spec["batch"], spec["context"], spec["steps"]
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"


def rope_tables(t, d, theta):
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = torch.arange(t, dtype=torch.float32)[:, None] * inv[None, :]
    return ang.cos().to(dev), ang.sin().to(dev)


def rope(x, cos, sin):  # x (B, H, T, D), pairs (j, j + D/2)
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        C, H, K, D, M = c["dModel"], c["nHeads"], c["nKvHeads"], c["headDim"], c["mlpHidden"]
        self.H, self.K, self.D = H, K, D
        self.attn_norm = nn.RMSNorm(C, eps=c["normEps"])
        self.mlp_norm = nn.RMSNorm(C, eps=c["normEps"])
        self.q = nn.Linear(C, H * D, bias=False)
        self.k = nn.Linear(C, K * D, bias=False)
        self.v = nn.Linear(C, K * D, bias=False)
        self.o = nn.Linear(H * D, C, bias=False)
        self.gate = nn.Linear(C, M, bias=False)
        self.up = nn.Linear(C, M, bias=False)
        self.down = nn.Linear(M, C, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        h = self.attn_norm(x)
        q = rope(self.q(h).view(B, T, self.H, self.D).transpose(1, 2), cos, sin)
        k = rope(self.k(h).view(B, T, self.K, self.D).transpose(1, 2), cos, sin)
        v = self.v(h).view(B, T, self.K, self.D).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.K != self.H)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, self.H * self.D))
        h = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed = nn.Embedding(c["vocabSize"], c["dModel"])
        self.layers = nn.ModuleList([Block(c) for _ in range(c["nLayers"])])
        self.norm = nn.RMSNorm(c["dModel"], eps=c["normEps"])
        self.cos, self.sin = rope_tables(c["contextLength"], c["headDim"], c["ropeTheta"])

    def forward(self, ids, targets):
        T = ids.shape[1]
        x = self.embed(ids)
        for l in self.layers:
            x = l(x, self.cos[:T], self.sin[:T])
        logits = self.norm(x) @ self.embed.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def run(autocast):
    torch.manual_seed(0)
    m = Model(cfg).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    V = cfg["vocabSize"]

    def step():
        ids = torch.randint(0, V, (batch, context), device=dev)
        tg = torch.randint(0, V, (batch, context), device=dev)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = m(ids, tg)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        loss = step()
    loss.item()
    secs = time.perf_counter() - t0
    return {"msPerStep": secs / steps * 1000, "tokensPerSecond": steps * batch * context / secs}


print(json.dumps({"fp32": run(False), "bf16 autocast": run(True)}))
