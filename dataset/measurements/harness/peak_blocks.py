#!/usr/bin/env python3
"""What is live at the peak of one reference case: records the allocator's history while the case
runs (torch.cuda.memory._record_memory_history), replays the alloc/free events to find the moment
of the peak, and prints the live allocations at that moment, largest first, with the Python frame
that made each. Used to find which tensors a fit-engine term is missing.

    python3 peak_blocks.py CASE_ID [--top 25]
"""

import argparse
import sys

import measure


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    import torch
    case = next((c for c in measure.all_cases() if c["id"] == a.case), None)
    if case is None:
        sys.exit(f"no case {a.case}")
    w = case["workload"]
    torch.empty(1, device="cuda")
    model = measure.build_llm(torch, w["model"], measure.dtype_of(torch, w["weights"]))
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(max_entries=2_000_000)
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    measure.run_generate(torch, model, w)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    live = {}
    cur = 0
    best = (0, {})
    for ev in snap["device_traces"][0]:
        if ev["action"] == "alloc":
            live[ev["addr"]] = ev
            cur += ev["size"]
            if cur > best[0]:
                best = (cur, dict(live))
        elif ev["action"] in ("free_requested", "free_completed") and ev["addr"] in live:
            if ev["action"] == "free_requested":
                cur -= live.pop(ev["addr"])["size"]
    print(f"{a.case}: max_memory_allocated {torch.cuda.max_memory_allocated() / 2**30:.3f} GiB, before the run {base / 2**30:.3f} GiB, "
          f"peak of the recorded events +{best[0] / 2**30:.3f} GiB")
    blocks = sorted(best[1].values(), key=lambda e: -e["size"])
    for ev in blocks[: a.top]:
        frames = [f for f in ev.get("frames", []) if f["filename"].endswith(".py")]
        where = " < ".join(f"{f['filename'].split('site-packages/')[-1]}:{f['line']} {f['name']}" for f in frames[:3])
        print(f"{ev['size'] / 2**20:10.1f} MiB  {where}")
    print(f"... {len(blocks)} live allocations at the peak")


if __name__ == "__main__":
    main()
