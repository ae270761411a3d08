"""PyTorch's view of the same GPU, for comparison with `probe` (issue: probe figures within 5 % for
bandwidth and 64 MiB for context overhead). Run in a fresh process on an idle GPU:

    python3 torch_side_by_side.py > torch.json

Pageable copies vary from one process to the next (and run slower for a while after a process
filled and emptied the whole device), so one probe run against one PyTorch run can differ by more
than 10 %. The comparison that holds is over rounds:

    python3 torch_side_by_side.py --rounds 5 --probe ./probe > side-by-side.json

runs the probe (`--json --quick`) and this script in fresh processes, alternating which goes
first each round, and reports every round and the median of each figure for each side.

Context overhead: total minus free right after PyTorch creates its context (torch.cuda.mem_get_info
is the first CUDA call). Bandwidth: 256 MiB copies timed with CUDA events, best of 10 after a
warm-up, the same method the probe uses (bytes counted once for device-to-device).
"""
import json
import os
import statistics
import subprocess
import sys


def rounds(n, probe):
    """Alternating fresh-process runs of the probe and of this script; medians per figure."""
    keys = ["h2d_pinned_gbs", "d2h_pinned_gbs", "h2d_pageable_gbs", "d2h_pageable_gbs", "d2d_gbs"]
    runs = []
    for i in range(n):
        order = ["probe", "torch"] if i % 2 == 0 else ["torch", "probe"]
        r = {}
        for side in order:
            if side == "probe":
                out = subprocess.run([probe, "--json", "--quick"], check=True, capture_output=True, text=True).stdout
                r["probe"] = {k: json.loads(out)["bandwidth"][k] for k in keys}
            else:
                out = subprocess.run([sys.executable, os.path.abspath(__file__)], check=True, capture_output=True, text=True).stdout
                t = json.loads(out)
                r["torch"] = {k: t[k] for k in keys}
                r["torch_version"] = t["torch"]
        r["first"] = order[0]
        print(f"round {i + 1}/{n}: pageable h2d probe {r['probe']['h2d_pageable_gbs']:.2f} torch {r['torch']['h2d_pageable_gbs']:.2f} GB/s", file=sys.stderr)
        runs.append(r)
    med = {side: {k: statistics.median(r[side][k] for r in runs) for k in keys} for side in ("probe", "torch")}
    diff = {k: round(100 * (med["probe"][k] / med["torch"][k] - 1), 1) for k in keys}
    return {"rounds": runs, "median": med, "probe_vs_torch_pct": diff, "torch": runs[0]["torch_version"]}


if len(sys.argv) > 1:
    if len(sys.argv) != 5 or sys.argv[1] != "--rounds" or sys.argv[3] != "--probe":
        sys.exit("usage: torch_side_by_side.py [--rounds N --probe PATH]")
    print(json.dumps(rounds(int(sys.argv[2]), sys.argv[4]), indent=1))
    sys.exit(0)

import torch  # noqa: E402  (the rounds mode runs without importing it)

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
