#!/usr/bin/env python3
"""Capture a real allocation trace from a small transformer training run on the GPU.

Usage: python3 capture_model.py OUTDIR [--steps N]

Builds a decoder-only transformer from random weights (no downloads, no network), trains it for
a few AdamW steps on random tokens with a sequence length that changes from step to step, under
torch.cuda.memory._record_memory_history, and writes:

  OUTDIR/model.pkl   the snapshot pickle (torch.cuda.memory._dump_snapshot), plus one extra
                     top-level key "device_total" (bytes, cudaMemGetInfo total) that
                     `probe replay` uses as the trace's device total
  OUTDIR/model.json  the same trace in the simple JSON form ("a"/"f" events), converted the
                     way headroom-alloc reads snapshots: allocation at "alloc", free at
                     "free_completed" (what replay_torch.py replays)

Run it in a fresh process with no PYTORCH_*_ALLOC_CONF set: recording starts before the first
CUDA allocation, so the trace is complete (no tensors alive before it). Only torch + stdlib.
"""
import json
import os
import pickle
import sys
import time



VOCAB = 16384


def make_lm(torch, vocab=VOCAB, d=1024, heads=16, layers=6):
    """The decoder-only transformer of the captures (random weights): explicit attention, so the
    t x t scores follow the sequence length. Shared with workload.py."""
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln2 = nn.LayerNorm(d)
            self.fc1 = nn.Linear(d, 4 * d)
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
            q = q.view(b, t, heads, d // heads).transpose(1, 2)
            k = k.view(b, t, heads, d // heads).transpose(1, 2)
            v = v.view(b, t, heads, d // heads).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // heads) ** 0.5)
            mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(1024, d)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.emb(idx) + self.pos(torch.arange(t, device=idx.device))
            for blk in self.blocks:
                x = blk(x)
            return self.head(self.ln(x))

    return LM()

def convert(snap, device=0):
    """Snapshot dict -> list of ["a", id, size] / ["f", id, size] (the canonical replay order).

    Mirrors headroom-alloc's snapshot reader: blocks alive before recording started (freed in
    the trace without an alloc, or alive in `segments` at the end without an alloc) are
    allocated first, in address order; then every alloc / free_completed in trace order.
    """
    entries = snap["device_traces"][device] if snap["device_traces"] else []
    live = {}       # addr -> (id, size)
    initial = []    # (addr, id, size)
    events = []
    next_id = [0]

    def new_id():
        i = next_id[0]
        next_id[0] += 1
        return i

    freed_requested = set()
    for e in entries:
        a = e["action"]
        if a == "alloc":
            live[e["addr"]] = (new_id(), e["size"])
            events.append(["a", live[e["addr"]][0], e["size"]])
        elif a in ("free_requested", "free_completed"):
            addr = e["addr"]
            if addr not in live:
                i = new_id()
                initial.append((addr, i, e["size"]))
                live[addr] = (i, e["size"])
            if a == "free_completed":
                i, size = live.pop(addr)
                events.append(["f", i, size])
    for seg in snap.get("segments", []):
        if seg.get("device", 0) != device:
            continue
        for blk in seg.get("blocks", []):
            if blk["state"] in ("active_allocated", "active_pending_free") and blk["address"] not in live:
                i = new_id()
                initial.append((blk["address"], i, blk["requested_size"]))
                live[blk["address"]] = (i, blk["requested_size"])
    initial.sort()
    return [["a", i, size] for _, i, size in initial] + events


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    out = sys.argv[1]
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 6
    for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        if os.environ.get(v) is not None:
            print(f"capture_model: unset {v} first (the capture uses the default allocator)", file=sys.stderr)
            sys.exit(2)
    os.makedirs(out, exist_ok=True)
    import torch
    import torch.nn.functional as F

    t0 = time.time()
    torch.manual_seed(0)
    torch.cuda.init()
    dev = torch.device("cuda")
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=2_000_000)

    vocab, batch = VOCAB, 4
    d, layers = 1024, 6
    model = make_lm(torch).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    seqs = [256, 512, 384, 768, 640, 512, 704, 448]
    for step in range(steps):
        t = seqs[step % len(seqs)]
        idx = torch.randint(0, vocab, (batch, t), device=dev)
        tgt = torch.randint(0, vocab, (batch, t), device=dev)
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, vocab), tgt.view(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del logits, loss, idx, tgt
        torch.cuda.synchronize()
        print(f"capture_model: step {step + 1}/{steps} seq {t}: allocated {torch.cuda.memory_allocated() / 2**30:.2f} GiB, "
              f"peak reserved {torch.cuda.max_memory_reserved() / 2**30:.2f} GiB", flush=True)

    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    free, total = torch.cuda.mem_get_info()
    snap["device_total"] = int(total)
    with open(os.path.join(out, "model.pkl"), "wb") as f:
        pickle.dump(snap, f)
    events = convert(snap)
    peak = live = 0
    sizes = {}
    for op, i, size in events:
        if op == "a":
            sizes[i] = size
            live += size
            peak = max(peak, live)
        else:
            live -= sizes.pop(i)
    stats = torch.cuda.memory_stats()
    doc = {
        "name": "model",
        "description": f"Captured with _record_memory_history: decoder-only transformer (d={d}, {layers} layers, vocab {vocab}, batch {batch}), {steps} AdamW steps, sequence length changing per step, torch {torch.__version__} on {torch.cuda.get_device_name()}.",
        "device_total": int(total),
        "peak_live_bytes": peak,
        "captured_peak_reserved": stats["reserved_bytes.all.peak"],
        "captured_peak_allocated": stats["allocated_bytes.all.peak"],
        "events": events,
    }
    with open(os.path.join(out, "model.json"), "w") as f:
        f.write("{\n")
        for k in doc:
            if k != "events":
                f.write(f"  {json.dumps(k)}: {json.dumps(doc[k])},\n")
        f.write('  "events": [\n')
        f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in events))
        f.write("\n  ]\n}\n")
    n_trace = len(snap["device_traces"][0]) if snap["device_traces"] else 0
    print(f"capture_model: {n_trace} trace entries, {len(events)} replay events, peak live {peak / 2**30:.2f} GiB, "
          f"captured peak reserved {stats['reserved_bytes.all.peak'] / 2**30:.2f} GiB, {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
