//! `cargo bench -p headroom-core --bench fit`: how long one fit takes, and one workload fitted
//! once per catalog GPU (what a GPU table with a fit column costs). Targets: 1 ms and 16 ms.
//! Plain timing loop (no external harness): median and 99th percentile over many runs.

use std::time::{Duration, Instant};

use headroom_core::fit::{fit, parse_input};
use headroom_core::load::load;

fn data_files() -> Vec<(String, String)> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for e in std::fs::read_dir(dir).expect("data dir").flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') || name == "README.md" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    out
}

fn time(label: &str, target: Duration, runs: usize, mut f: impl FnMut()) {
    for _ in 0..runs / 10 {
        f();
    }
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed()
        })
        .collect();
    samples.sort();
    let median = samples[runs / 2];
    let p99 = samples[runs * 99 / 100];
    let verdict = if p99 <= target { "within" } else { "OVER" };
    println!("{label}: median {median:?}, p99 {p99:?} ({verdict} the {target:?} target, {runs} runs)");
}

fn main() {
    let ds = load(&data_files()).expect("the data loads").dataset;
    let workloads = parse_input(
        r#"[{"kind":"llm-inference","model":"llama-3.1-8b","weights":"bf16","kv_cache":"bf16","context":32768,"batch":1,"engine":"transformers"},
            {"kind":"training","model":"llama-3.2-1b","method":"lora","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true,"lora_rank":16},
            {"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":1}]"#,
    )
    .unwrap();
    for w in &workloads {
        let kind = w.to_value()["kind"].as_str().unwrap().to_string();
        time(&format!("one fit ({kind}, breakdown + fits + levers)"), Duration::from_millis(1), 2000, || {
            std::hint::black_box(fit(&ds, std::hint::black_box(w)).unwrap());
        });
    }
    // vLLM's answer depends on the card; a GPU table evaluates it once per catalog GPU.
    let vllm = parse_input(r#"{"kind":"llm-inference","model":"qwen3-32b","weights":"awq-int4","context":32768,"batch":4,"engine":"vllm"}"#).unwrap();
    let gpus = ds.gpus.len();
    time(&format!("one workload against every GPU ({gpus} fits)"), Duration::from_millis(16), 200, || {
        for _ in 0..gpus {
            std::hint::black_box(fit(&ds, std::hint::black_box(&vllm[0])).unwrap());
        }
    });
}
