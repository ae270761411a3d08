//! The calculator's state as a URL query (`?kind=training&seq=2048&...`): the same parsing for
//! the site, the guides' calculator links and tests.

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
        _ => r#"{"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"bf16","context":8192,"batch":1,"engine":"ollama"}"#,
    };
    serde_json::from_str(text).expect("the presets are JSON objects")
}

/// Popular setups: (id, workload). The site labels each from `preset.<id>` in its language.
pub fn presets() -> Vec<(&'static str, Value)> {
    const PRESETS: [(&str, &str); 8] = [
        (
            "llama8b_ollama",
            r#"{"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"bf16","context":8192,"batch":1,"engine":"ollama"}"#,
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

fn decode(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                if let Ok(x) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                    out.push(x);
                    i += 2;
                } else {
                    out.push(b'%');
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (c as char).to_string(),
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// `?kind=training&seq=2048&gradient_checkpointing=true` → a workload object (numbers and
/// booleans typed; a value that is a JSON object or array, such as a user's `model` with its
/// config or `lora_targets`, is kept as JSON). A query without `kind` starts from the LLM preset;
/// one with only `kind` starts from that task's preset.
pub fn parse_query(query: &str) -> State {
    let mut m = Map::new();
    for kv in query.trim_start_matches('?').split('&').filter(|s| !s.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let (k, v) = (decode(k), decode(v));
        let structured = (v.starts_with('{') || v.starts_with('[')).then(|| serde_json::from_str::<Value>(&v).ok()).flatten();
        let value = match v.as_str() {
            _ if structured.is_some() => structured.unwrap(),
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => match v.parse::<u64>() {
                Ok(n) => json!(n),
                Err(_) => match crate::format::parse_decimal(&v) {
                    Some(x) if v.contains('.') => json!(x),
                    _ => Value::String(v),
                },
            },
        };
        m.insert(k, value);
    }
    let kind = m.get("kind").and_then(|k| k.as_str()).unwrap_or("llm-inference").to_string();
    if m.len() <= 1 {
        return preset(&kind);
    }
    m
}

/// Keys of the calculator state that are about the card, not the workload: `card` (a catalog id or a
/// size), `other` (GiB other processes use), `ram` (GiB of system RAM), `card2` (a second card to
/// compare).
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
    let Value::Object(mut out) = workload.to_value() else { return s.clone() };
    if let super::Workload::Diffusion(d) = &workload {
        if let Some(m) = ds.diffusion_model(&d.model) {
            if let Ok((nw, nh)) = super::diffusion::native_size(ds, m) {
                out.insert("width".into(), json!(d.width.unwrap_or(nw)));
                out.insert("height".into(), json!(d.height.unwrap_or(nh)));
            }
            if m.modality == crate::Modality::Video {
                if let Ok(f) = super::diffusion::default_frames(ds, m) {
                    out.insert("frames".into(), json!(d.frames.unwrap_or(f)));
                }
            }
            out.insert("cfg".into(), json!(d.cfg.unwrap_or_else(|| super::diffusion::default_cfg(m.family))));
        }
    }
    out.retain(|_, v| !v.is_null());
    for key in CARD_KEYS {
        if let Some(v) = s.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    out
}

pub fn to_query(state: &State) -> String {
    let mut keys: Vec<&String> = state.keys().collect();
    crate::sort_short_by(&mut keys, |a, b| (a.as_str() != "kind", a.as_str() != "model", a).cmp(&(b.as_str() != "kind", b.as_str() != "model", b)));
    let parts: Vec<String> = keys
        .into_iter()
        .filter(|k| !state[*k].is_null())
        .map(|k| {
            let v = match &state[k] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{}={}", encode(k), encode(&v))
        })
        .collect();
    format!("?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_round_trips_and_types_values() {
        let s = preset("training");
        let q = to_query(&s);
        assert_eq!(parse_query(&q), s);
        let p = parse_query("?kind=llm-inference&model=qwen3-8b&context=32768&all_logits=true&gpu_memory_utilization=0.85&weights=Q4_K_M");
        assert_eq!(p["context"], json!(32768));
        assert_eq!(p["all_logits"], json!(true));
        assert_eq!(p["gpu_memory_utilization"], json!(0.85));
        assert_eq!(parse_query("?kind=diffusion"), preset("diffusion"));
        assert_eq!(parse_query(""), preset("llm-inference"));
        assert!(q.starts_with("?kind=training&model=llama-3.1-8b"), "{q}");
        assert_eq!(decode("a%2Fb+c"), "a/b c");
        assert_eq!(encode("llama.cpp"), "llama.cpp");
    }

    #[test]
    fn a_model_object_and_arrays_round_trip_as_json() {
        let mut s = preset("training");
        s.insert("model".into(), json!({"hf_config": {"model_type": "qwen2", "hidden_size": 896}, "name": "Qwen2.5 0.5B & co"}));
        s.insert("lora_targets".into(), json!(["q_proj", "v_proj"]));
        let q = to_query(&s);
        assert_eq!(parse_query(&q), s);
        // Text that only looks like JSON stays text.
        assert_eq!(parse_query("?kind=training&model={oops")["model"], json!("{oops"));
    }
}
