#!/usr/bin/env python3
"""Does a predicted total hold on the card? Runs reference cases with the process capped at a
given total (the fit engine's prediction) and finds the smallest total each case really needs.

    python3 capped.py --caps caps.json --out capped.jsonl [--search]

`caps.json` is a list of {"id": case id (measure.py --list), "predicted": bytes}: the engine's
predicted total for the case: `dataset fit`'s peak_bytes (CUDA context included) for the case's
workload, e.g. `target/debug/dataset fit --input - < workload.json`.

Each case runs in its group's process on the model measure.py builds (random weights from the
architecture values). First an uncapped warm-up run, which loads the kernels; then the memory the
process holds outside PyTorch's allocator is read (device used minus reserved: the CUDA context,
loaded kernels, library handles). A total cap X then becomes the allocator limit X − outside,
set with torch.cuda.set_per_process_memory_fraction. Before every capped attempt the allocator
cache is emptied and a training case's optimizer states and gradients are dropped, so each
attempt starts like a fresh process that has loaded its weights.

Recorded per case: the uncapped peaks, the memory outside the allocator, whether it runs at the
predicted total and at 90 % of it, and with --search the smallest total that runs (bisection to
0.25 % of the prediction), every attempt with its cap, outcome, reserved peak and allocator
retries.
"""

import argparse
import gc
import json
import os
import subprocess
import sys
import time

import measure

GIB = 2 ** 30


def reset(torch, model, state):
    state.pop("optimizer", None)
    state.pop("overall_peak", None)
    state.pop("overall_peak_reserved", None)
    for p in model.parameters():
        p.grad = None
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def attempt(torch, model, case, state, total, outside, device_total):
    """One run with the allocator limited so that the process holds at most `total` bytes."""
    reset(torch, model, state)
    limit = total - outside
    if limit <= torch.cuda.memory_allocated():
        return {"cap": total, "ok": False, "error": "cap below the resident weights"}
    torch.cuda.set_per_process_memory_fraction(min(1.0, limit / device_total))
    rec = {"cap": total}
    t = time.time()
    try:
        measure.run_case(torch, model, case, state)
        torch.cuda.synchronize()
        rec["ok"] = True
    except torch.OutOfMemoryError as e:
        rec["ok"] = False
        rec["error"] = str(e).splitlines()[0][:300]
    rec["seconds"] = round(time.time() - t, 3)
    rec["peak_reserved"] = max(torch.cuda.max_memory_reserved(), state.get("overall_peak_reserved", 0))
    rec["peak_allocated"] = max(torch.cuda.max_memory_allocated(), state.get("overall_peak", 0))
    rec["num_alloc_retries"] = torch.cuda.memory_stats().get("num_alloc_retries", 0)
    torch.cuda.set_per_process_memory_fraction(1.0)
    return rec


def run_group(group, caps, out_path, search):
    import torch
    cases = [c for c in measure.all_cases() if c["group"] == group and c["id"] in caps]
    torch.cuda.init()
    torch.empty(1, device="cuda")
    env = measure.environment(torch)
    state = {}
    model = measure.build_model(torch, cases[0])
    _, device_total = torch.cuda.mem_get_info()
    for case in cases:
        predicted = caps[case["id"]]
        rec = {"id": case["id"], "workload": case["workload"], "run": case["run"], "env": env, "predicted": predicted}
        # Uncapped warm-up: loads the kernels this case uses, gives the uncapped peaks.
        reset(torch, model, state)
        try:
            measure.run_case(torch, model, case, state)
            torch.cuda.synchronize()
        except torch.OutOfMemoryError as e:
            rec["error"] = "uncapped run: " + str(e).splitlines()[0][:300]
            with open(out_path, "a") as f:
                f.write(json.dumps(rec) + "\n")
            continue
        rec["uncapped_peak_allocated"] = max(torch.cuda.max_memory_allocated(), state.get("overall_peak", 0))
        rec["uncapped_peak_reserved"] = max(torch.cuda.max_memory_reserved(), state.get("overall_peak_reserved", 0))
        reset(torch, model, state)
        outside = measure.device_used(torch) - torch.cuda.memory_reserved()
        rec["outside_allocator"] = outside
        attempts = []
        at_pred = attempt(torch, model, case, state, predicted, outside, device_total)
        attempts.append(at_pred)
        at_90 = attempt(torch, model, case, state, int(predicted * 0.9), outside, device_total)
        attempts.append(at_90)
        rec["ok_at_predicted"] = at_pred["ok"]
        rec["ok_at_90_percent"] = at_90["ok"]
        if search:
            # Bisection on the total between a cap that fails and one that runs.
            lo = int(predicted * 0.9) if not at_90["ok"] else int(min(predicted * 0.6, rec["uncapped_peak_allocated"] + outside))
            hi = predicted if at_pred["ok"] else int(max(predicted * 1.6, rec["uncapped_peak_reserved"] + outside + GIB))
            if not at_pred["ok"]:
                top = attempt(torch, model, case, state, hi, outside, device_total)
                attempts.append(top)
                if not top["ok"]:
                    hi = None
            if at_90["ok"]:
                bottom = attempt(torch, model, case, state, lo, outside, device_total)
                attempts.append(bottom)
                if bottom["ok"]:
                    hi = lo
                    lo = None
            while hi is not None and lo is not None and hi - lo > predicted * 0.0025:
                mid = (lo + hi) // 2
                a = attempt(torch, model, case, state, mid, outside, device_total)
                attempts.append(a)
                if a["ok"]:
                    hi = mid
                else:
                    lo = mid
            rec["min_total"] = hi
        rec["attempts"] = attempts
        with open(out_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        need = rec.get("min_total")
        print(f"{case['id']}: predicted {predicted / GIB:.3f} GiB, outside {outside / GIB:.3f}, "
              f"at predicted {'ok' if at_pred['ok'] else 'OOM'}, at 90% {'ok' if at_90['ok'] else 'OOM'}"
              + (f", needs {need / GIB:.3f} GiB ({need / predicted:.3f}×)" if need else ""), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--caps", required=True)
    ap.add_argument("--out", default="capped.jsonl")
    ap.add_argument("--search", action="store_true")
    ap.add_argument("--group")
    ap.add_argument("--timeout", type=int, default=300)
    a = ap.parse_args()
    with open(a.caps) as f:
        caps = {c["id"]: int(c["predicted"]) for c in json.load(f)}
    if a.group:
        run_group(a.group, caps, a.out, a.search)
        return
    groups = []
    for c in measure.all_cases():
        if c["id"] in caps and c["group"] not in groups:
            groups.append(c["group"])
    missing = set(caps) - {c["id"] for c in measure.all_cases()}
    if missing:
        raise SystemExit(f"unknown case ids: {sorted(missing)}")
    for g in groups:
        t = time.time()
        args = [sys.executable, __file__, "--caps", a.caps, "--out", a.out, "--group", g] + (["--search"] if a.search else [])
        try:
            r = subprocess.run(args, timeout=a.timeout)
            print(f"== group {g}: exit {r.returncode} in {time.time() - t:.1f}s", flush=True)
        except subprocess.TimeoutExpired:
            print(f"== group {g}: timed out after {a.timeout}s", flush=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
