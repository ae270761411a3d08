//! The model-file parsers against fixtures written by independent writers
//! (`scripts/model-fixtures.py`: gguf-py and the safetensors package). Each fixture has a
//! `<name>.expected.json` made on the Python side (gguf-py's `GGUFReader`, safetensors'
//! `deserialize`/`safe_open`, the values given to the writers); every field there must match.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use headroom_core::modelfile::gguf::{Value, ValueType};
use headroom_core::modelfile::{self, Kind, ModelFile, ParseError, gguf_to_hf_config, sniff};
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/modelfiles")
}

fn expected_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            expected_files(&p, out);
        } else if p.to_string_lossy().ends_with(".expected.json") {
            out.push(p);
        }
    }
}

fn all_expected() -> Vec<(PathBuf, Json)> {
    let mut files = Vec::new();
    expected_files(&fixtures(), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let j: Json = serde_json::from_str(&fs::read_to_string(&p).unwrap()).unwrap();
            (p, j)
        })
        .collect()
}

/// The file an expected.json describes.
fn subject(expected_path: &Path, e: &Json) -> PathBuf {
    let dir = expected_path.parent().unwrap();
    match e["file"].as_str() {
        Some(f) => dir.join(f),
        None => {
            let name = expected_path.file_name().unwrap().to_string_lossy().replace(".expected.json", ".json");
            dir.join(name)
        }
    }
}

fn u(j: &Json) -> u64 {
    j.as_u64().unwrap_or_else(|| panic!("not a u64: {j}"))
}

/// Reads the file the way the site does: a prefix, grown as the parser asks (at least doubling).
fn parse_by_prefix(file: &[u8]) -> (ModelFile, usize, usize) {
    let mut want = 16usize;
    let mut reads = 0;
    loop {
        reads += 1;
        let prefix = &file[..want.min(file.len())];
        match modelfile::parse(prefix) {
            Ok(m) => return (m, prefix.len(), reads),
            Err(ParseError::NeedBytes(n)) => {
                assert!(n as usize > prefix.len() && n as usize <= file.len(), "NeedBytes({n}) with {} of {} bytes", prefix.len(), file.len());
                want = (n as usize).max(2 * want);
            }
            Err(e) => panic!("{e}"),
        }
    }
}

fn assert_close(what: &str, got: f64, want: f64) {
    assert!((got - want).abs() <= 1e-9 * want.abs().max(1e-300), "{what}: got {got}, expected {want}");
}

/// A GGUF value against its expected.json form (`{"type", "value"}` or an array description).
fn check_value(key: &str, got: &Value, want: &Json) {
    let ty = want["type"].as_str().unwrap();
    assert_eq!(got.value_type().name(), ty, "{key}: type");
    match got {
        Value::Array(a) => {
            assert_eq!(a.elem_type.name(), want["elem_type"].as_str().unwrap(), "{key}: element type");
            assert_eq!(a.len, u(&want["len"]), "{key}: length");
            match (&a.items, want.get("value")) {
                (None, None) => assert!(a.len > modelfile::gguf::KEEP_ARRAY_MAX, "{key}: a short array was skipped"),
                (Some(items), Some(Json::Array(w))) => {
                    assert_eq!(items.len(), w.len(), "{key}: kept elements");
                    for (i, (g, w)) in items.iter().zip(w).enumerate() {
                        if a.elem_type == ValueType::Array {
                            check_value(&format!("{key}[{i}]"), g, w);
                        } else {
                            check_scalar(&format!("{key}[{i}]"), g, w);
                        }
                    }
                }
                (items, w) => panic!("{key}: kept {:?}, expected {w:?}", items.as_ref().map(Vec::len)),
            }
        }
        _ => check_scalar(key, got, &want["value"]),
    }
}

fn check_scalar(key: &str, got: &Value, want: &Json) {
    match got {
        // The expected value is the f32 the file holds, widened: compare as f32.
        Value::F32(v) => assert_eq!(*v, want.as_f64().unwrap() as f32, "{key}"),
        Value::F64(v) => assert_eq!(*v, want.as_f64().unwrap(), "{key}"),
        Value::String(s) => assert_eq!(Some(s.as_str()), want.as_str(), "{key}"),
        Value::Bool(b) => assert_eq!(Some(*b), want.as_bool(), "{key}"),
        Value::U64(_) | Value::U32(_) | Value::U16(_) | Value::U8(_) => {
            assert_eq!(got.as_u64(), want.as_u64(), "{key}")
        }
        _ => assert_eq!(got.as_i64(), want.as_i64(), "{key}"),
    }
}

fn check_gguf(path: &Path, e: &Json, bytes: &[u8]) {
    let name = path.display();
    assert_eq!(sniff(bytes), Kind::Gguf);
    let (parsed, prefix_len, reads) = parse_by_prefix(bytes);
    let ModelFile::Gguf(g) = parsed else { panic!("{name}: not parsed as GGUF") };
    assert!(reads <= 12, "{name}: {reads} reads");
    assert!(prefix_len < bytes.len() || bytes.len() < 64 * 1024, "{name}: read the whole file");
    assert_eq!(modelfile::parse_gguf(bytes).unwrap(), g, "{name}: prefix and whole-file parses differ");

    assert_eq!(u64::from(g.version), u(&e["version"]), "{name}: version");
    assert_eq!(g.metadata.len() as u64, u(&e["kv_count"]), "{name}: metadata count");
    assert_eq!(g.tensors.len() as u64, u(&e["tensor_count"]), "{name}: tensor count");
    assert_eq!(g.alignment, u(&e["alignment"]), "{name}: alignment");
    assert_eq!(g.data_offset, u(&e["data_offset"]), "{name}: data offset");
    assert_eq!(g.file_len(), u(&e["file_size"]), "{name}: file length from the header");

    // Every tensor: name, order, dimensions, type, offset, values and exact bytes.
    let want_tensors = e["tensors"].as_array().unwrap();
    assert_eq!(g.tensors.len(), want_tensors.len());
    for (t, w) in g.tensors.iter().zip(want_tensors) {
        assert_eq!(t.name, w["name"].as_str().unwrap(), "{name}: tensor order");
        let dims: Vec<u64> = w["dims"].as_array().unwrap().iter().map(u).collect();
        assert_eq!(t.dims, dims, "{name}: {} dims", t.name);
        assert_eq!(t.ggml_type.name(), w["ggml_type"].as_str().unwrap(), "{name}: {} type", t.name);
        assert_eq!(u64::from(t.ggml_type.id()), u(&w["ggml_type_id"]), "{name}: {} type id", t.name);
        assert_eq!(t.elements, u(&w["n_elements"]), "{name}: {} values", t.name);
        assert_eq!(t.bytes, u(&w["n_bytes"]), "{name}: {} bytes", t.name);
        assert_eq!(t.offset, u(&w["offset"]), "{name}: {} offset", t.name);
    }
    assert_eq!(g.total_tensor_bytes(), u(&e["total_bytes"]), "{name}: total bytes");
    assert_eq!(g.total_elements(), u(&e["total_elements"]), "{name}: total values");
    let by_type = e["by_type"].as_object().unwrap();
    assert_eq!(g.by_type().len(), by_type.len(), "{name}: types");
    for s in g.by_type() {
        let w = &by_type[s.ggml_type.name()];
        assert_eq!((s.tensors, s.bytes, s.elements), (u(&w["tensors"]), u(&w["bytes"]), u(&w["elements"])), "{name}: {}", s.ggml_type);
    }

    // Every metadata key the writer was given, with its type and value; no others.
    let want_meta = e["metadata"].as_object().unwrap();
    let keys: Vec<&str> = g.metadata.iter().map(|(k, _)| k.as_str()).collect();
    let mut want_keys: Vec<&str> = want_meta.keys().map(String::as_str).collect();
    let mut got_keys = keys.clone();
    got_keys.sort_unstable();
    want_keys.sort_unstable();
    assert_eq!(got_keys, want_keys, "{name}: metadata keys");
    for (k, v) in &g.metadata {
        check_value(&format!("{name}: {k}"), v, &want_meta[k]);
    }

    // The Hugging Face config the GGUF was converted from.
    let hf = gguf_to_hf_config(&g).unwrap_or_else(|err| panic!("{name}: {err}"));
    for (k, want) in e["hf_config"].as_object().unwrap() {
        let got = hf.get(k).unwrap_or_else(|| panic!("{name}: gguf_to_hf_config lacks `{k}` (gave {hf})"));
        match (got, want) {
            (Json::Number(a), Json::Number(b)) if a.is_f64() || b.is_f64() => assert_close(&format!("{name}: {k}"), a.as_f64().unwrap(), b.as_f64().unwrap()),
            _ => assert_eq!(got, want, "{name}: hf_config `{k}`"),
        }
    }
}

fn check_safetensors(path: &Path, e: &Json, bytes: &[u8]) {
    let name = path.display();
    assert_eq!(sniff(bytes), Kind::Safetensors);
    let (parsed, prefix_len, _) = parse_by_prefix(bytes);
    let ModelFile::Safetensors(s) = parsed else { panic!("{name}: not parsed as safetensors") };
    assert_eq!(prefix_len as u64, (8 + s.header_len).max(16), "{name}: read exactly the header");
    assert_eq!(s.header_len, u(&e["header_len"]), "{name}: header length");
    assert_eq!(s.file_len(), u(&e["file_size"]), "{name}: file length from the header");

    let meta: BTreeMap<&str, &str> = s.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let want_meta: BTreeMap<&str, &str> = e["metadata"].as_object().unwrap().iter().map(|(k, v)| (k.as_str(), v.as_str().unwrap())).collect();
    assert_eq!(meta, want_meta, "{name}: __metadata__");

    let want_tensors = e["tensors"].as_array().unwrap();
    assert_eq!(s.tensors.len(), want_tensors.len(), "{name}: tensor count");
    for w in want_tensors {
        let tname = w["name"].as_str().unwrap();
        let t = s.tensor(tname).unwrap_or_else(|| panic!("{name}: no tensor {tname}"));
        assert_eq!(t.dtype.name(), w["dtype"].as_str().unwrap(), "{name}: {tname} dtype");
        let shape: Vec<u64> = w["shape"].as_array().unwrap().iter().map(u).collect();
        assert_eq!(t.shape, shape, "{name}: {tname} shape");
        assert_eq!(t.bytes, u(&w["n_bytes"]), "{name}: {tname} bytes");
    }
    assert_eq!(s.total_tensor_bytes(), u(&e["total_bytes"]), "{name}: total bytes");
    assert_eq!(s.data_len, u(&e["total_bytes"]), "{name}: data buffer");
    let by = e["by_dtype"].as_object().unwrap();
    assert_eq!(s.by_dtype().len(), by.len(), "{name}: dtypes");
    for d in s.by_dtype() {
        let w = &by[d.dtype.name()];
        assert_eq!((d.tensors, d.bytes), (u(&w["tensors"]), u(&w["bytes"])), "{name}: {}", d.dtype);
    }
}

fn check_index(path: &Path, e: &Json, bytes: &[u8]) {
    let name = path.display();
    assert_eq!(sniff(bytes), Kind::SafetensorsIndex);
    let Ok(ModelFile::SafetensorsIndex(i)) = modelfile::parse(bytes) else { panic!("{name}: not parsed as an index") };
    assert_eq!(i.total_size, Some(u(&e["total_size"])), "{name}: total_size");
    assert_eq!(i.weight_map.len() as u64, u(&e["tensor_count"]), "{name}: tensors");
    let shards: Vec<&str> = e["shards"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
    assert_eq!(i.shards(), shards, "{name}: shards");
    for (t, f) in e["weight_map"].as_object().unwrap() {
        assert_eq!(i.shard_of(t), f.as_str(), "{name}: {t}");
    }
    // The shards' headers add up to the index's total_size, tensor by tensor.
    let mut total = 0;
    for shard in i.shards() {
        let s = modelfile::parse_safetensors(&fs::read(path.parent().unwrap().join(shard)).unwrap()).unwrap();
        let mut in_header: Vec<&str> = s.tensors.iter().map(|t| t.name.as_str()).collect();
        let mut in_index: Vec<&str> = i.tensors_in(shard).collect();
        in_header.sort_unstable();
        in_index.sort_unstable();
        assert_eq!(in_header, in_index, "{name}: tensors of {shard}");
        total += s.total_tensor_bytes();
    }
    assert_eq!(Some(total), i.total_size, "{name}: shard bytes vs total_size");
}

#[test]
fn every_fixture_matches_its_independent_reader() {
    let all = all_expected();
    let formats: Vec<&str> = all.iter().map(|(_, e)| e["format"].as_str().unwrap()).collect();
    assert!(formats.iter().filter(|f| **f == "gguf").count() >= 6, "{formats:?}");
    assert!(formats.iter().filter(|f| **f == "safetensors").count() >= 4, "{formats:?}");
    assert!(formats.contains(&"safetensors_index"), "{formats:?}");
    for (path, e) in &all {
        let file = subject(path, e);
        let bytes = fs::read(&file).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
        match e["format"].as_str().unwrap() {
            "gguf" => check_gguf(&file, e, &bytes),
            "safetensors" => check_safetensors(&file, e, &bytes),
            "safetensors_index" => check_index(&file, e, &bytes),
            other => panic!("{}: unknown format {other}", path.display()),
        }
    }
}

#[test]
fn configs_are_sniffed_and_parsed() {
    let dir = fixtures();
    for p in [dir.join("llama-bf16.config.json"), dir.join("mixed-fp8.config.json"), dir.join("sharded/config.json")] {
        let bytes = fs::read(&p).unwrap();
        assert_eq!(sniff(&bytes), Kind::Config, "{}", p.display());
        match modelfile::parse(&bytes) {
            Ok(ModelFile::Config(c)) => assert_eq!(c["model_type"], "llama"),
            other => panic!("{}: {other:?}", p.display()),
        }
    }
}

#[test]
fn specific_mappings() {
    let load = |n: &str| {
        let bytes = fs::read(fixtures().join(n)).unwrap();
        let g = modelfile::parse_gguf(&bytes).unwrap();
        gguf_to_hf_config(&g).unwrap()
    };
    // Gemma 3: tied, sliding window, gemma3_text.
    let c = load("gemma3.gguf");
    assert_eq!((c["model_type"].as_str(), c["tie_word_embeddings"].as_bool(), c["sliding_window"].as_u64()), (Some("gemma3_text"), Some(true), Some(512)));
    // DeepSeek: sigmoid gating → V3, MLA dimensions from the _mla keys; the legacy layout → V2.
    let c = load("deepseek2.gguf");
    assert_eq!(c["model_type"], "deepseek_v3");
    assert_eq!((c["qk_nope_head_dim"].as_u64(), c["v_head_dim"].as_u64(), c["num_key_value_heads"].as_u64()), (Some(16), Some(16), Some(4)));
    assert!(c.get("head_dim").is_none());
    let c = load("deepseek2-legacy.gguf");
    assert_eq!((c["model_type"].as_str(), c["q_lora_rank"].is_null(), c["qk_nope_head_dim"].as_u64()), (Some("deepseek_v2"), true, Some(16)));
    // Qwen3-MoE's expert count is `num_experts`.
    let c = load("qwen3moe.gguf");
    assert_eq!((c["num_experts"].as_u64(), c["moe_intermediate_size"].as_u64()), (Some(8), Some(32)));
    assert_eq!(load("qwen3-tied.gguf")["tie_word_embeddings"], true);
    assert_eq!(load("llama-mixed.gguf")["tie_word_embeddings"], false);
}

#[test]
fn truncated_files_say_so() {
    let bytes = fs::read(fixtures().join("qwen3moe.gguf")).unwrap();
    for cut in [5usize, 40, 3000] {
        let err = modelfile::parse(&bytes[..cut]).unwrap_err().at_file_len(cut as u64);
        assert!(matches!(&err, ParseError::Invalid(m) if m.starts_with("truncated file")), "{cut}: {err:?}");
    }
    let bytes = fs::read(fixtures().join("llama-bf16.safetensors")).unwrap();
    let err = modelfile::parse(&bytes[..100]).unwrap_err().at_file_len(100);
    assert!(matches!(&err, ParseError::Invalid(m) if m.starts_with("truncated file")), "{err:?}");
}
