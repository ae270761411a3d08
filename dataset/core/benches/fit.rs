//! `cargo bench -p headroom-core --features fs --bench fit`: one fit (breakdown, fits over the catalog, levers)
//! per workload kind, and one workload fitted once per catalog GPU (what a GPU table with a fit
//! column costs). Targets: under 1 ms and under 16 ms. Also a user's config.json parsed into the
//! engine's architecture, and each answer of `fit::search` for a card (target: under 2 ms natively,
//! 20 ms in the browser). And the whole fit for a card a workload does not fit (verdict, levers
//! each checked against the card, the plan search, the answers): the calculator recomputes it on
//! every keystroke (target: under 5 ms natively, 50 ms in the browser).

use criterion::{Criterion, criterion_group, criterion_main};
use headroom_core::fit::{Card, GIB, fit, fit_on, parse_input, search::answers};
use headroom_core::load::load;

fn data_files() -> Vec<(String, String)> {
    headroom_core::files::read_tree(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data")).expect("the data directory")
}

fn bench(c: &mut Criterion) {
    let ds = load(&data_files()).expect("the data loads").dataset;
    let workloads = parse_input(
        r#"[{"kind":"llm-inference","model":"llama-3.1-8b","weights":"bf16","kv_cache":"bf16","context":32768,"batch":1,"engine":"transformers"},
            {"kind":"training","model":"llama-3.2-1b","method":"lora","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true,"lora_rank":16},
            {"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","context":8192,"engine":"ollama"},
            {"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":1}]"#,
    )
    .unwrap();
    for w in &workloads {
        let v = w.to_value();
        let kind = match v["engine"].as_str() {
            Some(e) => format!("{} ({e})", v["kind"].as_str().unwrap()),
            None => v["kind"].as_str().unwrap().to_string(),
        };
        c.bench_function(&format!("one fit: {kind}"), |b| b.iter(|| fit(&ds, std::hint::black_box(w)).unwrap()));
    }
    // vLLM's answer depends on the card's memory; a GPU table evaluates it once per catalog GPU.
    let vllm = parse_input(r#"{"kind":"llm-inference","model":"qwen3-32b","weights":"awq-int4","context":32768,"batch":4,"engine":"vllm"}"#).unwrap();
    let gpus = ds.gpus.len();
    c.bench_function(&format!("one workload against every GPU ({gpus} fits)"), |b| {
        b.iter(|| {
            for _ in 0..gpus {
                std::hint::black_box(fit(&ds, std::hint::black_box(&vllm[0])).unwrap());
            }
        })
    });

    // A config.json as users bring it (Qwen2.5-0.5B's published values) and the answers for an 8 GiB card.
    let config = serde_json::json!({
        "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643,
        "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
        "max_position_embeddings": 32768, "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
        "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
        "sliding_window": 32768, "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
        "use_cache": true, "use_sliding_window": false, "vocab_size": 151936
    });
    c.bench_function("config.json → architecture", |b| b.iter(|| headroom_core::hf::llm_from_config(std::hint::black_box(&config), None).unwrap()));
    let budget = (8.0 * GIB) as u64;
    let searches = parse_input(&format!(
        r#"[{{"kind":"llm-inference","model":{{"hf_config":{config}}},"weights":"bf16","context":8192,"engine":"transformers"}},
            {{"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","context":8192,"engine":"ollama"}},
            {{"kind":"training","model":"llama-3.2-1b","method":"lora","seq":2048,"gradient_checkpointing":true}},
            {{"kind":"diffusion","model":"wan2.1-t2v-1.3b","precision":"bf16","width":832,"height":480,"frames":81}}]"#
    ))
    .unwrap();
    for (label, w) in ["config.json model, transformers", "catalog model, Ollama", "training", "video diffusion"].iter().zip(&searches) {
        c.bench_function(&format!("all answers for an 8 GiB card: {label}"), |b| b.iter(|| answers(&ds, std::hint::black_box(w), budget, false).unwrap()));
    }
    // The plan search where it works hardest: workloads far over a 12 GiB card.
    let card = Card::parse(&ds, "rtx-3060-12gb", 0.0).unwrap();
    let over = parse_input(
        r#"[{"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","kv_cache":"bf16","context":32768,"batch":4,"engine":"ollama"},
            {"kind":"training","model":"llama-3.1-8b","method":"full","precision":"bf16","optimizer":"adamw","seq":4096,"batch":8},
            {"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":2},
            {"kind":"diffusion","model":"wan2.1-t2v-14b","precision":"bf16","width":1280,"height":720,"frames":81}]"#,
    )
    .unwrap();
    for (label, w) in ["Ollama 32B", "full fine-tune 8B", "FLUX batch 2", "Wan 14B 720p"].iter().zip(&over) {
        c.bench_function(&format!("fit for a 12 GiB card it does not fit (plan search): {label}"), |b| {
            b.iter(|| fit_on(&ds, std::hint::black_box(w), &card).unwrap())
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
