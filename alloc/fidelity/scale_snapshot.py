#!/usr/bin/env python3
"""Writes a large memory snapshot for the allocator lab's speed benchmark: a real captured
snapshot (default: traces/image.pkl, Stable Diffusion 1.5's UNet and VAE on an H200) with its
allocation history played again and again until it has at least --events trace entries, written
with Python's pickle as torch.cuda.memory._dump_snapshot writes it (plain dicts and lists).

Each repetition moves its addresses to a range of its own and frees, at its end, what the
original left allocated, so every repetition starts from the same state, as a training or
generation loop does step after step. Frames are shared between repetitions (pickle's memo
writes each once), so a million entries take tens of MB, not gigabytes.

    python3 alloc/fidelity/scale_snapshot.py --events 1000000 --out target/lab-bench/1m.pickle
"""
import argparse
import pickle
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=str(HERE / "traces" / "image.pkl"))
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    with open(a.source, "rb") as f:
        snap = pickle.load(f)
    dev = max(range(len(snap["device_traces"])), key=lambda d: len(snap["device_traces"][d]))
    original = [e for e in snap["device_traces"][dev] if e["action"] in ("alloc", "free_requested", "free_completed")]
    # what the original leaves allocated at its end
    live = {}
    for e in original:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        elif e["action"] == "free_completed":
            live.pop(e["addr"], None)
    out = []
    rep = 0
    while len(out) < a.events:
        shift = (rep + 1) << 44
        for e in original:
            c = dict(e)
            c["addr"] = e["addr"] + shift
            out.append(c)
        for e in live.values():
            for action in ("free_requested", "free_completed"):
                c = dict(e)
                c["action"] = action
                c["addr"] = e["addr"] + shift
                out.append(c)
        rep += 1
    traces = [[] for _ in snap["device_traces"]]
    traces[dev] = out
    snap["device_traces"] = traces
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "wb") as f:
        pickle.dump(snap, f, protocol=4)
    print(f"{a.out}: {len(out)} trace entries ({rep} repetitions of {a.source})")


if __name__ == "__main__":
    main()
