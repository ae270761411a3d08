#!/usr/bin/env python3
"""Writes the diffusion-checkpoint fixtures of `headroom_core::modelfile::diffusion`.

Each fixture is the header of a real-sized checkpoint, written by an independent writer with the
tensor names and shapes the published files have:

* `flux1-dev-Q4_K_S.gguf.header`: FLUX.1 [dev] as city96's ComfyUI-GGUF pipeline makes it
  (city96/ComfyUI-GGUF at 795e45156ece99afbc3efef911e63fcb46e6a20d): `tools/convert.py` (its
  Aug 2024 version 8d1fbbc, which made the published FLUX files) keeps Black Forest Labs' tensor
  names, stores 1-D tensors and the weights of `img_in.`, `txt_in.`, `time_in.`, `vector_in.`,
  `guidance_in.` and `final_layer.` as F32 and every other weight as BF16; the patched
  `llama-quantize` (`tools/lcpp.patch`) then turns every 2-D weight outside those prefixes into
  Q4_K for `Q4_K_S` (its image-model rules upgrade no FLUX tensor) and writes
  `general.file_type = 14`. 780 tensors, 11 901 408 320 values (BFL's `flux/model.py`:
  19 double blocks, 38 single blocks, hidden 3072).
* `wan2.1-t2v-1.3b-Q8_0.gguf.header`: Wan 2.1 T2V 1.3B the same way (`ModelWan` in
  `tools/convert.py`, the Wan rules of `tools/lcpp.patch`, then `tools/fix_5d_tensors.py`):
  F32 for 1-D tensors and the `.modulation` parameters, F16 for the weights `llama-quantize`
  leaves alone (`patch_embedding.`, `text_embedding.`, `time_embedding.`, `time_projection.`,
  `head.`), Q8_0 for every other 2-D weight, and the 5-D Conv3d `patch_embedding.weight`
  ([1536, 16, 1, 2, 2]) added back in F32 after `patch_embedding.bias` by `fix_5d_tensors.py`
  (its README's example is exactly `wan2.1-t2v-1.3b-Q8_0.gguf`). 30 blocks of width 1536,
  FFN 8960 (Wan-Video/Wan2.1 README; module names as in ComfyUI's `comfy/ldm/wan/model.py`).
* `sd15-single-file.safetensors.header`: a Stable Diffusion 1.5 single-file checkpoint in fp16:
  the LDM UNet (`model.diffusion_model.`), VAE (`first_stage_model.`), CLIP ViT-L/14 text encoder
  (`cond_stage_model.transformer.text_model.`, with its int64 `position_ids`) and the buffers
  CompVis' `LatentDiffusion` saves (`betas`, `alphas_cumprod`, …, `model_ema.decay`,
  `model_ema.num_updates`). The whole 2.1 GB file is written to a temporary folder by the
  safetensors package and only its first 8 + N bytes (the header) are kept.

GGUF files are written header-only with `gguf.GGUFWriter`: `add_tensor_info` with the real shape,
ggml type and byte size of every tensor, then `write_header_to_file`, `write_kv_data_to_file`,
`write_ti_data_to_file` and `close` without tensor data, so each file is exactly the prefix a
browser reads from the multi-gigabyte original.

Next to each fixture, `<name>.expected.json` holds what the Python side knows: the model it is
(catalog id), tensor count, total bytes and values, bytes and values per component by name
prefix, per-type summaries, and for GGUF every tensor as `gguf.GGUFReader` reads it back from a
sparse full-length copy of the file (header + zero data).

The tensor tables are enumerated from the architectures here (as the reference modules define
them) and checked against published totals: FLUX.1 [dev] 11 901 408 320, the SD 1.5 UNet
859 520 964, its VAE 83 653 863 and the CLIP-L text encoder 123 060 480 values.
`--check-keys DIR` also compares the SD 1.5 tables name by name and shape by shape with the lists
taken from real checkpoints in arenasys/stable-diffusion-webui-model-toolkit
(commit e19dd46e61f04436832b258f7ae6adfc72bca346, `components/{UNET,VAE,CLIP}-v1-SD.txt`).

Run with (the versions these fixtures were generated with):

    python3 -m pip install gguf==0.19.0 safetensors==0.8.0 numpy==2.4.6
    python3 scripts/diffusion-fixtures.py [--check-keys DIR]

Output: `dataset/core/tests/fixtures/diffusion/` (deterministic: no timestamps, no randomness).
Needs about 2.2 GB of free disk in the temporary folder and about 100 MB of memory.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

import numpy as np
import gguf
import safetensors
from gguf import GGMLQuantizationType as Q
from safetensors import TensorSpec, safe_open, serialize_file

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "dataset" / "core" / "tests" / "fixtures" / "diffusion"

VERSIONS = {"gguf": "0.19.0", "safetensors": "0.8.0", "numpy": "2.4.6"}


def check_versions() -> None:
    from importlib.metadata import version

    got = {"gguf": version("gguf"), "safetensors": safetensors.__version__, "numpy": np.__version__}
    if got != VERSIONS:
        print(f"warning: running with {got}, the committed fixtures were written with {VERSIONS}", file=sys.stderr)


def write_json(path: Path, value) -> None:
    """Indented JSON; a `tensors` list is written one compact tensor per line."""
    rest = {k: v for k, v in value.items() if k != "tensors"}
    text = json.dumps(rest, indent=1, sort_keys=True)
    if "tensors" in value:
        lines = ",\n".join("  " + json.dumps(t, sort_keys=True, separators=(",", ":")) for t in value["tensors"])
        text = text[: text.rindex("}")].rstrip() + ',\n "tensors": [\n' + lines + "\n ]\n}"
    path.write_text(text + "\n", encoding="utf-8")


def numel(shape) -> int:
    return math.prod(shape) if shape else 1


# --------------------------------------------------------------------------------------------
# Tensor tables (PyTorch shapes: out, in, ...)
# --------------------------------------------------------------------------------------------


def linear(name: str, n_in: int, n_out: int, bias: bool = True) -> list[tuple[str, tuple]]:
    out = [(f"{name}.weight", (n_out, n_in))]
    if bias:
        out.append((f"{name}.bias", (n_out,)))
    return out


def flux_tensors(guidance: bool) -> list[tuple[str, tuple]]:
    """FLUX.1 in Black Forest Labs' layout (flux/model.py `Flux`, flux/modules/layers.py; the same
    names in ComfyUI's comfy/ldm/flux): hidden 3072, 24 heads of 128, MLP ratio 4, 19 double and
    38 single blocks, 64 input channels (16 latent channels in 2x2 patches), T5 4096, CLIP 768."""
    h, mlp, head = 3072, 4 * 3072, 128
    t: list[tuple[str, tuple]] = []
    t += linear("img_in", 64, h)
    t += linear("time_in.in_layer", 256, h) + linear("time_in.out_layer", h, h)
    t += linear("vector_in.in_layer", 768, h) + linear("vector_in.out_layer", h, h)
    if guidance:
        t += linear("guidance_in.in_layer", 256, h) + linear("guidance_in.out_layer", h, h)
    t += linear("txt_in", 4096, h)
    for i in range(19):
        for s in ("img", "txt"):
            p = f"double_blocks.{i}.{s}"
            t += linear(f"{p}_mod.lin", h, 6 * h)
            t += linear(f"{p}_attn.qkv", h, 3 * h)
            t += [(f"{p}_attn.norm.query_norm.scale", (head,)), (f"{p}_attn.norm.key_norm.scale", (head,))]
            t += linear(f"{p}_attn.proj", h, h)
            t += linear(f"{p}_mlp.0", h, mlp) + linear(f"{p}_mlp.2", mlp, h)
    for i in range(38):
        p = f"single_blocks.{i}"
        t += linear(f"{p}.linear1", h, 3 * h + mlp) + linear(f"{p}.linear2", h + mlp, h)
        t += [(f"{p}.norm.query_norm.scale", (head,)), (f"{p}.norm.key_norm.scale", (head,))]
        t += linear(f"{p}.modulation.lin", h, 3 * h)
    t += linear("final_layer.linear", h, 64)
    t += linear("final_layer.adaLN_modulation.1", h, 2 * h)
    return sorted(t)


def wan_tensors(dim: int, ffn: int, layers: int, in_dim: int = 16, out_dim: int = 16) -> list[tuple[str, tuple]]:
    """Wan 2.1 T2V in Wan-AI's layout (wan/modules/model.py `WanModel`; ComfyUI's
    comfy/ldm/wan/model.py uses the same names): Conv3d patch embedding with 1x2x2 patches, text
    embedding 4096 -> dim, time embedding 256 -> dim, time projection dim -> 6 dim, blocks with
    self- and cross-attention (q, k, v, o, RMS-normed q and k), an affine `norm3`, a GELU FFN and a
    [1, 6, dim] modulation; the head's [1, 2, dim] modulation."""
    t: list[tuple[str, tuple]] = [
        ("patch_embedding.weight", (dim, in_dim, 1, 2, 2)),
        ("patch_embedding.bias", (dim,)),
    ]
    t += linear("text_embedding.0", 4096, dim) + linear("text_embedding.2", dim, dim)
    t += linear("time_embedding.0", 256, dim) + linear("time_embedding.2", dim, dim)
    t += linear("time_projection.1", dim, 6 * dim)
    for i in range(layers):
        p = f"blocks.{i}"
        for a in ("self_attn", "cross_attn"):
            for x in ("q", "k", "v", "o"):
                t += linear(f"{p}.{a}.{x}", dim, dim)
            t += [(f"{p}.{a}.norm_q.weight", (dim,)), (f"{p}.{a}.norm_k.weight", (dim,))]
        t += [(f"{p}.norm3.weight", (dim,)), (f"{p}.norm3.bias", (dim,))]
        t += linear(f"{p}.ffn.0", dim, ffn) + linear(f"{p}.ffn.2", ffn, dim)
        t.append((f"{p}.modulation", (1, 6, dim)))
    t += linear("head.head", dim, out_dim * 4)
    t.append(("head.modulation", (1, 2, dim)))
    return sorted(t)


def ldm_resblock(p: str, c_in: int, c_out: int, emb: int) -> list[tuple[str, tuple]]:
    """openaimodel.py `ResBlock` (GroupNorm, conv, timestep projection, GroupNorm, conv, 1x1 skip)."""
    t = [
        (f"{p}.in_layers.0.weight", (c_in,)), (f"{p}.in_layers.0.bias", (c_in,)),
        (f"{p}.in_layers.2.weight", (c_out, c_in, 3, 3)), (f"{p}.in_layers.2.bias", (c_out,)),
        (f"{p}.emb_layers.1.weight", (c_out, emb)), (f"{p}.emb_layers.1.bias", (c_out,)),
        (f"{p}.out_layers.0.weight", (c_out,)), (f"{p}.out_layers.0.bias", (c_out,)),
        (f"{p}.out_layers.3.weight", (c_out, c_out, 3, 3)), (f"{p}.out_layers.3.bias", (c_out,)),
    ]
    if c_in != c_out:
        t += [(f"{p}.skip_connection.weight", (c_out, c_in, 1, 1)), (f"{p}.skip_connection.bias", (c_out,))]
    return t


def ldm_transformer(p: str, c: int, context: int) -> list[tuple[str, tuple]]:
    """attention.py `SpatialTransformer` of SD 1.x: 1x1 conv projections, one
    `BasicTransformerBlock` (self-attention, cross-attention to the text, GEGLU feed-forward)."""
    b = f"{p}.transformer_blocks.0"
    t = [(f"{p}.norm.weight", (c,)), (f"{p}.norm.bias", (c,)),
         (f"{p}.proj_in.weight", (c, c, 1, 1)), (f"{p}.proj_in.bias", (c,))]
    for a, kv in (("attn1", c), ("attn2", context)):
        t += [(f"{b}.{a}.to_q.weight", (c, c)), (f"{b}.{a}.to_k.weight", (c, kv)), (f"{b}.{a}.to_v.weight", (c, kv)),
              (f"{b}.{a}.to_out.0.weight", (c, c)), (f"{b}.{a}.to_out.0.bias", (c,))]
    t += [(f"{b}.ff.net.0.proj.weight", (8 * c, c)), (f"{b}.ff.net.0.proj.bias", (8 * c,)),
          (f"{b}.ff.net.2.weight", (c, 4 * c)), (f"{b}.ff.net.2.bias", (c,))]
    for n in ("norm1", "norm2", "norm3"):
        t += [(f"{b}.{n}.weight", (c,)), (f"{b}.{n}.bias", (c,))]
    t += [(f"{p}.proj_out.weight", (c, c, 1, 1)), (f"{p}.proj_out.bias", (c,))]
    return t


def sd15_unet() -> list[tuple[str, tuple]]:
    """openaimodel.py `UNetModel` with SD 1.x's v1-inference.yaml: model_channels 320,
    channel_mult [1, 2, 4, 4], 2 res blocks, attention at downsampling 1, 2, 4, context 768."""
    mc, mult, nres, context, emb = 320, (1, 2, 4, 4), 2, 768, 1280
    attn_ds = (1, 2, 4)
    t = linear("time_embed.0", mc, emb) + linear("time_embed.2", emb, emb)
    t += [("input_blocks.0.0.weight", (mc, 4, 3, 3)), ("input_blocks.0.0.bias", (mc,))]
    chans, ch, ds, idx = [mc], mc, 1, 1
    for level, m in enumerate(mult):
        for _ in range(nres):
            t += ldm_resblock(f"input_blocks.{idx}.0", ch, m * mc, emb)
            ch = m * mc
            if ds in attn_ds:
                t += ldm_transformer(f"input_blocks.{idx}.1", ch, context)
            chans.append(ch)
            idx += 1
        if level != len(mult) - 1:
            t += [(f"input_blocks.{idx}.0.op.weight", (ch, ch, 3, 3)), (f"input_blocks.{idx}.0.op.bias", (ch,))]
            chans.append(ch)
            ds *= 2
            idx += 1
    t += ldm_resblock("middle_block.0", ch, ch, emb) + ldm_transformer("middle_block.1", ch, context)
    t += ldm_resblock("middle_block.2", ch, ch, emb)
    idx = 0
    for level, m in reversed(list(enumerate(mult))):
        for i in range(nres + 1):
            skip = chans.pop()
            t += ldm_resblock(f"output_blocks.{idx}.0", ch + skip, m * mc, emb)
            ch = m * mc
            sub = 1
            if ds in attn_ds:
                t += ldm_transformer(f"output_blocks.{idx}.1", ch, context)
                sub = 2
            if level and i == nres:
                t += [(f"output_blocks.{idx}.{sub}.conv.weight", (ch, ch, 3, 3)), (f"output_blocks.{idx}.{sub}.conv.bias", (ch,))]
                ds //= 2
            idx += 1
    t += [("out.0.weight", (mc,)), ("out.0.bias", (mc,)), ("out.2.weight", (4, mc, 3, 3)), ("out.2.bias", (4,))]
    return t


def vae_resnet(p: str, c_in: int, c_out: int) -> list[tuple[str, tuple]]:
    t = [(f"{p}.norm1.weight", (c_in,)), (f"{p}.norm1.bias", (c_in,)),
         (f"{p}.conv1.weight", (c_out, c_in, 3, 3)), (f"{p}.conv1.bias", (c_out,)),
         (f"{p}.norm2.weight", (c_out,)), (f"{p}.norm2.bias", (c_out,)),
         (f"{p}.conv2.weight", (c_out, c_out, 3, 3)), (f"{p}.conv2.bias", (c_out,))]
    if c_in != c_out:
        t += [(f"{p}.nin_shortcut.weight", (c_out, c_in, 1, 1)), (f"{p}.nin_shortcut.bias", (c_out,))]
    return t


def vae_attn(p: str, c: int) -> list[tuple[str, tuple]]:
    t = [(f"{p}.norm.weight", (c,)), (f"{p}.norm.bias", (c,))]
    for x in ("q", "k", "v", "proj_out"):
        t += [(f"{p}.{x}.weight", (c, c, 1, 1)), (f"{p}.{x}.bias", (c,))]
    return t


def sd_vae() -> list[tuple[str, tuple]]:
    """ldm/modules/diffusionmodules/model.py `Encoder`/`Decoder` with the KL-f8 ddconfig (ch 128,
    ch_mult [1, 2, 4, 4], 2 res blocks, z 4, double_z) and `AutoencoderKL`'s 1x1 quant convs."""
    ch, mult, nres, z = 128, (1, 2, 4, 4), 2, 4
    t = [("encoder.conv_in.weight", (ch, 3, 3, 3)), ("encoder.conv_in.bias", (ch,))]
    c = ch
    for i, m in enumerate(mult):
        for j in range(nres):
            t += vae_resnet(f"encoder.down.{i}.block.{j}", c, ch * m)
            c = ch * m
        if i != len(mult) - 1:
            t += [(f"encoder.down.{i}.downsample.conv.weight", (c, c, 3, 3)), (f"encoder.down.{i}.downsample.conv.bias", (c,))]
    t += vae_resnet("encoder.mid.block_1", c, c) + vae_attn("encoder.mid.attn_1", c) + vae_resnet("encoder.mid.block_2", c, c)
    t += [("encoder.norm_out.weight", (c,)), ("encoder.norm_out.bias", (c,)),
          ("encoder.conv_out.weight", (2 * z, c, 3, 3)), ("encoder.conv_out.bias", (2 * z,))]
    c = ch * mult[-1]
    t += [("decoder.conv_in.weight", (c, z, 3, 3)), ("decoder.conv_in.bias", (c,))]
    t += vae_resnet("decoder.mid.block_1", c, c) + vae_attn("decoder.mid.attn_1", c) + vae_resnet("decoder.mid.block_2", c, c)
    for i in reversed(range(len(mult))):
        for j in range(nres + 1):
            t += vae_resnet(f"decoder.up.{i}.block.{j}", c, ch * mult[i])
            c = ch * mult[i]
        if i != 0:
            t += [(f"decoder.up.{i}.upsample.conv.weight", (c, c, 3, 3)), (f"decoder.up.{i}.upsample.conv.bias", (c,))]
    t += [("decoder.norm_out.weight", (c,)), ("decoder.norm_out.bias", (c,)),
          ("decoder.conv_out.weight", (3, c, 3, 3)), ("decoder.conv_out.bias", (3,))]
    t += [("quant_conv.weight", (2 * z, 2 * z, 1, 1)), ("quant_conv.bias", (2 * z,)),
          ("post_quant_conv.weight", (z, z, 1, 1)), ("post_quant_conv.bias", (z,))]
    return t


def clip_l() -> list[tuple[str, tuple]]:
    """transformers' `CLIPTextModel` of openai/clip-vit-large-patch14 (12 layers, width 768, MLP
    3072, 49408 tokens, 77 positions), with the `position_ids` buffer older versions saved."""
    w = 768
    t = [("embeddings.token_embedding.weight", (49408, w)), ("embeddings.position_embedding.weight", (77, w)),
         ("embeddings.position_ids", (1, 77))]
    for i in range(12):
        p = f"encoder.layers.{i}"
        for x in ("k_proj", "v_proj", "q_proj", "out_proj"):
            t += linear(f"{p}.self_attn.{x}", w, w)
        t += [(f"{p}.layer_norm1.weight", (w,)), (f"{p}.layer_norm1.bias", (w,))]
        t += linear(f"{p}.mlp.fc1", w, 4 * w) + linear(f"{p}.mlp.fc2", 4 * w, w)
        t += [(f"{p}.layer_norm2.weight", (w,)), (f"{p}.layer_norm2.bias", (w,))]
    t += [("final_layer_norm.weight", (w,)), ("final_layer_norm.bias", (w,))]
    return t


LDM_BUFFERS = [
    # ldm/models/diffusion/ddpm.py `DDPM.register_schedule` (1000 timesteps) and ldm/modules/ema.py `LitEma`.
    "betas", "alphas_cumprod", "alphas_cumprod_prev", "sqrt_alphas_cumprod", "sqrt_one_minus_alphas_cumprod",
    "log_one_minus_alphas_cumprod", "sqrt_recip_alphas_cumprod", "sqrt_recipm1_alphas_cumprod",
    "posterior_variance", "posterior_log_variance_clipped", "posterior_mean_coef1", "posterior_mean_coef2",
]


def check_keys(dirpath: Path, ours: list[tuple[str, tuple]], listing: str) -> None:
    theirs = {}
    for line in (dirpath / listing).read_text().splitlines():
        if line.strip():
            name, shape = line.rsplit(" ", 1)
            theirs[name] = tuple(json.loads(shape))
    mine = dict(ours)
    assert len(mine) == len(ours), f"{listing}: duplicate names"
    if mine != theirs:
        missing = sorted(set(theirs) - set(mine))[:5]
        extra = sorted(set(mine) - set(theirs))[:5]
        shapes = [(k, mine[k], theirs[k]) for k in sorted(set(mine) & set(theirs)) if mine[k] != theirs[k]][:5]
        raise SystemExit(f"{listing} differs: missing {missing}, extra {extra}, shapes {shapes}")
    print(f"{listing}: {len(theirs)} tensors, names and shapes identical")


# --------------------------------------------------------------------------------------------
# GGUF (city96's ComfyUI-GGUF layout), header only
# --------------------------------------------------------------------------------------------


def type_nbytes(shape: tuple, qtype: Q) -> int:
    return numel(gguf.quants.quant_shape_to_byte_shape(shape, qtype)) if qtype not in (Q.F32, Q.F16, Q.BF16) \
        else numel(shape) * {Q.F32: 4, Q.F16: 2, Q.BF16: 2}[qtype]


def flux_city96_type(name: str, shape: tuple, scheme: Q) -> Q:
    """convert.py (8d1fbbc): 1-D and the embedder / final-layer weights F32, other weights BF16;
    lcpp.patch's `llama-quantize`: 2-D weights outside those prefixes become the scheme's type."""
    keep = ("img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer.")
    if len(shape) == 1 or numel(shape) <= 1024 or any(k in name for k in keep):
        return Q.F32
    return scheme


def wan_city96_type(name: str, shape: tuple, scheme: Q) -> Q:
    """convert.py (`ModelWan`, fp32 source): 1-D, tiny and `.modulation` tensors F32, the rest F16;
    lcpp.patch: 2-D weights outside the Wan exclusions become the scheme's type; fix_5d_tensors.py
    adds the 5-D patch embedding back in F32."""
    if len(shape) == 1 or numel(shape) <= 1024 or ".modulation" in name or name == "head.modulation" or len(shape) == 5:
        return Q.F32
    keep = ("modulation.", "patch_embedding.", "text_embedding.", "time_projection.", "time_embedding.", "img_emb.", "head.")
    if len(shape) == 2 and not any(k in name for k in keep):
        return scheme
    return Q.F16


def write_gguf_header(path: Path, arch: str, file_type: int, tensors: list[tuple[str, tuple, Q]]) -> None:
    w = gguf.GGUFWriter(str(path), arch)  # writes general.architecture
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_file_type(file_type)
    for name, shape, qtype in tensors:
        w.add_tensor_info(name, shape, np.dtype(np.float32), type_nbytes(shape, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    w.close()


def gguf_expected(path: Path, model: str, scheme: str, components: dict, sizes: list[int], tmp: Path) -> dict:
    """What gguf-py's reader sees in the file completed with zero data (a sparse copy): the data
    section starts at the header's end rounded up to the alignment (32) and holds every tensor
    padded to 32 bytes."""
    header = path.read_bytes()
    full = tmp / (path.name + ".full")
    full.write_bytes(header)
    align = gguf.GGUF_DEFAULT_ALIGNMENT
    data_start = (len(header) + align - 1) // align * align
    data_len = sum((n + align - 1) // align * align for n in sizes)
    with open(full, "r+b") as f:
        f.truncate(data_start + data_len)
    return_t = []
    reader = gguf.GGUFReader(str(full))
    by_type: dict[str, dict] = {}
    comp: dict[str, dict] = {}
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape.tolist())]
        tname = t.tensor_type.name
        return_t.append({"name": t.name, "shape": shape, "type": tname, "n_bytes": int(t.n_bytes)})
        s = by_type.setdefault(tname, {"tensors": 0, "elements": 0, "bytes": 0})
        s["tensors"] += 1
        s["elements"] += int(t.n_elements)
        s["bytes"] += int(t.n_bytes)
        role = next(r for p, r in components.items() if t.name.startswith(p))
        c = comp.setdefault(role, {"tensors": 0, "elements": 0, "bytes": 0})
        c["tensors"] += 1
        c["elements"] += int(t.n_elements)
        c["bytes"] += int(t.n_bytes)
    metadata = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    out = {
        "format": "gguf",
        "file": path.name,
        "model": model,
        "layout": "comfyui-gguf",
        "format_name": scheme,
        "prefix_len": len(header),
        "data_offset": int(reader.data_offset),
        "file_size": data_start + data_len,
        "metadata": metadata,
        "tensor_count": len(return_t),
        "total_bytes": sum(t["n_bytes"] for t in return_t),
        "total_elements": sum(v["elements"] for v in by_type.values()),
        "by_type": by_type,
        "components": comp,
        "tensors": return_t,
        "writer": f"gguf {VERSIONS['gguf']} (GGUFWriter, header only); read back by GGUFReader",
    }
    full.unlink()
    return out


def gguf_fixture(name: str, arch: str, file_type: int, tensors: list[tuple[str, tuple, Q]], model: str,
                 scheme: str, tmp: Path) -> None:
    path = OUT / name
    write_gguf_header(path, arch, file_type, tensors)
    e = gguf_expected(path, model, scheme, {"": "denoiser"}, [type_nbytes(s, q) for _, s, q in tensors], tmp)
    want = [(n, list(s), q.name, type_nbytes(s, q)) for n, s, q in tensors]
    got = [(t["name"], t["shape"], t["type"], t["n_bytes"]) for t in e["tensors"]]
    assert got == want, f"{name}: GGUFReader disagrees with the writer"
    write_json(OUT / (name + ".expected.json"), e)
    print(f"{name}: {path.stat().st_size} bytes, {len(tensors)} tensors, {e['total_elements']} values")


def flux_fixture(tmp: Path) -> None:
    table = flux_tensors(guidance=True)
    assert sum(numel(s) for _, s in table) == 11_901_408_320
    tensors = [(n, s, flux_city96_type(n, s, Q.Q4_K)) for n, s in table]
    gguf_fixture("flux1-dev-Q4_K_S.gguf.header", "flux", int(gguf.LlamaFileType.MOSTLY_Q4_K_S), tensors,
                 "flux.1-dev", "Q4_K_S", tmp)


def wan_fixture(tmp: Path) -> None:
    table = wan_tensors(1536, 8960, 30)
    # fix_5d_tensors.py appends the 5-D weight right after its bias.
    five = [t for t in table if len(t[1]) == 5]
    rest = [t for t in table if len(t[1]) != 5]
    ordered = []
    for n, s in rest:
        ordered.append((n, s))
        if n == "patch_embedding.bias":
            ordered += five
    tensors = [(n, s, wan_city96_type(n, s, Q.Q8_0)) for n, s in ordered]
    gguf_fixture("wan2.1-t2v-1.3b-Q8_0.gguf.header", "wan", int(gguf.LlamaFileType.MOSTLY_Q8_0), tensors,
                 "wan2.1-t2v-1.3b", "Q8_0", tmp)


# --------------------------------------------------------------------------------------------
# safetensors: SD 1.5 single file, header kept
# --------------------------------------------------------------------------------------------

ST_SIZE = {"F16": 2, "F32": 4, "I64": 8, "I32": 4}
ST_SPEC = {"F16": "float16", "F32": "float32", "I64": "int64", "I32": "int32"}
SD15_COMPONENTS = {
    "model.diffusion_model.": "denoiser",
    "first_stage_model.": "vae",
    "cond_stage_model.": "text-encoder",
    "": "other",
}


def sd15_fixture(tmp: Path, check_dir: Path | None) -> None:
    unet, vae, clip = sd15_unet(), sd_vae(), clip_l()
    if check_dir is not None:
        check_keys(check_dir, unet, "UNET-v1-SD.txt")
        check_keys(check_dir, vae, "VAE-v1-SD.txt")
        check_keys(check_dir, clip, "CLIP-v1-SD.txt")
    assert sum(numel(s) for _, s in unet) == 859_520_964
    assert sum(numel(s) for _, s in vae) == 83_653_863
    assert sum(numel(s) for n, s in clip if not n.endswith("position_ids")) == 123_060_480
    tensors: list[tuple[str, str, tuple]] = []
    tensors += [(f"model.diffusion_model.{n}", "F16", s) for n, s in unet]
    tensors += [(f"first_stage_model.{n}", "F16", s) for n, s in vae]
    tensors += [(f"cond_stage_model.transformer.text_model.{n}", "I64" if n.endswith("position_ids") else "F16", s)
                for n, s in clip]
    tensors += [(n, "F16", (1000,)) for n in LDM_BUFFERS]
    tensors += [("model_ema.decay", "F16", ()), ("model_ema.num_updates", "I32", ())]
    # Every tensor's data points into one zero buffer as large as the largest tensor.
    biggest = max(numel(s) * ST_SIZE[d] for _, d, s in tensors)
    zeros = np.zeros(biggest, dtype=np.uint8)
    specs = {n: TensorSpec(dtype=ST_SPEC[d], shape=list(s), data_ptr=zeros.ctypes.data, data_len=numel(s) * ST_SIZE[d])
             for n, d, s in tensors}
    full = tmp / "sd15-single-file.safetensors"
    serialize_file(specs, str(full), metadata=None)
    del zeros

    name = "sd15-single-file.safetensors.header"
    with open(full, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        f.seek(0)
        header = f.read(8 + n)
    (OUT / name).write_bytes(header)

    by_dtype: dict[str, dict] = {}
    comp: dict[str, dict] = {}
    count = 0
    with safe_open(str(full), framework="numpy") as f:
        for key in f.keys():
            sl = f.get_slice(key)
            shape, dtype = sl.get_shape(), sl.get_dtype()
            elements = numel(shape)
            nbytes = elements * ST_SIZE[dtype]
            count += 1
            for bucket, k in ((by_dtype, dtype), (comp, next(r for p, r in SD15_COMPONENTS.items() if key.startswith(p)))):
                s = bucket.setdefault(k, {"tensors": 0, "elements": 0, "bytes": 0})
                s["tensors"] += 1
                s["elements"] += elements
                s["bytes"] += nbytes
        metadata = f.metadata()
    assert count == len(tensors)
    file_size = full.stat().st_size
    full.unlink()
    e = {
        "format": "safetensors",
        "file": name,
        "model": "sd-1.5",
        "layout": "ldm single file",
        "format_name": "fp16",
        "prefix_len": len(header),
        "header_len": n,
        "file_size": file_size,
        "metadata": metadata,
        "tensor_count": count,
        "total_bytes": sum(v["bytes"] for v in by_dtype.values()),
        "total_elements": sum(v["elements"] for v in by_dtype.values()),
        "by_dtype": by_dtype,
        "components": comp,
        "writer": f"safetensors {VERSIONS['safetensors']} (serialize_file, numpy {VERSIONS['numpy']}); read back by safe_open",
    }
    assert e["total_bytes"] + 8 + n == file_size
    write_json(OUT / (name + ".expected.json"), e)
    print(f"{name}: {len(header)} bytes of a {file_size}-byte file, {count} tensors")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check-keys", type=Path, help="arenasys model-toolkit components/ folder to compare the SD 1.5 tables with")
    args = ap.parse_args()
    check_versions()
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        flux_fixture(tmp)
        wan_fixture(tmp)
        sd15_fixture(tmp, args.check_keys)


if __name__ == "__main__":
    main()
