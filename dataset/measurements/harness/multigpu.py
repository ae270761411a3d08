#!/usr/bin/env python3
"""Data-parallel reference runs for Headroom's fit engine: what each GPU (each rank) holds.

The same training step as measure.py (random weights built from the catalog architecture,
transformers' Llama classes, two optimizer steps), with the model wrapped for data parallelism:

  ddp   torch.nn.parallel.DistributedDataParallel, default settings (gradient buckets that are a
        second copy of the gradients, gradient_as_bucket_view=False);
  fsdp  torch.distributed.fsdp.FullyShardedDataParallel, FULL_SHARD, one unit per decoder layer.
  fsdp-offload
        the same with CPUOffload(offload_params=True): parameters and gradients live in pinned host
        memory and the optimizer step runs on the CPU. Not in RUNS: in a world of one FSDP1 falls
        back to NO_SHARD and keeps the parameters on the GPU (Llama 3.2 1B: 5.95 GiB against
        3.65 GiB with FSDP2), which says nothing of several GPUs.
  fsdp2-offload
        torch.distributed.fsdp.fully_shard (FSDP2) on each decoder layer and then the root, with
        CPUOffloadPolicy (parameters, gradients and optimizer states on the CPU).
  zero1, zero2, zero3
        DeepSpeed's ZeRO stage 1, 2 or 3 (deepspeed.initialize with its default buckets; `bf16`
        enabled for a 16-bit precision, the client's torch AdamW), engine.backward and engine.step.
  zero2-offload, zero3-offload
        the same with offload_optimizer to the CPU (pinned), and for stage 3 offload_param too.
        The offloaded runs use torch's AdamW on the CPU, so their system RAM is not what
        DeepSpeedCPUAdam would take. EXPERIMENTS change a DeepSpeed default to test a mechanism;
        their lines go to ../experiments/.
        DeepSpeed comes from the Python registry: `pip download deepspeed==0.19.6` (source) and its
        dependencies as wheels into one folder, installed on the device with
        `pip install --no-index --find-links DIR --no-build-isolation deepspeed` (run-deepspeed.sh).

Offloading runs also record the host side: pinned bytes the CUDA host allocator holds and the
process's resident set (VmRSS now, VmHWM its peak) before the wrap and after the steps.

Each rank records its own torch.cuda.max_memory_allocated / max_memory_reserved; the line holds
every rank's figures and the workload in `dataset fit` form (`gpus`, `fsdp`). With as many GPUs
as ranks each rank has its own GPU and NCCL; with fewer (one GPU here) the ranks share it over
Gloo, which is enough for DDP: a rank's allocator counts only its own tensors, so its peak is what
that rank would hold on a GPU of its own. Gloo has no reduce-scatter, so FSDP runs only with one
rank per GPU (a world of one on one GPU goes through the same code path).

    python3 multigpu.py --list
    python3 multigpu.py --out ddp.jsonl [--only ID ...]
"""

import argparse
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import measure  # noqa: E402

# (mode, ranks, model, method, precision, seq, batch, gradient checkpointing)
# A world of one goes through the same code path with FSDP (the last run). DDP with one process
# still allocates its gradient buckets, which the engine's `gpus: 1` (no wrapper) does not model:
# Llama 3.2 1B, bf16, checkpointing, measured 13.88 GiB against 11.58 GiB without the wrapper.
RUNS = [
    ("ddp", 2, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("ddp", 2, "llama-3.2-1b", "full", "bf16", 2048, 1, False),
    ("ddp", 2, "llama-3.2-1b", "full", "mixed-bf16", 2048, 1, True),
    ("ddp", 2, "llama-3.2-1b", "lora", "bf16", 2048, 1, False),
    ("ddp", 2, "llama-3.2-3b", "full", "bf16", 2048, 1, True),
    ("fsdp", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("fsdp2-offload", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("fsdp2-offload", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, False),
    ("fsdp2-offload", 1, "llama-3.2-3b", "full", "bf16", 2048, 1, True),
    ("zero1", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("zero2", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("zero3", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("zero2-offload", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("zero3-offload", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True),
    ("zero2", 1, "llama-3.2-3b", "full", "bf16", 2048, 1, True),
    ("zero3-offload", 1, "qwen3-0.6b", "full", "bf16", 2048, 1, True),
    ("zero3-offload", 1, "llama-3.2-3b", "full", "bf16", 2048, 1, True),
]

# Experiments: a case as above with DeepSpeed settings other than the defaults the engine reads
# (a `zero_optimization` override). They test a mechanism, not the engine: `dataset accuracy`
# cannot read them, so their lines go to measurements/experiments/, not reference/.
EXPERIMENTS = [
    (("zero3-offload", 1, "llama-3.2-1b", "full", "bf16", 2048, 1, True), {"stage3_max_live_parameters": 100_000_000}),
]


def cases():
    out = []
    for run, extra in [(r, None) for r in RUNS] + EXPERIMENTS:
        mode, ranks, model, method, precision, seq, batch, gc_on = run
        w = {"kind": "training", "model": model, "method": method, "precision": precision, "optimizer": "adamw",
             "seq": seq, "batch": batch, "gradient_checkpointing": gc_on, "gpus": ranks}
        if method == "lora":
            w["lora_rank"] = 16
        if mode.startswith("fsdp"):
            w["fsdp"] = "full"
        if mode.startswith("zero"):
            w["zero"] = int(mode[4])
        if mode.endswith("offload"):
            w["cpu_offload"] = "optimizer" if mode == "zero2-offload" else "params"
        cid = f"{mode}{ranks}-{model}-{method}-{precision}-s{seq}-b{batch}" + ("-gc" if gc_on else "")
        case = {"id": cid, "mode": mode, "ranks": ranks, "workload": w}
        if extra:
            case["id"] += "-" + "-".join(f"{k}={v}" for k, v in extra.items())
            case["zero_optimization"] = extra
        out.append(case)
    return out


def rank_main(rank, case, port, result_path):
    import torch
    import torch.distributed as dist
    gpus = torch.cuda.device_count()
    shared = case["ranks"] > gpus
    device = 0 if shared else rank
    torch.cuda.set_device(device)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(device),
                      WORLD_SIZE=str(case["ranks"]))
    dist.init_process_group("gloo" if shared else "nccl", rank=rank, world_size=case["ranks"])
    torch.empty(1, device="cuda")
    w = case["workload"]
    rec = {"rank": rank, "device": device, "backend": dist.get_backend()}
    try:
        model = measure.build_model(torch, {"workload": {k: v for k, v in w.items() if k not in ("gpus", "fsdp", "cpu_offload", "zero")}})
        if w.get("gradient_checkpointing"):
            # Enabled before wrapping: the wrapper hides the transformers method.
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            if w["method"] == "lora":
                model.enable_input_require_grads()
        host_before = host(torch)
        optimizer = None
        if case["mode"] == "ddp":
            wrapped = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device])
        elif case["mode"].startswith("zero"):
            wrapped, optimizer = deepspeed_engine(torch, model, w, case.get("zero_optimization"))
            rec["deepspeed"] = __import__("deepspeed").__version__
        elif case["mode"] == "fsdp2-offload":
            from torch.distributed.fsdp import fully_shard, CPUOffloadPolicy
            from transformers.models.llama.modeling_llama import LlamaDecoderLayer
            from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer
            for m in model.modules():
                if isinstance(m, (LlamaDecoderLayer, Qwen2DecoderLayer)):
                    fully_shard(m, offload_policy=CPUOffloadPolicy())
            wrapped = fully_shard(model, offload_policy=CPUOffloadPolicy())
        else:
            import functools
            from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
            from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
            from transformers.models.llama.modeling_llama import LlamaDecoderLayer
            policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
            offload = None
            if case["mode"] == "fsdp-offload":
                from torch.distributed.fsdp import CPUOffload
                offload = CPUOffload(offload_params=True)
            wrapped = FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=device, cpu_offload=offload,
                                               sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        rec["allocated_before"] = torch.cuda.memory_allocated()
        detail = train(torch, wrapped, w, optimizer)
        torch.cuda.synchronize()
        rec.update(ok=True, peak_allocated=max(torch.cuda.max_memory_allocated(), detail.pop("overall")),
                   peak_reserved=torch.cuda.max_memory_reserved(), detail=detail,
                   host_before=host_before, host_after=host(torch))
    except torch.OutOfMemoryError as e:
        rec.update(ok=False, error="OutOfMemoryError: " + str(e).splitlines()[0])
    except Exception as e:  # recorded, the other cases go on
        rec.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
    with open(f"{result_path}.{rank}", "w") as f:
        json.dump(rec, f)
    dist.destroy_process_group()


def host(torch):
    """Host memory now: the CUDA host allocator's pinned bytes and the process's VmRSS/VmHWM."""
    out = {}
    try:
        stats = torch.cuda.memory.host_memory_stats()
        out["pinned_allocated"] = stats.get("allocated_bytes.current", stats.get("allocated_bytes", 0))
        out["pinned_reserved"] = stats.get("reserved_bytes.current", stats.get("reserved_bytes", 0))
        out["pinned_allocated_peak"] = stats.get("allocated_bytes.peak", 0)
    except Exception as e:  # older torch: no host allocator statistics
        out["pinned_error"] = str(e)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0].lower()] = int(line.split()[1]) * 1024
    return out


def deepspeed_engine(torch, model, w, extra=None):
    """The model under DeepSpeed ZeRO (stage `zero`, `extra` settings of an experiment), with its
    optimizer."""
    import deepspeed
    zc = {"stage": w["zero"], **(extra or {})}
    if w.get("cpu_offload") in ("optimizer", "params"):
        zc["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if w.get("cpu_offload") == "params":
        zc["offload_param"] = {"device": "cpu", "pin_memory": True}
    config = {"train_micro_batch_size_per_gpu": w["batch"], "gradient_accumulation_steps": 1, "zero_optimization": zc,
              "bf16": {"enabled": w["precision"] in ("bf16", "mixed-bf16")}, "fp16": {"enabled": w["precision"] == "fp16"},
              "zero_force_ds_cpu_optimizer": False, "steps_per_print": 10**9, "wall_clock_breakdown": False}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
    return engine, optimizer


def train(torch, model, w, engine_optimizer=None):
    """measure.run_train's two steps on a wrapped model (its peak per phase). A DeepSpeed engine
    (with `engine_optimizer`) runs its own backward and step (which also clears the gradients)."""
    ds = engine_optimizer is not None
    params = [p for p in model.parameters() if p.requires_grad]
    opt = engine_optimizer if ds else torch.optim.AdamW(params, lr=1e-5)
    model.train()
    ids = torch.randint(100, 1000, (w["batch"], w["seq"]), device="cuda")
    overall, phases = 0, []
    for step in range(2):
        for name in ["forward", "backward", "step", "zero_grad"]:
            overall = max(overall, torch.cuda.max_memory_allocated())
            torch.cuda.reset_peak_memory_stats()
            if name == "forward":
                if w["precision"] == "mixed-bf16":
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
                else:
                    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
            elif name == "backward":
                model.backward(loss) if ds else loss.backward()
                del loss
            elif name == "step":
                model.step() if ds else opt.step()
            elif not ds:
                opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            phases.append({"step": step, "phase": name, "peak": torch.cuda.max_memory_allocated()})
            overall = max(overall, torch.cuda.max_memory_allocated())
    return {"overall": overall, "phases": phases}


def run(case, out_path, port):
    import torch
    import torch.multiprocessing as mp
    tmp = f"/tmp/multigpu-{case['id']}"
    t = time.time()
    mp.spawn(rank_main, args=(case, port, tmp), nprocs=case["ranks"], join=True)
    ranks = []
    for r in range(case["ranks"]):
        with open(f"{tmp}.{r}") as f:
            ranks.append(json.load(f))
        os.remove(f"{tmp}.{r}")
    ok = all(r["ok"] for r in ranks)
    rec = {"id": case["id"], "workload": case["workload"], "mode": case["mode"], "env": measure.environment(torch),
           **({"zero_optimization": case["zero_optimization"]} if "zero_optimization" in case else {}),
           "gpus_visible": torch.cuda.device_count(), "ranks": ranks, "ok": ok, "seconds": round(time.time() - t, 2)}
    if ok:
        # The reference fields dataset accuracy reads: the largest rank's figures.
        rec["peak_allocated"] = max(r["peak_allocated"] for r in ranks)
        rec["peak_reserved"] = max(r["peak_reserved"] for r in ranks)
        rec["device_used_at_end"] = 0
    with open(out_path, "a") as f:
        f.write(json.dumps(rec) + "\n")
    print(f"{case['id']}: ok={ok} " + " ".join(
        f"rank{r['rank']}={r.get('peak_allocated', 0) / 2**30:.3f}GiB" if r["ok"] else f"rank{r['rank']}:{r['error'][:100]}"
        for r in ranks) + f" {rec['seconds']}s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--out", default="multigpu.jsonl")
    a = ap.parse_args()
    # Experiments run only when named: their lines belong in ../experiments/, not with the reference runs.
    todo = [c for c in cases() if c["id"] in a.only or (not a.only and "zero_optimization" not in c)]
    if a.list:  # every case, experiments included
        for c in [c for c in cases() if not a.only or c["id"] in a.only]:
            print(c["id"], json.dumps(c["workload"]))
        return
    for i, c in enumerate(todo):
        run(c, a.out, 29500 + i)


if __name__ == "__main__":
    main()
