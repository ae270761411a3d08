"""Where does the CUDA driver put a cudaMalloc? Replays recorded segment sequences (the
`--segments` output of replay_torch.py) with cuMemAlloc/cuMemFree in fresh, bare processes and
probes where one more allocation of a given size lands after a given number of operations.

    python3 va_probe.py plan SEGMENT_FILES '[[KEY, PREFIX, [SIZE_MIB, ...]], ...]'

SEGMENT_FILES: comma-separated .jsonl files; KEY: [trace, config, cap GiB] of a recorded run;
PREFIX: how many alloc/free operations to replay first. One line per (KEY, PREFIX, size): how
many prefix allocations landed where the recording has them (addresses relative to the first
segment, MiB), the first that did not, and where the probe landed. Size 0 (always run first)
probes nothing. Needs only the NVIDIA driver (libcuda.so.1).
"""
import ctypes, json, sys, subprocess, os
M = 1 << 20
def child(seq_file, key, prefix, probe):
    cu = ctypes.CDLL('libcuda.so.1')
    assert cu.cuInit(0) == 0
    dev = ctypes.c_int(); cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p(); assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
    cu.cuCtxSetCurrent(ctx)
    run = None
    for f in seq_file.split(','):
        for line in open(f):
            d = json.loads(line)
            if [d['trace'], d['config'], d['cap_bytes'] >> 30] == key: run = d
    ev = [e for e in run['segment_events'] if e[0] in ('segment_alloc', 'segment_free')]
    live = {}
    out = []
    base = None
    for i, (k, addr, size, _) in enumerate(ev[:prefix]):
        if k == 'segment_alloc':
            p = ctypes.c_uint64()
            r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(size))
            assert r == 0, r
            if base is None: base = p.value; rbase = addr
            live[addr] = p.value
            out.append((i, (p.value - base) // M, (addr - rbase) // M))
        else:
            cu.cuMemFree_v2(ctypes.c_uint64(live.pop(addr)))
    res = {'prefix_match': sum(1 for _, a, b in out if a == b), 'prefix_allocs': len(out), 'first_mismatch': next(((i, a, b) for i, a, b in out if a != b), None)}
    if probe:
        p = ctypes.c_uint64()
        r = cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(probe))
        res['probe'] = probe // M
        res['at'] = (p.value - base) // M if r == 0 else None
    print(json.dumps(res)); sys.stdout.flush()

if __name__ == '__main__':
    if len(sys.argv) < 4 or sys.argv[1] not in ('plan', 'child'):
        sys.exit(__doc__)
    if sys.argv[1] == 'child':
        child(sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])); sys.exit(0)
    seqs = sys.argv[2]
    plan = json.loads(sys.argv[3])  # list of [key, prefix, [sizes MiB]]
    for key, prefix, sizes in plan:
        for s in [0] + sizes:
            r = subprocess.run([sys.executable, __file__, 'child', seqs, json.dumps(key), str(prefix), str(s * M)], capture_output=True, text=True)
            print(json.dumps(key), prefix, r.stdout.strip() or r.stderr.strip()[-300:]); sys.stdout.flush()
