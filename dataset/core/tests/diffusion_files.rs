//! `modelfile::diffusion` against the headers of real-sized diffusion checkpoints
//! (`tests/fixtures/diffusion/`, written by `scripts/diffusion-fixtures.py` with gguf-py and the
//! safetensors package; each `<name>.expected.json` is what the Python side knows about the file)
//! and the real catalog (`dataset/data`).
//!
//! `cargo test -p headroom-core --features fs --test diffusion_files` (the catalog is read from
//! disk with `files::read_tree`, behind the `fs` feature).

use std::fs;
use std::path::{Path, PathBuf};

use headroom_core::Dataset;
use headroom_core::modelfile::diffusion::{PARAMS_TOLERANCE, Recognized, TensorEntry, recognize, recognize_file};
use headroom_core::modelfile::{Kind, ModelFile, parse, sniff};
use serde_json::Value as Json;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diffusion")
}

fn dataset() -> Dataset {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data");
    let files = headroom_core::files::read_tree(&dir).expect("the data directory");
    headroom_core::load::load(&files).expect("the data loads").dataset
}

fn expected(name: &str) -> Json {
    let p = fixtures().join(format!("{name}.expected.json"));
    serde_json::from_str(&fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

fn u(j: &Json) -> u64 {
    j.as_u64().unwrap_or_else(|| panic!("not a u64: {j}"))
}

/// The header-only fixture, parsed from exactly its bytes: a header needs nothing after it.
fn parsed(name: &str) -> ModelFile {
    let bytes = fs::read(fixtures().join(name)).unwrap();
    let e = expected(name);
    assert_eq!(bytes.len() as u64, u(&e["prefix_len"]), "{name}: the fixture is the header prefix");
    let kind = sniff(&bytes);
    match e["format"].as_str().unwrap() {
        "gguf" => assert_eq!(kind, Kind::Gguf),
        _ => assert_eq!(kind, Kind::Safetensors),
    }
    let file = parse(&bytes).unwrap_or_else(|err| panic!("{name}: {err}"));
    // The parser learns the whole file's length from the header alone.
    let file_len = match &file {
        ModelFile::Gguf(g) => {
            assert_eq!(g.data_offset, u(&e["data_offset"]), "{name}: data offset");
            g.file_len()
        }
        ModelFile::Safetensors(s) => s.file_len(),
        other => panic!("{name}: parsed as {other:?}"),
    };
    assert_eq!(file_len, u(&e["file_size"]), "{name}: file length");
    file
}

/// Everything `expected.json` says about the file that `recognize` reports.
fn check_recognized(name: &str, r: &Recognized, ds: &Dataset) {
    let e = expected(name);
    assert_eq!(r.model, e["model"].as_str().unwrap(), "{name}: model");
    assert_eq!(r.layout, e["layout"].as_str().unwrap(), "{name}: layout");
    assert_eq!(r.format.as_deref(), e["format_name"].as_str(), "{name}: format");
    let comps = e["components"].as_object().unwrap();
    assert_eq!(r.components.len(), comps.len(), "{name}: components {:?}", r.components);
    for (role, bytes, elements) in &r.components {
        let c = &comps.get(role.as_str()).unwrap_or_else(|| panic!("{name}: no `{role}` in expected.json"));
        assert_eq!((*bytes, *elements), (u(&c["bytes"]), u(&c["elements"])), "{name}: {role}");
    }
    assert_eq!(r.components.iter().map(|c| c.1).sum::<u64>(), u(&e["total_bytes"]), "{name}: bytes");
    assert_eq!(r.components.iter().map(|c| c.2).sum::<u64>(), u(&e["total_elements"]), "{name}: values");
    // A denoiser off the catalog's count by more than the tolerance is noted, and only then.
    let model = ds.diffusion.iter().find(|d| d.id == r.model).unwrap();
    let params = model.component("denoiser").unwrap().params as f64;
    let den = u(&comps["denoiser"]["elements"]) as f64;
    let off = ((den - params) / params).abs() > PARAMS_TOLERANCE;
    assert_eq!(off, r.notes.iter().any(|n| n.starts_with("denoiser:") && n.contains("values")), "{name}: {:?}", r.notes);
}

#[test]
fn flux_dev_q4_k_s_gguf_header() {
    let name = "flux1-dev-Q4_K_S.gguf.header";
    let ds = dataset();
    let file = parsed(name);
    let ModelFile::Gguf(g) = &file else { unreachable!() };
    let e = expected(name);
    assert_eq!(g.get_str("general.architecture"), Some("flux"));
    assert_eq!(g.get_u64("general.file_type"), Some(14));
    let tensors = e["tensors"].as_array().unwrap();
    assert_eq!(g.tensors.len(), tensors.len());
    for (t, x) in g.tensors.iter().zip(tensors) {
        let shape: Vec<u64> = x["shape"].as_array().unwrap().iter().map(u).rev().collect();
        assert_eq!(
            (t.name.as_str(), &t.dims, t.ggml_type.name(), t.bytes),
            (x["name"].as_str().unwrap(), &shape, x["type"].as_str().unwrap(), u(&x["n_bytes"]))
        );
    }
    let r = recognize_file(&ds, &file).unwrap_or_else(|err| panic!("{err}"));
    check_recognized(name, &r, &ds);
    assert!(r.notes.iter().any(|n| n.contains("bits per weight")), "{:?}", r.notes);
}

#[test]
fn sd15_single_file_safetensors_header() {
    let name = "sd15-single-file.safetensors.header";
    let ds = dataset();
    let file = parsed(name);
    let ModelFile::Safetensors(s) = &file else { unreachable!() };
    let e = expected(name);
    assert_eq!(s.tensors.len() as u64, u(&e["tensor_count"]));
    assert_eq!(s.header_len, u(&e["header_len"]));
    for (dtype, x) in e["by_dtype"].as_object().unwrap() {
        let d = s.by_dtype().into_iter().find(|d| d.dtype.name() == dtype).unwrap();
        assert_eq!((d.tensors, d.elements, d.bytes), (u(&x["tensors"]), u(&x["elements"]), u(&x["bytes"])), "{dtype}");
    }
    let r = recognize_file(&ds, &file).unwrap_or_else(|err| panic!("{err}"));
    check_recognized(name, &r, &ds);
    let roles: Vec<&str> = r.components.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(roles, ["denoiser", "text-encoder", "vae", "other"]);
}

/// The Wan file's tensor table as `entries_of` would give it from a parsed GGUF (dimensions
/// innermost first), taken from gguf-py's reading of the file in `expected.json`.
#[test]
fn wan_1_3b_q8_0_tensor_table() {
    let name = "wan2.1-t2v-1.3b-Q8_0.gguf.header";
    let ds = dataset();
    let e = expected(name);
    let owned: Vec<(String, Vec<u64>, u64, String)> = e["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let shape = x["shape"].as_array().unwrap().iter().map(u).rev().collect();
            (x["name"].as_str().unwrap().to_string(), shape, u(&x["n_bytes"]), x["type"].as_str().unwrap().to_string())
        })
        .collect();
    let entries: Vec<TensorEntry> = owned.iter().map(|(n, s, b, d)| TensorEntry { name: n, shape: s, bytes: *b, dtype: d }).collect();
    let r = recognize(&ds, &entries).unwrap_or_else(|err| panic!("{err}"));
    check_recognized(name, &r, &ds);
}

/// city96's Wan (and HunyuanVideo) GGUFs carry a 5-D `patch_embedding.weight`, added back by
/// `tools/fix_5d_tensors.py` with gguf-py; `modelfile::gguf` reads up to 8 dimensions for them.
#[test]
fn wan_1_3b_q8_0_gguf_header() {
    let name = "wan2.1-t2v-1.3b-Q8_0.gguf.header";
    let ds = dataset();
    let file = parsed(name);
    let r = recognize_file(&ds, &file).unwrap_or_else(|err| panic!("{err}"));
    check_recognized(name, &r, &ds);
}

#[test]
fn llm_gguf_is_refused() {
    let ds = dataset();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/modelfiles/qwen3-tied.gguf");
    let file = parse(&fs::read(path).unwrap()).unwrap();
    let e = recognize_file(&ds, &file).unwrap_err();
    assert!(e.contains("language-model GGUF") && e.contains("qwen3"), "{e}");
    // Without the container's word for it, the tensor names say it.
    let e = recognize(&ds, &headroom_core::modelfile::diffusion::entries_of(&file)).unwrap_err();
    assert!(e.contains("language model") && e.contains("`token_embd.weight`") && e.contains("Layouts tried"), "{e}");
}
