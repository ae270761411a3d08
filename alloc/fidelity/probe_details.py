#!/usr/bin/env python3
"""Measure the details the simulator's model depends on, on the real GPU.

Usage: python3 probe_details.py OUT.json

1. config: how PyTorch parses ~50 PYTORCH_CUDA_ALLOC_CONF strings (error type and text, or the
   settings it ended up with), one process each.
2. addresses: where cudaMalloc / expandable segments put segments for a scripted sequence of
   allocations, frees and empty_cache calls (the allocator breaks best-fit ties by address).
3. device_free: how close to cudaMemGetInfo's free bytes cudaMalloc and cuMemCreate can go.
4. async_pool: how the cudaMallocAsync pool's reserved bytes grow, are reused and trimmed.

Only torch and the standard library; about a minute on an H200.
"""
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

MiB = 1 << 20
GiB = 1 << 30

CONF_STRINGS = [
    "", " ", ",", ":", "expandable_segments:True", "max_split_size_mb:100",
    "max_split_size_mb:19,foo:1", "foo:1,max_split_size_mb:19",
    "max_split_size_mb", "max_split_size_mb:", "max_split_size_mb:abc", "max_split_size_mb:-5",
    "max_split_size_mb:100x", "max_split_size_mb=100", "max_split_size_mb:99999999999999999999",
    "max_split_size_mb:[1,2]", "max_split_size_mb:100 200", "max_split_size_mb:0x20",
    "expandable_segments:True:False", "expandable_segments:True,,max_split_size_mb:100",
    ",expandable_segments:True", "expandable_segments:[True]", "Expandable_segments:True",
    "expandable_segments:True,expandable_segments:False", "expandable_segments True",
    "roundup_power2_divisions:[>:4]", "roundup_power2_divisions:[1:4,>:8,64:2]",
    "roundup_power2_divisions:[256:1,512:2", "roundup_power2_divisions:[256:3]",
    "roundup_power2_divisions:[0:4]", "roundup_power2_divisions:[65536:2]",
    "roundup_power2_divisions:0", "roundup_power2_divisions:1", "roundup_power2_divisions:[]",
    "roundup_power2_divisions:[2:4,>]", "roundup_power2_divisions:[64:8,256:4,1024:4,>:1]",
    "garbage_collection_threshold:abc", "garbage_collection_threshold:0.5x",
    "garbage_collection_threshold:nan", "garbage_collection_threshold:1e-3",
    "backend:foo", "backend:native,backend:cudaMallocAsync", "backend:cudaMallocAsync,backend:native",
    "backend:cudaMallocAsync,expandable_segments:True", "backend:cudaMallocAsync,max_split_size_mb:19",
    "backend:cudaMallocAsync,foo:1", "backend:cudaMallocAsync,release_lock_on_cudamalloc:True",
    "per_process_memory_fraction:abc", "per_process_memory_fraction:0.5,per_process_memory_fraction:0.25",
    "per_process_memory_fraction:1", "release_lock_on_cudamalloc:true", "pinned_num_register_threads:256",
    "large_segment_size_mb:abc", "large_segment_size_mb:30,max_split_size_mb:25",
    "max_non_split_rounding_mb:30", "large_segment_size_mb:11",
    "max_split_size_mb:100,max_non_split_rounding_mb:40,large_segment_size_mb:30",
    "pinned_use_background_threads:yes", "graph_capture_record_stream_reuse:1",
]

CONF_CHILD = r'''
import json, sys
res = {}
stage = "import"
try:
    import torch
    stage = "init"
    torch.cuda.init()
    stage = "alloc"
    x = torch.empty(1536 * 1024, dtype=torch.uint8, device="cuda")
    stage = "stats"
    st = torch.cuda.memory_stats()
    res["reserved_after_1.5MiB"] = st.get("reserved_bytes.all.current")
    res["max_split_size"] = st.get("max_split_size")
    res["backend"] = torch.cuda.memory.get_allocator_backend()
    try:
        res["fraction"] = torch.cuda.get_per_process_memory_fraction()
    except Exception as e:
        res["fraction_err"] = repr(e)
    if res["backend"] == "native":
        res["settings"] = torch.cuda.memory._snapshot()["allocator_settings"]
    res["ok"] = True
except BaseException as e:
    res["error_type"] = type(e).__name__
    res["error"] = str(e)
    res["stage"] = stage
print("RESULT" + json.dumps(res))
'''


def conf_one(s):
    env = dict(os.environ)
    for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        env.pop(v, None)
    env["PYTORCH_CUDA_ALLOC_CONF"] = s
    p = subprocess.run([sys.executable, "-c", CONF_CHILD], env=env, capture_output=True, text=True, timeout=120)
    rec = {"conf": s, "rc": p.returncode}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT"):
            rec.update(json.loads(line[6:]))
    if "ok" not in rec and "error" not in rec:
        rec["stderr_tail"] = p.stderr[-1500:]
    warn = [l for l in p.stderr.splitlines() if "Warning" in l or "warn" in l.lower()]
    if warn:
        rec["warnings"] = warn[-5:]
    return rec


ADDR_CHILD = r'''
import json, sys, torch
MiB = 1 << 20
torch.cuda.init()
torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=1000000)
dev = torch.device("cuda")
s = 12345
def rnd():
    global s
    s = (s * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
    return (s >> 33) / float(1 << 31)
sizes = [1000, 300000, 3 * MiB, 12 * MiB, 22 * MiB, 50 * MiB + 7, 150 * MiB, 400 * MiB]
live = {}
ops = []
nid = 0
for step in range(400):
    u = rnd()
    if step % 25 == 24:
        torch.cuda.empty_cache(); ops.append(["e"])
    elif u < 0.55 or not live:
        size = sizes[int(rnd() * len(sizes))]
        live[nid] = torch.empty(size, dtype=torch.uint8, device=dev); ops.append(["a", nid, size]); nid += 1
    else:
        keys = sorted(live)
        k = keys[int(rnd() * len(keys))]
        del live[k]; ops.append(["f", k, 0])
snap = torch.cuda.memory._snapshot()
tr = [[e["action"], e["addr"] if "addr" in e else e.get("device_free"), e["size"]] for e in snap["device_traces"][0]]
print("RESULT" + json.dumps({"ops": ops, "trace": tr, "stats": {k: v for k, v in torch.cuda.memory_stats().items() if k.startswith("num_") or k.startswith("reserved_bytes.all")}}))
'''

FREE_CHILD = r'''
import json, ctypes, torch
MiB = 1 << 20
torch.cuda.init()
conf = __import__("os").environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
cuda = ctypes.CDLL("libcuda.so.1")
free0, total = torch.cuda.mem_get_info()
cap = 1024 * MiB
ptr = ctypes.c_uint64(0)
r = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(free0 - cap))
free1, _ = torch.cuda.mem_get_info()
res = {"conf": conf, "free0": free0, "total": total, "ballast_rc": r, "free_after_ballast": free1}
dev = torch.device("cuda")
live = []
steps = []
for size in [20 * MiB] * 200:
    try:
        live.append(torch.empty(size, dtype=torch.uint8, device=dev))
    except torch.OutOfMemoryError as e:
        res["first_oom_after"] = len(live)
        res["oom_message"] = str(e)
        break
st = torch.cuda.memory_stats()
res["reserved_at_oom"] = st["reserved_bytes.all.current"]
res["free_at_oom"] = torch.cuda.mem_get_info()[0]
# then small 2 MiB segments (1 MiB tensors) until OOM
n = 0
while True:
    try:
        live.append(torch.empty(1 * MiB, dtype=torch.uint8, device=dev)); n += 1
    except torch.OutOfMemoryError as e:
        res["small_after"] = n
        res["small_oom_message"] = str(e)
        break
    if n > 2000:
        break
st = torch.cuda.memory_stats()
res["reserved_final"] = st["reserved_bytes.all.current"]
res["free_final"] = torch.cuda.mem_get_info()[0]
print("RESULT" + json.dumps(res))
'''

ASYNC_CHILD = r'''
import json, ctypes, os, torch
MiB = 1 << 20
GiB = 1 << 30
torch.cuda.init()
dev = torch.device("cuda")
res = {"backend": torch.cuda.memory.get_allocator_backend()}
def st():
    s = torch.cuda.memory_stats()
    return [s.get("allocated_bytes.all.current", 0), s.get("reserved_bytes.all.current", 0), s.get("reserved_bytes.all.peak", 0)]
mode = os.environ["PROBE_MODE"]
if mode == "growth":
    rows = []
    live = []
    for size in [1000, 512 * 1024, MiB, 2 * MiB + 1, 5 * MiB, 10 * MiB, 33 * MiB, 64 * MiB, 100 * MiB + 1000, 300 * MiB, 700 * MiB, GiB + 5]:
        live.append(torch.empty(size, dtype=torch.uint8, device=dev))
        torch.cuda.synchronize()
        rows.append([size] + st())
    res["growth"] = rows
    live.clear(); torch.cuda.synchronize(); res["after_free"] = st()
    live = [torch.empty(40 * MiB, dtype=torch.uint8, device=dev) for _ in range(30)]
    torch.cuda.synchronize(); res["reuse_30x40MiB"] = st()
    live.clear(); torch.cuda.empty_cache(); torch.cuda.synchronize(); res["after_empty_cache"] = st()
    rows = []
    for i in range(64):
        live.append(torch.empty(8 * MiB, dtype=torch.uint8, device=dev))
    torch.cuda.synchronize(); rows.append(["64x8MiB"] + st())
    for i in range(0, 64, 2):
        live[i] = None
    torch.cuda.synchronize(); rows.append(["freed even"] + st())
    more = [torch.empty(12 * MiB, dtype=torch.uint8, device=dev) for _ in range(32)]
    torch.cuda.synchronize(); rows.append(["+32x12MiB"] + st())
    small = [torch.empty(3 * MiB, dtype=torch.uint8, device=dev) for _ in range(32)]
    torch.cuda.synchronize(); rows.append(["+32x3MiB"] + st())
    res["frag"] = rows
    live.clear(); more.clear(); small.clear(); torch.cuda.empty_cache()
    rows = []
    x = []
    for i in range(200):
        size = (i * 7919 % 97 + 1) * 1024 * 1024 + (i * 31 % 1000)
        x.append(torch.empty(size, dtype=torch.uint8, device=dev))
        if i % 3 == 2:
            x[i - 1] = None
        rows.append([size] + st())
    res["mixed"] = rows
elif mode == "free":
    cuda = ctypes.CDLL("libcuda.so.1")
    free0, total = torch.cuda.mem_get_info()
    ptr = ctypes.c_uint64(0)
    r = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(free0 - 2 * GiB))
    res["free_after_ballast"] = torch.cuda.mem_get_info()[0]
    steps = []
    def tryalloc(label, size):
        try:
            t = torch.empty(size, dtype=torch.uint8, device=dev)
            torch.cuda.synchronize()
            steps.append([label, "ok"] + st() + [torch.cuda.mem_get_info()[0]])
            return t
        except torch.OutOfMemoryError as e:
            steps.append([label, "oom: " + str(e)] + st() + [torch.cuda.mem_get_info()[0]])
            return None
    a = tryalloc("1.5GiB", 1536 * MiB)
    del a; torch.cuda.synchronize()
    steps.append(["freed"] + st() + [torch.cuda.mem_get_info()[0]])
    b = tryalloc("1.8GiB", 1843 * MiB)
    del b; torch.cuda.synchronize()
    parts = [tryalloc("150MiB#%d" % i, 150 * MiB) for i in range(10)]
    parts.clear(); torch.cuda.synchronize()
    steps.append(["freed parts"] + st() + [torch.cuda.mem_get_info()[0]])
    c = tryalloc("1.9GiB", 1946 * MiB)
    del c
    d = [tryalloc("fill64#%d" % i, 64 * MiB) for i in range(40)]
    res["steps"] = steps
print("RESULT" + json.dumps(res))
'''


def run_child(code, env_extra):
    env = dict(os.environ)
    for v in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        env.pop(v, None)
    env.update(env_extra)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT"):
            return json.loads(line[6:])
    return {"rc": p.returncode, "stderr_tail": p.stderr[-2000:]}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "probe_details.json"
    t0 = time.time()
    res = {}
    with ThreadPoolExecutor(max_workers=8) as ex:
        res["config"] = list(ex.map(conf_one, CONF_STRINGS))
        print(f"probe_details: config strings done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
        futs = {
            "addresses_default": ex.submit(run_child, ADDR_CHILD, {"PYTORCH_CUDA_ALLOC_CONF": ""}),
            "addresses_expandable": ex.submit(run_child, ADDR_CHILD, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
            "async_growth": ex.submit(run_child, ASYNC_CHILD, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync", "PROBE_MODE": "growth"}),
        }
        for k, f in futs.items():
            res[k] = f.result()
    print(f"probe_details: addresses and async growth done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    # device-free probes take the whole GPU: one at a time
    res["device_free_default"] = run_child(FREE_CHILD, {"PYTORCH_CUDA_ALLOC_CONF": ""})
    res["device_free_expandable"] = run_child(FREE_CHILD, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    res["async_free"] = run_child(ASYNC_CHILD, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync", "PROBE_MODE": "free"})
    with open(out, "w") as f:
        json.dump(res, f, indent=1)
    print(f"probe_details: done in {time.time() - t0:.0f} s -> {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
