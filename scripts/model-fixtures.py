#!/usr/bin/env python3
"""Writes the model-file fixtures of `headroom-core`'s `modelfile` parsers.

Every fixture is written by an independent writer, never assembled by hand:

* GGUF files by the `gguf` package (gguf-py, llama.cpp's own Python writer), in the layout
  llama.cpp's `convert_hf_to_gguf.py` produces: tensor names `token_embd.weight`,
  `blk.N.attn_q.weight`, ..., `output_norm.weight`, `output.weight`; metadata
  `general.architecture`, `{arch}.block_count`, `{arch}.context_length`, ...; a tokenizer with
  `tokenizer.ggml.model` / `tokens` / `scores` / `token_type` arrays. Each model starts from a
  Hugging Face `config.json`-shaped dict, which is turned into GGUF metadata the way the converter
  does it; that dict is what `gguf_to_hf_config` must give back.
* `.safetensors` files by the `safetensors` package (its Rust serializer, fed through
  `safetensors.serialize_file` with numpy buffers, so BF16, F8_E4M3, F8_E8M0 and F4 need no torch).

Next to each fixture it writes `<name>.expected.json`, what the Python side knows about the file:
for GGUF, `gguf.GGUFReader`'s tensor list (`n_bytes`, `n_elements`, shape, type) and the metadata
values the writer was given; for safetensors, `safetensors.deserialize`'s tensors (dtype, shape,
length of each tensor's data) and `safe_open(...).metadata()`. The Rust integration test
(`dataset/core/tests/modelfile.rs`) compares its parsers against these files.

Run with (the versions these fixtures were generated with):

    python3 -m pip install gguf==0.19.0 safetensors==0.8.0 numpy==2.4.6
    python3 scripts/model-fixtures.py

Output: `dataset/core/tests/fixtures/modelfiles/` (deterministic: fixed seeds, no timestamps).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import gguf
import safetensors
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as VT
from safetensors import TensorSpec, deserialize, safe_open, serialize_file

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "dataset" / "core" / "tests" / "fixtures" / "modelfiles"

VERSIONS = {"gguf": "0.19.0", "safetensors": "0.8.0", "numpy": "2.4.6"}

# Arrays longer than this are skipped by the Rust parser (only type and length kept), so the
# fixture vocabularies are longer than this on purpose.
KEEP_ARRAY_MAX = 256


def check_versions() -> None:
    got = {"gguf": _dist_version("gguf"), "safetensors": safetensors.__version__, "numpy": np.__version__}
    if got != VERSIONS:
        print(f"warning: running with {got}, the committed fixtures were written with {VERSIONS}", file=sys.stderr)


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def write_json(path: Path, value) -> None:
    path.write_text(json.dumps(value, indent=1, sort_keys=True) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------------------
# GGUF
# --------------------------------------------------------------------------------------------


class GgufModel:
    """One GGUF fixture: records every metadata value it writes, for `expected.json`."""

    def __init__(self, name: str, arch: str, hf_config: dict):
        self.name = name
        self.arch = arch
        self.hf_config = hf_config
        self.path = OUT / f"{name}.gguf"
        self.w = gguf.GGUFWriter(str(self.path), arch)
        # gguf.GGUFWriter adds general.architecture itself.
        self.meta: dict[str, dict] = {"general.architecture": {"type": "STRING", "value": arch}}
        self.r = rng(sum(map(ord, name)))

    # Metadata ---------------------------------------------------------------------------------

    def kv(self, key: str, value, vtype: VT, sub_type: VT | None = None) -> None:
        self.w.add_key_value(key, value, vtype, sub_type)
        self.meta[key] = describe(value, vtype, sub_type)

    def a(self, suffix: str, value, vtype: VT) -> None:
        self.kv(f"{self.arch}.{suffix}", value, vtype)

    def common(self, c: dict, file_type: int) -> None:
        """What convert_hf_to_gguf.py's `TextModel.set_gguf_parameters` writes for every model."""
        self.kv("general.name", c["_name_or_path"], VT.STRING)
        self.kv("general.file_type", file_type, VT.UINT32)
        self.kv("general.quantization_version", 2, VT.UINT32)
        self.a("block_count", c["num_hidden_layers"], VT.UINT32)
        self.a("context_length", c["max_position_embeddings"], VT.UINT32)
        self.a("embedding_length", c["hidden_size"], VT.UINT32)
        self.a("feed_forward_length", c["intermediate_size"], VT.UINT32)
        self.a("attention.head_count", c["num_attention_heads"], VT.UINT32)
        self.a("attention.head_count_kv", c["num_key_value_heads"], VT.UINT32)
        self.a("attention.layer_norm_rms_epsilon", c["rms_norm_eps"], VT.FLOAT32)
        self.a("rope.freq_base", c["rope_theta"], VT.FLOAT32)
        if "head_dim" in c:
            self.a("attention.key_length", c["head_dim"], VT.UINT32)
            self.a("attention.value_length", c["head_dim"], VT.UINT32)

    def tokenizer(self, vocab: int) -> None:
        """A llama (SentencePiece-style) vocabulary of `vocab` tokens, longer than KEEP_ARRAY_MAX."""
        assert vocab > KEEP_ARRAY_MAX
        tokens = ["<unk>", "<s>", "</s>"] + [f"\u2581tok{i}" for i in range(3, vocab)]
        scores = [float(-i) for i in range(vocab)]
        types = [int(gguf.TokenType.CONTROL) if i < 3 else int(gguf.TokenType.NORMAL) for i in range(vocab)]
        self.kv("tokenizer.ggml.model", "llama", VT.STRING)
        self.kv("tokenizer.ggml.tokens", tokens, VT.ARRAY, VT.STRING)
        self.kv("tokenizer.ggml.scores", scores, VT.ARRAY, VT.FLOAT32)
        self.kv("tokenizer.ggml.token_type", types, VT.ARRAY, VT.INT32)
        self.kv("tokenizer.ggml.bos_token_id", 1, VT.UINT32)
        self.kv("tokenizer.ggml.eos_token_id", 2, VT.UINT32)

    # Tensors ----------------------------------------------------------------------------------

    def t(self, name: str, shape: tuple[int, ...], qtype: Q = Q.F32) -> None:
        """Adds a tensor of numpy `shape` (HF order: out, in) stored as `qtype`.

        F32/F16 are given to the writer as numpy arrays; BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0,
        TQ2_0 and MXFP4 are quantized by `gguf.quants.quantize`; the other types (K-quants, IQ*),
        which gguf-py 0.19.0 cannot quantize, are given as raw random blocks of the size the writer's
        own `GGML_QUANT_SIZES` table implies (their header is what the parser reads).
        """
        x = (self.r.standard_normal(shape) * 0.02).astype(np.float32)
        if qtype == Q.F32:
            self.w.add_tensor(name, x)
        elif qtype == Q.F16:
            self.w.add_tensor(name, x.astype(np.float16))
        elif qtype in QUANTIZABLE:
            self.w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
        else:
            block, type_size = gguf.GGML_QUANT_SIZES[qtype]
            assert shape[-1] % block == 0, (name, shape, qtype)
            raw_shape = (*shape[:-1], shape[-1] // block * type_size)
            raw = self.r.integers(0, 256, size=raw_shape, dtype=np.uint8)
            self.w.add_tensor(name, raw, raw_dtype=qtype)

    def finish(self) -> None:
        self.w.write_header_to_file()
        self.w.write_kv_data_to_file()
        self.w.write_tensors_to_file()
        self.w.close()
        self.expected()

    def expected(self) -> None:
        reader = gguf.GGUFReader(str(self.path))
        # Cross-check the recorded metadata against what the reader finds (scalars and strings).
        for key, d in self.meta.items():
            field = reader.fields[key]
            if d["type"] not in ("ARRAY",):
                got = field.contents()
                want = d["value"]
                assert got == want, (key, got, want)
            elif d["elem_type"] != "ARRAY":  # gguf-py's reader flattens nested arrays
                assert len(field.data) == d["len"], (key, len(field.data), d["len"])
                if "value" in d:
                    assert field.contents() == d["value"], key
        tensors = []
        by_type: dict[str, dict] = {}
        for t in reader.tensors:
            rel = t.data_offset - reader.data_offset
            tensors.append({
                "name": t.name,
                "ggml_type": t.tensor_type.name,
                "ggml_type_id": int(t.tensor_type),
                "dims": [int(d) for d in t.shape],
                "n_elements": int(t.n_elements),
                "n_bytes": int(t.n_bytes),
                "offset": int(rel),
            })
            s = by_type.setdefault(t.tensor_type.name, {"tensors": 0, "bytes": 0, "elements": 0})
            s["tensors"] += 1
            s["bytes"] += int(t.n_bytes)
            s["elements"] += int(t.n_elements)
        write_json(OUT / f"{self.name}.expected.json", {
            "format": "gguf",
            "file": self.path.name,
            "file_size": self.path.stat().st_size,
            "version": int(reader.fields["GGUF.version"].contents()),
            "tensor_count": len(reader.tensors),
            "kv_count": int(reader.fields["GGUF.kv_count"].contents()),
            "alignment": int(reader.alignment),
            "data_offset": int(reader.data_offset),
            "metadata": self.meta,
            "tensors": tensors,
            "total_bytes": sum(t["n_bytes"] for t in tensors),
            "total_elements": sum(t["n_elements"] for t in tensors),
            "by_type": by_type,
            "hf_config": self.hf_config,
            "writer": f"gguf {VERSIONS['gguf']}",
        })


QUANTIZABLE = {Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.TQ1_0, Q.TQ2_0, Q.MXFP4}


def describe(value, vtype: VT, sub_type: VT | None) -> dict:
    """The expected.json form of a metadata value: its GGUF type and the value as written."""
    if vtype == VT.ARRAY:
        d = {"type": "ARRAY", "elem_type": sub_type.name, "len": len(value)}
        if len(value) <= KEEP_ARRAY_MAX:
            if sub_type == VT.ARRAY:
                d["value"] = [describe(v, VT.ARRAY, nested_type(v)) for v in value]
            else:
                d["value"] = [stored(v, sub_type) for v in value]
        return d
    return {"type": vtype.name, "value": stored(value, vtype)}


def nested_type(v) -> VT:
    return VT.get_type(v[0])


def stored(value, vtype: VT):
    """The value as the file holds it (FLOAT32 rounded to f32)."""
    if vtype == VT.FLOAT32:
        return float(np.float32(value))
    return value


def llama_mixed() -> None:
    """Llama, three layers, every tensor type the writer can produce, plus every metadata type."""
    c = {
        "model_type": "llama", "_name_or_path": "headroom/tiny-llama-mixed",
        "num_hidden_layers": 3, "hidden_size": 64, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 288,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "tie_word_embeddings": False,
    }
    m = GgufModel("llama-mixed", "llama", c)
    m.common(c, int(gguf.LlamaFileType.MOSTLY_Q4_K_M))
    m.a("vocab_size", c["vocab_size"], VT.UINT32)
    m.a("rope.dimension_count", c["head_dim"], VT.UINT32)
    m.tokenizer(c["vocab_size"])
    # One key of each remaining GGUF value type, and a nested array.
    m.kv("headroom.fixture.u8", 200, VT.UINT8)
    m.kv("headroom.fixture.i8", -100, VT.INT8)
    m.kv("headroom.fixture.u16", 60000, VT.UINT16)
    m.kv("headroom.fixture.i16", -30000, VT.INT16)
    m.kv("headroom.fixture.i32", -2_000_000_000, VT.INT32)
    m.kv("headroom.fixture.u64", 2**40 + 3, VT.UINT64)
    m.kv("headroom.fixture.i64", -(2**40) - 3, VT.INT64)
    m.kv("headroom.fixture.f64", 0.1, VT.FLOAT64)
    m.kv("headroom.fixture.bool", True, VT.BOOL)
    m.kv("headroom.fixture.empty_string", "", VT.STRING)
    m.kv("headroom.fixture.unicode", "Grüße, 世界", VT.STRING)
    m.kv("headroom.fixture.layer_flags", [True, False, True], VT.ARRAY, VT.BOOL)
    m.kv("headroom.fixture.nested", [[1, 2, 3], [4, 5]], VT.ARRAY, VT.ARRAY)
    m.kv("headroom.fixture.long_u16", list(range(1000)), VT.ARRAY, VT.UINT16)

    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    q_out = c["num_attention_heads"] * c["head_dim"]
    kv_out = c["num_key_value_heads"] * c["head_dim"]
    m.t("token_embd.weight", (v, h), Q.Q8_0)
    layer_types = [
        # attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down (rows of 256: K-quants)
        (Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.BF16, Q.MXFP4, Q.Q4_K),
        (Q.Q8_0, Q.F16, Q.F32, Q.Q8_0, Q.F16, Q.Q8_0, Q.Q6_K),
        (Q.Q8_0, Q.Q8_0, Q.Q8_0, Q.Q8_0, Q.Q4_0, Q.Q4_0, Q.TQ1_0),
    ]
    for b, (tq, tk, tv, to, tg, tu, td) in enumerate(layer_types):
        m.t(f"blk.{b}.attn_norm.weight", (h,))
        m.t(f"blk.{b}.attn_q.weight", (q_out, h), tq)
        m.t(f"blk.{b}.attn_k.weight", (kv_out, h), tk)
        m.t(f"blk.{b}.attn_v.weight", (kv_out, h), tv)
        m.t(f"blk.{b}.attn_output.weight", (h, q_out), to)
        m.t(f"blk.{b}.ffn_norm.weight", (h,))
        m.t(f"blk.{b}.ffn_gate.weight", (f, h), tg)
        m.t(f"blk.{b}.ffn_up.weight", (f, h), tu)
        m.t(f"blk.{b}.ffn_down.weight", (h, f), td)
    m.t("output_norm.weight", (h,))
    m.t("output.weight", (v, h), Q.Q8_0)
    m.finish()


def gemma3() -> None:
    """Gemma 3 text model: tied embeddings (no output.weight), sliding window, q/k norms."""
    c = {
        "model_type": "gemma3_text", "_name_or_path": "headroom/tiny-gemma3",
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 272,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "sliding_window": 512, "tie_word_embeddings": True,
    }
    m = GgufModel("gemma3", "gemma3", c)
    m.common(c, int(gguf.LlamaFileType.MOSTLY_BF16))
    m.a("attention.sliding_window", c["sliding_window"], VT.UINT32)
    m.tokenizer(c["vocab_size"])
    h, f, v, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    m.t("token_embd.weight", (v, h), Q.BF16)
    for b in range(c["num_hidden_layers"]):
        m.t(f"blk.{b}.attn_norm.weight", (h,))
        m.t(f"blk.{b}.attn_q.weight", (c["num_attention_heads"] * d, h), Q.BF16)
        m.t(f"blk.{b}.attn_k.weight", (c["num_key_value_heads"] * d, h), Q.BF16)
        m.t(f"blk.{b}.attn_v.weight", (c["num_key_value_heads"] * d, h), Q.BF16)
        m.t(f"blk.{b}.attn_q_norm.weight", (d,))
        m.t(f"blk.{b}.attn_k_norm.weight", (d,))
        m.t(f"blk.{b}.attn_output.weight", (h, c["num_attention_heads"] * d), Q.BF16)
        m.t(f"blk.{b}.post_attention_norm.weight", (h,))
        m.t(f"blk.{b}.ffn_norm.weight", (h,))
        m.t(f"blk.{b}.ffn_gate.weight", (f, h), Q.BF16)
        m.t(f"blk.{b}.ffn_up.weight", (f, h), Q.BF16)
        m.t(f"blk.{b}.ffn_down.weight", (h, f), Q.BF16)
        m.t(f"blk.{b}.post_ffw_norm.weight", (h,))
    m.t("output_norm.weight", (h,))
    m.finish()


def qwen3_tied() -> None:
    """Qwen3 dense with tied embeddings (as Qwen3-0.6B): no output.weight, F16."""
    c = {
        "model_type": "qwen3", "_name_or_path": "headroom/tiny-qwen3-tied",
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 272,
        "max_position_embeddings": 40960, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
    }
    m = GgufModel("qwen3-tied", "qwen3", c)
    m.common(c, int(gguf.LlamaFileType.MOSTLY_F16))
    m.tokenizer(c["vocab_size"])
    h, f, v, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    m.t("token_embd.weight", (v, h), Q.F16)
    for b in range(c["num_hidden_layers"]):
        m.t(f"blk.{b}.attn_norm.weight", (h,))
        m.t(f"blk.{b}.attn_q.weight", (c["num_attention_heads"] * d, h), Q.F16)
        m.t(f"blk.{b}.attn_k.weight", (c["num_key_value_heads"] * d, h), Q.F16)
        m.t(f"blk.{b}.attn_v.weight", (c["num_key_value_heads"] * d, h), Q.F16)
        m.t(f"blk.{b}.attn_q_norm.weight", (d,))
        m.t(f"blk.{b}.attn_k_norm.weight", (d,))
        m.t(f"blk.{b}.attn_output.weight", (h, c["num_attention_heads"] * d), Q.F16)
        m.t(f"blk.{b}.ffn_norm.weight", (h,))
        m.t(f"blk.{b}.ffn_gate.weight", (f, h), Q.F16)
        m.t(f"blk.{b}.ffn_up.weight", (f, h), Q.F16)
        m.t(f"blk.{b}.ffn_down.weight", (h, f), Q.F16)
    m.t("output_norm.weight", (h,))
    m.finish()


def qwen3moe() -> None:
    """Qwen3-MoE: expert keys, 3-D merged expert tensors (`blk.N.ffn_*_exps.weight`)."""
    c = {
        "model_type": "qwen3_moe", "_name_or_path": "headroom/tiny-qwen3-moe",
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 192,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 272,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
        "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "tie_word_embeddings": False,
    }
    m = GgufModel("qwen3moe", "qwen3moe", c)
    m.common(c, int(gguf.LlamaFileType.MOSTLY_Q8_0))
    m.a("expert_count", c["num_experts"], VT.UINT32)
    m.a("expert_used_count", c["num_experts_per_tok"], VT.UINT32)
    m.a("expert_feed_forward_length", c["moe_intermediate_size"], VT.UINT32)
    m.tokenizer(c["vocab_size"])
    h, v, d, e, mi = c["hidden_size"], c["vocab_size"], c["head_dim"], c["num_experts"], c["moe_intermediate_size"]
    m.t("token_embd.weight", (v, h), Q.Q8_0)
    for b in range(c["num_hidden_layers"]):
        m.t(f"blk.{b}.attn_norm.weight", (h,))
        m.t(f"blk.{b}.attn_q.weight", (c["num_attention_heads"] * d, h), Q.Q8_0)
        m.t(f"blk.{b}.attn_k.weight", (c["num_key_value_heads"] * d, h), Q.Q8_0)
        m.t(f"blk.{b}.attn_v.weight", (c["num_key_value_heads"] * d, h), Q.Q8_0)
        m.t(f"blk.{b}.attn_q_norm.weight", (d,))
        m.t(f"blk.{b}.attn_k_norm.weight", (d,))
        m.t(f"blk.{b}.attn_output.weight", (h, c["num_attention_heads"] * d), Q.Q8_0)
        m.t(f"blk.{b}.ffn_norm.weight", (h,))
        m.t(f"blk.{b}.ffn_gate_inp.weight", (e, h), Q.F32)
        m.t(f"blk.{b}.ffn_gate_exps.weight", (e, mi, h), Q.Q8_0)
        m.t(f"blk.{b}.ffn_up_exps.weight", (e, mi, h), Q.Q8_0)
        m.t(f"blk.{b}.ffn_down_exps.weight", (e, h, mi), Q.Q8_0)
    m.t("output_norm.weight", (h,))
    m.t("output.weight", (v, h), Q.Q8_0)
    m.finish()


def deepseek(name: str, legacy: bool) -> None:
    """DeepSeek with multi-head latent attention.

    `legacy = False`: the layout of llama.cpp's converter since MLA absorption (DeepSeek-V3-like:
    sigmoid gating with `exp_probs_b`, `head_count_kv = 1`, `key_length = kv_lora_rank +
    qk_rope_head_dim`, `value_length = kv_lora_rank`, `key_length_mla`, `value_length_mla`,
    `attn_k_b`/`attn_v_b`). `legacy = True`: the older layout (DeepSeek-V2-Lite-like: softmax,
    no q_lora_rank, `key_length = qk_nope + qk_rope`, `value_length = v_head_dim`, `attn_kv_b`).
    """
    c = {
        "model_type": "deepseek_v2" if legacy else "deepseek_v3",
        "_name_or_path": f"headroom/tiny-{name}",
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 96,
        "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 272,
        "max_position_embeddings": 4096 if legacy else 163840, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
        "kv_lora_rank": 32, "q_lora_rank": None if legacy else 64,
        "qk_rope_head_dim": 8, "qk_nope_head_dim": 16, "v_head_dim": 16,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
        "moe_intermediate_size": 32, "first_k_dense_replace": 1,
        "scoring_func": "softmax" if legacy else "sigmoid",
        "tie_word_embeddings": False,
    }
    hf = dict(c)
    del hf["scoring_func"]  # not a field gguf_to_hf_config reproduces (it decides the model_type)
    m = GgufModel(name, "deepseek2", hf)
    heads, rope, nope, vd, kvr = c["num_attention_heads"], c["qk_rope_head_dim"], c["qk_nope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    conv = dict(c)
    if not legacy:
        conv["num_key_value_heads"] = 1  # "deepseek2 using MLA converts into MQA"
    m.common(conv, int(gguf.LlamaFileType.MOSTLY_Q8_0))
    m.a("leading_dense_block_count", c["first_k_dense_replace"], VT.UINT32)
    m.a("vocab_size", c["vocab_size"], VT.UINT32)
    if c["q_lora_rank"] is not None:
        m.a("attention.q_lora_rank", c["q_lora_rank"], VT.UINT32)
    m.a("attention.kv_lora_rank", kvr, VT.UINT32)
    if legacy:
        m.a("attention.key_length", nope + rope, VT.UINT32)
        m.a("attention.value_length", vd, VT.UINT32)
    else:
        m.a("attention.key_length", kvr + rope, VT.UINT32)
        m.a("attention.value_length", kvr, VT.UINT32)
        m.a("attention.key_length_mla", nope + rope, VT.UINT32)
        m.a("attention.value_length_mla", vd, VT.UINT32)
    m.a("expert_feed_forward_length", c["moe_intermediate_size"], VT.UINT32)
    m.a("expert_count", c["n_routed_experts"], VT.UINT32)
    m.a("expert_used_count", c["num_experts_per_tok"], VT.UINT32)
    m.a("expert_shared_count", c["n_shared_experts"], VT.UINT32)
    m.a("expert_weights_scale", 2.5 if not legacy else 1.0, VT.FLOAT32)
    m.a("expert_weights_norm", not legacy, VT.BOOL)
    if not legacy:
        m.a("expert_gating_func", int(gguf.ExpertGatingFuncType.SIGMOID), VT.UINT32)
    m.a("rope.dimension_count", rope, VT.UINT32)
    m.tokenizer(c["vocab_size"])

    h, f, v, e, mi = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["n_routed_experts"], c["moe_intermediate_size"]
    qr = c["q_lora_rank"]
    m.t("token_embd.weight", (v, h), Q.Q8_0)
    for b in range(c["num_hidden_layers"]):
        m.t(f"blk.{b}.attn_norm.weight", (h,))
        if qr is None:
            m.t(f"blk.{b}.attn_q.weight", (heads * (nope + rope), h), Q.Q8_0)
        else:
            m.t(f"blk.{b}.attn_q_a.weight", (qr, h), Q.Q8_0)
            m.t(f"blk.{b}.attn_q_a_norm.weight", (qr,))
            m.t(f"blk.{b}.attn_q_b.weight", (heads * (nope + rope), qr), Q.Q8_0)
        m.t(f"blk.{b}.attn_kv_a_mqa.weight", (kvr + rope, h), Q.Q8_0)
        m.t(f"blk.{b}.attn_kv_a_norm.weight", (kvr,))
        if legacy:
            m.t(f"blk.{b}.attn_kv_b.weight", (heads * (nope + vd), kvr), Q.Q8_0)
        else:
            m.t(f"blk.{b}.attn_k_b.weight", (heads, kvr, nope), Q.F16)
            m.t(f"blk.{b}.attn_v_b.weight", (heads, vd, kvr), Q.Q8_0)
        m.t(f"blk.{b}.attn_output.weight", (h, heads * vd), Q.Q8_0)
        m.t(f"blk.{b}.ffn_norm.weight", (h,))
        if b < c["first_k_dense_replace"]:
            m.t(f"blk.{b}.ffn_gate.weight", (f, h), Q.Q8_0)
            m.t(f"blk.{b}.ffn_up.weight", (f, h), Q.Q8_0)
            m.t(f"blk.{b}.ffn_down.weight", (h, f), Q.F16)
        else:
            m.t(f"blk.{b}.ffn_gate_inp.weight", (e, h), Q.F32)
            if not legacy:
                m.t(f"blk.{b}.exp_probs_b.bias", (e,), Q.F32)
            m.t(f"blk.{b}.ffn_gate_exps.weight", (e, mi, h), Q.Q8_0)
            m.t(f"blk.{b}.ffn_up_exps.weight", (e, mi, h), Q.Q8_0)
            m.t(f"blk.{b}.ffn_down_exps.weight", (e, h, mi), Q.Q8_0)
            sh = mi * c["n_shared_experts"]
            m.t(f"blk.{b}.ffn_gate_shexp.weight", (sh, h), Q.Q8_0)
            m.t(f"blk.{b}.ffn_up_shexp.weight", (sh, h), Q.Q8_0)
            m.t(f"blk.{b}.ffn_down_shexp.weight", (h, sh), Q.Q8_0)
    m.t("output_norm.weight", (h,))
    m.t("output.weight", (v, h), Q.Q8_0)
    m.finish()


# --------------------------------------------------------------------------------------------
# safetensors
# --------------------------------------------------------------------------------------------

# numpy has no bfloat16/float8/float4: those tensors are handed to the safetensors serializer as
# raw little-endian bytes with the safetensors dtype name (its TensorSpec dtype strings).
SPEC_DTYPE = {
    "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu", "F4": "float4_e2m1fn_x2", "I64": "int64", "U8": "uint8", "BOOL": "bool",
}


def tensor_bytes(r: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> tuple[np.ndarray, list[int]]:
    """Random data of `dtype` and the shape to declare (F4 packs two values per byte: the writer
    takes the packed shape and doubles its last dimension)."""
    n = int(np.prod(shape)) if shape else 1
    x = (r.standard_normal(n) * 0.02).astype(np.float32)
    if dtype == "F32":
        return x, list(shape)
    if dtype == "F16":
        return x.astype(np.float16), list(shape)
    if dtype == "BF16":
        return (x.view(np.uint32) >> 16).astype(np.uint16), list(shape)
    if dtype in ("F8_E4M3", "F8_E8M0", "U8"):
        return r.integers(0, 0x7F, size=n, dtype=np.uint8), list(shape)
    if dtype == "F4":
        assert shape[-1] % 2 == 0
        packed = (*shape[:-1], shape[-1] // 2)
        return r.integers(0, 256, size=int(np.prod(packed)), dtype=np.uint8), list(packed)
    if dtype == "I64":
        return np.arange(n, dtype=np.int64), list(shape)
    if dtype == "BOOL":
        return (np.arange(n) % 2 == 0), list(shape)
    raise ValueError(dtype)


def write_safetensors(path: Path, tensors: list[tuple[str, str, tuple[int, ...]]], seed: int, metadata: dict | None) -> None:
    r = rng(seed)
    keep = []
    specs = {}
    for name, dtype, shape in tensors:
        data, spec_shape = tensor_bytes(r, dtype, shape)
        data = np.ascontiguousarray(data)
        keep.append(data)
        specs[name] = TensorSpec(dtype=SPEC_DTYPE[dtype], shape=spec_shape, data_ptr=data.ctypes.data, data_len=data.nbytes)
    serialize_file(specs, str(path), metadata=metadata)
    del keep


def safetensors_expected(path: Path) -> dict:
    blob = path.read_bytes()
    tensors = []
    by_dtype: dict[str, dict] = {}
    for name, info in deserialize(blob):
        n = len(info["data"])
        tensors.append({"name": name, "dtype": info["dtype"], "shape": list(info["shape"]), "n_bytes": n})
        s = by_dtype.setdefault(info["dtype"], {"tensors": 0, "bytes": 0})
        s["tensors"] += 1
        s["bytes"] += n
    with safe_open(str(path), framework="numpy") as f:
        metadata = f.metadata()
        keys = sorted(f.keys())
    assert keys == sorted(t["name"] for t in tensors)
    return {
        "format": "safetensors",
        "file": path.name,
        "file_size": len(blob),
        "header_len": int.from_bytes(blob[:8], "little"),
        "metadata": metadata,
        "tensors": sorted(tensors, key=lambda t: t["name"]),
        "total_bytes": sum(t["n_bytes"] for t in tensors),
        "by_dtype": by_dtype,
        "writer": f"safetensors {VERSIONS['safetensors']}",
    }


def llama_hf_tensors(c: dict, dtype_of) -> list[tuple[str, str, tuple[int, ...]]]:
    """The tensor names and shapes of transformers' LlamaForCausalLM."""
    h, f, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    d = c["hidden_size"] // c["num_attention_heads"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    out = [("model.embed_tokens.weight", dtype_of("embed"), (v, h))]
    for b in range(c["num_hidden_layers"]):
        p = f"model.layers.{b}"
        out += [
            (f"{p}.input_layernorm.weight", dtype_of("norm"), (h,)),
            (f"{p}.self_attn.q_proj.weight", dtype_of("linear"), (q, h)),
            (f"{p}.self_attn.k_proj.weight", dtype_of("linear"), (kv, h)),
            (f"{p}.self_attn.v_proj.weight", dtype_of("linear"), (kv, h)),
            (f"{p}.self_attn.o_proj.weight", dtype_of("linear"), (h, q)),
            (f"{p}.post_attention_layernorm.weight", dtype_of("norm"), (h,)),
            (f"{p}.mlp.gate_proj.weight", dtype_of("linear"), (f, h)),
            (f"{p}.mlp.up_proj.weight", dtype_of("linear"), (f, h)),
            (f"{p}.mlp.down_proj.weight", dtype_of("linear"), (h, f)),
        ]
    out.append(("model.norm.weight", dtype_of("norm"), (h,)))
    if not c["tie_word_embeddings"]:
        out.append(("lm_head.weight", dtype_of("embed"), (v, h)))
    return out


def llama_config(name: str, **over) -> dict:
    c = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "_name_or_path": f"headroom/{name}",
        "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 64,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 128,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16",
    }
    c.update(over)
    return c


def st_single_bf16() -> None:
    c = llama_config("tiny-llama-bf16")
    path = OUT / "llama-bf16.safetensors"
    write_safetensors(path, llama_hf_tensors(c, lambda _: "BF16"), 11, {"format": "pt"})
    write_json(OUT / "llama-bf16.config.json", c)
    write_json(OUT / "llama-bf16.expected.json", safetensors_expected(path))


def st_mixed() -> None:
    """F16 embeddings, F32 norms, F8_E4M3 linears with F32 block scales (`weight_scale_inv`, as
    DeepSeek-V3's FP8 checkpoints), one MXFP4-style F4 tensor with F8_E8M0 scales, an I64 buffer."""
    c = llama_config("tiny-llama-mixed", torch_dtype="float16", tie_word_embeddings=True)
    tensors = llama_hf_tensors(c, {"embed": "F16", "norm": "F32", "linear": "F8_E4M3"}.get)
    extra = []
    for name, dtype, shape in tensors:
        if dtype == "F8_E4M3":
            extra.append((name.replace(".weight", ".weight_scale_inv"), "F32", (max(1, shape[0] // 32), max(1, shape[1] // 32))))
    extra += [
        ("model.layers.0.mlp.experts.down_proj_blocks", "F4", (4, 64, 32)),
        ("model.layers.0.mlp.experts.down_proj_scales", "F8_E8M0", (4, 64, 1)),
        ("model.rotary_emb.position_ids", "I64", (1, 16)),
        ("model.layers.0.attention_mask_flag", "BOOL", (3,)),
        ("model.layers.0.packed_u8", "U8", (5,)),
    ]
    path = OUT / "mixed-fp8.safetensors"
    # One metadata key: the serializer writes a multi-key map in hash order, which would make the
    # fixture differ from run to run.
    write_safetensors(path, tensors + extra, 12, {"format": "pt"})
    write_json(OUT / "mixed-fp8.config.json", c)
    write_json(OUT / "mixed-fp8.expected.json", safetensors_expected(path))


def st_sharded() -> None:
    """Two shards and the `model.safetensors.index.json` transformers writes next to them."""
    c = llama_config("tiny-llama-sharded")
    d = OUT / "sharded"
    d.mkdir(exist_ok=True)
    tensors = llama_hf_tensors(c, lambda _: "BF16")
    half = len(tensors) // 2
    shards = [tensors[:half], tensors[half:]]
    weight_map = {}
    total_size = 0
    total_params = 0
    for i, part in enumerate(shards, start=1):
        fname = f"model-{i:05d}-of-{len(shards):05d}.safetensors"
        path = d / fname
        write_safetensors(path, part, 20 + i, {"format": "pt"})
        write_json(d / fname.replace(".safetensors", ".expected.json"), safetensors_expected(path))
        for name, dtype, shape in part:
            weight_map[name] = fname
            n = int(np.prod(shape))
            total_params += n
            total_size += n * 2  # BF16: what transformers' save_pretrained sums (numel × element size)
    index = {"metadata": {"total_parameters": total_params, "total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    # transformers writes the index with indent=2, sort_keys=True and a trailing newline.
    (d / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    write_json(d / "model.safetensors.index.expected.json", {
        "format": "safetensors_index",
        "total_size": total_size,
        "tensor_count": len(weight_map),
        "shards": sorted(set(weight_map.values())),
        "weight_map": weight_map,
    })
    write_json(d / "config.json", c)


def main() -> None:
    check_versions()
    OUT.mkdir(parents=True, exist_ok=True)
    llama_mixed()
    gemma3()
    qwen3_tied()
    qwen3moe()
    deepseek("deepseek2", legacy=False)
    deepseek("deepseek2-legacy", legacy=True)
    st_single_bf16()
    st_mixed()
    st_sharded()
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT.relative_to(ROOT)} ({total} bytes)")


if __name__ == "__main__":
    main()
