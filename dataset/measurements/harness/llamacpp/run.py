#!/usr/bin/env python3
"""llama.cpp reference runs for Headroom's fit engine (run on the device by device.sh).

For each case: a random-weight GGUF of the model (write_gguf.py, the converter's layout), quantized
with the build's own `llama-quantize`; llama.cpp's estimate (`llama-fit-params --fit-print on`);
then a real run (`llama-completion`, or `llama-server` with parallel slots) whose prompt fills the
context, while a thread samples the device's used memory through NVML every 2 ms. Each case is one
JSON line: the workload in `dataset fit` form, the peak used memory minus the level before the run,
llama.cpp's own breakdown and estimate per device (model, context, compute, from `--fit-print`), and
the environment.
Each model file is also described once (every tensor's name, type and bytes) in the files output.

    python3 run.py --list
    python3 run.py --bin BUILD/bin --models /dev/shm/models --group small --out res.jsonl --files files.jsonl
"""

import argparse
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
sys.path.insert(0, HERE)
import write_gguf  # noqa: E402

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"
N_PREDICT = 8

# --------------------------------------------------------------------------------------------
# Cases: (group, model, file format, run settings). Defaults: every layer on the GPU, flash
# attention on, f16 KV cache, ubatch 512, batch 2048, one sequence, llama-completion.
# --------------------------------------------------------------------------------------------


def case(group, model, weights, context, **kw):
    c = dict(group=group, model=model, weights=weights, context=context, kv="f16", fa=True, ub=512, b=2048,
             ngl=None, slots=1, tool="completion", ncmoe=None, swa_full=False, ollama=False, tag=None,
             devices=1, ts=None)
    c.update(kw)
    fa = {True: "fa", False: "nofa", "auto": "faauto"}[c["fa"]]
    parts = [model, weights, f"c{context}", fa, f"kv{c['kv']}", f"ub{c['ub']}"]
    if c["ngl"] is not None:
        parts.append(f"ngl{c['ngl']}")
    if c["slots"] > 1:
        parts.append(f"np{c['slots']}")
    if c["ncmoe"] is not None:
        parts.append(f"ncmoe{c['ncmoe']}")
    if c["swa_full"]:
        parts.append("swafull")
    if c["tool"] != "completion":
        parts.append(c["tool"])
    if c["ollama"]:
        parts.append("ollama")
    if c["devices"] > 1:
        parts.append(f"dev{c['devices']}")
    if c["ts"]:
        parts.append("ts" + "-".join(str(x) for x in c["ts"]))
    if c["tag"]:
        parts.append(c["tag"])
    c["id"] = "-".join(parts)
    return c


def cases():
    L1, L8, Q05, G2, NEMO, MOE = "llama-3.2-1b", "llama-3.1-8b", "Qwen__Qwen2.5-0.5B", "google__gemma-2-2b-it", "mistral-nemo-12b", "qwen3-30b-a3b"
    out = []
    s = "small"
    for w in ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "IQ4_XS"]:
        out.append(case(s, L1, w, 4096))
    out += [
        case(s, L1, "Q4_K_M", 32768),
        case(s, L1, "Q4_K_M", 32768, fa=False),
        case(s, L1, "Q4_K_M", 32768, kv="q8_0"),
        case(s, L1, "Q4_K_M", 32768, kv="q4_0"),
        case(s, L1, "Q4_K_M", 8192, ub=2048),
        case(s, L1, "Q4_K_M", 8192, fa=False, ub=2048),
        case(s, L1, "Q4_K_M", 8192, ngl=8),
        case(s, L1, "Q4_K_M", 131072),
        case(s, L1, "Q4_K_M", 4096, slots=4, tool="server"),
        case(s, Q05, "Q4_K_M", 4096),
        case(s, Q05, "Q4_K_M", 32768, fa=False),
        case(s, Q05, "Q8_0", 16384, kv="q8_0"),
        case(s, G2, "Q4_K_M", 8192),
        case(s, G2, "Q4_K_M", 8192, swa_full=True),
        case(s, G2, "Q4_K_M", 8192, fa=False),
        case(s, G2, "Q6_K", 4096, kv="q8_0"),
    ]
    b = "8b"
    out += [
        case(b, L8, "Q4_K_M", 8192),
        case(b, L8, "Q4_K_M", 32768),
        case(b, L8, "Q4_K_M", 131072),
        case(b, L8, "Q4_K_M", 32768, kv="q8_0"),
        case(b, L8, "Q4_K_M", 65536, kv="q4_0"),
        case(b, L8, "Q4_K_M", 16384, fa=False),
        case(b, L8, "Q4_K_M", 8192, ngl=16),
        case(b, L8, "Q4_K_M", 8192, ngl=32),
        case(b, L8, "Q4_K_M", 8192, ub=2048),
        case(b, L8, "Q4_K_M", 8192, slots=4, tool="server"),
        # Ollama 0.32.15's llama-server arguments on a 24 GB card (32k context, batch 1024) and on
        # a card under 23 GiB (4k context, batch 512): flash attention auto, no -ngl, -b = -ub.
        case(b, L8, "Q4_K_M", 32768, fa="auto", ub=1024, b=1024, tool="server", ollama=True),
        case(b, L8, "Q4_K_M", 4096, fa="auto", ub=512, b=512, tool="server", ollama=True),
    ]
    n = "nemo"
    out += [
        case(n, NEMO, "Q4_K_M", 16384),
        case(n, NEMO, "Q4_K_M", 65536, kv="q8_0"),
        case(n, NEMO, "Q4_K_M", 8192, fa=False, ub=2048),
    ]
    m = "moe"
    out += [
        case(m, MOE, "Q8_0", 8192, ncmoe=48),
        case(m, MOE, "Q8_0", 32768, ncmoe=24),
        case(m, MOE, "Q8_0", 8192),
    ]
    # Held out: never used to fit the engine. Fresh runs of the acceptance cases (Llama 3.1 8B
    # Q4_K_M at 8k, 32k and 128k, with llama.cpp's defaults and as Ollama starts it), compared with
    # the calculator's answers by tests/tests/llamacpp.rs. Ollama's -b/-ub for each context come
    # from its source (server/sched.go at v0.32.15: 1024 over 4096 tokens, 2048 over 32768).
    h = "heldout"
    for ctx in [8192, 32768, 131072]:
        out.append(case(h, L8, "Q4_K_M", ctx, fa="auto", tag="fresh"))
    for ctx, batch in [(8192, 1024), (32768, 1024), (131072, 2048)]:
        out.append(case(h, L8, "Q4_K_M", ctx, fa="auto", ub=batch, b=batch, tool="server", ollama=True, tag="fresh"))
    # The first held-out runs found the attention mask missing under the MLP's working set (Ollama
    # at 128k, -ub 2048: 317 MiB under). After the fix, a second set where that sum decides the
    # compute buffer, never run before: long contexts with a large micro-batch and few logits rows.
    h = "heldout2"
    out += [
        case(h, L8, "Q4_K_M", 65536, fa="auto", ub=2048, b=2048, tool="server", ollama=True, tag="check"),
        case(h, L8, "Q6_K", 65536, ub=2048, tool="server", tag="check"),
        case(h, L1, "Q8_0", 65536, ub=1024, slots=2, tool="server", tag="check"),
        case(h, NEMO, "Q4_K_M", 131072, kv="q8_0", ub=2048, tool="server", tag="check"),
    ]
    # Several GPUs: llama.cpp's layer split over virtual CUDA devices (GGML_CUDA_DEVICES=N
    # emulates N devices on one GPU, each reporting its share of the memory), checked per device
    # against llama.cpp's own --fit-print breakdown. One physical GPU holds every device, so the
    # NVML peak is the sum over devices with one CUDA context, not a per-GPU figure.
    d = "split"
    out += [
        case(d, L8, "Q4_K_M", 8192, devices=2),
        case(d, L8, "Q4_K_M", 8192, devices=2, ts=[3, 1]),
        case(d, L8, "Q4_K_M", 8192, devices=2, ts=[1, 3], ngl=20),
        case(d, L8, "Q4_K_M", 32768, devices=3, ts=[2, 1, 1]),
        case(d, L8, "Q4_K_M", 8192, devices=2, ts=[1, 1], slots=4, tool="server"),
        case(d, L8, "Q4_K_M", 16384, devices=2, ts=[5, 3], fa=False),
        case(d, L1, "Q8_0", 16384, devices=2, ts=[1, 1]),
        case(d, L1, "Q8_0", 16384, devices=4, ts=[1, 2, 3, 4], ub=2048),
        case(d, G2, "Q4_K_M", 8192, devices=2, ts=[1, 2]),
        case(d, NEMO, "Q4_K_M", 16384, devices=2, ts=[2, 1]),
    ]
    return out


def env_of(c):
    """The environment of a case's llama.cpp processes: virtual devices for the split cases."""
    e = dict(os.environ)
    if c["devices"] > 1:
        e["GGML_CUDA_DEVICES"] = str(c["devices"])
    return e


# --------------------------------------------------------------------------------------------
# NVML: the device's used memory, sampled in a thread.
# --------------------------------------------------------------------------------------------


class Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Nvml:
    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        assert self.lib.nvmlInit_v2() == 0
        self.dev = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.dev)) == 0
        buf = ctypes.create_string_buffer(96)
        self.lib.nvmlSystemGetDriverVersion(buf, 96)
        self.driver = buf.value.decode()
        self.lib.nvmlDeviceGetName(self.dev, buf, 96)
        self.name = buf.value.decode()

    def used(self):
        m = Memory()
        assert self.lib.nvmlDeviceGetMemoryInfo(self.dev, ctypes.byref(m)) == 0
        return m.used, m.total


class Sampler(threading.Thread):
    def __init__(self, nvml):
        super().__init__(daemon=True)
        self.nvml, self.stop, self.peak, self.n = nvml, threading.Event(), 0, 0

    def run(self):
        while not self.stop.is_set():
            u, _ = self.nvml.used()
            self.peak = max(self.peak, u)
            self.n += 1
            time.sleep(0.002)


# --------------------------------------------------------------------------------------------
# Model files.
# --------------------------------------------------------------------------------------------


def model_file(args, c, made):
    """The quantized file for a case, made once (the F16 source is kept until the model's last case)."""
    name = f"{c['model']}-{c['weights']}.gguf"
    path = os.path.join(args.models, name)
    if os.path.exists(path):
        return path
    s = write_gguf.spec(c["model"])
    gguf_py = os.path.join(args.src, "gguf-py")
    if c["weights"] == "Q8_0" and c["model"] == "qwen3-30b-a3b":
        # The converter's own --outtype q8_0 (an F16 file of this model is 61 GB).
        t = time.time()
        write_gguf.write(s, path, "q8_0", gguf_py)
        made[name] = {"how": "write_gguf.py --outtype q8_0 (the converter's q8_0 layout)", "seconds": round(time.time() - t, 1)}
    else:
        src = os.path.join(args.models, f"{c['model']}-F16.gguf")
        if not os.path.exists(src):
            write_gguf.write(s, src, "f16", gguf_py)
        t = time.time()
        r = subprocess.run([os.path.join(args.bin, "llama-quantize"), src, path, c["weights"], str(os.cpu_count())],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"llama-quantize failed: {r.stderr[-2000:]}")
        made[name] = {"how": f"llama-quantize F16 → {c['weights']}", "seconds": round(time.time() - t, 1)}
    describe_file(args, path, name, made[name])
    return path


def describe_file(args, path, name, how):
    sys.path.insert(0, os.path.join(args.src, "gguf-py"))
    import gguf
    r = gguf.GGUFReader(path)
    ts = [[t.name, t.tensor_type.name, int(t.n_bytes)] for t in r.tensors]
    rec = {"file": name, "bytes": os.path.getsize(path), "tensor_bytes": sum(t[2] for t in ts), "tensors": ts, **how}
    with open(args.files, "a") as f:
        f.write(json.dumps(rec) + "\n")


def drop_sources(args, done_model):
    for f in os.listdir(args.models):
        if f.startswith(done_model + "-"):
            os.remove(os.path.join(args.models, f))


# --------------------------------------------------------------------------------------------
# Runs.
# --------------------------------------------------------------------------------------------

def common_args(c, path):
    fa = {True: "on", False: "off", "auto": "auto"}[c["fa"]]
    a = ["-m", path, "-c", str(c["context"] * c["slots"]), "-fa", fa,
         "-ctk", c["kv"], "-ctv", c["kv"], "-ub", str(c["ub"]), "-b", str(max(c["b"], c["ub"]))]
    if c["ts"]:
        a += ["-ts", ",".join(str(x) for x in c["ts"])]
    if c["ollama"]:
        # What Ollama passes (llm/llama_server.go at v0.32.15): no -ngl, no threads, context shift.
        return a + ["--context-shift", "--keep", "4"]
    a += ["-ngl", str(c["ngl"]) if c["ngl"] is not None else "999", "-t", "16"]
    if c["ncmoe"] is not None:
        a += ["--n-cpu-moe", str(c["ncmoe"])]
    if c["swa_full"]:
        a += ["--swa-full"]
    return a


def prompt_text(chars, seed):
    import random
    r = random.Random(seed)
    letters = "cdefghijklmnopqrstuvwxyz"  # no merge of the test tokenizer applies to these
    words = []
    n = 0
    while n < chars:
        w = "".join(r.choice(letters) for _ in range(r.randint(2, 8)))
        words.append(w)
        n += len(w) + 1
    return " ".join(words)[:chars]


def fit_print(args, c, path):
    # llama-fit-params takes the common arguments, not the server's own (Ollama's --context-shift).
    a = common_args(c, path)
    if "--context-shift" in a:
        a = a[:a.index("--context-shift")]
    r = subprocess.run([os.path.join(args.bin, "llama-fit-params")] + a + ["--fit-print", "on"],
                       capture_output=True, text=True, timeout=300, env=env_of(c))
    rows = {}
    for line in r.stdout.splitlines():
        p = line.split()
        if len(p) == 4 and p[1].isdigit():
            rows[p[0]] = {"model_mib": int(p[1]), "context_mib": int(p[2]), "compute_mib": int(p[3])}
    return rows or {"error": (r.stdout + r.stderr)[-1500:]}


def run_completion(args, c, path, nvml):
    chars = c["context"] - N_PREDICT - 48
    with open(os.path.join(args.models, "prompt.txt"), "w") as f:
        f.write(prompt_text(chars, 1))
    cmd = [os.path.join(args.bin, "llama-completion")] + common_args(c, path) + [
        "-f", os.path.join(args.models, "prompt.txt"), "-n", str(N_PREDICT), "-no-cnv", "--no-display-prompt",
        "--temp", "0", "--perf"]
    s = Sampler(nvml)
    s.start()
    t = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout, env=env_of(c))
    s.stop.set()
    s.join()
    log = r.stdout + r.stderr
    m = re.search(r"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens", log)
    return dict(ok=r.returncode == 0, rc=r.returncode, seconds=round(time.time() - t, 2), peak=s.peak, samples=s.n,
                prompt_tokens=int(m.group(1)) if m else None, log=log)


def run_server(args, c, path, nvml):
    port = 18080
    cmd = [os.path.join(args.bin, "llama-server")] + common_args(c, path) + ["-np", str(c["slots"]), "--port", str(port), "--host", "127.0.0.1"]
    logf = open(os.path.join(args.models, "server.log"), "w")
    s = Sampler(nvml)
    s.start()
    t = time.time()
    p = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env_of(c))
    ok, tokens = False, []
    try:
        for _ in range(600):
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).status == 200:
                    ok = True
                    break
            except Exception:
                time.sleep(0.2)
        if ok:
            def one(i):
                body = json.dumps({"prompt": prompt_text(c["context"] - N_PREDICT - 48, 10 + i), "n_predict": N_PREDICT,
                                   "temperature": 0, "cache_prompt": False}).encode()
                req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=body, headers={"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=args.case_timeout) as resp:
                    tokens.append(json.load(resp).get("tokens_evaluated"))
            th = [threading.Thread(target=one, args=(i,)) for i in range(c["slots"])]
            for x in th:
                x.start()
            for x in th:
                x.join()
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
        s.stop.set()
        s.join()
        logf.close()
    with open(os.path.join(args.models, "server.log")) as f:
        log = f.read()
    ok = ok and len([x for x in tokens if x]) == c["slots"]
    return dict(ok=ok, rc=p.returncode, seconds=round(time.time() - t, 2), peak=s.peak, samples=s.n,
                prompt_tokens=tokens, log=log)


def workload(c):
    model = c["model"]
    if os.path.exists(os.path.join(write_gguf.CONFIGS, model + ".json")):
        with open(os.path.join(write_gguf.CONFIGS, model + ".json")) as f:
            model = {"hf_config": json.load(f), "name": model.split("__")[-1]}
    w = {"kind": "llm-inference", "model": model, "weights": c["weights"], "kv_cache": {"f16": "fp16"}.get(c["kv"], c["kv"]), "context": c["context"],
         "batch": c["slots"], "engine": "ollama" if c["ollama"] else "llama.cpp"}
    # A held-out workload is what a calculator user enters: llama.cpp's defaults (flash attention
    # auto, -ub 512) and Ollama's own batch are left to the engine; calibration runs record the
    # value passed.
    if not c["tag"] or (not c["ollama"] and c["ub"] != 512):
        w["ubatch"] = c["ub"]
    if c["fa"] != "auto":
        w["flash_attention"] = c["fa"]
    if c["ngl"] is not None:
        w["gpu_layers"] = c["ngl"]
    if c["ncmoe"] is not None:
        w["cpu_moe_layers"] = c["ncmoe"]
    if c["swa_full"]:
        w["swa_full"] = True
    if c["tool"] == "server":
        w["server"] = True
    if c["devices"] > 1:
        w["gpus"] = c["devices"]
        if c["ts"]:
            w["tensor_split"] = c["ts"]
    return w


def environment(nvml):
    cuda = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    return {"gpu": nvml.name, "gpu_total_bytes": nvml.used()[1], "driver": nvml.driver, "llama_cpp": COMMIT,
            "nvcc": cuda[0] if cuda else None}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--list", action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--only", action="append", default=[])
    p.add_argument("--bin", default="/tmp/llama-build/bin")
    p.add_argument("--src", default=os.path.join(ROOT, "target", "llama-src"))
    p.add_argument("--models", default="/dev/shm/models")
    p.add_argument("--out", default="llamacpp.jsonl")
    p.add_argument("--files", default="files.jsonl")
    p.add_argument("--case-timeout", type=int, default=240)
    p.add_argument("--deadline", type=float, default=0, help="stop starting cases after this many seconds")
    a = p.parse_args()
    todo = [c for c in cases() if (not a.group and not a.only) or c["group"] in a.group or c["id"] in a.only]
    if a.list:
        for c in todo:
            print(c["group"], c["id"])
        return
    os.makedirs(a.models, exist_ok=True)
    nvml = Nvml()
    env = environment(nvml)
    start = time.time()
    made = {}
    for i, c in enumerate(todo):
        if a.deadline and time.time() - start > a.deadline:
            print(f"deadline: stopped before {c['id']}", flush=True)
            break
        rec = {"id": c["id"], "workload": workload(c), "tool": c["tool"], "env": env}
        try:
            path = model_file(a, c, made)
            rec["file"] = os.path.basename(path)
            rec["file_bytes"] = os.path.getsize(path)
            rec["fit_print"] = fit_print(a, c, path)
            time.sleep(0.5)
            idle, _ = nvml.used()
            r = (run_server if c["tool"] == "server" else run_completion)(a, c, path, nvml)
            log = r.pop("log")
            rec.update(r)
            rec["idle_used"] = idle
            rec["peak_minus_idle"] = r["peak"] - idle
            rec["args"] = common_args(c, os.path.basename(path))
            if c["devices"] > 1:
                # llama.cpp's own per-device lines: buffers allocated, the memory breakdown at exit.
                rec["log_devices"] = [x for x in log.splitlines() if re.search(r"CUDA\d|pipeline parallel", x)][-60:]
            if not r["ok"]:
                rec["log_tail"] = log[-3000:]
        except Exception as e:  # one broken case must not stop the rest
            rec.update(ok=False, error=repr(e)[-2000:])
        with open(a.out, "a") as f:
            f.write(json.dumps(rec) + "\n")
        print(f"{time.time() - start:6.0f}s {c['id']}: ok={rec.get('ok')} peak-idle={rec.get('peak_minus_idle', 0) / 2**20:.0f} MiB "
              f"prompt={rec.get('prompt_tokens')} fit={rec.get('fit_print', {}).get('CUDA0')}", flush=True)
        nxt = todo[i + 1]["model"] if i + 1 < len(todo) else None
        if nxt != c["model"]:
            drop_sources(a, c["model"])
    shutil.rmtree(a.models, ignore_errors=True)


if __name__ == "__main__":
    main()
