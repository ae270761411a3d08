#!/usr/bin/env python3
"""Writes a random-weight GGUF of an LLM in the layout of llama.cpp's converter.

The memory llama.cpp uses is decided by the file's tensor shapes and types and by the metadata it
reads, not by the weight values, so nothing is downloaded: the architecture comes from Headroom's
catalog (dataset/data/catalog/llms.toml) or from a published config.json (../configs/llm/), and the
file gets what `convert_hf_to_gguf.py` at the pinned llama.cpp commit writes for that architecture:

- tensor names and shapes of the `llama`, `qwen2`, `gemma2` and `qwen3moe` architectures (gguf-py's
  MODEL_TENSORS; no fused QKV, the converter's default), `rope_freqs` for Llama 3 rope scaling;
- tensor types of `--outtype f16` (norms, biases and other 1-D tensors and the MoE router in F32,
  every other weight F16) or `--outtype q8_0` (the same with Q8_0 instead of F16);
- the hyperparameter keys the converter sets, and a tokenizer of the same kind (GPT-2 byte-level BPE
  with merges, or SentencePiece with byte tokens for Gemma) with exactly `vocab_size` tokens.

Values are random: normal(0, 0.02) for F16; for Q8_0, random int8 quants with one f16 scale per
32-value block (the bytes a Q8_0 block holds). gguf-py is llama.cpp's own writer (gguf-py/ in the
source tree the device builds from, `--gguf-py`).

    python3 write_gguf.py --model llama-3.1-8b --out /dev/shm/m.gguf [--outtype f16|q8_0]
    python3 write_gguf.py --model Qwen__Qwen2.5-0.5B --out m.gguf      # a config in ../configs/llm
"""

import argparse
import json
import os
import sys
import time
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
CATALOG = os.path.join(ROOT, "dataset", "data", "catalog", "llms.toml")
CONFIGS = os.path.join(HERE, "..", "configs", "llm")


def spec(model):
    """Architecture values the writer needs, from the catalog or a config.json."""
    path = os.path.join(CONFIGS, model + ".json")
    if os.path.exists(path):
        with open(path) as f:
            c = json.load(f)
        mt = c["model_type"]
        heads = c["num_attention_heads"]
        s = dict(
            name=model, model_type=mt, layers=c["num_hidden_layers"], hidden=c["hidden_size"],
            intermediate=c["intermediate_size"], heads=heads, kv_heads=c.get("num_key_value_heads", heads),
            head_dim=c.get("head_dim") or c["hidden_size"] // heads, vocab=c["vocab_size"],
            max_context=c["max_position_embeddings"], tied=c.get("tie_word_embeddings", mt == "gemma2"),
            rope_theta=c.get("rope_theta", 10000.0), eps=c.get("rms_norm_eps", 1e-6),
            sliding_window=c.get("sliding_window") if mt == "gemma2" else None,
            attn_softcap=c.get("attn_logit_softcapping"), final_softcap=c.get("final_logit_softcapping"),
        )
        return s
    with open(CATALOG, "rb") as f:
        entries = {m["id"]: m for m in tomllib.load(f)["llm"]}
    if model not in entries:
        raise SystemExit(f"no LLM `{model}` in the catalog or in {CONFIGS}")
    m = entries[model]
    if model.startswith("llama") or model.startswith("mistral"):
        mt = "llama"
    elif model.startswith("qwen2.5"):
        mt = "qwen2"
    elif model.startswith("qwen3") and m.get("experts"):
        mt = "qwen3_moe"
    elif model.startswith("gemma-2"):
        mt = "gemma2"
    else:
        raise SystemExit(f"no GGUF layout for `{model}` here (llama, mistral, qwen2.5, qwen3 MoE, gemma-2)")
    return dict(
        name=model, model_type=mt, layers=m["layers"], hidden=m["hidden"], intermediate=m["intermediate"],
        heads=m["heads"], kv_heads=m["kv_heads"], head_dim=m["head_dim"], vocab=m["vocab"],
        max_context=m["max_context"], tied=m["tied_embeddings"],
        rope_theta={"llama": 500000.0 if model.startswith("llama") else 1000000.0}.get(mt, 1000000.0),
        eps=1e-5 if mt == "llama" else 1e-6, sliding_window=m.get("sliding_window"),
        attn_softcap=50.0 if mt == "gemma2" else None, final_softcap=30.0 if mt == "gemma2" else None,
        experts=m.get("experts"), experts_per_token=m.get("experts_per_token"), moe_intermediate=m.get("moe_intermediate"),
    )


GGUF_ARCH = {"llama": "llama", "qwen2": "qwen2", "gemma2": "gemma2", "qwen3_moe": "qwen3moe"}


def tensors(s):
    """(name, shape in GGUF order (ne0 first), kind) of every tensor; kind: 'f32' or 'w' (a weight)."""
    h, ff, L = s["hidden"], s["intermediate"], s["layers"]
    q, kv = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    mt = s["model_type"]
    out = [("token_embd.weight", (h, s["vocab"]), "w")]
    if mt == "llama" and s["name"].startswith("llama-3"):
        out.append(("rope_freqs.weight", (s["head_dim"] // 2,), "f32"))
    for i in range(L):
        b = f"blk.{i}."
        out += [(b + "attn_norm.weight", (h,), "f32"),
                (b + "attn_q.weight", (h, q), "w"), (b + "attn_k.weight", (h, kv), "w"), (b + "attn_v.weight", (h, kv), "w")]
        if mt == "qwen2":
            out += [(b + "attn_q.bias", (q,), "f32"), (b + "attn_k.bias", (kv,), "f32"), (b + "attn_v.bias", (kv,), "f32")]
        if mt == "qwen3_moe":
            out += [(b + "attn_q_norm.weight", (s["head_dim"],), "f32"), (b + "attn_k_norm.weight", (s["head_dim"],), "f32")]
        out.append((b + "attn_output.weight", (q, h), "w"))
        if mt == "gemma2":
            out.append((b + "post_attention_norm.weight", (h,), "f32"))
        out.append((b + "ffn_norm.weight", (h,), "f32"))
        if mt == "qwen3_moe":
            e, mi = s["experts"], s["moe_intermediate"]
            out += [(b + "ffn_gate_inp.weight", (h, e), "f32"),
                    (b + "ffn_gate_exps.weight", (h, mi, e), "w"), (b + "ffn_up_exps.weight", (h, mi, e), "w"),
                    (b + "ffn_down_exps.weight", (mi, h, e), "w")]
        else:
            out += [(b + "ffn_gate.weight", (h, ff), "w"), (b + "ffn_up.weight", (h, ff), "w"), (b + "ffn_down.weight", (ff, h), "w")]
        if mt == "gemma2":
            out.append((b + "post_ffw_norm.weight", (h,), "f32"))
    out.append(("output_norm.weight", (h,), "f32"))
    if not s["tied"]:
        out.append(("output.weight", (h, s["vocab"]), "w"))
    return out


def metadata(w, gguf, s, file_type):
    a = GGUF_ARCH[s["model_type"]]
    w.add_name(s["name"])
    w.add_context_length(s["max_context"])
    w.add_embedding_length(s["hidden"])
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["intermediate"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_file_type(file_type)
    if s["model_type"] == "llama":
        w.add_vocab_size(s["vocab"])
        w.add_rope_dimension_count(s["head_dim"])
    if s["head_dim"] != s["hidden"] // s["heads"] or s["model_type"] in ("gemma2", "qwen3_moe"):
        w.add_key_length(s["head_dim"])
        w.add_value_length(s["head_dim"])
    if s["model_type"] == "gemma2":
        w.add_attn_logit_softcapping(s["attn_softcap"])
        w.add_final_logit_softcapping(s["final_softcap"])
        w.add_sliding_window(s["sliding_window"])
    if s["model_type"] == "qwen3_moe":
        w.add_expert_count(s["experts"])
        w.add_expert_used_count(s["experts_per_token"])
        w.add_expert_feed_forward_length(s["moe_intermediate"])
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    vocab(w, gguf, s)
    del a


def byte_chars():
    """GPT-2's byte → printable character table (the byte-level BPE alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def vocab(w, gguf, s):
    n = s["vocab"]
    if s["model_type"] == "gemma2":
        # SentencePiece: pad, eos, bos, unk, then the 256 byte tokens, the word-start mark, letters.
        toks = ["<pad>", "<eos>", "<bos>", "<unk>"] + [f"<0x{b:02X}>" for b in range(256)] + ["▁"] + [chr(c) for c in range(97, 123)]
        types = [3, 3, 3, 2] + [6] * 256 + [1] * 27
        toks += [f"▁w{i}" for i in range(n - len(toks))]
        types += [1] * (n - len(types))
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(toks)
        w.add_token_scores([0.0] * 4 + [0.0] * 256 + [-1.0] * (n - 260))
        w.add_token_types(types)
        w.add_bos_token_id(2)
        w.add_eos_token_id(1)
        w.add_unk_token_id(3)
        w.add_pad_token_id(0)
        w.add_add_bos_token(True)
        w.add_add_space_prefix(False)
        return
    chars = byte_chars()
    specials = 256 if s["model_type"] == "llama" and s["vocab"] >= 128256 else 22
    toks = chars + ["ĠĠ"]
    toks += [f"w{i}x" for i in range(n - specials - len(toks))]
    first_special = len(toks)
    toks += [f"<|special_{i}|>" for i in range(specials)]
    types = [1] * first_special + [3] * specials
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre({"llama": "llama-bpe", "qwen2": "qwen2", "qwen3_moe": "qwen2"}[s["model_type"]] if not s["name"].startswith("mistral") else "tekken")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_merges(["Ġ Ġ"])
    w.add_bos_token_id(first_special)
    w.add_eos_token_id(first_special + 1)
    w.add_add_bos_token(s["model_type"] == "llama")


def write(s, out, outtype, gguf_py):
    sys.path.insert(0, gguf_py)
    import numpy as np
    import gguf
    t0 = time.time()
    ts = tensors(s)
    file_type = {"f16": gguf.LlamaFileType.MOSTLY_F16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[outtype]
    w = gguf.GGUFWriter(out, GGUF_ARCH[s["model_type"]])
    metadata(w, gguf, s, file_type)
    rng = np.random.default_rng(0)
    # One random buffer, viewed by every tensor (values do not matter; the bytes are written out).
    largest = max(int(np.prod(sh)) for _, sh, _ in ts)
    if outtype == "f16":
        base = (rng.standard_normal(largest, dtype=np.float32) * 0.02).astype(np.float16)
    else:
        nblocks = largest // 32 + 1
        blocks = np.empty((nblocks, 34), dtype=np.uint8)
        blocks[:, :2] = np.frombuffer(np.float16(0.0005).tobytes(), dtype=np.uint8)
        blocks[:, 2:] = rng.integers(-127, 128, size=(nblocks, 32), dtype=np.int8).view(np.uint8)
        base = blocks.reshape(-1)
    f32 = (rng.standard_normal(65536, dtype=np.float32) * 0.02 + 1.0).astype(np.float32)
    total = 0
    for name, shape, kind in ts:
        ne = int(np.prod(shape))
        np_shape = tuple(reversed(shape))
        if kind == "f32":
            reps = -(-ne // f32.size)
            w.add_tensor(name, np.tile(f32, reps)[:ne].reshape(np_shape))
        elif outtype == "f16":
            w.add_tensor(name, base[:ne].reshape(np_shape))
        else:
            row = shape[0] // 32 * 34
            nbytes = ne // 32 * 34
            byte_shape = np_shape[:-1] + (row,)
            w.add_tensor(name, base[:nbytes].reshape(byte_shape), raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        total += ne
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(json.dumps({"model": s["name"], "out": out, "outtype": outtype, "params": total,
                      "bytes": os.path.getsize(out), "seconds": round(time.time() - t0, 1)}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--outtype", default="f16", choices=["f16", "q8_0"])
    p.add_argument("--gguf-py", default=os.path.join(ROOT, "target", "llama-src", "gguf-py"))
    p.add_argument("--print-spec", action="store_true")
    a = p.parse_args()
    s = spec(a.model)
    if a.print_spec:
        print(json.dumps(s))
        return
    write(s, a.out, a.outtype, a.gguf_py)


if __name__ == "__main__":
    main()
