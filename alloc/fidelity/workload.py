#!/usr/bin/env python3
"""Real workloads, captured and then run for real under caps: the ground truth for replaying a
real snapshot (cuDNN's out-of-memory fallbacks included).

    python3 workload.py capture OUTDIR --workload image|transformer
    python3 workload.py run --workload W --cap BYTES|none [--record]      (one case, one process)
    python3 workload.py sweep OUTDIR [--jobs N] [--workloads image,transformer]

Workloads (random weights built from architecture values; memory is decided by shapes):
  image        Stable Diffusion 1.5's UNet (fp16, diffusers UNet2DConditionModel from
               dataset/measurements/harness/configs/sd15_unet.json): 3 denoiser steps at 768x768
               with classifier-free guidance (batch 2), then its VAE decoding the latent at
               1024x1024 (AutoencoderKL, sd15_vae.json). Convolutions go through cuDNN with
               torch.backends.cudnn.benchmark off (PyTorch's default), as ComfyUI and A1111 run.
  transformer  the decoder-only transformer of capture_model.py, 4 AdamW steps.

`capture` records the allocation history with `_record_memory_history(stacks="all")` (C++
frames included: that is how a replay recognises an allocation PyTorch recovers from) and
writes OUTDIR/<workload>.pkl (the snapshot, plus "device_total") and OUTDIR/<workload>.json
(a/f events).

`run` runs the same workload in this process with PYTORCH_CUDA_ALLOC_CONF as set in the
environment, capped with torch.cuda.set_per_process_memory_fraction(cap / total) before the
first allocation, records (python frames only) and prints one JSON line: whether it ran out,
where (the count of allocations before the failing one, the same count a replay reports), every
out-of-memory error PyTorch caught and went on from (its place, size and top frames), and the
allocator's counters.

`sweep` captures both workloads, then runs every (workload, config, cap) in fresh processes and
writes OUTDIR/real-<workload>.jsonl. Caps are fractions of the captured peak reserved, chosen
so that some runs fail and some survive. Needs a CUDA GPU, torch, and diffusers for `image`
(see measure.py for installing it from a wheel).
"""
import json
import os
import pickle
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "dataset", "measurements", "harness"))

CONFIGS = [
    ("default", ""),
    ("expandable", "expandable_segments:True"),
    ("max_split_128", "max_split_size_mb:128"),
    ("gc_0.6_max_split_256", "garbage_collection_threshold:0.6,max_split_size_mb:256"),
    ("async", "backend:cudaMallocAsync"),
    # Not in the committed sweep (run uncapped once each, 2026-12-02): add them to the next one.
    ("expandable_max_split_128", "expandable_segments:True,max_split_size_mb:128"),
    ("roundup_4", "roundup_power2_divisions:4"),
]
# Fractions of the captured peak reserved.
CAPS = [0.55, 0.65, 0.75, 0.85, 0.95, 1.05]


def image_workload(torch, phase):
    import measure
    unet = measure.build_diffusion(torch, {"workload": {"model": "sd-1.5", "component": "denoiser", "precision": "fp16"}})
    phase("unet built")
    vae = measure.build_diffusion(torch, {"workload": {"model": "sd-1.5", "component": "vae-decode", "precision": "fp16"}})
    phase("vae built")
    g = torch.Generator(device="cuda").manual_seed(0)
    with torch.no_grad():
        lat = torch.randn(1, 4, 96, 96, device="cuda", dtype=torch.float16, generator=g)
        enc = torch.randn(2, 77, 768, device="cuda", dtype=torch.float16, generator=g)
        for step in range(3):
            x = torch.cat([lat, lat])
            t = torch.full((2,), 900 - 300 * step, device="cuda")
            eps = unet(x, t, encoder_hidden_states=enc).sample
            uncond, cond = eps.chunk(2)
            lat = lat - 0.1 * (uncond + 7.5 * (cond - uncond))
            del x, eps, uncond, cond
            phase(f"unet step {step + 1}")
        big = torch.nn.functional.interpolate(lat, size=(128, 128), mode="nearest")
        img = vae.decode(big / 0.18215).sample
        phase("vae decode")
        del img, big


def transformer_workload(torch, phase):
    import torch.nn.functional as F
    from capture_model import VOCAB, make_lm
    batch = 4
    torch.manual_seed(0)
    model = make_lm(torch).to("cuda")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    phase("model built")
    g = torch.Generator(device="cuda").manual_seed(0)
    for step, t in enumerate([512, 768, 640, 1024]):
        idx = torch.randint(0, VOCAB, (batch, t), device="cuda", generator=g)
        tgt = torch.randint(0, VOCAB, (batch, t), device="cuda", generator=g)
        loss = F.cross_entropy(model(idx).view(-1, VOCAB), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss, idx, tgt
        phase(f"step {step + 1}")


WORKLOADS = {"image": image_workload, "transformer": transformer_workload}


def frames_of(e, n=6):
    return [f.get("name", "") for f in (e.get("frames") or [])[:n]]


def summarize_trace(entries):
    """Allocation count before each OOM (the replay's numbering) and the OOMs caught."""
    allocs = 0
    ooms = []
    for pos, e in enumerate(entries):
        a = e["action"]
        if a == "alloc":
            allocs += 1
        elif a == "oom":
            ooms.append({"pos": pos, "allocs_before": allocs, "size": e.get("size"), "frames": frames_of(e)})
    return ooms


def run_case(workload, cap, record):
    import torch
    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    if cap is not None:
        torch.cuda.set_per_process_memory_fraction(cap / total)
    if record:
        try:
            torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)
        except RuntimeError as e:  # a backend that keeps no history
            record = False
            print(f"workload.py: no history: {e}", file=sys.stderr)
    phases = []

    def phase(name):
        torch.cuda.synchronize()
        phases.append({"phase": name, "allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()})

    out = {"workload": workload, "conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), "cap": cap,
           "device_total": total, "torch": torch.__version__, "device": torch.cuda.get_device_name()}
    t0 = time.time()
    try:
        WORKLOADS[workload](torch, phase)
        out["oom"] = False
    except torch.OutOfMemoryError as e:
        out["oom"] = True
        out["oom_message"] = str(e).split("\n")[0][:400]
        out["oom_phase_after"] = phases[-1]["phase"] if phases else None
    out["seconds"] = round(time.time() - t0, 2)
    if record:
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        entries = snap["device_traces"][0] if snap["device_traces"] else []
        ooms = summarize_trace(entries)
        out["trace_allocs"] = sum(1 for e in entries if e["action"] == "alloc")
        # The last OOM is the one that stopped the run when it ran out; the others were caught.
        caught = ooms[:-1] if out["oom"] and ooms else ooms
        out["caught_ooms"] = caught
        if out["oom"] and ooms:
            out["oom_allocs_before"] = ooms[-1]["allocs_before"]
            out["oom_size"] = ooms[-1]["size"]
            out["oom_frames"] = ooms[-1]["frames"]
    s = torch.cuda.memory_stats()
    out["stats"] = {k: s.get(k) for k in ("allocated_bytes.all.peak", "reserved_bytes.all.peak", "num_ooms",
                                          "num_alloc_retries", "num_device_alloc", "num_device_free")}
    out["phases"] = phases
    return out


def capture(outdir, workload):
    for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        if os.environ.get(v):
            sys.exit(f"workload.py: unset {v} for the capture")
    import torch
    from capture_model import convert
    torch.cuda.init()
    # C++ frames ("all") so that cuDNN's workspace allocations show where they come from.
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="all", max_entries=2_000_000)
    phases = []

    def phase(name):
        torch.cuda.synchronize()
        phases.append(name)
        print(f"workload.py: capture {workload}: {name}: allocated {torch.cuda.memory_allocated() / 2**30:.2f} GiB", file=sys.stderr, flush=True)

    WORKLOADS[workload](torch, phase)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    free, total = torch.cuda.mem_get_info()
    snap["device_total"] = int(total)
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, f"{workload}.pkl"), "wb") as f:
        pickle.dump(snap, f)
    events = convert(snap)
    s = torch.cuda.memory_stats()
    doc = {"name": workload, "device_total": int(total), "captured_peak_reserved": s["reserved_bytes.all.peak"],
           "captured_peak_allocated": s["allocated_bytes.all.peak"], "torch": torch.__version__, "events": events}
    with open(os.path.join(outdir, f"{workload}.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(f"workload.py: captured {workload}: {len(events)} events, peak reserved {s['reserved_bytes.all.peak'] / 2**30:.3f} GiB",
          file=sys.stderr, flush=True)
    return doc


def sweep(outdir, jobs, workloads):
    for w in workloads:
        path = os.path.join(outdir, f"{w}.json")
        if not os.path.exists(path):
            r = subprocess.run([sys.executable, __file__, "capture", outdir, "--workload", w], env=clean_env())
            if r.returncode != 0:
                sys.exit(f"workload.py: capture {w} failed")
        with open(path) as f:
            peak = json.load(f)["captured_peak_reserved"]
        cases = [(w, name, conf, None) for name, conf in CONFIGS[:1]]
        cases += [(w, name, conf, int(peak * frac)) for name, conf in CONFIGS for frac in CAPS]
        results = []
        procs = []
        out = open(os.path.join(outdir, f"real-{w}.jsonl"), "w")

        def drain(block):
            while procs and (block or len(procs) >= jobs):
                p, case = procs.pop(0)
                stdout, _ = p.communicate(timeout=900)
                line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
                try:
                    rec = json.loads(line)
                except ValueError:
                    rec = {"workload": case[0], "conf": case[2], "cap": case[3], "error": f"exit {p.returncode}"}
                rec["config"] = case[1]
                results.append(rec)
                out.write(json.dumps(rec, separators=(",", ":")) + "\n")
                out.flush()
                print(f"workload.py: {case[0]} {case[1]} cap {case[3]}: oom={rec.get('oom')} caught={len(rec.get('caught_ooms', []))}",
                      file=sys.stderr, flush=True)
                if not block:
                    break

        for case in cases:
            env = clean_env()
            if case[2]:
                env["PYTORCH_CUDA_ALLOC_CONF"] = case[2]
            cap = "none" if case[3] is None else str(case[3])
            procs.append((subprocess.Popen([sys.executable, __file__, "run", "--workload", w, "--cap", cap, "--record"],
                                           env=env, stdout=subprocess.PIPE, text=True), case))
            drain(False)
        drain(True)
        out.close()


def clean_env():
    env = dict(os.environ)
    for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF"):
        env.pop(v, None)
    return env


def main():
    args = sys.argv[1:]

    def opt(name, default=None):
        return args[args.index(name) + 1] if name in args else default

    if not args or args[0] not in ("capture", "run", "sweep"):
        print(__doc__)
        sys.exit(2)
    if args[0] == "capture":
        capture(args[1], opt("--workload", "image"))
    elif args[0] == "run":
        cap = opt("--cap", "none")
        print(json.dumps(run_case(opt("--workload", "image"), None if cap == "none" else int(cap), "--record" in args),
                         separators=(",", ":")), flush=True)
    else:
        sweep(args[1], int(opt("--jobs", "4")), opt("--workloads", "image,transformer").split(","))


if __name__ == "__main__":
    main()
