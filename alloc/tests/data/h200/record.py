"""Writes the four real PyTorch snapshots that alloc/tests/traces.rs replays.

Each one is recorded by torch.cuda.memory._record_memory_history and written by
torch.cuda.memory._dump_snapshot (PyTorch's own pickle), in a fresh process, because the
allocator reads PYTORCH_CUDA_ALLOC_CONF once per process:

  snapshot_default.pkl  two streams; a 4 MiB block freed while another stream still uses it
                        (its free is requested, then completed after a synchronize); default settings
  snapshot_es.pkl       blocks of 1.5, 5, 30 MiB and 1000 B, one freed and replaced, a 200 MiB one,
                        all freed and the cache emptied; expandable_segments:True
  live_default.pkl      three blocks still alive when the snapshot is taken (one 5 MiB block freed);
                        default settings
  live_es.pkl           the same under expandable_segments:True

Usage, on a machine with a CUDA GPU and PyTorch:  python3 record.py OUTDIR
Records what it ran (PyTorch, CUDA, GPU) in OUTDIR/recorded.txt.
"""

import os
import subprocess
import sys

MiB = 1 << 20

CASES = {
    "snapshot_default": "",
    "snapshot_es": "expandable_segments:True",
    "live_default": "",
    "live_es": "expandable_segments:True",
}


def block(nbytes):
    import torch

    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def record(name, path):
    import torch

    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=100000, context="all", stacks="python")
    if name == "snapshot_default":
        first, second = torch.cuda.Stream(), torch.cuda.Stream()
        with torch.cuda.stream(first):
            gone = block(MiB)
        del gone
        with torch.cuda.stream(second):
            kept = block(MiB)
        with torch.cuda.stream(first):
            pending = block(4 * MiB)
        with torch.cuda.stream(second):
            torch.cuda._sleep(2_000_000_000)  # the second stream is busy while the block is freed
        pending.record_stream(second)
        del pending  # free requested; completed only once the second stream passes this point
        with torch.cuda.stream(first):
            big = block(16 * MiB)
        torch.cuda.synchronize()
        with torch.cuda.stream(first):
            tiny = block(1000)  # the next allocation processes the completed event
        del big, tiny, kept
        torch.cuda.empty_cache()
    elif name == "snapshot_es":
        a, b, c, d = block(3 * MiB // 2), block(5 * MiB), block(30 * MiB), block(1000)
        del b
        e = block(6 * MiB)
        f = block(200 * MiB)
        del a, c, d, e, f
        torch.cuda.empty_cache()
    else:  # live_default, live_es
        alive = [block(3 * MiB // 2), block(1000), block(30 * MiB)]
        freed = block(5 * MiB)
        del freed
    torch.cuda.synchronize()
    torch.cuda.memory._dump_snapshot(path)
    if name.startswith("live"):
        del alive


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--case":
        name = sys.argv[2]
        record(name, os.path.join(os.environ["RECORD_OUT"], name + ".pkl"))
        return
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, conf in CASES.items():
        env = dict(os.environ, RECORD_OUT=out, PYTORCH_CUDA_ALLOC_CONF=conf)
        subprocess.run([sys.executable, __file__, "--case", name], env=env, check=True)
        print(f"{name}.pkl: {os.path.getsize(os.path.join(out, name + '.pkl'))} bytes", file=sys.stderr)
    import torch

    with open(os.path.join(out, "recorded.txt"), "w") as fh:
        fh.write(f"PyTorch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}\n")


if __name__ == "__main__":
    main()
