#!/usr/bin/env python3
"""Reference measurements for Headroom's fit engine.

Builds each model from its architecture values with random weights (memory is decided by shapes,
so nothing is downloaded), runs what a user runs (transformers `generate`, a training step with a
real optimizer step, one denoiser step, a VAE decode) and records PyTorch's peak allocated and
reserved bytes plus what the device reports as used.

    python3 measure.py --list                 # the cases
    python3 measure.py --group llm-llama-3.1-8b --out results.jsonl
    python3 measure.py --all --out results.jsonl [--skip-done]

On the lent H200 (no network) diffusers and peft travel as wheels: here
`python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp
--platform manylinux2014_x86_64 --platform any -d .whl diffusers peft`, there
`python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site`.
The committed results were taken that way (torch 2.11.0+cu130, transformers 5.17.0, diffusers
0.42.1, peft 0.21.2, driver 580.159.04).

Each group runs in its own process (one model built once, several cases); between cases the
allocator cache is emptied and the peak counters reset. Every case is written as one JSON line as
soon as it finishes, with the workload (in `dataset fit` input form), the measurement and the
environment.
"""

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import time
import tomllib
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CATALOG = os.path.join(ROOT, "dataset", "data", "catalog", "llms.toml")
CONFIGS = os.path.join(HERE, "configs")

# --------------------------------------------------------------------------------------------
# Cases. `workload` is exactly what `dataset fit` accepts; the harness reads the same fields.
# --------------------------------------------------------------------------------------------

GEN_TOKENS = 64  # tokens generated in every generate case; context = prompt + generated


def llm_cases():
    cases = []
    shapes = {
        "llama-3.2-1b": [(1024, 1), (8192, 1), (32768, 1), (65536, 1), (1024, 8), (8192, 8)],
        "llama-3.1-8b": [(1024, 1), (8192, 1), (32768, 1), (65536, 1), (1024, 8), (8192, 8)],
        "qwen3-8b": [(1024, 1), (8192, 1), (32768, 1), (1024, 8), (8192, 8)],
        "mistral-7b-v0.3": [(1024, 1), (16384, 1), (4096, 8)],
        "qwen3-30b-a3b": [(1024, 1), (8192, 1), (32768, 1), (4096, 8)],
    }
    for model, runs in shapes.items():
        for context, batch in runs:
            cases.append({
                "id": f"gen-{model}-ctx{context}-b{batch}",
                "group": f"llm-{model}",
                "run": "generate",
                "workload": {"kind": "llm-inference", "model": model, "weights": "bf16", "kv_cache": "bf16",
                             "context": context, "batch": batch, "engine": "transformers"},
            })
    # A plain forward that returns the logits of every position (what a perplexity run does).
    for model, context in [("llama-3.2-1b", 4096), ("llama-3.2-1b", 16384), ("llama-3.1-8b", 8192)]:
        cases.append({
            "id": f"forward-{model}-ctx{context}",
            "group": f"llm-{model}",
            "run": "forward-all-logits",
            "workload": {"kind": "llm-inference", "model": model, "weights": "bf16", "kv_cache": "bf16",
                         "context": context, "batch": 1, "engine": "transformers", "all_logits": True},
        })
    return cases


# Models outside the catalog, built from their published config.json (configs/llm/*.json, sources
# in configs/llm/SOURCES.md): the workload carries the config itself, as `dataset fit` takes it.
HF_RUNS = [
    # config file, name, [(context, batch)]
    ("Qwen__Qwen2.5-0.5B.json", "Qwen2.5-0.5B", [(4096, 1), (32768, 1), (4096, 8)]),
    ("google__gemma-3-1b-it.json", "gemma-3-1b-it", [(1024, 1), (16384, 1), (32768, 1), (4096, 4)]),
    ("microsoft__Phi-3-mini-4k-instruct.json", "Phi-3-mini-4k-instruct", [(4096, 1), (2048, 4)]),
    ("mistralai__Mistral-7B-v0.1.json", "Mistral-7B-v0.1", [(2048, 1), (16384, 1)]),
    ("google__gemma-2-2b-it.json", "gemma-2-2b-it", [(8192, 1), (4096, 4)]),
    ("bigcode__starcoder2-7b.json", "starcoder2-7b", [(8192, 1)]),
    ("HuggingFaceTB__SmolLM2-135M.json", "SmolLM2-135M", [(8192, 1), (2048, 16)]),
    ("moonshotai__Moonlight-16B-A3B.json", "Moonlight-16B-A3B", [(1024, 1), (8192, 1)]),
    ("CohereForAI__c4ai-command-r-v01.json", "c4ai-command-r-v01", [(2048, 1), (8192, 1)]),
    ("Qwen__Qwen2-57B-A14B.json", "Qwen2-57B-A14B", [(2048, 1)]),
]


def hf_model(config_file, name):
    with open(os.path.join(CONFIGS, "llm", config_file)) as f:
        return {"hf_config": json.load(f), "name": name}


def hf_cases():
    cases = []
    for config_file, name, runs in HF_RUNS:
        slug = config_file.removesuffix(".json")
        for context, batch in runs:
            cases.append({
                "id": f"gen-{slug}-ctx{context}-b{batch}",
                "group": f"hf-{slug}",
                "run": "generate",
                "workload": {"kind": "llm-inference", "model": hf_model(config_file, name), "weights": "bf16",
                             "kv_cache": "bf16", "context": context, "batch": batch, "engine": "transformers"},
            })
    return cases


def training_cases():
    cases = []
    runs = [
        # model, method, precision, optimizer, seq, batch, checkpointing
        ("llama-3.2-1b", "full", "mixed-bf16", "adamw", 2048, 1, False),
        ("llama-3.2-1b", "full", "mixed-bf16", "adamw", 2048, 4, False),
        ("llama-3.2-1b", "full", "mixed-bf16", "adamw", 2048, 4, True),
        ("llama-3.2-1b", "full", "bf16", "adamw", 2048, 1, False),
        ("llama-3.2-1b", "full", "bf16", "adamw", 2048, 1, True),
        ("llama-3.2-1b", "full", "bf16", "adamw", 4096, 2, True),
        ("llama-3.2-1b", "full", "bf16", "sgd", 2048, 1, False),
        ("llama-3.2-1b", "full", "fp32", "adamw", 1024, 1, False),
        ("llama-3.2-1b", "lora", "bf16", "adamw", 2048, 1, False),
        ("llama-3.2-1b", "lora", "bf16", "adamw", 2048, 4, True),
        ("llama-3.1-8b", "lora", "bf16", "adamw", 2048, 1, False),
        ("llama-3.1-8b", "lora", "bf16", "adamw", 2048, 1, True),
        ("llama-3.1-8b", "lora", "bf16", "adamw", 4096, 2, True),
        ("llama-3.2-3b", "full", "bf16", "adamw", 2048, 1, False),
        ("llama-3.2-3b", "full", "bf16", "adamw", 2048, 2, True),
        ("llama-3.2-3b", "lora", "bf16", "adamw", 4096, 1, False),
        ("qwen3-8b", "full", "bf16", "adamw", 1024, 1, False),
        ("qwen3-8b", "full", "bf16", "adamw", 1024, 1, True),
    ]
    # LoRA on the attention projections only, and PEFT's Llama default (q_proj, v_proj).
    targeted = [
        ("llama-3.2-1b", "attention", 2048, 1, False),
        ("llama-3.2-1b", "attention", 2048, 4, True),
        ("llama-3.2-1b", ["q_proj", "v_proj"], 2048, 1, False),
        ("llama-3.2-1b", ["q_proj", "v_proj"], 4096, 2, True),
        ("llama-3.1-8b", "attention", 2048, 1, False),
        ("llama-3.1-8b", "attention", 4096, 1, True),
        ("llama-3.1-8b", ["q_proj", "v_proj"], 2048, 2, False),
    ]
    for model, method, precision, optimizer, seq, batch, gc_on in runs:
        cid = f"train-{model}-{method}-{precision}-{optimizer}-s{seq}-b{batch}" + ("-gc" if gc_on else "")
        w = {"kind": "training", "model": model, "method": method, "precision": precision,
             "optimizer": optimizer, "seq": seq, "batch": batch, "gradient_checkpointing": gc_on}
        if method == "lora":
            w["lora_rank"] = 16
        cases.append({"id": cid, "group": f"train-{model}-{method}-{precision}-{optimizer}", "run": "train-step",
                      "workload": w})
    for model, targets, seq, batch, gc_on in targeted:
        tname = targets if isinstance(targets, str) else "-".join(t.removesuffix("_proj") for t in targets)
        cid = f"train-{model}-lora-{tname}-bf16-adamw-s{seq}-b{batch}" + ("-gc" if gc_on else "")
        w = {"kind": "training", "model": model, "method": "lora", "precision": "bf16", "optimizer": "adamw",
             "seq": seq, "batch": batch, "gradient_checkpointing": gc_on, "lora_rank": 16, "lora_targets": targets}
        cases.append({"id": cid, "group": f"train-{model}-lora-{tname}", "run": "train-step", "workload": w})
    return cases


def diffusion_cases():
    cases = []

    def add(cid, group, run, **w):
        w = {"kind": "diffusion", **w}
        cases.append({"id": cid, "group": group, "run": run, "workload": w})

    for res, batch in [(512, 1), (512, 4), (768, 1)]:
        add(f"sd15-unet-{res}-b{batch}", "diff-sd15", "denoiser-step", model="sd-1.5", precision="fp16",
            width=res, height=res, batch=batch, cfg=True, component="denoiser")
    add("sd15-vae-decode-512-fp16", "diff-sd15-vae", "vae-decode", model="sd-1.5", precision="fp16",
        width=512, height=512, batch=1, component="vae-decode")
    for res, batch in [(1024, 1), (1024, 2), (768, 1)]:
        add(f"sdxl-unet-{res}-b{batch}", "diff-sdxl", "denoiser-step", model="sdxl", precision="fp16",
            width=res, height=res, batch=batch, cfg=True, component="denoiser")
    add("sdxl-vae-decode-1024-fp16", "diff-sdxl-vae16", "vae-decode", model="sdxl", precision="fp16",
        width=1024, height=1024, batch=1, component="vae-decode")
    add("sdxl-vae-decode-1024-fp32", "diff-sdxl-vae32", "vae-decode", model="sdxl", precision="fp32",
        width=1024, height=1024, batch=1, component="vae-decode")
    for res in [512, 1024, 1536]:
        add(f"flux-dev-transformer-{res}", "diff-flux", "denoiser-step", model="flux.1-dev", precision="bf16",
            width=res, height=res, batch=1, cfg=False, component="denoiser")
    # True CFG (a negative prompt and true_cfg_scale > 1): two passes one after the other.
    add("flux-dev-transformer-1024-true-cfg", "diff-flux", "denoiser-step", model="flux.1-dev", precision="bf16",
        width=1024, height=1024, batch=1, cfg=True, component="denoiser")
    add("flux-vae-decode-1024-bf16", "diff-flux-vae", "vae-decode", model="flux.1-dev", precision="bf16",
        width=1024, height=1024, batch=1, component="vae-decode")
    for frames in [49, 81]:
        add(f"wan21-1.3b-transformer-480p-f{frames}", "diff-wan13", "denoiser-step", model="wan2.1-t2v-1.3b",
            precision="bf16", width=832, height=480, frames=frames, batch=1, cfg=False, component="denoiser")
    # Guidance as the Wan pipeline runs it: two passes one after the other.
    add("wan21-1.3b-transformer-480p-f81-cfg", "diff-wan13", "denoiser-step", model="wan2.1-t2v-1.3b",
        precision="bf16", width=832, height=480, frames=81, batch=1, cfg=True, component="denoiser")
    add("sd35-large-transformer-1024", "diff-sd35", "denoiser-step", model="sd-3.5-large", precision="bf16",
        width=1024, height=1024, batch=1, cfg=True, component="denoiser")
    add("hunyuanvideo-transformer-544x960-f61", "diff-hunyuan", "denoiser-step", model="hunyuanvideo",
        precision="bf16", width=960, height=544, frames=61, batch=1, cfg=False, component="denoiser")
    add("wan21-vae-decode-480p-f49", "diff-wan-vae", "vae-decode", model="wan2.1-t2v-1.3b", precision="bf16",
        width=832, height=480, frames=49, batch=1, component="vae-decode")
    add("t5-xxl-encoder-512", "diff-t5", "text-encode", model="flux.1-dev", precision="bf16",
        width=1024, height=1024, batch=1, component="text-encoder")
    return cases


def all_cases():
    return llm_cases() + hf_cases() + training_cases() + diffusion_cases()


# --------------------------------------------------------------------------------------------
# Environment and memory readings
# --------------------------------------------------------------------------------------------

def environment(torch):
    env = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "gpu_total_bytes": torch.cuda.get_device_properties(0).total_memory,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
    }
    for mod in ("transformers", "diffusers", "peft", "accelerate"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception:  # not installed
            env[mod] = None
    try:
        env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception:
        env["driver"] = None
    return env


def device_used(torch):
    free, total = torch.cuda.mem_get_info()
    return total - free


# --------------------------------------------------------------------------------------------
# Model builders (random weights from architecture values)
# --------------------------------------------------------------------------------------------

def llm_entry(model_id):
    with open(CATALOG, "rb") as f:
        for m in tomllib.load(f)["llm"]:
            if m["id"] == model_id:
                return m
    raise SystemExit(f"no LLM {model_id} in {CATALOG}")


def hf_config(model_id):
    import transformers
    m = llm_entry(model_id)
    common = dict(vocab_size=m["vocab"], hidden_size=m["hidden"], intermediate_size=m["intermediate"],
                  num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
                  num_key_value_heads=m["kv_heads"], max_position_embeddings=max(m["max_context"], 65536 + 128),
                  tie_word_embeddings=m["tied_embeddings"])
    if model_id.startswith("llama"):
        return transformers.LlamaConfig(head_dim=m["head_dim"], rope_theta=500000.0, **common)
    if model_id.startswith("mistral"):
        return transformers.MistralConfig(head_dim=m["head_dim"], sliding_window=None, **common)
    if model_id.startswith("qwen3") and m.get("experts"):
        return transformers.Qwen3MoeConfig(head_dim=m["head_dim"], num_experts=m["experts"],
                                           num_experts_per_tok=m["experts_per_token"],
                                           moe_intermediate_size=m["moe_intermediate"], **common)
    if model_id.startswith("qwen3"):
        return transformers.Qwen3Config(head_dim=m["head_dim"], **common)
    raise SystemExit(f"no transformers config mapping for {model_id}")


def dtype_of(torch, name):
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
            "mixed-bf16": torch.float32}[name]


def config_from_json(cfg):
    import transformers
    cfg = dict(cfg)
    model_type = cfg.pop("model_type")
    for k in [k for k in cfg if k.startswith("_") or k in ("architectures", "transformers_version", "auto_map",
                                                           "quantization_config", "torch_dtype", "dtype")]:
        cfg.pop(k)
    return transformers.AutoConfig.for_model(model_type, **cfg)


def build_llm(torch, model, dtype):
    import transformers
    cfg = config_from_json(model["hf_config"]) if isinstance(model, dict) else hf_config(model)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="sdpa")
    model.eval()
    return model


def diffusers_config(name):
    with open(os.path.join(CONFIGS, name)) as f:
        return json.load(f)


def build_diffusion(torch, case):
    import diffusers
    w = case["workload"]
    dtype = dtype_of(torch, w["precision"])
    model = w["model"]
    comp = w["component"]
    table = {
        ("sd-1.5", "denoiser"): (diffusers.UNet2DConditionModel, "sd15_unet.json"),
        ("sd-1.5", "vae-decode"): (diffusers.AutoencoderKL, "sd15_vae.json"),
        ("sdxl", "denoiser"): (diffusers.UNet2DConditionModel, "sdxl_unet.json"),
        ("sdxl", "vae-decode"): (diffusers.AutoencoderKL, "sdxl_vae.json"),
        ("flux.1-dev", "denoiser"): (diffusers.FluxTransformer2DModel, "flux_dev_transformer.json"),
        ("flux.1-dev", "vae-decode"): (diffusers.AutoencoderKL, "flux_vae.json"),
        ("wan2.1-t2v-1.3b", "denoiser"): (diffusers.WanTransformer3DModel, "wan21_t2v_1_3b_transformer.json"),
        ("wan2.1-t2v-1.3b", "vae-decode"): (diffusers.AutoencoderKLWan, "wan21_vae.json"),
        ("sd-3.5-large", "denoiser"): (diffusers.SD3Transformer2DModel, "sd35_large_transformer.json"),
        ("hunyuanvideo", "denoiser"): (diffusers.HunyuanVideoTransformer3DModel, "hunyuanvideo_transformer.json"),
    }
    if comp == "text-encoder":
        import transformers
        # T5 v1.1 XXL encoder, as FLUX and SD3 use it (text_encoder_2 / text_encoder_3).
        cfg = transformers.T5Config(vocab_size=32128, d_model=4096, d_kv=64, d_ff=10240, num_layers=24,
                                    num_heads=64, feed_forward_proj="gated-gelu", is_encoder_decoder=False)
        with torch.device("cuda"):
            return transformers.T5EncoderModel(cfg).to(dtype).eval()
    cls, cfg_file = table[(model, comp)]
    cfg = {k: v for k, v in diffusers_config(cfg_file).items() if not k.startswith("_")}
    with torch.device("cuda"):
        m = cls.from_config(cfg)
    return m.to(dtype).eval()


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------

def run_generate(torch, model, w):
    prompt = w["context"] - GEN_TOKENS
    ids = torch.randint(100, 1000, (w["batch"], prompt), device="cuda")
    out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=GEN_TOKENS,
                         min_new_tokens=GEN_TOKENS, do_sample=False, pad_token_id=0)
    assert out.shape[1] == w["context"], out.shape
    return {"generated_tokens": GEN_TOKENS}


def run_forward(torch, model, w):
    ids = torch.randint(100, 1000, (w["batch"], w["context"]), device="cuda")
    with torch.no_grad():
        out = model(ids, use_cache=False)
    shape = list(out.logits.shape)
    dtype = str(out.logits.dtype)
    del out
    return {"logits_shape": shape, "logits_dtype": dtype}


def run_train(torch, model, w, state):
    prec = w["precision"]
    opt = state.get("optimizer")
    if opt is None:
        params = [p for p in model.parameters() if p.requires_grad]
        if w["optimizer"] == "adamw":
            opt = torch.optim.AdamW(params, lr=1e-5)
        elif w["optimizer"] == "sgd":
            opt = torch.optim.SGD(params, lr=1e-5, momentum=0.0)
        else:
            raise SystemExit(f"optimizer {w['optimizer']} not in the harness")
        state["optimizer"] = opt
    if w.get("gradient_checkpointing"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if w["method"] == "lora":
            model.enable_input_require_grads()
    else:
        model.gradient_checkpointing_disable()
    model.train()
    ids = torch.randint(100, 1000, (w["batch"], w["seq"]), device="cuda")
    steps = 2  # the optimizer states appear at the first step; the second shows the steady state
    phases = []
    overall = 0
    overall_r = 0

    def phase(step, name, fn):
        # Peak of one phase: the counters are reset at its start; the overall peak is kept aside.
        nonlocal overall, overall_r
        overall = max(overall, torch.cuda.max_memory_allocated())
        overall_r = max(overall_r, torch.cuda.max_memory_reserved())
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        out = fn()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        overall = max(overall, peak)
        overall_r = max(overall_r, torch.cuda.max_memory_reserved())
        phases.append({"step": step, "phase": name, "start": start, "peak": peak, "end": torch.cuda.memory_allocated()})
        return out

    for step in range(steps):
        def forward():
            if prec == "mixed-bf16":
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return model(input_ids=ids, labels=ids, use_cache=False).loss
            return model(input_ids=ids, labels=ids, use_cache=False).loss
        loss = phase(step, "forward", forward)
        phase(step, "backward", loss.backward)
        del loss
        phase(step, "step", opt.step)
        phase(step, "zero_grad", lambda: opt.zero_grad(set_to_none=True))
    state["overall_peak"] = overall
    state["overall_peak_reserved"] = overall_r
    return {"steps": steps, "phases": phases}
    return {"steps": steps}


def latent_hw(w, f=8):
    return w["height"] // f, w["width"] // f


# How diffusers 0.42.1 runs classifier-free guidance: the Stable Diffusion pipelines concatenate
# the conditional and unconditional latents into one batch (pipeline_stable_diffusion.py line
# 1037, pipeline_stable_diffusion_xl.py 1204, pipeline_stable_diffusion_3.py 1067); Wan calls the
# transformer twice, one pass after the other, and keeps the first prediction
# (pipeline_wan.py 620-638); FLUX and HunyuanVideo do the same for true CFG
# (pipeline_flux.py 913-929, pipeline_hunyuan_video.py 690-702).
SEQUENTIAL_GUIDANCE = ("wan2.1-t2v-1.3b", "flux.1-dev", "hunyuanvideo")


def run_denoiser(torch, model, w):
    dtype = next(model.parameters()).dtype
    name = w["model"]
    sequential = bool(w.get("cfg")) and name in SEQUENTIAL_GUIDANCE
    b = w["batch"] * (2 if w.get("cfg") and not sequential else 1)
    with torch.no_grad():
        if name in ("sd-1.5", "sdxl"):
            h, wd = latent_hw(w)
            lat = torch.randn(b, 4, h, wd, device="cuda", dtype=dtype)
            ctx_dim = 768 if name == "sd-1.5" else 2048
            enc = torch.randn(b, 77, ctx_dim, device="cuda", dtype=dtype)
            t = torch.full((b,), 500, device="cuda")
            kwargs = {}
            if name == "sdxl":
                kwargs["added_cond_kwargs"] = {"text_embeds": torch.randn(b, 1280, device="cuda", dtype=dtype),
                                               "time_ids": torch.randn(b, 6, device="cuda", dtype=dtype)}
            fwd = lambda: model(lat, t, encoder_hidden_states=enc, **kwargs).sample
        elif name == "flux.1-dev":
            h, wd = w["height"] // 16, w["width"] // 16
            seq = h * wd
            x = torch.randn(b, seq, 64, device="cuda", dtype=dtype)
            enc = torch.randn(b, 512, 4096, device="cuda", dtype=dtype)
            pooled = torch.randn(b, 768, device="cuda", dtype=dtype)
            img_ids = torch.zeros(seq, 3, device="cuda", dtype=dtype)
            txt_ids = torch.zeros(512, 3, device="cuda", dtype=dtype)
            t = torch.full((b,), 0.5, device="cuda", dtype=dtype)
            g = torch.full((b,), 3.5, device="cuda", dtype=dtype)
            fwd = lambda: model(hidden_states=x, encoder_hidden_states=enc, pooled_projections=pooled, timestep=t,
                               img_ids=img_ids, txt_ids=txt_ids, guidance=g).sample
        elif name == "sd-3.5-large":
            h, wd = latent_hw(w)
            x = torch.randn(b, 16, h, wd, device="cuda", dtype=dtype)
            enc = torch.randn(b, 333, 4096, device="cuda", dtype=dtype)
            pooled = torch.randn(b, 2048, device="cuda", dtype=dtype)
            t = torch.full((b,), 500, device="cuda")
            fwd = lambda: model(hidden_states=x, encoder_hidden_states=enc, pooled_projections=pooled, timestep=t).sample
        elif name == "hunyuanvideo":
            frames = (w["frames"] - 1) // 4 + 1
            h, wd = latent_hw(w)
            x = torch.randn(b, 16, frames, h, wd, device="cuda", dtype=dtype)
            enc = torch.randn(b, 256, 4096, device="cuda", dtype=dtype)
            mask = torch.ones(b, 256, device="cuda", dtype=torch.bool)
            pooled = torch.randn(b, 768, device="cuda", dtype=dtype)
            t = torch.full((b,), 500, device="cuda")
            g = torch.full((b,), 6000.0, device="cuda", dtype=dtype)
            fwd = lambda: model(hidden_states=x, timestep=t, encoder_hidden_states=enc, encoder_attention_mask=mask,
                               pooled_projections=pooled, guidance=g).sample
        elif name == "wan2.1-t2v-1.3b":
            frames = (w["frames"] - 1) // 4 + 1
            h, wd = latent_hw(w)
            x = torch.randn(b, 16, frames, h, wd, device="cuda", dtype=dtype)
            enc = torch.randn(b, 512, 4096, device="cuda", dtype=dtype)
            t = torch.full((b,), 500, device="cuda")
            fwd = lambda: model(hidden_states=x, timestep=t, encoder_hidden_states=enc).sample
        else:
            raise SystemExit(f"no denoiser run for {name}")
        out = fwd()
        if sequential:
            # The unconditional pass, then the guided prediction, as the pipeline computes it.
            uncond = fwd()
            out = uncond + 5.0 * (out - uncond)
            del uncond
    shape = list(out.shape)
    del out
    return {"output_shape": shape}


def run_vae_decode(torch, model, w):
    dtype = next(model.parameters()).dtype
    cfg = model.config
    ch = cfg["latent_channels"] if "latent_channels" in cfg else cfg["z_dim"]
    h, wd = latent_hw(w)
    with torch.no_grad():
        if "frames" in w:  # video VAE: (batch, channels, latent frames, h, w)
            z = torch.randn(w["batch"], ch, (w["frames"] - 1) // 4 + 1, h, wd, device="cuda", dtype=dtype)
        else:
            z = torch.randn(w["batch"], ch, h, wd, device="cuda", dtype=dtype)
        out = model.decode(z).sample
    shape = list(out.shape)
    del out
    return {"output_shape": shape}


def run_text_encode(torch, model, w):
    with torch.no_grad():
        ids = torch.randint(0, 32000, (w["batch"], 512), device="cuda")
        out = model(input_ids=ids).last_hidden_state
    shape = list(out.shape)
    del out
    return {"output_shape": shape}


def param_bytes(model):
    seen = set()
    total = 0
    for p in list(model.parameters()) + list(model.buffers()):
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        total += p.numel() * p.element_size()
    return total


def build_model(torch, first):
    """The model a group's cases run on, built from its first case's workload."""
    w0 = first["workload"]
    if w0["kind"] == "llm-inference":
        return build_llm(torch, w0["model"], dtype_of(torch, w0["weights"]))
    if w0["kind"] == "training":
        model = build_llm(torch, w0["model"], dtype_of(torch, w0["precision"]))
        model.config.use_cache = False
        if w0["method"] == "lora":
            import peft
            for p in model.parameters():
                p.requires_grad_(False)
            targets = w0.get("lora_targets", "all-linear")
            modules = {"all-linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                       "attention": ["q_proj", "k_proj", "v_proj", "o_proj"]}.get(targets, targets) \
                if isinstance(targets, str) else targets
            lcfg = peft.LoraConfig(r=w0["lora_rank"], lora_alpha=2 * w0["lora_rank"], lora_dropout=0.0,
                                   target_modules=modules)
            model = peft.get_peft_model(model, lcfg)
        return model
    return build_diffusion(torch, first)


def run_case(torch, model, case, state):
    """Runs one case on its group's model; returns the run's detail."""
    w = case["workload"]
    if case["run"] == "generate":
        return run_generate(torch, model, w)
    if case["run"] == "forward-all-logits":
        return run_forward(torch, model, w)
    if case["run"] == "train-step":
        return run_train(torch, model, w, state)
    if case["run"] == "denoiser-step":
        return run_denoiser(torch, model, w)
    if case["run"] == "vae-decode":
        return run_vae_decode(torch, model, w)
    if case["run"] == "text-encode":
        return run_text_encode(torch, model, w)
    raise SystemExit(f"unknown run {case['run']}")


def run_group(group, out_path):
    import torch
    cases = [c for c in all_cases() if c["group"] == group]
    if not cases:
        raise SystemExit(f"no group {group}")
    torch.cuda.init()
    torch.empty(1, device="cuda")  # creates the context
    used_after_context = device_used(torch)
    env = environment(torch)
    first = cases[0]
    t0 = time.time()
    state = {}
    model = build_model(torch, first)
    build_s = time.time() - t0
    weights = param_bytes(model)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    param_count = sum(p.numel() for p in model.parameters())  # tied weights are counted once
    for case in cases:
        w = case["workload"]
        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        before_alloc = torch.cuda.memory_allocated()
        before_reserved = torch.cuda.memory_reserved()
        rec = {"id": case["id"], "workload": w, "run": case["run"], "env": env,
               "build_seconds": round(build_s, 2), "param_bytes": weights, "trainable_params": trainable,
               "param_count": param_count,
               "device_used_after_context": used_after_context,
               "allocated_before": before_alloc, "reserved_before": before_reserved}
        t1 = time.time()
        try:
            rec["detail"] = run_case(torch, model, case, state)
            torch.cuda.synchronize()
            rec["ok"] = True
        except torch.OutOfMemoryError as e:
            rec["ok"] = False
            rec["error"] = "OutOfMemoryError: " + str(e).splitlines()[0]
        except Exception as e:  # a harness bug: recorded, the group goes on
            rec["ok"] = False
            rec["error"] = f"{type(e).__name__}: {e}"
            rec["traceback"] = traceback.format_exc()[-2000:]
        rec["seconds"] = round(time.time() - t1, 3)
        rec["peak_allocated"] = max(torch.cuda.max_memory_allocated(), state.pop("overall_peak", 0))
        rec["peak_reserved"] = max(torch.cuda.max_memory_reserved(), state.pop("overall_peak_reserved", 0))
        rec["device_used_at_end"] = device_used(torch)
        stats = torch.cuda.memory_stats()
        rec["num_alloc_retries"] = stats.get("num_alloc_retries", 0)
        with open(out_path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        status = "ok" if rec["ok"] else rec["error"][:120]
        print(f"{case['id']}: peak_allocated={rec['peak_allocated']/2**30:.3f} GiB "
              f"peak_reserved={rec['peak_reserved']/2**30:.3f} GiB {rec['seconds']}s {status}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--group")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--groups", help="comma-separated prefixes of groups to run (with --all)")
    ap.add_argument("--out", default="results.jsonl")
    ap.add_argument("--skip-done", action="store_true", help="skip groups whose cases are all in --out")
    ap.add_argument("--timeout", type=int, default=420, help="seconds per group")
    a = ap.parse_args()
    if a.list:
        for c in all_cases():
            print(c["group"], c["id"], json.dumps(c["workload"]))
        print(len(all_cases()), "cases")
        return
    if a.group:
        run_group(a.group, a.out)
        return
    if a.all:
        done = set()
        if a.skip_done and os.path.exists(a.out):
            with open(a.out) as f:
                done = {json.loads(l)["id"] for l in f if l.strip()}
        groups = []
        for c in all_cases():
            if c["group"] not in groups:
                groups.append(c["group"])
        if a.groups:
            prefixes = a.groups.split(",")
            groups = [g for g in groups if any(g.startswith(p) for p in prefixes)]
        for g in groups:
            ids = {c["id"] for c in all_cases() if c["group"] == g}
            if ids <= done:
                continue
            t = time.time()
            r = subprocess.run([sys.executable, __file__, "--group", g, "--out", a.out], timeout=a.timeout)
            print(f"== group {g}: exit {r.returncode} in {time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
