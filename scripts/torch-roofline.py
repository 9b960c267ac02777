#!/usr/bin/env python3
"""PyTorch's view of the GPU's roofline, to check tokenmeter's probe against on the same GPU in the
same device check (issue 29): device-to-device copy (bytes read + written), a read-only reduction
(torch.sum over a float32 tensor: bytes read), and the f32 FMA rate of a square matmul with TF32
off. Each figure is the median of 10 timings by CUDA events, each over enough back-to-back calls
to last at least 20 ms; buffers of 1 GiB, several times an H200's 60 MB L2. Prints one JSON object.
"""
import json
import statistics

import torch


def timed(fn, min_s=0.02, repeats=10):
    """Median seconds per call of fn, each timing over enough calls to last min_s."""
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    once = max(start.elapsed_time(end) / 1e3, 1e-7)
    calls = max(1, min(1000, int(min_s / once) + 1))
    times = []
    for _ in range(repeats):
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / calls)
    return statistics.median(times), (max(times) - min(times)) / statistics.median(times)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n_bytes = 1 << 30
    src = torch.empty(n_bytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    copy_s, copy_spread = timed(lambda: dst.copy_(src))
    read_s, read_spread = timed(lambda: torch.sum(src))
    del dst
    n = 8192
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    mm_s, mm_spread = timed(lambda: a @ b, repeats=5)
    print(json.dumps({
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0),
        "bytes": n_bytes,
        "copy_gb_s": 2 * n_bytes / copy_s / 1e9,
        "copy_spread": copy_spread,
        "read_gb_s": n_bytes / read_s / 1e9,
        "read_spread": read_spread,
        "fma_gflop_s": 2 * n ** 3 / mm_s / 1e9,
        "fma_spread": mm_spread,
    }, indent=1))


if __name__ == "__main__":
    main()
