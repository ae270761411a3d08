//! The calculator's state and its URL query (`?kind=training&seq=2048&…`): one mapping for the
//! site's form and links, the guides' calculator links and the tests. Tested in
//! `dataset/core/tests/form.rs` against the real catalogs.

use serde_json::{Map, Value, json};

/// A workload as a JSON object, keyed like the fit input.
pub type State = Map<String, Value>;

/// The starting workload of each task (JSON text parsed when asked: the browser build stays
/// smaller than with the same objects built in code).
pub fn preset(kind: &str) -> State {
    let text = match kind {
        "training" => {
            r#"{"kind":"training","model":"llama-3.1-8b","method":"qlora","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true,"lora_rank":16}"#
        }
        "diffusion" => r#"{"kind":"diffusion","model":"flux.1-dev","precision":"fp8","width":1024,"height":1024,"batch":1,"cfg":false}"#,
        _ => r#"{"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"fp16","context":8192,"batch":1,"engine":"ollama"}"#,
    };
    serde_json::from_str(text).expect("the presets are JSON objects")
}

/// Popular setups: (id, workload). The site labels each from `preset.<id>` in its language.
pub fn presets() -> Vec<(&'static str, Value)> {
    const PRESETS: [(&str, &str); 8] = [
        (
            "llama8b_ollama",
            r#"{"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"fp16","context":8192,"batch":1,"engine":"ollama"}"#,
        ),
        (
            "qwen8b_transformers",
            r#"{"kind":"llm-inference","model":"qwen3-8b","weights":"bf16","kv_cache":"bf16","context":32768,"batch":1,"engine":"transformers"}"#,
        ),
        ("qwen32b_vllm", r#"{"kind":"llm-inference","model":"qwen3-32b","weights":"awq-int4","kv_cache":"fp8","context":16384,"batch":4,"engine":"vllm"}"#),
        (
            "llama8b_qlora",
            r#"{"kind":"training","model":"llama-3.1-8b","method":"qlora","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true,"lora_rank":16}"#,
        ),
        (
            "llama1b_full",
            r#"{"kind":"training","model":"llama-3.2-1b","method":"full","precision":"mixed-bf16","optimizer":"adamw","seq":2048,"batch":4,"gradient_checkpointing":true}"#,
        ),
        ("flux_fp8", r#"{"kind":"diffusion","model":"flux.1-dev","precision":"fp8","width":1024,"height":1024,"batch":1,"cfg":false}"#),
        ("sdxl_fp16", r#"{"kind":"diffusion","model":"sdxl","precision":"fp16","width":1024,"height":1024,"batch":1,"cfg":true}"#),
        ("wan13b_480p", r#"{"kind":"diffusion","model":"wan2.1-t2v-1.3b","precision":"bf16","width":832,"height":480,"frames":81,"batch":1,"cfg":true}"#),
    ];
    PRESETS.iter().map(|(id, text)| (*id, serde_json::from_str(text).expect("the presets are JSON"))).collect()
}

/// A query's value, typed: `true`/`false` as booleans, digits as numbers, a JSON object or array
/// (a reader's `model` with its config, `lora_targets`) as JSON; anything else as text, so that a
/// value the engine refuses reaches it and its message names the field.
fn typed(v: &str) -> Value {
    if v.starts_with('{') || v.starts_with('[') {
        if let Ok(x) = serde_json::from_str::<Value>(v) {
            return x;
        }
    }
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => match v.parse::<u64>() {
            Ok(n) => json!(n),
            Err(_) => match crate::format::parse_decimal(v) {
                Some(x) if v.contains('.') => json!(x),
                _ => Value::String(v.to_string()),
            },
        },
    }
}

/// The fields a query names (`?kind=training&seq=2048&…`), typed, read with the URL form
/// encoding (`form_urlencoded`); nothing filled in.
pub fn decode(query: &str) -> State {
    // Inserted one by one: collecting into the map would sort, and bring a sort into the
    // calculator's browser bundle for nothing.
    let mut s = State::new();
    for (k, v) in form_urlencoded::parse(query.trim_start_matches('?').as_bytes()) {
        s.insert(k.into_owned(), typed(&v));
    }
    s
}

/// The task a link means when it names no kind: a catalog diffusion model is an image or video
/// workload; fields only training has (`method`, `seq`, `optimizer`, …) make it training; any other
/// model (a catalog LLM, a reader's config, a Hub id) is an LLM's inference.
pub fn infer_kind(ds: &crate::Dataset, named: &State) -> &'static str {
    const TRAINING: [&str; 8] = ["method", "seq", "optimizer", "lora_rank", "gradient_checkpointing", "zero", "fsdp", "cpu_offload"];
    match named.get("model").and_then(Value::as_str) {
        Some(id) if ds.diffusion_model(id).is_some() => "diffusion",
        _ if TRAINING.iter().any(|k| named.contains_key(*k)) => "training",
        _ => "llm-inference",
    }
}

/// The state a set of named fields opens: what the form shows after a reader picks the kind
/// (its preset), the engine, the model, and then types each other field — each through
/// [`super::form::set_field`], the form's own rule — with every field the workload takes written
/// out at its default ([`complete`]). A link and the form therefore cannot disagree. A kind the
/// engine does not know is kept as given, so its message names it.
pub fn resolve(ds: &crate::Dataset, named: &State) -> State {
    use super::form::{Field, set_field};
    let kind = match named.get("kind") {
        Some(Value::String(k)) if matches!(k.as_str(), "llm-inference" | "training" | "diffusion") => k.clone(),
        Some(_) => return named.clone(),
        None => infer_kind(ds, named).to_string(),
    };
    let mut s = complete(ds, &preset(&kind));
    for (field, key) in [(Field::Engine, "engine"), (Field::Model, "model")] {
        if let Some(v) = named.get(key) {
            set_field(ds, &mut s, field, v.clone());
        }
    }
    for (k, v) in named {
        if !matches!(k.as_str(), "kind" | "engine" | "model") {
            if v.is_null() {
                s.remove(k);
            } else {
                s.insert(k.clone(), v.clone());
            }
        }
    }
    complete(ds, &s)
}

/// The state a calculator URL opens ([`decode`], then [`resolve`]).
pub fn parse_query(ds: &crate::Dataset, query: &str) -> State {
    resolve(ds, &decode(query))
}

/// The card fields of a calculator state (not workload fields): the card, what other processes
/// use on it, system RAM, the other cards in the same machine (`cards`, comma-separated) and a
/// card to compare.
pub const CARD_KEYS: [&str; 5] = ["card", "other", "ram", "cards", "card2"];

/// A state with every field the workload takes written out at its default (a link that names only
/// a few fields opens with every control filled): the engine's own defaults, the task preset's
/// context or sequence when the link has none, and a diffusion model's native size, frames and
/// guidance. A state the engine cannot read is returned as it is (its error is shown).
pub fn complete(ds: &crate::Dataset, s: &State) -> State {
    let kind = s.get("kind").and_then(|k| k.as_str()).unwrap_or("llm-inference").to_string();
    let mut w = s.clone();
    for key in CARD_KEYS {
        w.remove(key);
    }
    w.insert("kind".into(), json!(kind));
    let preset = preset(&kind);
    for required in ["model", "context", "seq"] {
        if !w.contains_key(required) {
            if let Some(v) = preset.get(required) {
                w.insert(required.into(), v.clone());
            }
        }
    }
    let Ok(workload) = super::Workload::from_value(&Value::Object(w)) else { return s.clone() };
    let Value::Object(mut filled) = workload.to_value() else { return s.clone() };
    if let super::Workload::Diffusion(d) = &workload {
        if let Some(m) = ds.diffusion_model(&d.model) {
            if let Ok((nw, nh)) = super::diffusion::native_size(ds, m) {
                filled.insert("width".into(), json!(d.width.unwrap_or(nw)));
                filled.insert("height".into(), json!(d.height.unwrap_or(nh)));
            }
            if m.modality == crate::Modality::Video {
                if let Ok(f) = super::diffusion::default_frames(ds, m) {
                    filled.insert("frames".into(), json!(d.frames.unwrap_or(f)));
                }
            }
            filled.insert("cfg".into(), json!(d.cfg.unwrap_or_else(|| super::diffusion::default_cfg(m.family))));
        }
    }
    // Only what is absent is filled: a given value stays exactly as given.
    let mut out = s.clone();
    for (k, v) in filled {
        if !v.is_null() && !out.contains_key(&k) {
            out.insert(k, v);
        }
    }
    out
}

/// The URL query of a state: every field written out (a shared link keeps its meaning if a
/// default changes), `kind` and `model` first, in the URL form encoding.
pub fn to_query(state: &State) -> String {
    let mut keys: Vec<&String> = state.keys().filter(|k| !state[*k].is_null()).collect();
    crate::sort_short_by(&mut keys, |a, b| (a.as_str() != "kind", a.as_str() != "model", a).cmp(&(b.as_str() != "kind", b.as_str() != "model", b)));
    let mut q = form_urlencoded::Serializer::for_suffix(String::from("?"), 1);
    for k in keys {
        match &state[k] {
            Value::String(s) => q.append_pair(k, s),
            other => q.append_pair(k, &other.to_string()),
        };
    }
    q.finish()
}
