"""Small cudaMallocAsync placement experiments on the default pool (release threshold UINT64_MAX),
each in a fresh bare process: a few allocations, some frees, then one probe allocation; prints
where every allocation landed (MiB from the first). Needs only libcuda.so.1.

    python3 pool_micro.py plan
"""
import ctypes, json, sys, subprocess
M = 1 << 20
def child(spec):
    cu = ctypes.CDLL('libcuda.so.1'); cu.cuInit(0)
    dev = ctypes.c_int(); cu.cuDeviceGet(ctypes.byref(dev), 0)
    ctx = ctypes.c_void_p(); cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev); cu.cuCtxSetCurrent(ctx)
    pool = ctypes.c_void_p(); cu.cuDeviceGetDefaultMemPool(ctypes.byref(pool), dev)
    thr = ctypes.c_uint64(2**64 - 1); cu.cuMemPoolSetAttribute(pool, 4, ctypes.byref(thr))
    live = {}; base = None; out = []
    for op in spec:
        if op[0] == 'a':
            p = ctypes.c_uint64(); r = cu.cuMemAllocAsync(ctypes.byref(p), ctypes.c_size_t(op[2]), None)
            if base is None: base = p.value
            live[op[1]] = p.value
            out.append((op[1], round((p.value - base) / M, 4)))
        else:
            cu.cuMemFreeAsync(ctypes.c_uint64(live.pop(op[1])), None)
    print(json.dumps(out))
if len(sys.argv) < 2 or sys.argv[1] not in ('plan', 'child'):
    sys.exit(__doc__)
if sys.argv[1] == 'child':
    child(json.loads(sys.argv[2])); sys.exit()
K = 1024
exps = {}
for probe in [512, 4*K, 12*K, 64*K, 256*K, M, 2*M]:
    base4 = [['a', i, M] for i in range(4)]
    exps[f'X1 4x1MiB free#1 probe {probe}'] = base4 + [['f', 1], ['a', 9, probe]]
    exps[f'X3 4x1MiB free#0,#2 probe {probe}'] = base4 + [['f', 0], ['f', 2], ['a', 9, probe]]
    exps[f'X4 4x1MiB free#2,#0 probe {probe}'] = base4 + [['f', 2], ['f', 0], ['a', 9, probe]]
    exps[f'X5 4x4K free#1 probe {probe}'] = [['a', i, 4*K] for i in range(4)] + [['f', 1], ['a', 9, probe]]
    exps[f'X6 4x8MiB free#1 probe {probe}'] = [['a', i, 8*M] for i in range(4)] + [['f', 1], ['a', 9, probe]]
    exps[f'X7 4x1MiB free#1, 1 op, probe {probe}'] = base4 + [['f', 1], ['a', 8, 4*K], ['a', 9, probe]]
    exps[f'X8 mixed 600K,12K,1M,30K free#0,#2 probe {probe}'] = [['a',0,600*K],['a',1,12*K],['a',2,M],['a',3,30*K],['f',0],['f',2],['a',9,probe]]
for name, spec in exps.items():
    r = subprocess.run([sys.executable, __file__, 'child', json.dumps(spec)], capture_output=True, text=True)
    print(name, r.stdout.strip() or r.stderr[-200:]); sys.stdout.flush()
