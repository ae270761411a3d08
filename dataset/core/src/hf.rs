//! A Hugging Face `config.json` → the fit engine's architecture ([`Llm`]).
//!
//! The engine sizes any model from the values its publisher wrote in `config.json`, the same file
//! transformers builds the model from. Each supported `model_type` is counted the way that
//! model's transformers class lays out its parameters (which projections carry a bias, how many
//! norms a block has, query/key norms, dense and sparse layers, MLA's low-rank projections), so the
//! parameter count is exact, not an estimate; `tests/tests/any_model.rs` checks it against what
//! transformers built on the GPU for every reference run and against GGUF tensor tables. Fields a config leaves out take the defaults of that model's
//! transformers configuration class.
//!
//! Behaviour that depends on the architecture (sliding-window layers, MoE, MLA) is read from the
//! config, never guessed from a name.

use serde_json::{Map, Value};

use crate::{Attention, Llm, Source, SourceKind};

/// How the calculator's state names a Hugging Face model by its id (`hf:org/name`).
pub const HUB_PREFIX: &str = "hf:";

/// The `model_type`s this module reads, with a word on what each adds to the Llama layout.
pub const MODEL_TYPES: &[(&str, &str)] = &[
    ("llama", "Llama layout: grouped-query attention, gated MLP, two RMS norms per block"),
    ("mistral", "Llama layout, optional sliding window"),
    ("mixtral", "Llama attention, sparse MoE in every block"),
    ("qwen2", "Llama layout with q/k/v biases"),
    ("qwen2_moe", "q/k/v biases, sparse MoE with a gated shared expert"),
    ("qwen3", "Llama layout with per-head query/key RMS norms"),
    ("qwen3_moe", "Qwen3 attention, sparse MoE"),
    ("gemma", "Llama layout, tied embeddings"),
    ("gemma2", "four norms per block, alternating sliding-window layers"),
    ("gemma3_text", "Gemma 2 layout plus query/key norms, five sliding layers in six"),
    ("gemma3", "multimodal: the text model (text_config) plus the SigLIP vision tower and projector"),
    ("phi3", "fused qkv and gate/up projections (same count as Llama)"),
    ("deepseek_v2", "multi-head latent attention, shared and routed experts"),
    ("deepseek_v3", "multi-head latent attention, shared and routed experts, router score bias"),
    ("kimi_k2", "DeepSeek-V3's layout (Kimi K2 ships it as remote code)"),
    ("gpt_oss", "attention biases and sinks, MoE experts with biases, alternating sliding window"),
    ("olmo2", "full-width query/key norms, norms after attention and MLP"),
    ("granite", "Llama layout with scaling multipliers"),
    ("cohere", "parallel attention and MLP after one layer norm"),
    ("cohere2", "Cohere layout with sliding-window layers"),
    ("starcoder2", "biases everywhere, plain (non-gated) MLP, layer norms with bias"),
    ("chatglm", "GLM-4 / ChatGLM keys (num_layers, ffn_hidden_size, multi_query_group_num, kv_channels, padded_vocab_size), Llama layout with q/k/v biases"),
];

/// The keys every decoder config carries under transformers' standard names: with them, a
/// `model_type` the engine does not know is read in the Llama layout, and said so.
pub const STANDARD_KEYS: &[&str] = &["num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"];

/// A config written with ChatGLM's own key names (GLM-4, ChatGLM3: `configuration_chatglm.py`)
/// under the standard ones; its other keys are kept.
fn chatglm_keys(m: &Map<String, Value>) -> Map<String, Value> {
    let mut out = m.clone();
    for (theirs, ours) in [
        ("num_layers", "num_hidden_layers"),
        ("ffn_hidden_size", "intermediate_size"),
        ("padded_vocab_size", "vocab_size"),
        ("seq_length", "max_position_embeddings"),
        ("kv_channels", "head_dim"),
    ] {
        if let Some(v) = m.get(theirs) {
            out.entry(ours.to_string()).or_insert_with(|| v.clone());
        }
    }
    // Grouped-query attention when `multi_query_attention` is on: that many key/value groups.
    if m.get("multi_query_attention").and_then(Value::as_bool) == Some(true) {
        if let Some(g) = m.get("multi_query_group_num") {
            out.entry("num_key_value_heads".to_string()).or_insert_with(|| g.clone());
        }
    }
    out.entry("tie_word_embeddings".to_string()).or_insert(Value::Bool(false));
    out
}

/// The fields the engine needs when a model is described by hand (the site's manual form), as
/// `config.json` names.
pub const REQUIRED_FIELDS: &[&str] = &[
    "num_hidden_layers",
    "hidden_size",
    "intermediate_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "tie_word_embeddings",
    "max_position_embeddings",
];

/// Every `config.json` key this module reads (also inside `text_config` and `vision_config`).
pub const READ_KEYS: &[&str] = &[
    "_name_or_path",
    "model_type",
    // ChatGLM's own names (`chatglm_keys`).
    "num_layers",
    "ffn_hidden_size",
    "padded_vocab_size",
    "seq_length",
    "kv_channels",
    "multi_query_attention",
    "multi_query_group_num",
    "add_qkv_bias",
    "add_bias_linear",
    "attention_bias",
    "decoder_sparse_step",
    "first_k_dense_replace",
    "head_dim",
    "hidden_size",
    "image_size",
    "intermediate_size",
    "kv_lora_rank",
    "layer_types",
    "max_position_embeddings",
    "max_window_layers",
    "mlp_bias",
    "mlp_only_layers",
    "moe_intermediate_size",
    "moe_layer_freq",
    "n_routed_experts",
    "n_shared_experts",
    "num_attention_heads",
    "num_channels",
    "num_experts",
    "num_experts_per_tok",
    "num_hidden_layers",
    "num_key_value_heads",
    "num_local_experts",
    "patch_size",
    "q_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "shared_expert_intermediate_size",
    "sliding_window",
    "sliding_window_pattern",
    "tie_word_embeddings",
    "use_bias",
    "use_qk_norm",
    "use_sliding_window",
    "v_head_dim",
    "vocab_size",
    "torch_dtype",
    "dtype",
];

/// The part of a `config.json` the engine reads (the same architecture, a much shorter object:
/// what a shared calculator link carries).
pub fn essential(config: &Value) -> Value {
    fn keep(m: &Map<String, Value>) -> Map<String, Value> {
        // Inserted one by one (collecting into a map would sort: a few KB of browser bundle).
        let mut out = Map::new();
        for (k, v) in m.iter().filter(|(k, _)| READ_KEYS.contains(&k.as_str())) {
            out.insert(k.clone(), v.clone());
        }
        out
    }
    match config.as_object() {
        Some(m) => {
            let mut out = keep(m);
            for sub in ["text_config", "vision_config"] {
                if let Some(Value::Object(inner)) = m.get(sub) {
                    out.insert(sub.into(), Value::Object(keep(inner)));
                }
            }
            Value::Object(out)
        }
        None => config.clone(),
    }
}

/// Where a resolved architecture came from, for the fit result.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ArchOrigin {
    /// `catalog`, `hf_config` or `architecture`.
    pub source: String,
    /// The `model_type` of a config (absent for the catalog and for hand-typed architectures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
    /// What the parameter count includes, when that is not obvious (multimodal configs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counted: Option<String>,
    /// The config's `model_type` is not one the engine knows: its standard keys were read in the
    /// Llama layout.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub assumed_layout: bool,
}

/// Counts are computed in 128 bits from values of at most [`MAX_VALUE`], so no product overflows.
type N = u128;

/// The largest value a config field may hold (2^24; the longest context windows are below it).
const MAX_VALUE: N = 1 << 24;

struct Cfg<'a> {
    m: &'a Map<String, Value>,
    model_type: &'a str,
}

impl<'a> Cfg<'a> {
    fn get(&self, key: &str) -> Option<&'a Value> {
        self.m.get(key).filter(|v| !v.is_null())
    }

    fn uint(&self, key: &str) -> Result<Option<N>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => {
                let n = match v.as_u64() {
                    Some(n) => n as N,
                    None => match v.as_f64() {
                        Some(x) if x >= 0.0 && x.fract() == 0.0 && x < 9.0e15 => x as N,
                        _ => return Err(crate::messages::say("config-not-whole", &[("key", key), ("value", &v.to_string())])),
                    },
                };
                // Larger than any model's value: refused before the counts can overflow.
                if n > MAX_VALUE {
                    return Err(crate::messages::say("config-too-large", &[("key", key), ("value", &n.to_string()), ("max", &MAX_VALUE.to_string())]));
                }
                Ok(Some(n))
            }
        }
    }

    fn need(&self, key: &str) -> Result<N, String> {
        self.uint(key)?.ok_or_else(|| crate::messages::say("config-lacks", &[("model_type", self.model_type), ("key", key)]))
    }

    fn or(&self, key: &str, default: N) -> Result<N, String> {
        Ok(self.uint(key)?.unwrap_or(default))
    }

    fn flag(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(crate::messages::say("config-not-bool", &[("key", key), ("value", &v.to_string())])),
        }
    }

    fn positive(&self, key: &str, n: N) -> Result<u32, String> {
        if n == 0 || n > u32::MAX as N {
            return Err(crate::messages::say("config-out-of-range", &[("key", key), ("max", &u32::MAX.to_string()), ("value", &n.to_string())]));
        }
        Ok(n as u32)
    }
}

/// Which layers use a sliding window, as transformers decides it: the config's `layer_types`
/// when present, otherwise the model type's own rule.
fn sliding_layers(c: &Cfg, layers: N) -> Result<Option<(u32, u32)>, String> {
    // The configuration classes' defaults when the key is absent (a `null` turns the window off).
    let class_default = match c.model_type {
        "gemma2" | "gemma3_text" | "cohere2" => Some(4096),
        "gpt_oss" => Some(128),
        _ => None,
    };
    let window = match c.m.get("sliding_window") {
        None => class_default,
        Some(_) => c.uint("sliding_window")?,
    };
    let window = match window {
        Some(w) if w > 0 => w,
        _ => return Ok(None),
    };
    if let Some(types) = c.get("layer_types") {
        let arr = types.as_array().ok_or_else(|| crate::messages::say("config-layer-types-type", &[]))?;
        if arr.len() as N != layers {
            return Err(crate::messages::say("config-layer-types-count", &[("count", &arr.len().to_string()), ("layers", &layers.to_string())]));
        }
        let n = arr.iter().filter(|t| t.as_str() == Some("sliding_attention")).count() as u32;
        return Ok(if n == 0 { None } else { Some((window as u32, n)) });
    }
    let every = |p: N| if p == 0 { 0 } else { layers - layers / p };
    let n = match c.model_type {
        // Even layers slide (layer 0, 2, …), odd ones attend globally.
        "gemma2" | "gpt_oss" => layers.div_ceil(2),
        // Every `sliding_window_pattern`-th layer is global, the others slide.
        "gemma3_text" => every(c.or("sliding_window_pattern", 6)?),
        "cohere2" => every(c.or("sliding_window_pattern", 4)?),
        // Qwen2-family configs carry a window that only applies with `use_sliding_window`, from
        // layer `max_window_layers` on.
        "qwen2" | "qwen2_moe" | "qwen3" | "qwen3_moe" => {
            if !c.flag("use_sliding_window", false)? {
                0
            } else {
                layers.saturating_sub(c.or("max_window_layers", 28)?)
            }
        }
        // Mistral, Mixtral, Phi-3, Starcoder2: one window for every layer.
        _ => layers,
    };
    Ok(if n == 0 { None } else { Some((window as u32, n as u32)) })
}

/// Parameters of a SigLIP vision tower and Gemma 3's projector, from the `vision_config` and the
/// text model's width.
fn gemma3_vision_params(vc: &Map<String, Value>, text_hidden: N) -> Result<N, String> {
    let c = Cfg { m: vc, model_type: "siglip_vision_model" };
    let h = c.or("hidden_size", 768)?;
    let i = c.or("intermediate_size", 3072)?;
    let layers = c.or("num_hidden_layers", 12)?;
    let channels = c.or("num_channels", 3)?;
    let image = c.or("image_size", 224)?;
    let patch = c.or("patch_size", 16)?;
    if patch == 0 {
        return Err(crate::messages::say("config-at-least-one", &[("key", "vision_config.patch_size")]));
    }
    let positions = (image / patch) * (image / patch);
    let embeddings = channels * patch * patch * h + h + positions * h;
    // Two layer norms (weight and bias), q/k/v/o with biases, a two-matrix MLP with biases.
    let layer = 4 * h + 4 * (h * h + h) + (h * i + i) + (i * h + h);
    let post_norm = 2 * h;
    // Projector: an RMS norm over the vision width and a vision → text matrix.
    let projector = h + h * text_hidden;
    Ok(embeddings + layers * layer + post_norm + projector)
}

/// The values of [`REQUIRED_FIELDS`] a config carries (under ChatGLM's names too), as text: what
/// the hand form starts from when the config itself cannot be read.
pub fn hand_fields(config: &Value) -> Vec<(&'static str, String)> {
    let Some(top) = config.as_object() else { return Vec::new() };
    let renamed = (top.get("model_type").and_then(Value::as_str) == Some("chatglm")).then(|| chatglm_keys(top));
    let m = renamed.as_ref().unwrap_or(top);
    let m = m.get("text_config").and_then(Value::as_object).unwrap_or(m);
    REQUIRED_FIELDS
        .iter()
        .filter_map(|f| {
            let v = m.get(*f)?;
            Some((*f, v.as_u64().map(|n| n.to_string()).or_else(|| v.as_bool().map(|b| b.to_string()))?))
        })
        .collect()
}

/// Builds the engine's architecture from a `config.json` object. `name` labels it in results
/// (default: the config's `_name_or_path`, else its `model_type`).
pub fn llm_from_config(config: &Value, name: Option<&str>) -> Result<(Llm, ArchOrigin), String> {
    let top = config.as_object().ok_or_else(|| crate::messages::say("config-not-object", &[]))?;
    let top_type = top
        .get("model_type")
        .and_then(Value::as_str)
        .ok_or_else(|| crate::messages::say("config-no-model-type", &[("fields", &REQUIRED_FIELDS.join(", "))]))?;
    // Multimodal Gemma 3 keeps the language model under `text_config`.
    let renamed = (top_type == "chatglm").then(|| chatglm_keys(top));
    let top = renamed.as_ref().unwrap_or(top);
    let (m, model_type, vision) = if top_type == "gemma3" {
        let text = top.get("text_config").and_then(Value::as_object).ok_or_else(|| crate::messages::say("config-no-text-config", &[]))?;
        (text, "gemma3_text", top.get("vision_config").and_then(Value::as_object))
    } else {
        (top, top_type, None)
    };
    // An unknown model_type with the standard keys: the Llama layout, said so.
    let assumed_layout = !MODEL_TYPES.iter().any(|(t, _)| *t == model_type) && STANDARD_KEYS.iter().all(|k| m.get(*k).is_some_and(|v| !v.is_null()));
    let model_type = if assumed_layout { "llama" } else { model_type };
    if !MODEL_TYPES.iter().any(|(t, _)| *t == model_type) {
        let known: Vec<&str> = MODEL_TYPES.iter().map(|(t, _)| *t).collect();
        return Err(crate::messages::say(
            "config-unknown-model-type",
            &[("model_type", model_type), ("known", &known.join(", ")), ("fields", &REQUIRED_FIELDS.join(", "))],
        ));
    }
    let c = Cfg { m, model_type };
    let h = c.need("hidden_size")?;
    let layers = c.need("num_hidden_layers")?;
    let heads = c.need("num_attention_heads")?;
    if heads == 0 {
        return Err(crate::messages::say("config-at-least-one", &[("key", "num_attention_heads")]));
    }
    let kv = c.or("num_key_value_heads", heads)?;
    let vocab = c.need("vocab_size")?;
    let gemma_like = matches!(model_type, "gemma" | "gemma2" | "gemma3_text");
    let head_default = match model_type {
        "gemma" | "gemma2" | "gemma3_text" => 256,
        "gpt_oss" => 64,
        _ => h / heads,
    };
    let d = c.or("head_dim", head_default)?;
    let tie_default = matches!(model_type, "gemma" | "gemma2" | "gemma3_text" | "cohere" | "cohere2" | "starcoder2");
    // Gemma 3's multimodal config carries the tie flag at the top level.
    let tied = match top.get("tie_word_embeddings") {
        Some(Value::Bool(b)) if vision.is_some() => *b,
        _ => c.flag("tie_word_embeddings", tie_default)?,
    };
    let max_context = c.or("max_position_embeddings", if gemma_like { 131072 } else { 4096 })?;
    // Kimi K2 is DeepSeek-V3's architecture under its own name.
    let model_type = if model_type == "kimi_k2" { "deepseek_v3" } else { model_type };
    let c = Cfg { m, model_type };
    let is_mla = matches!(model_type, "deepseek_v2" | "deepseek_v3");
    let i = match c.uint("intermediate_size")? {
        Some(i) => i,
        None if model_type == "gpt_oss" => c.need("intermediate_size")?,
        None => return Err(crate::messages::say("config-lacks", &[("model_type", model_type), ("key", "intermediate_size")])),
    };

    // --- attention, per layer -----------------------------------------------------------------
    let mut mla = (None, None, None, None, None);
    let attention = if is_mla {
        let rope = c.need("qk_rope_head_dim")?;
        let nope = c.need("qk_nope_head_dim")?;
        let v = c.need("v_head_dim")?;
        let kv_rank = c.need("kv_lora_rank")?;
        let q_rank = c.uint("q_lora_rank")?.unwrap_or(0);
        mla = (Some(kv_rank), Some(rope), Some(nope), Some(v), Some(q_rank));
        let bias = c.flag("attention_bias", false)?;
        let q = if q_rank == 0 { h * heads * (nope + rope) } else { h * q_rank + q_rank + q_rank * heads * (nope + rope) };
        let q_bias = if bias && q_rank > 0 { q_rank } else { 0 };
        q + q_bias
            + h * (kv_rank + rope)
            + if bias { kv_rank + rope } else { 0 }
            + kv_rank
            + kv_rank * heads * (nope + v)
            + heads * v * h
            + if bias { h } else { 0 }
    } else {
        let (qo, kvo) = (heads * d, kv * d);
        let weights = h * qo + 2 * h * kvo + qo * h;
        let (qkv_bias, o_bias) = match model_type {
            "qwen2" | "qwen2_moe" => (true, false),
            "chatglm" => (c.flag("add_qkv_bias", false)?, c.flag("add_bias_linear", false)?),
            "starcoder2" => {
                let b = c.flag("use_bias", true)?;
                (b, b)
            }
            "gpt_oss" => {
                let b = c.flag("attention_bias", true)?;
                (b, b)
            }
            _ => {
                let b = c.flag("attention_bias", false)?;
                (b, b)
            }
        };
        let bias = if qkv_bias { qo + 2 * kvo } else { 0 } + if o_bias { h } else { 0 };
        let qk_norm = match model_type {
            "qwen3" | "qwen3_moe" | "gemma3_text" => 2 * d,
            "olmo2" => qo + kvo,
            "cohere" if c.flag("use_qk_norm", false)? => qo + kvo,
            _ => 0,
        };
        let sinks = if model_type == "gpt_oss" { heads } else { 0 };
        weights + bias + qk_norm + sinks
    };

    // --- norms, per layer, and the final norm --------------------------------------------------
    let (layer_norms, final_norm) = match model_type {
        "gemma2" | "gemma3_text" => (4 * h, h),
        "cohere" | "cohere2" => (h, h),
        "starcoder2" => (4 * h, 2 * h),
        _ => (2 * h, h),
    };

    // --- MLP or experts, per layer -------------------------------------------------------------
    let mlp_bias = c.flag("mlp_bias", false)?;
    let dense_mlp = match model_type {
        "starcoder2" => {
            let b = c.flag("use_bias", true)?;
            2 * h * i + if b { i + h } else { 0 }
        }
        _ => 3 * h * i + if mlp_bias { 2 * i + h } else { 0 },
    };
    let mut moe = MoeFields::default();
    let mut mlp_total: N = 0;
    let mut dense_layers: N = 0;
    match model_type {
        "mixtral" => {
            let e = c.need("num_local_experts")?;
            moe = MoeFields { experts: e, per_token: c.need("num_experts_per_tok")?, inter: i, shared: 0 };
            mlp_total = layers * (h * e + e * 3 * h * i);
        }
        "qwen2_moe" | "qwen3_moe" => {
            let e = c.need("num_experts")?;
            let mi = c.need("moe_intermediate_size")?;
            let step = c.or("decoder_sparse_step", 1)?;
            let only: Vec<N> = match c.get("mlp_only_layers") {
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_u64).map(N::from).collect(),
                _ => Vec::new(),
            };
            let shared_i = if model_type == "qwen2_moe" { c.or("shared_expert_intermediate_size", 0)? } else { 0 };
            let sparse = 3 * h * mi * e + h * e + if shared_i > 0 { 3 * h * shared_i + h } else { 0 };
            for l in 0..layers {
                let is_sparse = !only.contains(&l) && e > 0 && step > 0 && (l + 1) % step == 0;
                if is_sparse {
                    mlp_total += sparse;
                } else {
                    mlp_total += dense_mlp;
                    dense_layers += 1;
                }
            }
            let shared = if mi > 0 { shared_i.div_ceil(mi) } else { 0 };
            moe = MoeFields { experts: e, per_token: c.need("num_experts_per_tok")?, inter: mi, shared };
        }
        "deepseek_v2" | "deepseek_v3" => {
            let e = c.need("n_routed_experts")?;
            let mi = c.need("moe_intermediate_size")?;
            let shared = c.or("n_shared_experts", 0)?;
            let first = c.or("first_k_dense_replace", 0)?;
            let freq = c.or("moe_layer_freq", 1)?.max(1);
            let score_bias = if model_type == "deepseek_v3" { e } else { 0 };
            let sparse = e * h + score_bias + e * 3 * h * mi + shared * 3 * h * mi;
            for l in 0..layers {
                if e > 0 && l >= first && l % freq == 0 {
                    mlp_total += sparse;
                } else {
                    mlp_total += dense_mlp;
                    dense_layers += 1;
                }
            }
            moe = MoeFields { experts: e, per_token: c.need("num_experts_per_tok")?, inter: mi, shared };
        }
        "gpt_oss" => {
            let e = c.need("num_local_experts")?;
            let router = e * h + e;
            let experts = e * (h * 2 * i + 2 * i) + e * (i * h + h);
            mlp_total = layers * (router + experts);
            moe = MoeFields { experts: e, per_token: c.need("num_experts_per_tok")?, inter: i, shared: 0 };
        }
        _ => mlp_total = layers * dense_mlp,
    }

    let embed = vocab * h;
    let head = if tied { 0 } else { vocab * h };
    let text_params = embed + head + layers * (attention + layer_norms) + mlp_total + final_norm;
    let (vision_params, counted) = match vision {
        Some(vc) => {
            let p = gemma3_vision_params(vc, h)?;
            (p, Some(format!("the language model and the vision tower with its projector ({p} parameters); text-only use still loads both")))
        }
        None => (0, None),
    };
    let params = text_params + vision_params;
    let active = if moe.experts > 0 {
        // Each token uses its routed experts' share of the expert parameters.
        let all_experts = moe.experts * 3 * h * moe.inter * (layers - dense_layers);
        let used = moe.per_token * 3 * h * moe.inter * (layers - dense_layers);
        Some(params - all_experts + used)
    } else {
        None
    };
    let sliding = sliding_layers(&c, layers)?;
    let label = name
        .map(str::to_string)
        .or_else(|| top.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string))
        .unwrap_or_else(|| format!("{top_type} model from config.json"));
    let attention_kind = if is_mla {
        Attention::Mla
    } else if kv < heads {
        Attention::Gqa
    } else {
        Attention::Mha
    };
    let u32f = |key: &str, n: N| c.positive(key, n);
    let count = |n: N| u64::try_from(n).map_err(|_| crate::messages::say("config-too-many-params", &[("count", &n.to_string())]));
    let params = count(params)?;
    let active = active.map(count).transpose()?;
    let llm = Llm {
        id: format!("config:{}", label),
        name: label,
        params,
        layers: u32f("num_hidden_layers", layers)?,
        hidden: u32f("hidden_size", h)?,
        intermediate: u32f("intermediate_size", i)?,
        heads: u32f("num_attention_heads", heads)?,
        kv_heads: u32f("num_key_value_heads", kv)?,
        head_dim: u32f("head_dim", d)?,
        vocab: u32f("vocab_size", vocab)?,
        max_context: max_context as u64,
        tied_embeddings: tied,
        attention: attention_kind,
        active_params: active,
        experts: (moe.experts > 0).then_some(moe.experts as u32),
        experts_per_token: (moe.experts > 0).then_some(moe.per_token as u32),
        moe_intermediate: (moe.experts > 0).then_some(moe.inter as u32),
        shared_experts: (moe.shared > 0).then_some(moe.shared as u32),
        dense_layers: (dense_layers > 0 && moe.experts > 0).then_some(dense_layers as u32),
        kv_lora_rank: mla.0.map(|x| x as u32),
        qk_rope_head_dim: mla.1.map(|x| x as u32),
        qk_nope_head_dim: mla.2.map(|x| x as u32),
        v_head_dim: mla.3.map(|x| x as u32),
        q_lora_rank: mla.4.filter(|&r| r > 0).map(|x| x as u32),
        sliding_window: sliding.map(|s| s.0),
        sliding_layers: sliding.map(|s| s.1),
        qk_norm: matches!(model_type, "qwen3" | "qwen3_moe" | "gemma3_text" | "olmo2"),
        model_type: Some(model_type.to_string()),
        repo: None,
        source: Source {
            kind: SourceKind::ModelCard,
            title: "config.json given with the workload".into(),
            url: None,
            passage: format!("model_type {top_type}"),
            version: None,
            accessed: String::new(),
            submitters: None,
            seed: None,
            compute: None,
            expect: None,
            unit: None,
            tolerance: None,
            aggregate: None,
            backs: Vec::new(),
        },
    };
    Ok((llm, ArchOrigin { source: "hf_config".into(), model_type: Some(top_type.to_string()), counted, assumed_layout }))
}

#[derive(Default)]
struct MoeFields {
    experts: N,
    per_token: N,
    inter: N,
    shared: N,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn llama_like(extra: Value) -> Value {
        let mut v = json!({
            "model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000, "tie_word_embeddings": false,
            "max_position_embeddings": 2048
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    #[test]
    fn llama_count_by_hand() {
        let (m, o) = llm_from_config(&llama_like(json!({})), None).unwrap();
        // embed + head + 4 × (q 64·64 + k,v 2·64·32 + o 64·64 + MLP 3·64·160 + 2 norms) + final norm
        let layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 160 + 2 * 64;
        assert_eq!(m.params, 2 * 1000 * 64 + 4 * layer + 64);
        assert_eq!((m.head_dim, m.kv_heads, m.attention), (16, 2, Attention::Gqa));
        assert_eq!(o.model_type.as_deref(), Some("llama"));
        assert_eq!(m.name, "llama model from config.json");
    }

    #[test]
    fn biases_and_norms_follow_the_model_type() {
        let base = llm_from_config(&llama_like(json!({})), None).unwrap().0.params;
        let qwen2 = llm_from_config(&llama_like(json!({"model_type": "qwen2"})), None).unwrap().0.params;
        assert_eq!(qwen2 - base, 4 * (64 + 2 * 32), "q, k, v biases");
        let qwen3 = llm_from_config(&llama_like(json!({"model_type": "qwen3", "head_dim": 16})), None).unwrap().0;
        assert_eq!(qwen3.params - base, 4 * 2 * 16, "per-head q and k norms");
        assert!(qwen3.qk_norm);
        let olmo2 = llm_from_config(&llama_like(json!({"model_type": "olmo2"})), None).unwrap().0.params;
        assert_eq!(olmo2 - base, 4 * (64 + 32), "full-width q and k norms");
        let gemma2 = llm_from_config(&llama_like(json!({"model_type": "gemma2", "head_dim": 16})), None).unwrap().0.params;
        assert_eq!(gemma2 - base, 4 * 2 * 64, "two more norms per block");
        let bias = llm_from_config(&llama_like(json!({"attention_bias": true, "mlp_bias": true})), None).unwrap().0.params;
        assert_eq!(bias - base, 4 * ((64 + 2 * 32 + 64) + (2 * 160 + 64)));
    }

    #[test]
    fn sliding_layers_follow_the_config() {
        let g3 = json!({"model_type": "gemma3_text", "sliding_window": 512, "num_hidden_layers": 26, "head_dim": 16});
        let (m, _) = llm_from_config(&llama_like(g3), None).unwrap();
        // Layers 6, 12, 18, 24 (1-based) are global: 26 − 4 slide.
        assert_eq!(m.sliding(), Some((22, 512)));
        let types: Vec<&str> = (0..4).map(|i| if i % 2 == 0 { "sliding_attention" } else { "full_attention" }).collect();
        let (m, _) = llm_from_config(&llama_like(json!({"sliding_window": 128, "layer_types": types})), None).unwrap();
        assert_eq!(m.sliding(), Some((2, 128)));
        // Qwen2 ignores its window unless use_sliding_window is set.
        let (m, _) = llm_from_config(&llama_like(json!({"model_type": "qwen2", "sliding_window": 4096})), None).unwrap();
        assert_eq!(m.sliding(), None);
        let (m, _) = llm_from_config(&llama_like(json!({"model_type": "mistral", "sliding_window": 4096})), None).unwrap();
        assert_eq!(m.sliding(), Some((4, 4096)));
        let (m, _) = llm_from_config(&llama_like(json!({"model_type": "mistral", "sliding_window": null})), None).unwrap();
        assert_eq!(m.sliding(), None);
        let bad = llama_like(json!({"sliding_window": 8, "layer_types": ["full_attention"]}));
        assert!(llm_from_config(&bad, None).unwrap_err().contains("1 entries for 4 layers"));
    }

    #[test]
    fn moe_and_mla() {
        let moe = json!({"model_type": "qwen3_moe", "head_dim": 16, "num_experts": 8, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 32, "mlp_only_layers": [0]});
        let (m, _) = llm_from_config(&llama_like(moe), None).unwrap();
        assert_eq!((m.experts, m.experts_per_token, m.moe_intermediate, m.dense_layers), (Some(8), Some(2), Some(32), Some(1)));
        let active = m.active_params.unwrap();
        assert_eq!(m.params - active, 3 * (8 - 2) * 3 * 64 * 32, "three sparse layers use 2 of 8 experts");
        let mla = json!({"model_type": "deepseek_v2", "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 16,
                          "v_head_dim": 16, "q_lora_rank": null, "n_routed_experts": 4, "num_experts_per_tok": 2,
                          "moe_intermediate_size": 32, "n_shared_experts": 1, "first_k_dense_replace": 1});
        let (m, _) = llm_from_config(&llama_like(mla), None).unwrap();
        assert_eq!(m.attention, Attention::Mla);
        assert_eq!(m.kv_elements_per_layer_token(), 32 + 8);
        assert_eq!(m.q_lora_rank, None);
    }

    #[test]
    fn multimodal_gemma3_reads_text_config_and_counts_the_vision_tower() {
        let cfg = json!({
            "model_type": "gemma3", "tie_word_embeddings": true,
            "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
                            "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16, "vocab_size": 1000, "sliding_window": 64},
            "vision_config": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "image_size": 28, "patch_size": 14}
        });
        let (m, o) = llm_from_config(&cfg, Some("tiny gemma 3")).unwrap();
        assert!(o.counted.unwrap().contains("vision tower"));
        assert_eq!(m.name, "tiny gemma 3");
        let vision = 3 * 14 * 14 * 32 + 32 + 4 * 32 + (4 * 32 + 4 * (32 * 32 + 32) + (32 * 64 + 64) + (64 * 32 + 32)) + 2 * 32 + (32 + 32 * 64);
        let text = 1000 * 64 + 2 * (64 * 64 + 2 * 64 * 16 + 64 * 64 + 2 * 16 + 4 * 64 + 3 * 64 * 160) + 64;
        assert_eq!(m.params, text + vision);
        assert!(m.tied_embeddings);
    }

    #[test]
    fn unknown_or_broken_configs_say_what_is_missing() {
        let e = llm_from_config(&json!({"model_type": "mamba"}), None).unwrap_err();
        assert!(e.contains("`mamba`") && e.contains("num_key_value_heads") && e.contains("head_dim"), "{e}");
        let e = llm_from_config(&json!({"hidden_size": 8}), None).unwrap_err();
        assert!(e.contains("no `model_type`") && e.contains("vocab_size"), "{e}");
        let mut c = llama_like(json!({}));
        c.as_object_mut().unwrap().remove("vocab_size");
        assert!(llm_from_config(&c, None).unwrap_err().contains("lacks `vocab_size`"));
        let e = llm_from_config(&llama_like(json!({"hidden_size": "big"})), None).unwrap_err();
        assert!(e.contains("`hidden_size` must be a whole number"), "{e}");
        let e = llm_from_config(&llama_like(json!({"num_attention_heads": 0})), None).unwrap_err();
        assert!(e.contains("at least 1"), "{e}");
        assert!(llm_from_config(&json!([1]), None).unwrap_err().contains("JSON object"));
        // Absurd sizes are refused with a message, never an overflow.
        let e = llm_from_config(&llama_like(json!({"hidden_size": 4_000_000_000u64, "vocab_size": 4_000_000_000u64})), None).unwrap_err();
        assert!(e.contains("`hidden_size` is 4000000000, more than any model has"), "{e}");
        let big = json!({"hidden_size": 1 << 24, "intermediate_size": 1 << 24, "num_hidden_layers": 1 << 24, "vocab_size": 1 << 24,
                         "num_attention_heads": 1, "head_dim": 1 << 24});
        assert!(llm_from_config(&llama_like(big), None).unwrap_err().contains("more than any model"));
    }

    #[test]
    fn an_unknown_model_type_with_the_standard_keys_is_read_in_the_llama_layout() {
        // InternLM3-8B-Instruct's config.json (model_type internlm3): the standard keys, nothing
        // the engine would have to guess. About 8.8 billion parameters.
        let c = json!({"model_type": "internlm3", "num_hidden_layers": 48, "hidden_size": 4096, "intermediate_size": 10240,
                       "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 128512,
                       "tie_word_embeddings": false, "max_position_embeddings": 32768, "bias": false});
        let (m, origin) = llm_from_config(&c, None).unwrap();
        assert!(origin.assumed_layout);
        assert_eq!(origin.model_type.as_deref(), Some("internlm3"));
        assert_eq!((m.layers, m.kv_heads, m.head_dim), (48, 2, 128));
        assert!((8.7e9..8.9e9).contains(&(m.params as f64)), "{}", m.params);
        // Without them, still refused, naming the fields a hand description needs.
        assert!(llm_from_config(&json!({"model_type": "internlm3", "hidden_size": 4096}), None).unwrap_err().contains("num_key_value_heads"));
    }

    #[test]
    fn chatglm_keys_are_read_under_their_own_names() {
        // GLM-4-9B's config.json (THUDM/glm-4-9b, configuration_chatglm.py's names); its model
        // card gives 9.4 billion parameters.
        let c = json!({"model_type": "chatglm", "num_layers": 40, "padded_vocab_size": 151552, "hidden_size": 4096,
                       "ffn_hidden_size": 13696, "kv_channels": 128, "num_attention_heads": 32, "seq_length": 131072,
                       "multi_query_attention": true, "multi_query_group_num": 2, "add_qkv_bias": true, "add_bias_linear": false});
        let (m, origin) = llm_from_config(&c, None).unwrap();
        assert!(!origin.assumed_layout);
        assert_eq!((m.layers, m.heads, m.kv_heads, m.head_dim, m.intermediate, m.vocab), (40, 32, 2, 128, 13696, 151552));
        assert_eq!(m.max_context, 131072);
        assert!(!m.tied_embeddings);
        assert!((9.35e9..9.45e9).contains(&(m.params as f64)), "{}", m.params);
        // What the hand form starts from, under the standard names.
        let hand = hand_fields(&c);
        assert!(hand.contains(&("num_hidden_layers", "40".to_string())) && hand.contains(&("num_key_value_heads", "2".to_string())), "{hand:?}");
    }
}
