//! The llama.cpp path of the fit engine against real llama.cpp runs on a GPU
//! (dataset/measurements/llamacpp/, made by dataset/measurements/harness/llamacpp/): every run
//! within 2 % or 256 MiB of the measured peak and never under it by more than 128 MiB, closer than
//! llama.cpp's own estimate; and the file schemes' tensor types exactly as llama-quantize wrote them.

use std::collections::BTreeMap;

use headroom_core::fit::accuracy::{llama_accuracy, parse_llama_references};
use headroom_core::fit::llamacpp::bytes_by_type;
use headroom_e2e::data::loaded;
use headroom_e2e::repo_root;
use serde_json::Value;

fn dir() -> std::path::PathBuf {
    repo_root().join("dataset/measurements/llamacpp")
}

#[test]
fn every_llamacpp_run_is_within_bounds_and_beats_llamacpps_estimate() {
    let text = std::fs::read_to_string(dir().join("h200-llamacpp-0c1e570.jsonl")).unwrap();
    let refs = parse_llama_references(&text).unwrap();
    assert!(refs.iter().filter(|r| r.ok).count() >= 30, "at least 30 runs");
    let rows = llama_accuracy(&loaded().dataset, &refs).unwrap();
    const MIB: f64 = 1024.0 * 1024.0;
    for r in &rows {
        assert!(
            r.within_tolerance,
            "{}: predicted {:.0} MiB, measured {:.0} MiB ({:+.0} MiB)",
            r.id,
            r.predicted as f64 / MIB,
            r.measured as f64 / MIB,
            r.error_bytes as f64 / MIB
        );
        if let Some(e) = r.llamacpp_estimate {
            assert!(
                r.error_bytes.abs() < (r.measured as i64 - e as i64).abs(),
                "{}: llama.cpp's own estimate ({:.0} MiB) is closer than the engine ({:.0} MiB)",
                r.id,
                e as f64 / MIB,
                r.predicted as f64 / MIB
            );
        }
    }
    // Every kind the issue asks for is among the runs.
    let ids: Vec<&str> = rows.iter().map(|r| r.id.as_str()).collect();
    for part in ["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "IQ4_XS", "kvq8_0", "kvq4_0", "nofa", "ngl", "ub2048", "np4", "swafull", "ncmoe", "ollama", "c131072"] {
        assert!(ids.iter().any(|i| i.contains(part)), "no run with {part}");
    }
}

#[test]
fn file_schemes_match_llama_quantize_tensor_by_tensor_type() {
    let ds = &loaded().dataset;
    let text = std::fs::read_to_string(dir().join("files-0c1e570.jsonl")).unwrap();
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Value = serde_json::from_str(line).unwrap();
        let name = f["file"].as_str().unwrap().trim_end_matches(".gguf");
        // Scheme names have no '-': the model is everything before the last one.
        let (model, scheme) = name.rsplit_once('-').unwrap();
        let m = match ds.llm(model) {
            Some(m) => m.clone(),
            None => {
                let cfg: Value =
                    serde_json::from_str(&std::fs::read_to_string(repo_root().join(format!("dataset/measurements/harness/configs/llm/{model}.json"))).unwrap())
                        .unwrap();
                headroom_core::hf::llm_from_config(&cfg, Some(model)).unwrap().0
            }
        };
        let predicted = bytes_by_type(&m, scheme).unwrap_or_else(|| panic!("{scheme} is modelled"));
        let mut actual: BTreeMap<String, u64> = BTreeMap::new();
        for t in f["tensors"].as_array().unwrap() {
            *actual.entry(t[1].as_str().unwrap().to_string()).or_insert(0) += t[2].as_u64().unwrap();
        }
        for (ty, bytes) in &actual {
            let p = predicted.get(ty.as_str()).copied().unwrap_or(0);
            if ty == "F32" {
                // Norms and biases: counted from the parameter total (rope_freqs is not a parameter).
                assert!((p as i64 - *bytes as i64).abs() <= 4096, "{name}: F32 {p} vs {bytes}");
            } else {
                assert_eq!(p, *bytes, "{name}: bytes in {ty}");
            }
        }
        for ty in predicted.keys() {
            assert!(actual.contains_key(*ty), "{name}: the engine has {ty}, the file has none");
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} files");
}

/// The acceptance cases, held out of calibration: Llama 3.1 8B Q4_K_M at 8k, 32k and 128k, with
/// llama.cpp's defaults and as Ollama starts it, run fresh on the device after the engine was
/// fitted (run.py --group heldout). The workloads are what a calculator user enters (llama.cpp's
/// default micro-batch and flash attention, Ollama's own batch left to the engine) and are answered
/// from the data the calculator loads.
#[test]
fn held_out_8b_answers_match_a_fresh_run_on_the_device() {
    let text = std::fs::read_to_string(dir().join("h200-llamacpp-heldout-0c1e570.jsonl")).unwrap();
    let refs = parse_llama_references(&text).unwrap();
    let calculator = loaded().dataset.for_calculator();
    let rows = llama_accuracy(&calculator, &refs).unwrap();
    const MIB: f64 = 1024.0 * 1024.0;
    let mut seen = Vec::new();
    for r in &rows {
        assert!(
            r.within_tolerance,
            "{}: the calculator says {:.0} MiB, the run measured {:.0} MiB ({:+.0} MiB)",
            r.id,
            r.predicted as f64 / MIB,
            r.measured as f64 / MIB,
            r.error_bytes as f64 / MIB
        );
        seen.push(r.id.clone());
    }
    for engine in ["faauto-kvf16-ub512-fresh", "server-ollama-fresh"] {
        for ctx in ["c8192", "c32768", "c131072"] {
            assert!(
                seen.iter().any(|i| i.contains(ctx) && i.ends_with(engine) && i.starts_with("llama-3.1-8b-Q4_K_M")),
                "no successful held-out run {ctx} {engine} (runs: {seen:?})"
            );
        }
    }
    // The held-out workloads leave the batch to the engine.
    for r in &refs {
        assert!(r.workload.get("ubatch").is_none(), "{}: held-out workload names its ubatch", r.id);
    }
}

/// A second held-out set, chosen after the compute-buffer fix (the attention mask under each
/// layer's MLP) and run on the device only after the engine was left as it is (run.py --group
/// heldout2): long contexts with a large micro-batch, where that sum decides the compute buffer.
/// Three of its four cases ran (the Mistral Nemo 128k case did not finish inside the device call).
#[test]
fn second_held_out_set_is_within_bounds() {
    let text = std::fs::read_to_string(dir().join("h200-llamacpp-heldout2-0c1e570.jsonl")).unwrap();
    let refs = parse_llama_references(&text).unwrap();
    let rows = llama_accuracy(&loaded().dataset, &refs).unwrap();
    const MIB: f64 = 1024.0 * 1024.0;
    assert_eq!(rows.len(), 3, "{:?}", rows.iter().map(|r| &r.id).collect::<Vec<_>>());
    for r in &rows {
        eprintln!(
            "{}: predicted {:.0} MiB, measured {:.0} MiB ({:+.0} MiB)",
            r.id,
            r.predicted as f64 / MIB,
            r.measured as f64 / MIB,
            r.error_bytes as f64 / MIB
        );
        assert!(r.within_tolerance, "{}: predicted {:.0} MiB, measured {:.0} MiB", r.id, r.predicted as f64 / MIB, r.measured as f64 / MIB);
        // Never under the measured peak: a card the answer says is enough must be enough.
        assert!(r.error_bytes >= 0, "{}: {:+.0} MiB under", r.id, r.error_bytes as f64 / MIB);
    }
}
