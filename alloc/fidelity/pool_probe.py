"""How does the driver's stream-ordered pool (cudaMallocAsync) place allocations and grow?
Replays a JSON trace ({"events": [["a", id, size], ["f", id, size], ...]}) with cuMemAllocAsync /
cuMemFreeAsync on the legacy default stream, using the device's default memory pool with its
release threshold raised to UINT64_MAX (as PyTorch's cudaMallocAsync backend sets it), in a
bare process (ctypes on libcuda.so.1, no PyTorch). Writes one JSON object: for every allocation
its offset from the first one, and the pool's reserved bytes after every operation.

    python3 pool_probe.py TRACE.json OUT.json [MAX_EVENTS]
"""
import ctypes, json, sys

CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4
CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    events = json.load(open(sys.argv[1]))["events"]
    if len(sys.argv) > 3:
        events = events[: int(sys.argv[3])]
    cu = ctypes.CDLL("libcuda.so.1")
    check = lambda r, what: r == 0 or sys.exit(f"{what} failed: CUresult {r}")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    pool = ctypes.c_void_p()
    check(cu.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev), "cuDeviceGetDefaultMemPool")
    thr = ctypes.c_uint64(2**64 - 1)
    check(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, ctypes.byref(thr)), "set threshold")
    free_b, total_b = ctypes.c_size_t(), ctypes.c_size_t()
    cu.cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total_b))
    res = ctypes.c_uint64()
    reserved = lambda: (cu.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, ctypes.byref(res)), res.value)[1]
    live = {}
    base = None
    allocs = []  # [event index, size, offset]
    rtrace = []  # [event index, reserved] when it changes
    last = -1
    for i, e in enumerate(events):
        if e[0] == "a" and e[2] > 0:
            p = ctypes.c_uint64()
            r = cu.cuMemAllocAsync(ctypes.byref(p), ctypes.c_size_t(e[2]), None)
            if r != 0:
                allocs.append([i, e[2], None])
                break
            if base is None:
                base = p.value
            live[e[1]] = p.value
            allocs.append([i, e[2], p.value - base])
        elif e[0] == "f" and e[1] in live:
            check(cu.cuMemFreeAsync(ctypes.c_uint64(live.pop(e[1])), None), "cuMemFreeAsync")
        rv = reserved()
        if rv != last:
            rtrace.append([i, rv])
            last = rv
    cu.cuCtxSynchronize()
    json.dump({"trace": sys.argv[1], "events": len(events), "free_at_start": free_b.value,
               "total": total_b.value, "allocs": allocs, "reserved": rtrace}, open(sys.argv[2], "w"))
    print(f"{sys.argv[1]}: {len(allocs)} allocations, reserved changes {len(rtrace)}, final {last >> 20} MiB", file=sys.stderr)


if __name__ == "__main__":
    main()
