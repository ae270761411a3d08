//! `read_header(prefix)` for the browser: the calculator reads the first bytes of a user's model
//! file with `File.slice`, passes them here, and gets back JSON: `{"need": N}` (read at least N
//! bytes from the start and call again), `{"error": "…"}` or `{"facts": …}`
//! (`headroom_core::modelfile::describe::FileFacts`). Built as its own wasm module by
//! `cargo xtask dist` and loaded on first use, so the parsers cost nothing on a first visit.

use headroom_core::modelfile::describe::{FileFacts, describe, facts, with_diffusion};
use headroom_core::modelfile::{ParseError, parse};
use serde_json::json;
use wasm_bindgen::prelude::*;

/// Reads a prefix of a file (`file_len`: the whole file's size, so that a header running past the
/// end is reported as a truncated file). `catalog` is the app's dataset as JSON (its diffusion
/// models and formats suffice): with it, a diffusion checkpoint is recognised too.
pub fn read(prefix: &[u8], file_len: u64, catalog: Option<&headroom_core::Dataset>) -> serde_json::Value {
    match parse(prefix) {
        Ok(f) => match catalog {
            Some(ds) => {
                let facts = with_diffusion(ds, &f);
                json!({"description": describe(ds, &facts, None), "facts": facts})
            }
            None => json!({"facts": facts(&f)}),
        },
        Err(ParseError::NeedBytes(n)) if n <= file_len && (prefix.len() as u64) < file_len => json!({"need": n}),
        Err(e) => json!({"error": e.at_file_len(file_len).to_string()}),
    }
}

/// The description of a file read earlier (`facts`, as `read_header` gave them) together with the
/// `config.json` the user gave for it (a safetensors file or index holds no architecture).
pub fn describe_with(facts: &str, config: &str, catalog: &headroom_core::Dataset) -> serde_json::Value {
    let facts: FileFacts = match serde_json::from_str(facts) {
        Ok(f) => f,
        Err(e) => return json!({"error": format!("the file's facts: {e}")}),
    };
    let config: serde_json::Value = match serde_json::from_str(config.trim()) {
        Ok(c) => c,
        Err(e) => return json!({"error": format!("config.json is not JSON: {e}")}),
    };
    json!({"description": describe(catalog, &facts, Some(&config))})
}

#[wasm_bindgen(js_name = describeWith)]
pub fn describe_with_js(facts: &str, config: &str, catalog: &str) -> String {
    match headroom_core::Dataset::from_json(catalog) {
        Ok(ds) => describe_with(facts, config, &ds).to_string(),
        Err(e) => json!({"error": format!("catalog: {e}")}).to_string(),
    }
}

#[wasm_bindgen]
pub fn read_header(prefix: &[u8], file_len: f64, catalog: &str) -> String {
    let ds = headroom_core::Dataset::from_json(catalog).ok();
    read(prefix, file_len as u64, ds.as_ref()).to_string()
}

/// A saved probe report (`probe --out`): the card and what other programs held
/// (`headroom_core::report::card_of_report`), as `{"name", "gpu", "total_bytes", "other_bytes"}`
/// or `{"error": "not_json" | "not_report" | "schema" | "implausible", "version"}`. Here rather
/// than in the calculator's bundle: matching a device name to the catalog carries Unicode tables
/// that a first visit should not download.
pub fn report_card(text: &str, catalog: &headroom_core::Dataset) -> serde_json::Value {
    use headroom_core::report::{ReportCardError as E, card_of_report};
    match card_of_report(text, &catalog.gpus) {
        Ok(c) => json!({"name": c.name, "gpu": c.gpu, "total_bytes": c.total_bytes, "other_bytes": c.other_bytes}),
        Err(E::NotJson) => json!({"error": "not_json"}),
        Err(E::NotReport) => json!({"error": "not_report"}),
        Err(E::UnknownSchema(v)) => json!({"error": "schema", "version": v}),
        Err(E::Implausible) => json!({"error": "implausible"}),
    }
}

#[wasm_bindgen(js_name = reportCard)]
pub fn report_card_js(text: &str, catalog: &str) -> String {
    match headroom_core::Dataset::from_json(catalog) {
        Ok(ds) => report_card(text, &ds).to_string(),
        Err(e) => json!({"error": format!("catalog: {e}")}).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dataset/core/tests/fixtures/modelfiles").join(name)).unwrap()
    }

    #[test]
    fn a_probe_report_gives_its_card_and_what_other_programs_held() {
        let text =
            std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dataset/measurements/probe/h200-example.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ds = headroom_core::Dataset::default();
        let a = report_card(&text, &ds);
        assert_eq!(a["name"], "NVIDIA H200");
        assert_eq!(a["gpu"], serde_json::Value::Null, "an empty catalog matches nothing");
        assert_eq!(a["total_bytes"], v["memory"]["total_bytes"]);
        let m = &v["memory"];
        let other = m["total_bytes"].as_u64().unwrap() - m["free_bytes_with_context"].as_u64().unwrap() - m["context_bytes"].as_u64().unwrap();
        assert_eq!(a["other_bytes"], other);
        assert_eq!(report_card("{", &ds)["error"], "not_json");
        assert_eq!(report_card("{\"events\": []}", &ds)["error"], "not_report");
        let later = text.replacen("\"schema_version\": 2", "\"schema_version\": 7", 1);
        assert_eq!(report_card(&later, &ds), json!({"error": "schema", "version": 7}));
    }

    #[test]
    fn a_prefix_asks_for_more_then_reads_the_header() {
        let file = fixture("qwen3moe.gguf");
        let len = file.len() as u64;
        let first = read(&file[..64], len, None);
        let need = first["need"].as_u64().expect("a GGUF header is longer than 64 bytes");
        let mut want = need as usize;
        let facts = loop {
            let r = read(&file[..want.min(file.len())], len, None);
            match r["need"].as_u64() {
                Some(n) => want = n as usize,
                None => break r,
            }
        };
        assert_eq!(facts["facts"]["format"], "gguf");
        assert_eq!(facts["facts"]["hf_config"]["model_type"], "qwen3_moe");
        let cut = read(&file[..200], 200, None);
        assert!(cut["error"].as_str().unwrap().contains("truncated"), "{cut}");
        assert!(read(b"hello world, not a model", 24, None)["error"].as_str().unwrap().contains("not a model file"));
    }
}
