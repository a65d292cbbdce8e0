"""CUDA timing shared by the PyTorch sides of FON's benchmarks (bench/torch_attention.py,
bench/torch_fox_fpa.py): 3 warm-up calls, then the median of 3 CUDA-event-timed batches of
back-to-back calls, each batch >= 250 ms of GPU work; a call that alone takes over a second is timed
once."""
import torch


def timed(fn):
    """Milliseconds per call of fn (GPU time, CUDA events)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()

    def batch(n):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e)

    n = 1
    t = batch(n)
    if t > 1000:
        return batch(1)
    while t < 250 and n < 100000:
        n = int(n * min(10, 300 / max(t, 0.05))) + 1
        t = batch(n)
    ts = sorted(batch(n) for _ in range(3))
    return ts[1] / n
