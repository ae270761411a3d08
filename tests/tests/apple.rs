//! Apple silicon: unified memory the GPU shares with macOS. A Mac's budget is the GPU's default
//! share (the claims' two thirds up to 32 GB, three quarters above), what stays for the system is
//! said, and each entry rests on a source.

use headroom_core::fit::{Card, fit, fit_on, gpu_bytes, gpu_limit_bytes, parse_input};
use headroom_core::{SourceKind, Vendor};
use headroom_e2e::data::loaded;
use serde_json::json;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[test]
fn macs_are_in_the_catalog_with_their_sources() {
    let ds = &loaded().dataset;
    let macs: Vec<_> = ds.gpus.iter().filter(|g| g.vendor == Vendor::Apple).collect();
    assert!(macs.len() >= 15, "{} Macs", macs.len());
    for chip in ["M1", "M1 Max", "M2 Ultra", "M3 Pro", "M3 Max", "M4", "M4 Pro", "M4 Max"] {
        assert!(macs.iter().any(|g| g.architecture == chip), "no {chip}");
    }
    for g in &macs {
        assert!(g.name.contains(&format!("({} GB)", g.memory_gb)), "{}", g.name);
        assert!(g.compute_capability.is_empty() && g.llvm_target.is_none());
    }
    // Apple's own tech-specs pages back the M3 Pro/Max and M4/M4 Pro entries.
    let apple_pages = macs
        .iter()
        .filter(|g| g.source.kind == SourceKind::VendorSpec && g.source.url.as_deref().unwrap_or("").starts_with("https://support.apple.com/"))
        .count();
    assert!(apple_pages >= 8, "{apple_pages}");
}

#[test]
fn a_macs_budget_is_the_gpus_share_and_the_rest_stays_for_the_system() {
    let ds = &loaded().dataset;
    // 24 GB: two thirds; 48 GB: three quarters.
    let small = ds.gpu("apple-m4-pro-24gb").unwrap();
    assert_eq!(gpu_limit_bytes(ds, small).unwrap(), (24.0 * GIB * 66.7 / 100.0) as u64);
    let large = ds.gpu("apple-m4-pro-48gb").unwrap();
    assert_eq!(gpu_limit_bytes(ds, large).unwrap(), (48.0 * GIB * 0.75) as u64);
    let card = Card::parse(ds, "apple-m4-pro-48gb", 0.0).unwrap();
    assert_eq!(card.budget_bytes(), (36.0 * GIB) as u64);
    // Other programs' memory comes off the GPU's share.
    assert_eq!(Card::parse(ds, "apple-m4-pro-48gb", 4.0).unwrap().budget_bytes(), (32.0 * GIB) as u64);
    assert!(Card::parse(ds, "apple-m4-pro-48gb", 40.0).is_err(), "more than the GPU's share");
    // An NVIDIA card keeps its whole memory.
    let g = ds.gpu("rtx-4090").unwrap();
    assert_eq!(gpu_limit_bytes(ds, g).unwrap(), gpu_bytes(g));

    // Qwen3 30B-A3B at Q4_K_M in llama.cpp (about 18 GiB): fits the 36 GiB share of 48 GB, not the
    // 16 GiB share of a 24 GB Mac; the note says how much stays for macOS.
    let w = &parse_input(&json!({"kind": "llm-inference", "model": "qwen3-30b-a3b", "weights": "Q4_K_M", "context": 8192, "engine": "llama.cpp"}).to_string())
        .unwrap()[0];
    let on48 = fit_on(ds, w, &card).unwrap();
    assert!(on48.verdict.as_ref().unwrap().fits, "{}", on48.peak_bytes as f64 / GIB);
    let note = on48.notes.iter().find(|n| n.id == "apple-card").expect("the unified-memory note");
    assert_eq!(note.values["left"], ((48.0 * GIB) as u64 - (36.0 * GIB) as u64).to_string());
    let on24 = fit_on(ds, w, &Card::parse(ds, "apple-m4-pro-24gb", 0.0).unwrap()).unwrap();
    assert!(!on24.verdict.as_ref().unwrap().fits);
    // The list of GPUs it fits on counts a Mac by its share, not its whole memory.
    let f = fit(ds, w).unwrap();
    let m4 = f.fits.iter().find(|x| x.gpu == "apple-m4-pro-48gb").expect("fits the 48 GB Mac");
    assert_eq!(m4.headroom_bytes, (36.0 * GIB) as i64 - f.peak_bytes as i64);
    assert!(!f.fits.iter().any(|x| x.gpu == "apple-m4-pro-24gb"));

    // What llama.cpp keeps on the host (the token embedding) comes out of the same memory: the RAM
    // verdict counts what is left beside the GPU's peak.
    let r = on48.verdict.as_ref().unwrap().ram.clone().expect("a RAM verdict on unified memory");
    assert_eq!(r.ram_bytes, (48.0 * GIB) as u64 - on48.peak_bytes);
    assert_eq!(r.host_bytes, on48.host_bytes);
    assert!(r.fits);
}

#[test]
fn a_plan_on_a_mac_keeps_the_gpu_and_the_system_ram_within_its_memory() {
    // Qwen3 32B at Q4_K_M does not fit a 16 GB Mac's GPU share; moving layers "to system RAM"
    // does not help there as it would on a PC: they stay in the same memory. The plan holds both.
    let ds = &loaded().dataset;
    let w = &parse_input(
        &json!({"kind": "llm-inference", "model": "qwen3-32b", "weights": "Q4_K_M", "kv_cache": "fp16", "context": 8192, "engine": "llama.cpp"}).to_string(),
    )
    .unwrap()[0];
    for mac in ["apple-m4-16gb", "apple-m3-pro-18gb", "apple-m4-pro-24gb"] {
        let card = Card::parse(ds, mac, 0.0).unwrap();
        let f = fit_on(ds, w, &card).unwrap();
        let plan = f.plan.unwrap_or_else(|| panic!("{mac}: a plan"));
        assert!(plan.peak_bytes <= card.budget_bytes(), "{mac}");
        assert!(plan.peak_bytes + plan.host_bytes <= card.memory_bytes, "{mac}: {} + {} on {}", plan.peak_bytes, plan.host_bytes, card.memory_bytes);
    }
}
