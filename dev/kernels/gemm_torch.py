"""PyTorch side of dev/kernels/gemm.ts: torch.matmul at n³ in fp32 (TF32 off), bf16 and fp16 on
the GPU, C = A·B with random normal inputs; prints TFLOP/s per dtype and size (median of reps).

    python3 dev/kernels/gemm_torch.py [1024,4096,8192]
"""
import sys

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "1024,4096,8192").split(",")]
print(f"# torch {torch.__version__}, {torch.cuda.get_device_name()}, allow_tf32={torch.backends.cuda.matmul.allow_tf32}")
for name, dt in [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)]:
    cells = []
    for n in sizes:
        a = torch.randn(n, n, device="cuda", dtype=dt)
        b = torch.randn(n, n, device="cuda", dtype=dt)
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            torch.matmul(a, b)
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        ms = sorted(times)[len(times) // 2]
        cells.append(f"{n}: {2 * n**3 / (ms * 1e-3) / 1e12:.1f} TFLOP/s ({ms:.2f} ms)")
        del a, b
    print(f"torch {name}: " + " | ".join(cells))
