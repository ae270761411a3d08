#!/usr/bin/env python3
"""Replay allocation traces with the real PyTorch CUDA caching allocator and record what it did.

Usage:
  python3 replay_torch.py TRACE_DIR OUT.jsonl [--jobs N] [--only TRACE,...] [--configs NAME,...]
                          [--quick] [--uncapped] [--free-only] [--segments OUT_SEGMENTS.jsonl]
                          [--segments-configs NAME,...]

For every (trace, config, cap) it starts one fresh Python process (PyTorch reads
PYTORCH_CUDA_ALLOC_CONF once per process), replays the trace with torch.empty(size,
dtype=torch.uint8) per "a" event and `del` per "f" event, stops at the first OutOfMemoryError,
and writes one JSON line with oom_at, the OOM message and the allocator's counters from
torch.cuda.memory_stats(). Traces are the JSON files in TRACE_DIR (gen_traces.py, and
model.json from capture_model.py).

Caps:
  fraction:N     torch.cuda.set_per_process_memory_fraction(N / total): the allocator's own limit
                 (2, 4 and 8 GiB, every config)
  free:N         a ballast cuMemAlloc in another process leaves N bytes free on the device, so
                 cudaMalloc itself fails and no fraction is set (2 and 4 GiB for six
                 configs, 8 GiB for two)
  none           no limit at all (only with --uncapped: such runs must have the GPU alone)
Fraction runs go N at a time (default 8): each is limited to its own cap, so they do not disturb
each other on a 140 GiB H200. Free-memory and uncapped runs go one at a time, after them.

Needs only torch and the standard library; no network. Progress goes to stderr. Total time on an
H200: about 5 to 7 minutes for the full matrix (--quick: well under a minute).
"""
import json
import os
import subprocess
import sys
import time

GiB = 1 << 30

CONFIGS = [
    ("default", ""),
    ("expandable", "expandable_segments:True"),
    ("max_split_128", "max_split_size_mb:128"),
    ("max_split_512", "max_split_size_mb:512"),
    ("gc_0.8", "garbage_collection_threshold:0.8"),
    ("gc_0.6_max_split_256", "garbage_collection_threshold:0.6,max_split_size_mb:256"),
    ("roundup_4", "roundup_power2_divisions:4"),
    ("roundup_list", "roundup_power2_divisions:[256:1,512:2,>:4]"),
    ("expandable_max_split_128", "expandable_segments:True,max_split_size_mb:128"),
    ("expandable_roundup_8", "expandable_segments:True,roundup_power2_divisions:8"),
    ("large_segment_64", "large_segment_size_mb:64"),
    ("max_split_128_rounding_64", "max_split_size_mb:128,max_non_split_rounding_mb:64"),
    ("cuda_malloc_async", "backend:cudaMallocAsync"),
]

FRACTION_CAPS = [2 * GiB, 4 * GiB, 8 * GiB]
FREE_CAPS = [2 * GiB, 4 * GiB]
# configs also run under the device-free caps (one process at a time, so fewer of them)
FREE_CONFIGS = ["default", "expandable", "max_split_128", "gc_0.8", "roundup_4", "cuda_malloc_async"]
FREE_8G_CONFIGS = ["default", "expandable"]

STAT_KEYS = [
    "allocated_bytes.all.peak", "allocated_bytes.all.current",
    "reserved_bytes.all.peak", "reserved_bytes.all.current",
    "active_bytes.all.peak", "requested_bytes.all.peak",
    "segment.all.peak", "segment.all.current",
    "inactive_split_bytes.all.current",
    "num_alloc_retries", "num_ooms", "num_sync_all_streams",
    "num_device_alloc", "num_device_free",
    "oversize_allocations.peak", "oversize_segments.peak",
]


def child(trace_path, cap_kind, cap_bytes, seg_out):
    import gc
    import ctypes
    import torch

    gc.disable()
    t0 = time.time()
    torch.cuda.init()
    dev = torch.device("cuda")
    free0, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0)
    rec = {
        "torch": torch.__version__,
        "gpu": props.name,
        "device_total": int(total),
        "total_global_mem": int(props.total_memory),
        "backend": torch.cuda.memory.get_allocator_backend(),
        "free_at_start": int(free0),
    }
    ballast_proc = None
    if cap_kind == "fraction":
        frac = cap_bytes / props.total_memory
        torch.cuda.set_per_process_memory_fraction(frac)
        rec["fraction"] = frac
        rec["fraction_repr"] = repr(frac)
    elif cap_kind == "free":
        # Another process takes the rest of the memory, as other programs on a user's GPU do; a
        # ballast in this process would also take address space and move where the driver puts
        # this process's segments.
        ballast_proc = subprocess.Popen([sys.executable, __file__, "--ballast", str(cap_bytes)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = ballast_proc.stdout.readline().split()
        if not line or line[0] != "ready":
            raise RuntimeError(f"ballast process failed: {line}")
        free1, _ = torch.cuda.mem_get_info()
        rec["ballast_bytes"] = int(line[1])
        rec["ballast"] = "process"
        rec["device_free"] = int(free1)
    if seg_out:
        torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=10_000_000)
    with open(trace_path) as f:
        doc = json.load(f)
    events = doc["events"]
    torch.cuda.reset_peak_memory_stats()
    live = {}
    oom_at = None
    msg = None
    empty = torch.empty
    u8 = torch.uint8
    sample = rec["backend"] == "cudaMallocAsync"
    reserved_trace = []
    t1 = time.time()
    for i, ev in enumerate(events):
        op = ev[0]
        if op == "a":
            try:
                live[ev[1]] = empty(ev[2], dtype=u8, device=dev)
            except torch.OutOfMemoryError as e:
                oom_at = i
                msg = str(e)
                break
        elif op == "f":
            del live[ev[1]]
        elif op == "e":
            torch.cuda.empty_cache()
        if sample and i % 250 == 0:
            reserved_trace.append([i, torch.cuda.memory_reserved()])
    if sample:
        rec["reserved_trace"] = reserved_trace
    rec["replay_s"] = round(time.time() - t1, 3)
    stats = torch.cuda.memory_stats()
    rec["oom_at"] = oom_at
    rec["oom_message"] = msg
    rec["stats"] = {k: stats.get(k) for k in STAT_KEYS}
    rec["events"] = len(events)
    if seg_out:
        snap = torch.cuda.memory._snapshot()
        segs = []
        n_alloc = 0
        for e in snap["device_traces"][0]:
            a = e["action"]
            if a == "alloc":
                n_alloc += 1
            elif a in ("segment_alloc", "segment_free", "segment_map", "segment_unmap"):
                segs.append([a, e["addr"], e["size"], n_alloc])
        rec["segment_events"] = segs
    live.clear()
    rec["wall_s"] = round(time.time() - t0, 3)
    print(json.dumps(rec))


def run_job(trace_dir, trace, cfg_name, conf, cap_kind, cap_bytes, seg):
    env = dict(os.environ)
    for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        env.pop(v, None)
    env["PYTORCH_CUDA_ALLOC_CONF"] = conf
    env["PYTHONUNBUFFERED"] = "1"
    args = [sys.executable, os.path.abspath(__file__), "--child", os.path.join(trace_dir, trace + ".json"),
            cap_kind, str(cap_bytes), "1" if seg else "0"]
    return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(job, p, timeout):
    trace, cfg_name, conf, cap_kind, cap_bytes, seg = job
    base = {"trace": trace, "config": cfg_name, "conf": conf, "cap_kind": cap_kind, "cap_bytes": cap_bytes}
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        base["error"] = f"timeout after {timeout} s"
        return base
    line = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        rec = json.loads(line)
    except ValueError:
        base["error"] = f"rc {p.returncode}: {err.strip()[-800:]}"
        return base
    base.update(rec)
    return base


def ballast(leave):
    """Holds all but `leave` bytes of the free device memory until stdin closes."""
    import ctypes
    cu = ctypes.CDLL("libcuda.so.1")
    dev = ctypes.c_int()
    ctx = ctypes.c_void_p()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
    want = free.value - leave
    ptr = ctypes.c_uint64(0)
    for _ in range(8):
        if cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(want)) == 0:
            print("ready", want, flush=True)
            sys.stdin.read()
            return
        want -= 64 << 20
    print("failed", want, flush=True)


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--ballast":
        ballast(int(sys.argv[2]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1")
        return
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    trace_dir, out_path = sys.argv[1], sys.argv[2]
    argv = sys.argv[3:]

    def opt(name, default=None):
        return argv[argv.index(name) + 1] if name in argv else default

    jobs_n = int(opt("--jobs", "8"))
    only = opt("--only")
    traces = sorted(f[:-5] for f in os.listdir(trace_dir) if f.endswith(".json"))
    if only:
        traces = [t for t in traces if t in only.split(",")]
    configs = CONFIGS
    if opt("--configs"):
        configs = [c for c in CONFIGS if c[0] in opt("--configs").split(",")]
    quick = "--quick" in argv
    seg_path = opt("--segments")
    seg_configs = set((opt("--segments-configs") or "default,expandable").split(","))

    uncapped = "--uncapped" in argv
    free_only = "--free-only" in argv
    parallel, serial = [], []
    for t in traces:
        for name, conf in configs:
            for cap in ([] if free_only else [2 * GiB] if quick else FRACTION_CAPS):
                seg = bool(seg_path) and name in seg_configs and (cap == FRACTION_CAPS[-1] or "--segments-configs" in argv)
                parallel.append((t, name, conf, "fraction", cap, seg))
            if name in FREE_CONFIGS:
                for cap in ([2 * GiB] if quick else FREE_CAPS + ([8 * GiB] if name in FREE_8G_CONFIGS else [])):
                    seg = bool(seg_path) and name in seg_configs and "--segments-configs" in argv
                    serial.append((t, name, conf, "free", cap, seg))
            if uncapped:
                serial.append((t, name, conf, "none", 0, False))
    total = len(parallel) + len(serial)
    print(f"replay_torch: {len(traces)} traces x {len(configs)} configs: {len(parallel)} parallel runs "
          f"({jobs_n} at a time) then {len(serial)} device-free runs one at a time", file=sys.stderr, flush=True)
    t0 = time.time()
    results = []
    done = 0

    def report(rec):
        nonlocal done
        done += 1
        results.append(rec)
        cap = f"{rec['cap_kind']}:{rec['cap_bytes'] / GiB:g}G" if rec["cap_kind"] != "none" else "none"
        if "error" in rec:
            what = "ERROR " + rec["error"][-200:]
        else:
            s = rec["stats"]
            what = (f"oom_at={rec['oom_at']} peak_reserved={s['reserved_bytes.all.peak'] / GiB:.3f}G "
                    f"retries={s['num_alloc_retries']} {rec['replay_s']}s")
        print(f"[{done}/{total} {time.time() - t0:6.1f}s] {rec['trace']:<11} {rec['config']:<26} {cap:<14} {what}",
              file=sys.stderr, flush=True)

    from concurrent.futures import ThreadPoolExecutor, as_completed

    def one(job):
        return finish(job, run_job(trace_dir, *job), 300)

    with ThreadPoolExecutor(max_workers=jobs_n) as ex:
        for fut in as_completed([ex.submit(one, job) for job in parallel]):
            report(fut.result())
    for job in serial:
        report(one(job))

    seg_recs = []
    with open(out_path, "w") as f:
        for rec in results:
            if "segment_events" in rec:
                seg_recs.append({k: rec[k] for k in ("trace", "config", "cap_kind", "cap_bytes", "segment_events")})
                del rec["segment_events"]
            f.write(json.dumps(rec, sort_keys=True) + "\n")
    if seg_path:
        with open(seg_path, "w") as f:
            for rec in seg_recs:
                f.write(json.dumps(rec) + "\n")
    errors = sum(1 for r in results if "error" in r)
    print(f"replay_torch: {len(results)} runs, {errors} errors, {time.time() - t0:.0f} s -> {out_path}", file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
