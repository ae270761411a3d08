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
    for chip in ["M1", "M1 Max", "M2", "M2 Pro", "M2 Max", "M2 Ultra", "M3", "M3 Pro", "M3 Max", "M4", "M4 Pro", "M4 Max"] {
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
    // Qwen3 14B at Q8_0 does not fit a 16 GB Mac's GPU share. On a PC the plan could leave layers
    // in system RAM; a Mac has no memory apart from the GPU's, so its plan changes the model's
    // format or context instead, and the GPU's peak and the host's part stay within the Mac.
    let ds = &loaded().dataset;
    let w = &parse_input(
        &json!({"kind": "llm-inference", "model": "qwen3-14b", "weights": "Q8_0", "kv_cache": "fp16", "context": 32768, "engine": "llama.cpp"}).to_string(),
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

/// What moves memory "to system RAM" on a PC, by the field it sets.
const TO_SYSTEM_RAM: [&str; 6] = ["gpu_layers", "cpu_moe_layers", "offload", "text_encoders", "block_swap", "cpu_offload"];

/// On unified memory no lever, plan or answer moves anything to system RAM: there is none apart
/// from the GPU's. The same workloads on an NVIDIA card with the same budget do get those levers.
#[test]
fn a_mac_is_offered_no_lever_to_system_ram() {
    let ds = &loaded().dataset;
    let workloads = [
        json!({"kind": "llm-inference", "model": "qwen3-30b-a3b", "weights": "Q8_0", "kv_cache": "fp16", "context": 32768, "engine": "llama.cpp"}),
        json!({"kind": "llm-inference", "model": "qwen2.5-14b", "weights": "Q6_K", "kv_cache": "fp16", "context": 16384, "engine": "ollama"}),
        json!({"kind": "diffusion", "model": "flux.1-dev", "precision": "bf16"}),
        json!({"kind": "diffusion", "model": "wan2.1-t2v-14b", "precision": "bf16", "frames": 81}),
    ];
    for mac in ["apple-m4-16gb", "apple-m4-pro-24gb", "apple:32"] {
        let card = Card::parse(ds, mac, 0.0).unwrap();
        // A PC card of the same budget: a size in GiB.
        let pc = Card::parse(ds, &format!("{}", card.budget_bytes() as f64 / GIB), 0.0).unwrap();
        assert_eq!(pc.budget_bytes() / (1 << 20), card.budget_bytes() / (1 << 20));
        for w in &workloads {
            let w = &parse_input(&w.to_string()).unwrap()[0];
            let fields = |f: &headroom_core::fit::Fit| -> Vec<String> {
                let levers = f.levers.iter().flat_map(|l| l.changes.iter().map(|c| c.field.clone()));
                let plan = f.plan.iter().flat_map(|p| p.changes.iter().map(|c| c.field.clone()));
                levers.chain(plan).filter(|x| TO_SYSTEM_RAM.contains(&x.as_str())).collect()
            };
            let on_mac = fit_on(ds, w, &card).unwrap();
            assert_eq!(fields(&on_mac), Vec::<String>::new(), "{mac} {w:?}");
            assert!(on_mac.answers.as_ref().unwrap().gpu_layers.is_none(), "{mac}: no GPU-layer answer on a Mac");
            let on_pc = fit_on(ds, w, &pc).unwrap();
            assert!(!fields(&on_pc).is_empty(), "{mac} as a PC card: {w:?}");
        }
    }
}

/// A Mac typed by its size (`apple:N`, the calculator's "Apple silicon" box under "another size")
/// is judged as the catalog's Mac of that size, not as N GiB of VRAM.
#[test]
fn a_mac_typed_by_its_size_is_judged_like_the_catalogs() {
    let ds = &loaded().dataset;
    for (typed, preset) in
        [("apple:16", "apple-m4-16gb"), ("apple:32", "apple-m4-32gb"), ("apple: 48", "apple-m4-pro-48gb"), ("apple:128GB", "apple-m4-max-128gb")]
    {
        let (a, b) = (Card::parse(ds, typed, 1.5).unwrap(), Card::parse(ds, preset, 1.5).unwrap());
        assert_eq!((a.memory_bytes, a.gpu_limit_bytes, a.budget_bytes()), (b.memory_bytes, b.gpu_limit_bytes, b.budget_bytes()), "{typed}");
    }
    let typed = Card::parse(ds, "apple:32", 0.0).unwrap();
    let vram = Card::parse(ds, "32", 0.0).unwrap();
    assert_eq!(vram.budget_bytes(), (32.0 * GIB) as u64);
    assert!(vram.budget_bytes() - typed.budget_bytes() > (10.0 * GIB) as u64, "32 GB of unified memory is not 32 GiB of VRAM");
    assert_eq!(typed.name, "Apple 32 GB");
    let w = &parse_input(&json!({"kind": "llm-inference", "model": "qwen3-8b", "weights": "Q4_K_M", "context": 8192, "engine": "llama.cpp"}).to_string())
        .unwrap()[0];
    let f = fit_on(ds, w, &typed).unwrap();
    let note = f.notes.iter().find(|n| n.id == "apple-card").expect("the unified-memory note for a typed Mac");
    assert_eq!(note.values["card"], "Apple 32 GB");
    for bad in ["apple:", "apple:abc", "apple:-4", "apple:0"] {
        assert!(Card::parse(ds, bad, 0.0).is_err(), "{bad}");
    }
}
