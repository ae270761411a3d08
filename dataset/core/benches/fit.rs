//! `cargo bench -p headroom-core --features fs --bench fit`: one fit (breakdown, fits over the catalog, levers)
//! per workload kind, and one workload fitted once per catalog GPU (what a GPU table with a fit
//! column costs). Targets: under 1 ms and under 16 ms.

use criterion::{criterion_group, criterion_main, Criterion};
use headroom_core::fit::{fit, parse_input};
use headroom_core::load::load;

fn data_files() -> Vec<(String, String)> {
    headroom_core::files::read_tree(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data")).expect("the data directory")
}

fn bench(c: &mut Criterion) {
    let ds = load(&data_files()).expect("the data loads").dataset;
    let workloads = parse_input(
        r#"[{"kind":"llm-inference","model":"llama-3.1-8b","weights":"bf16","kv_cache":"bf16","context":32768,"batch":1,"engine":"transformers"},
            {"kind":"training","model":"llama-3.2-1b","method":"lora","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true,"lora_rank":16},
            {"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":1}]"#,
    )
    .unwrap();
    for w in &workloads {
        let kind = w.to_value()["kind"].as_str().unwrap().to_string();
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
