#!/usr/bin/env python3
"""Write the synthetic stress traces for the allocator fidelity harness.

Usage: python3 gen_traces.py [--holdout] [OUTDIR]      (default: the traces/ folder beside this file)

--holdout writes the same three kinds of trace from other seeds (101, 102, 103) as
churn-holdout, grow-holdout and resolution-holdout: traces no part of the model was fitted to.

Each trace is JSON: {"name": ..., "description": ..., "events": [["a", id, size], ["f", id, size], ...]}.
"a" allocates `size` bytes under `id`; "f" frees that id. Sizes are bytes as passed to
torch.empty(size, dtype=torch.uint8). Deterministic: a fixed-seed splitmix64 generator, no
`random` module, so every Python version writes the same bytes. Only the standard library.

The traces are sized for the harness's caps (2, 4 and 8 GiB): the live bytes of every trace
exceed 2 GiB, most cross 4 GiB, and none needs more than about 7 GiB live, so the 8 GiB cap
separates configurations by fragmentation alone.
"""
import json
import math
import os
import sys

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


class Rng:
    """splitmix64: tiny, fast, identical everywhere."""

    def __init__(self, seed):
        self.s = seed & 0xFFFFFFFFFFFFFFFF

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def uniform(self):
        return (self.next() >> 11) / float(1 << 53)

    def below(self, n):
        return self.next() % n

    def log_uniform(self, lo, hi):
        """An integer in [lo, hi], log-uniformly distributed."""
        x = math.exp(math.log(lo) + self.uniform() * (math.log(hi) - math.log(lo)))
        return max(lo, min(hi, int(x)))


class Builder:
    def __init__(self):
        self.events = []
        self.live = {}
        self.next_id = 0
        self.live_bytes = 0
        self.peak = 0

    def alloc(self, size):
        i = self.next_id
        self.next_id += 1
        self.events.append(["a", i, size])
        self.live[i] = size
        self.live_bytes += size
        self.peak = max(self.peak, self.live_bytes)
        return i

    def free(self, i):
        size = self.live.pop(i)
        self.live_bytes -= size
        self.events.append(["f", i, size])


def churn(seed=1, n_ops=60000):
    """Random churn of mixed sizes around a live-bytes target that drifts between 1 and 6.5 GiB."""
    r = Rng(seed)
    b = Builder()
    ids = []  # live ids, for O(1) random choice
    # three phases, one per cap: the live-bytes target drifts inside a band just under 2, then
    # 4, then 8 GiB, so where each cap is first exceeded depends on fragmentation
    bands = [(0.9 * GiB, 1.6 * GiB), (2.5 * GiB, 3.6 * GiB), (4.8 * GiB, 6.6 * GiB)]
    huge = [300 * MiB, 600 * MiB, 900 * MiB]
    target = 1.0 * GiB
    for step in range(n_ops):
        phase = min(2, step * 3 // n_ops)
        lo, hi = bands[phase]
        if step % 500 == 0:
            target += (r.uniform() - 0.45) * 0.6 * GiB
            target = max(lo, min(hi, target))
        u = r.uniform()
        want_alloc = b.live_bytes < target if r.uniform() < 0.85 else r.uniform() < 0.5
        if want_alloc or not ids:
            if u < 0.40:
                size = r.log_uniform(1, MiB)            # small pool, odd sizes
            elif u < 0.72:
                size = r.log_uniform(MiB + 1, 10 * MiB)  # 20 MiB segments territory
            elif u < 0.95:
                size = r.log_uniform(10 * MiB, 200 * MiB)
            else:
                size = r.log_uniform(200 * MiB, huge[phase])
            ids.append(b.alloc(size))
        else:
            k = r.below(len(ids))
            ids[k], ids[-1] = ids[-1], ids[k]
            b.free(ids.pop())
    for i in ids:
        b.free(i)
    return b


def grow(seed=2, n_rounds=2600):
    """Buffers that grow by reallocate-and-copy (new buffer, copy, free old), like a list or a
    KV cache extended by torch.cat, with short-lived temporaries in between."""
    r = Rng(seed)
    b = Builder()
    buffers = []
    phases = [(100 * MiB, 300 * MiB), (250 * MiB, 650 * MiB), (700 * MiB, 1700 * MiB)]
    for _ in range(6):
        size = r.log_uniform(256 * KiB, 4 * MiB)
        buffers.append([b.alloc(size), size, r.log_uniform(*phases[0])])
    for rnd in range(n_rounds):
        phase = phases[min(2, rnd * 3 // n_rounds)]
        k = r.below(len(buffers))
        bid, size, cap = buffers[k]
        factor = 1.15 + 0.85 * r.uniform()
        new_size = int(size * factor) + r.below(4096)
        if new_size > cap:
            # the sequence ends: drop it and start a new one, small
            b.free(bid)
            new_size = r.log_uniform(256 * KiB, 4 * MiB)
            buffers[k] = [b.alloc(new_size), new_size, r.log_uniform(*phase)]
        else:
            nid = b.alloc(new_size)   # the copy target
            tmp = b.alloc(r.log_uniform(512, 2 * MiB))  # scratch during the copy
            b.free(tmp)
            b.free(bid)
            buffers[k] = [nid, new_size, cap]
        # unrelated short-lived work
        for _ in range(r.below(4)):
            t = b.alloc(r.log_uniform(1, 24 * MiB))
            b.free(t)
    for bid, _, _ in buffers:
        b.free(bid)
    return b


def resolution(seed=3, n_iters=120):
    """A convolutional-style training loop whose input resolution changes every iteration:
    persistent weights, forward activations kept for backward, gradients and temporaries."""
    r = Rng(seed)
    b = Builder()
    weights = []
    chans = [64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 256, 256, 128, 128, 64, 64]
    strides = [1, 1, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 0.5, 1, 0.5, 1, 0.5, 1]
    for c_in, c_out in zip([3] + chans[:-1], chans):
        w = b.alloc(c_in * c_out * 9 * 4 + 4 * c_out)
        weights.append(w)
        weights.append(b.alloc(4 * c_out))  # bias / norm params
    # optimizer state (two moments per weight)
    state = [b.alloc(b.live[w]) for w in weights] + [b.alloc(b.live[w]) for w in weights]
    side = 448
    bands = [(384, 704), (576, 960), (832, 1216)]
    for it in range(n_iters):
        lo, hi = bands[min(2, it * 3 // n_iters)]
        # random walk over resolutions in steps of 64 inside the phase's band, sometimes a jump
        if r.uniform() < 0.15:
            side = lo + 64 * r.below((hi - lo) // 64 + 1)
        else:
            side = max(lo, min(hi, side + 64 * (r.below(5) - 2)))
        h = w_ = side
        batch = 2
        acts = []
        x = b.alloc(batch * 3 * h * w_ * 2)
        acts.append(x)
        scale = 1.0
        for c, s in zip(chans, strides):
            scale = scale * s
            hh = max(1, int(h / scale))
            ww = max(1, int(w_ / scale))
            n = batch * c * hh * ww * 2
            tmp = b.alloc(n * 2)        # conv workspace-ish temporary
            out = b.alloc(n)
            b.free(tmp)
            norm = b.alloc(n)           # normalisation output, kept
            acts.append(out)
            acts.append(norm)
        loss = b.alloc(4)
        grad = b.alloc(b.live[acts[-1]])
        b.free(loss)
        while acts:
            a = acts.pop()
            g2 = b.alloc(b.live[a])
            b.free(grad)
            b.free(a)
            grad = g2
            if len(acts) % 2 == 0:
                wg = b.alloc(b.live[weights[(len(acts) // 2) % len(weights)]])
                b.free(wg)
        b.free(grad)
    for i in state + weights:
        b.free(i)
    return b


TRACES = [
    ("churn", churn, "Random churn of mixed sizes (1 B to 900 MiB, log-uniform per class) around a drifting live-bytes target: 0.9-1.6 GiB, then 2.5-3.6 GiB, then 4.8-6.6 GiB; the largest requests grow from 300 to 600 to 900 MiB."),
    ("grow", grow, "Six buffers growing by reallocate-and-copy (x1.15 to x2 per step, up to 0.1-0.3, then 0.25-0.65, then 0.7-1.7 GiB, then restarted) with short-lived temporaries."),
    ("resolution", resolution, "Conv-net-like training iterations whose input resolution walks between 384-704, then 576-960, then 832-1216 pixels: weights and optimizer state, activations kept for backward, gradients."),
]


def main():
    args = sys.argv[1:]
    holdout = "--holdout" in args
    args = [a for a in args if a != "--holdout"]
    out = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "traces")
    os.makedirs(out, exist_ok=True)
    for k, (name, fn, desc) in enumerate(TRACES):
        if holdout:
            b = fn(seed=101 + k)
            name += "-holdout"
            desc += f" Seed {101 + k} (hold-out)."
        else:
            b = fn()
        assert not b.live, name
        doc = {"name": name, "description": desc, "peak_live_bytes": b.peak, "events": b.events}
        path = os.path.join(out, name + ".json")
        with open(path, "w") as f:
            # one event per line: diffable, and still plain JSON
            f.write("{\n")
            for k in ("name", "description", "peak_live_bytes"):
                f.write(f"  {json.dumps(k)}: {json.dumps(doc[k])},\n")
            f.write('  "events": [\n')
            f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in b.events))
            f.write("\n  ]\n}\n")
        print(f"{path}: {len(b.events)} events, peak live {b.peak / GiB:.2f} GiB")


if __name__ == "__main__":
    main()
