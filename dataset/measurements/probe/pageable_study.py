#!/usr/bin/env python3
"""Why the probe's pageable host->device figure differs from PyTorch's (issue 20, part 4).

Times the same 256 MiB host->device and device->host copies, best of 10 after a warm-up,
with CUDA events (as the probe and torch_side_by_side.py do), varying one thing at a time:
  * how the copy is issued: cuMemcpyHtoD/DtoH (the synchronous driver call the probe made up to
    2026-12-02, through ctypes), cuMemcpyHtoDAsync/DtoHAsync on the current stream then
    cuStreamSynchronize (what the probe does now), or tensor.copy_ (PyTorch: cudaMemcpyAsync on the
    current stream, then a sync);
  * the host buffer: PyTorch's CPU tensor; an anonymous mmap touched page by page (what Rust's
    vec! of 256 MiB gets from malloc); the same with madvise(MADV_HUGEPAGE) before touching;
    a buffer allocated but never touched;
  * the buffer's offset from a page boundary: 0 (mmap), 16 (where glibc's malloc puts the data
    of a large block, so a Rust `vec!` of 256 MiB), 64 (PyTorch's CPU allocator aligns to 64);
  * the CPU the process runs on (NUMA node of the GPU or not), when more than one node exists.
Prints one JSON object: the machine's transparent-hugepage setting, each buffer's share of huge
pages (/proc/self/smaps), and GB/s per case.

    python3 dataset/measurements/probe/pageable_study.py > result.json
"""
import ctypes
import ctypes.util
import json
import mmap
import os

import torch

from smaps import huge_share

N = 256 << 20
MADV_HUGEPAGE = 14
libc = ctypes.CDLL(None, use_errno=True)
cuda = ctypes.CDLL("libcuda.so.1")
torch.cuda.init()
dev = torch.empty(N, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUDA error {rc}")


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
    return round(N / (t / 1e3) / 1e9, 2)




def mapped(touch, hugepage, offset=0):
    m = mmap.mmap(-1, N + 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    if hugepage:
        libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(N + 4096), MADV_HUGEPAGE)
    if touch:
        ctypes.memset(addr, 1, N + 4096)
    return (m, offset), addr + offset


def cases():
    out = {}
    t = torch.ones(N, dtype=torch.uint8)
    bufs = {"torch_tensor": (t, t.data_ptr())}
    for name, touch, huge, off in [("mmap_touched", True, False, 0), ("mmap_touched_offset16", True, False, 16),
                                   ("mmap_touched_offset64", True, False, 64), ("mmap_hugepage_touched", True, True, 0),
                                   ("mmap_untouched", False, False, 0)]:
        bufs[name] = mapped(touch, huge, off)
    d = ctypes.c_uint64(dev.data_ptr())
    for name, (obj, addr) in bufs.items():
        h = ctypes.c_void_p(addr)
        r = {"page_offset": addr % 4096, "huge_share_before": huge_share(addr)}
        r["h2d_driver_gbs"] = best(lambda: check(cuda.cuMemcpyHtoD_v2(d, h, ctypes.c_size_t(N)), "cuMemcpyHtoD"))
        r["d2h_driver_gbs"] = best(lambda: check(cuda.cuMemcpyDtoH_v2(h, d, ctypes.c_size_t(N)), "cuMemcpyDtoH"))
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

        def htod_async():
            check(cuda.cuMemcpyHtoDAsync_v2(d, h, ctypes.c_size_t(N), stream), "cuMemcpyHtoDAsync")
            check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")

        def dtoh_async():
            check(cuda.cuMemcpyDtoHAsync_v2(h, d, ctypes.c_size_t(N), stream), "cuMemcpyDtoHAsync")
            check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")

        r["h2d_driver_async_gbs"] = best(htod_async)
        r["d2h_driver_async_gbs"] = best(dtoh_async)
        if isinstance(obj, torch.Tensor):
            r["h2d_torch_gbs"] = best(lambda: dev.copy_(obj))
            r["d2h_torch_gbs"] = best(lambda: obj.copy_(dev))
        else:
            view = torch.frombuffer(obj[0], dtype=torch.uint8, count=N, offset=obj[1])
            r["h2d_torch_gbs"] = best(lambda: dev.copy_(view))
            r["d2h_torch_gbs"] = best(lambda: view.copy_(dev))
        r["huge_share_after"] = huge_share(addr)
        out[name] = r
    return out


def main():
    res = {
        "gpu": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip(),
        "cpus": len(os.sched_getaffinity(0)),
        "numa_nodes": len([n for n in os.listdir("/sys/devices/system/node") if n.startswith("node")]),
        "bytes": N,
    }
    res["cases"] = cases()
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
