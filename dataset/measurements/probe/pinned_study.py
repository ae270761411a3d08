#!/usr/bin/env python3
"""Why the probe's pinned host->device figure is sometimes half of PyTorch's (issue 20, part 4).

On the H200 machine the probe measured pinned host->device at 26.5 GB/s in most runs while
PyTorch's pin_memory() tensor measured 55 GB/s in every run; device->host agreed. This times the
same 256 MiB host->device copy (cuMemcpyHtoDAsync + cuStreamSynchronize on a stream of its own,
CUDA events, best of 10 after a warm-up) from host buffers pinned in different ways, in a bare
process that talks to the driver through ctypes as the probe does (no PyTorch loaded):
  * cuMemHostAlloc with flags 0 (what the probe calls), PORTABLE, DEVICEMAP, both;
  * malloc'd memory, touched, then cuMemHostRegister;
  * the same, 2 MiB-aligned with madvise(MADV_HUGEPAGE) before touching;
and reports each buffer's share of huge pages (/proc/self/smaps) beside its rate.

    python3 dataset/measurements/probe/pinned_study.py > result.json
"""
import ctypes
import json
import mmap

from smaps import huge_share

N = 256 << 20
MADV_HUGEPAGE = 14
cuda = ctypes.CDLL("libcuda.so.1")
libc = ctypes.CDLL(None, use_errno=True)


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: {rc}")




def main():
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    d = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(d), ctypes.c_size_t(N)), "cuMemAlloc")
    stream = ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
    start, stop = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuEventCreate(ctypes.byref(start), 0), "cuEventCreate")
    check(cuda.cuEventCreate(ctypes.byref(stop), 0), "cuEventCreate")

    def rate(addr):
        h = ctypes.c_void_p(addr)

        def once():
            check(cuda.cuMemcpyHtoDAsync_v2(d, h, ctypes.c_size_t(N), stream), "cuMemcpyHtoDAsync")
            check(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")

        once()
        best = float("inf")
        for _ in range(10):
            check(cuda.cuEventRecord(start, stream), "cuEventRecord")
            once()
            check(cuda.cuEventRecord(stop, stream), "cuEventRecord")
            check(cuda.cuEventSynchronize(stop), "cuEventSynchronize")
            ms = ctypes.c_float()
            check(cuda.cuEventElapsedTime(ctypes.byref(ms), start, stop), "cuEventElapsedTime")
            best = min(best, ms.value)
        return round(N / (best / 1e3) / 1e9, 2)

    out = {"thp": open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip(), "cases": {}}
    for name, flags in [("hostalloc_0", 0), ("hostalloc_portable", 1), ("hostalloc_devicemap", 2), ("hostalloc_portable_devicemap", 3)]:
        p = ctypes.c_void_p()
        check(cuda.cuMemHostAlloc(ctypes.byref(p), ctypes.c_size_t(N), flags), "cuMemHostAlloc")
        ctypes.memset(p.value, 1, N)
        out["cases"][name] = {"page_offset": p.value % (2 << 20), "huge_share": huge_share(p.value), "h2d_gbs": rate(p.value)}
        check(cuda.cuMemFreeHost(p), "cuMemFreeHost")
    for name, huge in [("register_4k", False), ("register_hugepage", True)]:
        m = mmap.mmap(-1, N + (2 << 20), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        addr = (base + (2 << 20) - 1) // (2 << 20) * (2 << 20)
        if huge:
            libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(N), MADV_HUGEPAGE)
        else:
            libc.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(N), 15)  # MADV_NOHUGEPAGE
        ctypes.memset(addr, 1, N)
        check(cuda.cuMemHostRegister_v2(ctypes.c_void_p(addr), ctypes.c_size_t(N), 0), "cuMemHostRegister")
        out["cases"][name] = {"page_offset": addr % (2 << 20), "huge_share": huge_share(addr), "h2d_gbs": rate(addr)}
        check(cuda.cuMemHostUnregister(ctypes.c_void_p(addr)), "cuMemHostUnregister")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
