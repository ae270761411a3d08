//! AMD cards: catalog entries backed by AMD's own ROCm tables, the checks that keep each vendor's
//! fields apart, and what the fit says on a ROCm card.

use std::collections::BTreeMap;

use headroom_core::fit::{Card, fit_on, parse_input};
use headroom_core::{SourceKind, Vendor};
use headroom_e2e::data::loaded;
use serde_json::json;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[test]
fn amd_entries_rest_on_amds_rocm_tables() {
    let ds = &loaded().dataset;
    let amd: Vec<_> = ds.gpus.iter().filter(|g| g.vendor == Vendor::Amd).collect();
    assert!(amd.len() >= 12, "{} AMD GPUs", amd.len());
    for id in ["rx-7900-xtx", "rx-7900-xt", "rx-7800-xt", "rx-9070-xt", "rx-7600", "mi300x", "radeon-pro-w7900"] {
        assert!(amd.iter().any(|g| g.id == id), "no {id}");
    }
    for g in &amd {
        // Memory, architecture and LLVM target from AMD's hardware table, the Linux status from
        // AMD's support list: both vendor documents.
        assert_eq!(g.source.kind, SourceKind::VendorSpec, "{}", g.id);
        assert!(g.source.backs.iter().any(|b| b == "memory_gb") && g.source.backs.iter().any(|b| b == "llvm_target"), "{}", g.id);
        let passage = g.source.passage.as_str();
        assert!(passage.contains(g.llvm_target.as_deref().unwrap()) && passage.contains(&format!("- {}", g.memory_gb)), "{}: {passage}", g.id);
        let linux = g.extra_sources.iter().find(|s| s.backs.iter().any(|b| b == "rocm_linux")).unwrap_or_else(|| panic!("{}: no source for rocm_linux", g.id));
        assert_eq!(linux.kind, SourceKind::OfficialDoc);
        let listed = g.rocm_linux.as_deref() != Some("none");
        let name = g.name.trim_start_matches("AMD ").trim_end_matches(" 16 GB");
        assert_eq!(linux.passage.contains(&format!("\"AMD {name}\"")), listed, "{}", g.id);
        assert!(g.compute_capability.is_empty());
    }
}

#[test]
fn each_vendor_keeps_its_own_fields() {
    let loaded = loaded();
    let file_of = BTreeMap::new();
    let problems = |ds: &headroom_core::Dataset| -> Vec<String> { headroom_core::check::check(ds, &file_of).into_iter().map(|p| p.to_string()).collect() };
    let base = problems(&loaded.dataset).len();
    let mut ds = loaded.dataset.clone();
    let i = ds.gpus.iter().position(|g| g.id == "rx-7900-xtx").unwrap();
    ds.gpus[i].llvm_target = Some("navi31".into());
    ds.gpus[i].rocm_linux = Some("soon".into());
    let j = ds.gpus.iter().position(|g| g.id == "rtx-4090").unwrap();
    ds.gpus[j].llvm_target = Some("gfx1100".into());
    ds.gpus[j].interface.clear();
    let found = problems(&ds);
    let new: Vec<&String> = found.iter().filter(|p| p.contains("rx-7900-xtx") || p.contains("rtx-4090")).collect();
    assert!(found.len() >= base + 4, "{new:?}");
    for want in ["must look like gfx1100", "must be a ROCm version", "AMD fields", "an NVIDIA entry states"] {
        assert!(new.iter().any(|p| p.contains(want)), "no `{want}` in {new:?}");
    }
}

#[test]
fn a_rocm_card_gets_its_budget_and_says_what_was_measured_where() {
    let ds = &loaded().dataset;
    let w = &parse_input(&json!({"kind": "llm-inference", "model": "llama-3.1-8b", "weights": "Q4_K_M", "context": 16384, "engine": "llama.cpp"}).to_string())
        .unwrap()[0];
    let f = fit_on(ds, w, &Card::parse(ds, "rx-7900-xtx", 0.0).unwrap()).unwrap();
    let v = f.verdict.as_ref().unwrap();
    assert_eq!(v.budget_bytes, (24.0 * GIB) as u64);
    assert!(v.fits);
    let note = f.notes.iter().find(|n| n.id == "rocm-card").expect("a note on ROCm");
    assert_eq!(note.values.get("card").map(String::as_str), Some("AMD Radeon RX 7900 XTX"));
    let nvidia = fit_on(ds, w, &Card::parse(ds, "rtx-4090", 0.0).unwrap()).unwrap();
    assert!(!nvidia.notes.iter().any(|n| n.id == "rocm-card"));
    // The claims the note rests on are in the dataset with their verdicts.
    assert_eq!(ds.claim("pytorch-rocm-same-caching-allocator").unwrap().verdict, headroom_core::Verdict::Verified);
    assert_eq!(ds.claim("rocm-expandable-segments").unwrap().verdict, headroom_core::Verdict::Qualified);
}
