//! A user's model file, read from its header: GGUF (llama.cpp), `.safetensors` (Hugging Face),
//! `model.safetensors.index.json` (a sharded checkpoint's map) or `config.json`.
//!
//! Pure functions over bytes. The shells read the file: the CLI from disk, the site with
//! `File.slice` on a prefix. Only headers are parsed, so a 40 GB file costs the few kilobytes
//! (GGUF: up to a few megabytes with a large vocabulary) at its start. A parser given too short a
//! prefix answers [`ParseError::NeedBytes`] with how many bytes from the start it needs; the
//! caller reads that many (or more) and calls again:
//!
//! ```
//! use headroom_core::modelfile::{parse, ParseError};
//! # let file: Vec<u8> = Vec::new();
//! let mut want = 64 * 1024;
//! let parsed = loop {
//!     let prefix = &file[..want.min(file.len())];
//!     match parse(prefix) {
//!         Err(ParseError::NeedBytes(n)) if n as usize > prefix.len() && prefix.len() < file.len() => {
//!             want = (n as usize).max(2 * want)
//!         }
//!         other => break other.map_err(|e| e.at_file_len(file.len() as u64)),
//!     }
//! };
//! # assert!(parsed.is_err());
//! ```
//!
//! [`gguf_to_hf_config`] turns a GGUF's llama.cpp metadata back into the `config.json` fields the
//! fit engine reads.

pub mod describe;
pub mod diffusion;
pub mod gguf;
pub mod safetensors;

use std::fmt;

use serde_json::{Map, Value as Json};

pub use self::gguf::{GgmlType, Gguf, parse_gguf};
pub use self::safetensors::{Dtype, Safetensors, SafetensorsIndex, parse_safetensors, parse_safetensors_index};

/// Why a header could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The prefix ends inside the header: read at least this many bytes from the start of the
    /// file and call again.
    NeedBytes(u64),
    /// The file is not what it claims to be, or is damaged; the message says how.
    Invalid(String),
}

impl ParseError {
    /// The answer for a caller that holds the whole file (`file_len` bytes): asking for more than
    /// the file has means the file is truncated.
    pub fn at_file_len(self, file_len: u64) -> ParseError {
        match self {
            ParseError::NeedBytes(n) if n > file_len => {
                ParseError::Invalid(format!("truncated file: it ends after {file_len} bytes, inside its header, which needs at least {n}"))
            }
            other => other,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::NeedBytes(n) => write!(f, "the header continues past the bytes read: read at least {n} bytes"),
            ParseError::Invalid(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ParseError {}

/// What a file's first bytes say it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Starts with the magic `GGUF`.
    Gguf,
    /// An 8-byte little-endian header length of at most 100 MB, then `{`.
    Safetensors,
    /// A JSON object with a `"weight_map"` key (`model.safetensors.index.json`).
    SafetensorsIndex,
    /// Any other JSON object (taken for a `config.json`).
    Config,
    /// None of these, or too few bytes to tell (16 always suffice for the binary formats; a JSON
    /// file should be given whole).
    Unknown,
}

/// Tells the format from the first bytes (16 are enough for GGUF and safetensors; for JSON the
/// `"weight_map"` key must be within the prefix, so give JSON files whole).
pub fn sniff(prefix: &[u8]) -> Kind {
    if prefix.starts_with(&gguf::MAGIC) {
        return Kind::Gguf;
    }
    // Before JSON: a header length whose low byte is 0x7B would start with `{` too.
    if let (Some(len), Some(b'{')) = (prefix.get(..8), prefix.get(8)) {
        let mut le = [0u8; 8];
        le.copy_from_slice(len);
        let n = u64::from_le_bytes(le);
        if (2..=safetensors::MAX_HEADER_LEN).contains(&n) {
            return Kind::Safetensors;
        }
    }
    let text = strip_bom(prefix);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') if contains(text, b"\"weight_map\"") => Kind::SafetensorsIndex,
        Some(b'{') => Kind::Config,
        _ => Kind::Unknown,
    }
}

fn strip_bom(b: &[u8]) -> &[u8] {
    b.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(b)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// A parsed model file.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelFile {
    Gguf(Gguf),
    Safetensors(Safetensors),
    SafetensorsIndex(SafetensorsIndex),
    /// A `config.json` (any JSON object without `weight_map`).
    Config(Json),
}

/// Sniffs and parses a prefix of a file. JSON files must be given whole (a cut JSON file is
/// `Invalid`, not `NeedBytes`).
pub fn parse(prefix: &[u8]) -> Result<ModelFile, ParseError> {
    match sniff(prefix) {
        Kind::Gguf => parse_gguf(prefix).map(ModelFile::Gguf),
        Kind::Safetensors => parse_safetensors(prefix).map(ModelFile::Safetensors),
        Kind::SafetensorsIndex | Kind::Config => {
            let value: Json = serde_json::from_slice(strip_bom(prefix)).map_err(|e| {
                ParseError::Invalid(if e.is_eof() { format!("truncated JSON file ({e}); JSON files are read whole") } else { format!("not valid JSON: {e}") })
            })?;
            let Json::Object(obj) = &value else {
                return Err(ParseError::Invalid("the JSON file is not an object".into()));
            };
            if obj.contains_key("weight_map") {
                let text = std::str::from_utf8(strip_bom(prefix)).map_err(|e| ParseError::Invalid(format!("the index file is not UTF-8: {e}")))?;
                parse_safetensors_index(text).map(ModelFile::SafetensorsIndex)
            } else {
                Ok(ModelFile::Config(value))
            }
        }
        Kind::Unknown if prefix.len() < 9 && !prefix.iter().all(u8::is_ascii_whitespace) => Err(ParseError::NeedBytes(9)),
        Kind::Unknown => {
            let start: String = prefix.iter().take(8).flat_map(|b| std::ascii::escape_default(*b)).map(char::from).collect();
            Err(ParseError::Invalid(format!("not a model file: neither GGUF, safetensors nor a JSON config (it starts with \"{start}\")")))
        }
    }
}

/// GGUF architectures with a Hugging Face `model_type`, as llama.cpp's converter names them
/// (`MODEL_ARCH_NAMES` in gguf-py/gguf/constants.py) and transformers names them.
pub const GGUF_ARCHITECTURES: &[(&str, &str)] = &[
    ("llama", "llama"),
    ("qwen2", "qwen2"),
    ("qwen2moe", "qwen2_moe"),
    ("qwen3", "qwen3"),
    ("qwen3moe", "qwen3_moe"),
    ("gemma", "gemma"),
    ("gemma2", "gemma2"),
    ("gemma3", "gemma3_text"),
    ("phi3", "phi3"),
    ("deepseek2", "deepseek_v2"),
    ("gpt-oss", "gpt_oss"),
    ("olmo2", "olmo2"),
    ("granite", "granite"),
    ("command-r", "cohere"),
    ("cohere2", "cohere2"),
    ("starcoder2", "starcoder2"),
];

/// `ExpertGatingFuncType.SIGMOID` in gguf-py/gguf/constants.py.
const GATING_SIGMOID: u64 = 2;

/// A GGUF's architecture metadata as a Hugging Face `config.json` object.
///
/// The mapping inverts llama.cpp's `convert_hf_to_gguf.py` (its `TextModel.set_gguf_parameters`,
/// ggml-org/llama.cpp commit a458664fc83b6513baea7adafcb0ef0626b006f8, and the per-model classes
/// in `conversion/*.py`) with key names from `gguf-py/gguf/constants.py` (`Keys.LLM`,
/// `Keys.Attention`, `Keys.Rope`; commit ef035f779276d5f5636a0fd8cbeff6a83d646d2b):
///
/// * `{arch}.block_count` → `num_hidden_layers`, `.embedding_length` → `hidden_size`,
///   `.feed_forward_length` → `intermediate_size`, `.context_length` →
///   `max_position_embeddings`, `.attention.head_count` → `num_attention_heads`,
///   `.attention.head_count_kv` → `num_key_value_heads` (default: the head count),
///   `.attention.key_length` → `head_dim` (default: hidden / heads),
///   `.attention.layer_norm_rms_epsilon` → `rms_norm_eps` (`layer_norm_eps` for Cohere,
///   `norm_epsilon` for Starcoder2, from `.attention.layer_norm_epsilon`), `.rope.freq_base` →
///   `rope_theta`, `.attention.sliding_window` → `sliding_window`, `general.name` →
///   `_name_or_path`;
/// * `vocab_size`: the rows of `token_embd.weight` (its second GGUF dimension), else
///   `{arch}.vocab_size`, else the length of `tokenizer.ggml.tokens`;
/// * `tie_word_embeddings`: true when there is no `output.weight` tensor (llama.cpp then reuses
///   `token_embd.weight` for the output);
/// * MoE: `.expert_count` → `num_experts` (Qwen MoE), `num_local_experts` (Mixtral, GPT-OSS) or
///   `n_routed_experts` (DeepSeek); `.expert_used_count` → `num_experts_per_tok`;
///   `.expert_feed_forward_length` → `moe_intermediate_size` (GPT-OSS: `intermediate_size`, its
///   experts' width); `.expert_shared_count` → `n_shared_experts`;
///   `.expert_shared_feed_forward_length` → `shared_expert_intermediate_size` (Qwen2-MoE);
///   `.leading_dense_block_count` → `first_k_dense_replace`;
/// * DeepSeek's multi-head latent attention: `.attention.kv_lora_rank`, `.attention.q_lora_rank`
///   (`null` when absent: V2-Lite has no query compression), `.rope.dimension_count` →
///   `qk_rope_head_dim`. Since llama.cpp absorbs MLA, its converter writes
///   `key_length = kv_lora_rank + qk_rope_head_dim`, `value_length = kv_lora_rank`,
///   `key_length_mla = qk_nope_head_dim + qk_rope_head_dim`, `value_length_mla = v_head_dim` and
///   `head_count_kv = 1`; older files have `key_length = qk_nope + qk_rope`,
///   `value_length = v_head_dim` and no `_mla` keys. So `qk_nope_head_dim = key_length_mla (or
///   key_length) − qk_rope_head_dim`, `v_head_dim = value_length_mla (or value_length)`, and
///   `num_key_value_heads` is the head count (the HF configs' value);
/// * DeepSeek V2 or V3: the converter writes `expert_gating_func = 2` (sigmoid) from a config's
///   `scoring_func: "sigmoid"`, which is V3's router (V2 uses softmax); a `blk.N.exp_probs_b.bias`
///   tensor (V3's `e_score_correction_bias`) also marks V3. Either gives `deepseek_v3`, otherwise
///   `deepseek_v2`;
/// * a `llama` GGUF with experts is Mixtral (`mixtral`); a plain Mistral converts to `llama` and
///   stays `llama`.
///
/// Errors name the missing key, or the architecture when it has no mapping.
pub fn gguf_to_hf_config(g: &Gguf) -> Result<Json, String> {
    let arch = g.architecture().ok_or("the GGUF file has no `general.architecture`")?;
    let mut model_type = GGUF_ARCHITECTURES.iter().find(|(a, _)| *a == arch).map(|(_, t)| *t).ok_or_else(|| {
        let known: Vec<&str> = GGUF_ARCHITECTURES.iter().map(|(a, _)| *a).collect();
        format!("GGUF architecture `{arch}` has no Hugging Face config mapping (mapped: {})", known.join(", "))
    })?;
    let key = |s: &str| format!("{arch}.{s}");
    let uint = |s: &str| -> Result<Option<u64>, String> {
        match g.get(&key(s)) {
            None => Ok(None),
            Some(v) => {
                v.as_u64().map(Some).ok_or_else(|| format!("GGUF key `{}` must be a whole number ≥ 0, found {} {}", key(s), v.value_type().name(), v.to_json()))
            }
        }
    };
    let need = |s: &str| -> Result<u64, String> { uint(s)?.ok_or_else(|| format!("the GGUF file ({arch}) lacks `{}`, which the config needs", key(s))) };
    let float = |s: &str| g.get_f64(&key(s));

    let experts = uint("expert_count")?.filter(|&e| e > 0);
    if arch == "llama" && experts.is_some() {
        model_type = "mixtral";
    }
    let is_deepseek = arch == "deepseek2";
    if is_deepseek {
        let sigmoid = uint("expert_gating_func")? == Some(GATING_SIGMOID);
        let score_bias = g.tensors.iter().any(|t| t.name.ends_with(".exp_probs_b.bias"));
        if sigmoid || score_bias {
            model_type = "deepseek_v3";
        }
    }

    let mut c = Map::new();
    let mut put = |k: &str, v: Json| {
        c.insert(k.to_string(), v);
    };
    put("model_type", model_type.into());
    if let Some(name) = g.get_str("general.name") {
        put("_name_or_path", name.into());
    }
    let layers = need("block_count")?;
    let hidden = need("embedding_length")?;
    let heads = need("attention.head_count")?;
    put("num_hidden_layers", layers.into());
    put("hidden_size", hidden.into());
    put("num_attention_heads", heads.into());
    if let Some(ctx) = uint("context_length")? {
        put("max_position_embeddings", ctx.into());
    }
    let ff = uint("feed_forward_length")?;
    let expert_ff = uint("expert_feed_forward_length")?;
    // GPT-OSS's `intermediate_size` is its experts' width.
    let (i, i_key) = if model_type == "gpt_oss" { (expert_ff.or(ff), "expert_feed_forward_length") } else { (ff, "feed_forward_length") };
    let i = i.ok_or_else(|| format!("the GGUF file ({arch}) lacks `{}`, which the config needs", key(i_key)))?;
    put("intermediate_size", i.into());

    let vocab = g
        .tensor("token_embd.weight")
        .and_then(|t| t.dims.get(1).copied())
        .or(uint("vocab_size")?)
        .or_else(|| g.get("tokenizer.ggml.tokens").and_then(|v| v.as_array()).map(|a| a.len))
        .ok_or_else(|| format!("the GGUF file ({arch}) has no `token_embd.weight`, `{}` or tokenizer to take vocab_size from", key("vocab_size")))?;
    put("vocab_size", vocab.into());
    put("tie_word_embeddings", g.tensor("output.weight").is_none().into());

    // Norm epsilon, under each model's own name.
    let eps_rms = float("attention.layer_norm_rms_epsilon");
    let eps_ln = float("attention.layer_norm_epsilon");
    match model_type {
        "cohere" | "cohere2" => {
            if let Some(e) = eps_ln.or(eps_rms) {
                put("layer_norm_eps", num(e));
            }
        }
        "starcoder2" => {
            if let Some(e) = eps_ln.or(eps_rms) {
                put("norm_epsilon", num(e));
            }
        }
        _ => {
            if let Some(e) = eps_rms {
                put("rms_norm_eps", num(e));
            }
        }
    }
    if let Some(theta) = float("rope.freq_base") {
        put("rope_theta", num(theta));
    }
    if let Some(w) = uint("attention.sliding_window")?.filter(|&w| w > 0) {
        put("sliding_window", w.into());
    }

    if is_deepseek {
        let rope = need("rope.dimension_count")?;
        let kv_rank = need("attention.kv_lora_rank")?;
        let key_len = uint("attention.key_length_mla")?.map_or_else(|| need("attention.key_length"), Ok)?;
        let v_len = uint("attention.value_length_mla")?.map_or_else(|| need("attention.value_length"), Ok)?;
        let nope = key_len.checked_sub(rope).ok_or_else(|| format!("the GGUF file's MLA key length {key_len} is smaller than its rope dimension {rope}"))?;
        put("num_key_value_heads", heads.into());
        put("kv_lora_rank", kv_rank.into());
        put("q_lora_rank", uint("attention.q_lora_rank")?.map_or(Json::Null, Json::from));
        put("qk_rope_head_dim", rope.into());
        put("qk_nope_head_dim", nope.into());
        put("v_head_dim", v_len.into());
    } else {
        let kv = uint("attention.head_count_kv")?.unwrap_or(heads);
        put("num_key_value_heads", kv.into());
        let head_dim = match uint("attention.key_length")? {
            Some(d) => Some(d),
            None if heads > 0 && hidden % heads == 0 => Some(hidden / heads),
            None => None,
        };
        if let Some(d) = head_dim {
            put("head_dim", d.into());
        }
    }

    // Mixture of experts.
    if let Some(e) = experts {
        let count_key = match model_type {
            "qwen2_moe" | "qwen3_moe" => "num_experts",
            "deepseek_v2" | "deepseek_v3" => "n_routed_experts",
            _ => "num_local_experts",
        };
        put(count_key, e.into());
        put("num_experts_per_tok", need("expert_used_count")?.into());
        if model_type != "gpt_oss"
            && model_type != "mixtral"
            && let Some(mi) = expert_ff
        {
            put("moe_intermediate_size", mi.into());
        }
        if let Some(s) = uint("expert_shared_feed_forward_length")? {
            put("shared_expert_intermediate_size", s.into());
        }
    }
    if is_deepseek {
        put("n_shared_experts", uint("expert_shared_count")?.unwrap_or(0).into());
        put("first_k_dense_replace", uint("leading_dense_block_count")?.unwrap_or(0).into());
        if let Some(s) = float("expert_weights_scale") {
            put("routed_scaling_factor", num(s));
        }
        if let Some(n) = g.arch_get("expert_weights_norm").and_then(|v| v.as_bool()) {
            put("norm_topk_prob", n.into());
        }
        if let Some(f) = uint("expert_gating_func")? {
            put("scoring_func", if f == GATING_SIGMOID { "sigmoid" } else { "softmax" }.into());
        }
        for (gguf_key, hf_key) in [("expert_group_count", "n_group"), ("expert_group_used_count", "topk_group")] {
            if let Some(v) = uint(gguf_key)? {
                put(hf_key, v.into());
            }
        }
    }

    // Model-specific scalars.
    let scalars: &[(&str, &str)] = match model_type {
        "gemma2" => &[("attn_logit_softcapping", "attn_logit_softcapping"), ("final_logit_softcapping", "final_logit_softcapping")],
        "granite" => &[
            ("attention.scale", "attention_multiplier"),
            ("embedding_scale", "embedding_multiplier"),
            ("residual_scale", "residual_multiplier"),
            ("logit_scale", "logits_scaling"),
        ],
        "cohere" | "cohere2" => &[("logit_scale", "logit_scale")],
        _ => &[],
    };
    for (gguf_key, hf_key) in scalars {
        if let Some(v) = float(gguf_key) {
            put(hf_key, num(v));
        }
    }
    Ok(Json::Object(c))
}

fn num(v: f64) -> Json {
    serde_json::Number::from_f64(v).map(Json::Number).unwrap_or(Json::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_each_format() {
        assert_eq!(sniff(b"GGUF\x03\x00\x00\x00"), Kind::Gguf);
        let mut st = 123u64.to_le_bytes().to_vec(); // low byte 0x7B is '{'
        st.extend_from_slice(b"{\"a\"");
        assert_eq!(sniff(&st), Kind::Safetensors);
        assert_eq!(sniff(b"\xEF\xBB\xBF {\"metadata\":{},\"weight_map\":{}}"), Kind::SafetensorsIndex);
        assert_eq!(sniff(b"\n{\"model_type\": \"llama\"}"), Kind::Config);
        assert_eq!(sniff(b"PK\x03\x04"), Kind::Unknown);
        assert_eq!(sniff(b""), Kind::Unknown);
    }

    #[test]
    fn parse_dispatches_and_explains() {
        assert_eq!(parse(b"GG"), Err(ParseError::NeedBytes(9)));
        assert!(matches!(parse(b"GGUF"), Err(ParseError::NeedBytes(8))));
        assert!(matches!(parse(b"PK\x03\x04\x14\x00\x00\x00\x08\x00"), Err(ParseError::Invalid(m)) if m.contains("not a model file")));
        assert!(matches!(parse(b"{\"model_type\": \"ll"), Err(ParseError::Invalid(m)) if m.contains("truncated JSON")));
        assert!(matches!(parse(b"{\"model_type\": \"llama\"}"), Ok(ModelFile::Config(_))));
        assert!(matches!(parse(br#"{"weight_map": {"a": "x.safetensors"}}"#), Ok(ModelFile::SafetensorsIndex(_))));
        assert_eq!(
            ParseError::NeedBytes(100).at_file_len(50),
            ParseError::Invalid("truncated file: it ends after 50 bytes, inside its header, which needs at least 100".into())
        );
        assert_eq!(ParseError::NeedBytes(10).at_file_len(50), ParseError::NeedBytes(10));
    }

    #[test]
    fn unknown_architecture_is_named() {
        let file = include_bytes!("../../tests/fixtures/modelfiles/qwen3-tied.gguf");
        let mut g = parse_gguf(file).unwrap();
        for (k, v) in &mut g.metadata {
            if k == "general.architecture" {
                *v = gguf::Value::String("mamba".into());
            }
        }
        let e = gguf_to_hf_config(&g).unwrap_err();
        assert!(e.contains("`mamba`") && e.contains("no Hugging Face config mapping"), "{e}");
        g.metadata.retain(|(k, _)| k != "general.architecture");
        assert!(gguf_to_hf_config(&g).unwrap_err().contains("general.architecture"));
    }
}
