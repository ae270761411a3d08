"""PyTorch's view of the same GPU, for comparison with `probe` (issue: probe figures within 5 % for
bandwidth and 64 MiB for context overhead). Run in a fresh process on an idle GPU:

    python3 torch_side_by_side.py > torch.json

Context overhead: total minus free right after PyTorch creates its context (torch.cuda.mem_get_info
is the first CUDA call). Bandwidth: 256 MiB copies timed with CUDA events, best of 10 after a
warm-up, the same method the probe uses (bytes counted once for device-to-device).
"""
import json
import torch

MIB = 1 << 20
free, total = torch.cuda.mem_get_info(0)
out = {"torch": torch.__version__, "total_bytes": total, "free_bytes_after_context": free,
       "context_and_others_bytes": total - free}
n = 256 * MIB
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
dev2 = torch.empty(n, dtype=torch.uint8, device="cuda")
pinned = torch.ones(n, dtype=torch.uint8).pin_memory()
pageable = torch.ones(n, dtype=torch.uint8)


def best(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    t = float("inf")
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        t = min(t, s.elapsed_time(e))
    return n / (t / 1e3) / 1e9


out["h2d_pinned_gbs"] = best(lambda: dev.copy_(pinned, non_blocking=False))
out["d2h_pinned_gbs"] = best(lambda: pinned.copy_(dev, non_blocking=False))
out["h2d_pageable_gbs"] = best(lambda: dev.copy_(pageable))
out["d2h_pageable_gbs"] = best(lambda: pageable.copy_(dev))
def d2d4():
    for _ in range(4):
        dev2.copy_(dev)


out["d2d_gbs"] = best(d2d4) * 4  # four copies per timing, as the probe does
print(json.dumps(out, indent=1))
