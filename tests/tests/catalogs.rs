//! The catalogs are internally consistent with the published numbers.

use headroom_e2e::data::loaded;

#[test]
fn llm_parameter_counts_match_their_architecture() {
    let mut report = Vec::new();
    for m in &loaded().dataset.llms {
        let computed = m.architecture_params() as f64;
        let published = m.params as f64;
        let rel = (computed - published) / published;
        // Published counts of multimodal checkpoints include the vision tower; 2.5 % covers Gemma 3.
        if rel.abs() > 0.025 {
            report.push(format!("{}: architecture gives {computed:.0}, published {published:.0} ({:+.2} %)", m.id, rel * 100.0));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn the_catalogs_have_the_required_breadth() {
    let ds = &loaded().dataset;
    let gpus = ds.gpus.len();
    let moe = ds.llms.iter().filter(|m| m.is_moe()).count();
    let mla = ds.llms.iter().filter(|m| m.attention == headroom_core::Attention::Mla).count();
    let gqa = ds.llms.iter().filter(|m| m.attention == headroom_core::Attention::Gqa).count();
    assert!(gpus >= 40, "{gpus} GPUs");
    assert!(ds.llms.len() >= 25, "{} LLMs", ds.llms.len());
    assert!(moe >= 1 && mla >= 1 && gqa >= 1, "moe {moe} mla {mla} gqa {gqa}");
    for id in ["sd-1.5", "sdxl", "sd-3.5-large", "flux.1-dev", "wan2.1-t2v-1.3b", "wan2.2-t2v-a14b", "hunyuanvideo"] {
        assert!(ds.diffusion_model(id).is_some(), "diffusion model {id} missing");
    }
    for id in ["bf16", "fp8", "nf4", "Q4_K_M", "Q8_0", "awq-int4", "gptq-int4"] {
        assert!(ds.quant(id).is_some(), "quant {id} missing");
    }
}

#[test]
fn gguf_block_types_follow_their_block_layout() {
    for q in &loaded().dataset.quant {
        if let (Some(n), Some(b)) = (q.block_elements, q.block_bytes) {
            assert!((q.bits - b as f64 * 8.0 / n as f64).abs() < 1e-9, "{}", q.id);
        }
    }
}
