//! The calculator's "your model" path in the browser: a model file read header-first with
//! `File.slice` through the lazily loaded parsers (`site/modelfile`), and `config.json` fetched
//! from the Hugging Face Hub and kept in Cache Storage for offline use. The pure parts (what a
//! state's model is, turning facts into a `model` object) compile everywhere; the I/O only with
//! feature `csr`.

use std::collections::BTreeMap;

use headroom_core::Dataset;
use headroom_core::modelfile::describe::{model_object, torch_dtype_format};
use serde_json::{Value, json};

/// State values of `model` that name a Hugging Face repository: `hf:organization/name`.
pub use headroom_core::hf::HUB_PREFIX;

/// localStorage key of the Hub's base address (tests point it at a local server).
pub const HUB_BASE_KEY: &str = "headroom.hub";
pub const DEFAULT_HUB: &str = "https://huggingface.co";

/// The Cache Storage cache that keeps fetched configs (not named `headroom-…`, which the service
/// worker owns and replaces on every deployment).
pub const HUB_CACHE: &str = "hub-configs";

/// Why a Hub id gave no model, for the message the reader sees.
#[derive(Clone, Debug, PartialEq)]
pub enum HubError {
    BadId,
    Gated,
    Missing,
    Offline,
    Other(String),
}

/// What the Hub gave for an id, by id (this page's memory; Cache Storage keeps the bodies).
pub type HubModels = BTreeMap<String, Result<Value, HubError>>;

/// `organization/name`, as the Hub spells repository ids.
pub fn valid_hub_id(id: &str) -> bool {
    let mut parts = id.split('/');
    let ok = |p: Option<&str>| {
        p.is_some_and(|p| !p.is_empty() && p.len() <= 96 && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) && !p.starts_with('.'))
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// The model object for a config fetched from the Hub, with the checkpoint's exact size when its
/// safetensors index was there too (in the dtype the config names).
pub fn hub_model(ds: &Dataset, id: &str, config: &Value, index: Option<&Value>) -> Result<Value, String> {
    headroom_core::hf::llm_from_config(config, Some(id))?;
    let total = index.and_then(|i| i.get("metadata")).and_then(|m| m.get("total_size")).and_then(Value::as_u64);
    let format = torch_dtype_format(config).filter(|f| ds.quant(f).is_some());
    let file = match (format, total) {
        (Some(f), Some(b)) if b > 0 => Some((f, b)),
        _ => None,
    };
    Ok(model_object(&headroom_core::hf::essential(config), Some(id), file))
}

/// "not JSON", with where the parser stopped.
pub fn not_json(what: &str, e: &serde_json::Error) -> String {
    headroom_core::messages::say("not-json", &[("what", what), ("line", &e.line().to_string()), ("column", &e.column().to_string())])
}

/// A model object from a pasted config.json.
pub fn pasted_model(text: &str) -> Result<Value, String> {
    let config: Value = serde_json::from_str(text.trim()).map_err(|e| not_json("config.json", &e))?;
    if !config.is_object() {
        return Err(headroom_core::messages::say("config-not-object", &[]));
    }
    let name = config.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
    headroom_core::hf::llm_from_config(&config, name.as_deref())?;
    Ok(model_object(&headroom_core::hf::essential(&config), name.as_deref(), None))
}

/// A model described by hand with the fields `headroom_core::hf::REQUIRED_FIELDS` names, in
/// the plain Llama layout, named `name` (in the reader's language).
pub fn manual_model(values: &BTreeMap<String, String>, name: &str) -> Result<Value, String> {
    let mut config = json!({"model_type": "llama"});
    for field in headroom_core::hf::REQUIRED_FIELDS {
        let raw = values.get(*field).map(|s| s.trim()).unwrap_or("");
        let v = if *field == "tie_word_embeddings" {
            json!(raw == "true")
        } else {
            match raw.parse::<u64>() {
                Ok(n) if n > 0 => json!(n),
                _ => return Err(headroom_core::messages::say("manual-not-whole", &[("field", field)])),
            }
        };
        config[*field] = v;
    }
    headroom_core::hf::llm_from_config(&config, Some(name))?;
    Ok(json!({"hf_config": config, "name": name}))
}

#[cfg(feature = "csr")]
pub use browser::*;

#[cfg(feature = "csr")]
mod browser {
    use super::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::JsValue;
    use wasm_bindgen_futures::JsFuture;

    /// Loads the parsers' module once (a dynamic `import()` of the file `cargo xtask dist` named)
    /// and calls one of its functions.
    async fn modelfile_call(function: &str, args: &[JsValue]) -> Result<Value, String> {
        let (js, wasm) = parser_urls()?;
        let f = js_sys::Function::new_with_args(
            "js, wasm, name, args",
            "return (async () => { if (!globalThis.__headroomModelfile) { const m = await import(js); await m.default({ module_or_path: wasm }); globalThis.__headroomModelfile = m; } return globalThis.__headroomModelfile[name](...args); })();",
        );
        let list: js_sys::Array = args.iter().collect();
        let call = js_sys::Array::of4(&JsValue::from_str(&js), &JsValue::from_str(&wasm), &JsValue::from_str(function), &list);
        let promise: js_sys::Promise = f.apply(&JsValue::NULL, &call).map_err(err)?.unchecked_into();
        let text = JsFuture::from(promise).await.map_err(err)?.as_string().unwrap_or_default();
        serde_json::from_str(&text).map_err(|e| e.to_string())
    }

    /// What recognising a diffusion checkpoint and naming formats need from the catalog: the
    /// page's data file as served (already in the browser's cache), which the parsers read.
    async fn catalog() -> Result<String, String> {
        let path = leptos::prelude::window().location().pathname().unwrap_or_default();
        let lang = crate::routes::Route::parse(&path).map(|(l, _)| l).unwrap_or(headroom_core::Lang::En);
        crate::api::fetch_text(&crate::pages::Bundle::Calculator.data_url(lang)).await
    }

    /// A file read earlier that needs its config.json: its description with that config.
    pub async fn describe_with(facts: &Value, config: &str) -> Result<Value, String> {
        let answer =
            modelfile_call("describeWith", &[JsValue::from_str(&facts.to_string()), JsValue::from_str(config), JsValue::from_str(&catalog().await?)]).await?;
        match answer.get("error").and_then(Value::as_str) {
            Some(e) => Err(e.to_string()),
            None => Ok(answer["description"].clone()),
        }
    }

    /// A saved probe report: its card and what other programs held (see the parsers'
    /// `report_card`), as JSON.
    pub async fn report_card(text: String) -> Result<Value, String> {
        modelfile_call("reportCard", &[JsValue::from_str(&text), JsValue::from_str(&catalog().await?)]).await
    }

    fn err(e: JsValue) -> String {
        e.as_string().or_else(|| js_sys::JSON::stringify(&e).ok().and_then(|s| s.as_string())).unwrap_or_else(|| format!("{e:?}"))
    }

    /// Where `cargo xtask dist` put the parsers (`<meta name="headroom-modelfile">`).
    fn parser_urls() -> Result<(String, String), String> {
        let meta = leptos::prelude::document()
            .query_selector("meta[name=headroom-modelfile]")
            .ok()
            .flatten()
            .and_then(|m| m.get_attribute("content"))
            .ok_or("this build has no model-file parsers (meta headroom-modelfile missing)")?;
        let (js, wasm) = meta.split_once(' ').ok_or("malformed headroom-modelfile meta")?;
        Ok((js.to_string(), wasm.to_string()))
    }

    /// Reads a file's header: a first slice, then as many bytes from the start as the parser
    /// asks for (JSON files whole, up to 64 MiB). The answer holds the file's `facts` and its
    /// `description` (`headroom_core::modelfile::describe`), as JSON.
    pub async fn read_file(file: web_sys::File) -> Result<Value, String> {
        let catalog = catalog().await?;
        let len = file.size();
        let is_json = file.name().to_ascii_lowercase().ends_with(".json");
        if is_json && len > 64.0 * 1024.0 * 1024.0 {
            return Err(headroom_core::messages::say("file-json-too-large", &[]));
        }
        let mut want = if is_json { len } else { len.min(256.0 * 1024.0) };
        loop {
            let blob = file.slice_with_f64_and_f64(0.0, want).map_err(err)?;
            let buf = JsFuture::from(blob.array_buffer()).await.map_err(err)?;
            let bytes = js_sys::Uint8Array::new(&buf);
            let answer = modelfile_call("read_header", &[bytes.into(), JsValue::from_f64(len), JsValue::from_str(&catalog)]).await?;
            if let Some(n) = answer.get("need").and_then(Value::as_u64) {
                let n = n as f64;
                if n <= want || n > len {
                    return Err(headroom_core::messages::say("file-header-too-long", &[]));
                }
                want = n.max(want * 2.0).min(len);
                continue;
            }
            if let Some(e) = answer.get("error").and_then(Value::as_str) {
                return Err(e.to_string());
            }
            return Ok(answer);
        }
    }

    fn hub_base() -> String {
        use gloo_storage::Storage;
        gloo_storage::LocalStorage::get::<String>(HUB_BASE_KEY).unwrap_or_else(|_| DEFAULT_HUB.to_string()).trim_end_matches('/').to_string()
    }

    enum Got {
        Body(String),
        Status(u16),
        Offline,
    }

    /// One file of a repository: the network first (and the answer kept), the kept copy when the
    /// network fails.
    async fn hub_file(id: &str, file: &str) -> Result<Got, String> {
        let window = leptos::prelude::window();
        let url = format!("{}/{id}/resolve/main/{file}", hub_base());
        let caches = window.caches().map_err(err)?;
        let cache: web_sys::Cache = JsFuture::from(caches.open(HUB_CACHE)).await.map_err(err)?.unchecked_into();
        match JsFuture::from(window.fetch_with_str(&url)).await {
            Ok(resp) => {
                let resp: web_sys::Response = resp.unchecked_into();
                if !resp.ok() {
                    return Ok(Got::Status(resp.status()));
                }
                let copy = resp.clone().map_err(err)?;
                let _ = JsFuture::from(cache.put_with_str(&url, &copy)).await;
                let text = JsFuture::from(resp.text().map_err(err)?).await.map_err(err)?;
                Ok(Got::Body(text.as_string().unwrap_or_default()))
            }
            Err(_) => {
                let hit = JsFuture::from(cache.match_with_str(&url)).await.map_err(err)?;
                if hit.is_undefined() || hit.is_null() {
                    return Ok(Got::Offline);
                }
                let resp: web_sys::Response = hit.unchecked_into();
                let text = JsFuture::from(resp.text().map_err(err)?).await.map_err(err)?;
                Ok(Got::Body(text.as_string().unwrap_or_default()))
            }
        }
    }

    /// A Hub id's model object: its config.json, and its safetensors index when it has one.
    pub async fn fetch_hub(ds: &Dataset, id: &str) -> Result<Value, HubError> {
        if !valid_hub_id(id) {
            return Err(HubError::BadId);
        }
        let config = match hub_file(id, "config.json").await.map_err(HubError::Other)? {
            Got::Body(text) => serde_json::from_str::<Value>(&text).map_err(|e| HubError::Other(not_json("config.json", &e)))?,
            Got::Status(401 | 403) => return Err(HubError::Gated),
            Got::Status(404) => return Err(HubError::Missing),
            Got::Status(s) => return Err(HubError::Other(headroom_core::messages::say("hub-status", &[("status", &s.to_string())]))),
            Got::Offline => return Err(HubError::Offline),
        };
        let index = match hub_file(id, "model.safetensors.index.json").await {
            Ok(Got::Body(text)) => serde_json::from_str::<Value>(&text).ok(),
            _ => None,
        };
        hub_model(ds, id, &config, index.as_ref()).map_err(HubError::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_ids() {
        assert!(valid_hub_id("Qwen/Qwen2.5-0.5B"));
        assert!(valid_hub_id("meta-llama/Llama-3.1-8B"));
        for bad in ["Qwen", "a/b/c", "/x", "x/", "a b/c", "../x", "a/.git"] {
            assert!(!valid_hub_id(bad), "{bad}");
        }
    }

    #[test]
    fn manual_values_make_a_llama_layout_model() {
        let mut v: BTreeMap<String, String> = [
            ("num_hidden_layers", "4"),
            ("hidden_size", "64"),
            ("intermediate_size", "160"),
            ("num_attention_heads", "4"),
            ("num_key_value_heads", "2"),
            ("head_dim", "16"),
            ("vocab_size", "1000"),
            ("tie_word_embeddings", "false"),
            ("max_position_embeddings", "2048"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        let m = manual_model(&v, "by hand").unwrap();
        assert_eq!(m["hf_config"]["model_type"], "llama");
        v.insert("hidden_size".into(), "lots".into());
        assert!(manual_model(&v, "by hand").unwrap_err().contains("hidden_size"));
    }
}
