//! The fit engine against the real dataset: the brief's examples, every engine path, errors, and
//! the accuracy of every reference run (5 % or 0.5 GiB, whichever is larger).

use std::io::Write;
use std::process::{Command, Stdio};

use headroom_core::fit::accuracy::{accuracy, parse_references, tolerance};
use headroom_core::fit::{Fit, fit, parse_input};
use headroom_e2e::data::loaded;
use headroom_e2e::{bin, repo_root};
use serde_json::{Value, json};

const BRIEF_EXAMPLES: &str = r#"[
 {"kind":"llm-inference","model":"llama-3.1-8b","weights":"bf16","kv_cache":"bf16","context":32768,"batch":1,"engine":"transformers"},
 {"kind":"training","model":"llama-3.2-1b","method":"lora","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true,"lora_rank":16},
 {"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":1}
]"#;

fn run(w: Value) -> Fit {
    let ds = &loaded().dataset;
    let ws = parse_input(&w.to_string()).unwrap_or_else(|e| panic!("{w}: {e}"));
    fit(ds, &ws[0]).unwrap_or_else(|e| panic!("{w}: {e}"))
}

fn assert_consistent(f: &Fit) {
    let ds = &loaded().dataset;
    let sum: u64 = f.breakdown.iter().map(|t| t.bytes).sum();
    assert_eq!(sum, f.peak_bytes, "{}", f.workload);
    let tensors: u64 = f.breakdown.iter().filter(|t| t.term != "cuda-context" && t.term != "allocator-headroom").map(|t| t.bytes).sum();
    assert_eq!(tensors, f.tensor_bytes);
    for t in &f.breakdown {
        assert!(!t.claims.is_empty(), "term {} cites no claim", t.term);
        for c in &t.claims {
            assert!(ds.claim(c).is_some(), "term {} cites unknown claim {c}", t.term);
        }
    }
    for l in &f.levers {
        assert!(l.saving_bytes > 0 && l.peak_bytes < f.peak_bytes, "lever {} saves nothing", l.lever);
        for c in &l.claims {
            assert!(ds.claim(c).is_some(), "lever {} cites unknown claim {c}", l.lever);
        }
        assert!(["quality", "speed", "capability", "throughput"].contains(&serde_json::to_value(l.cost).unwrap().as_str().unwrap()), "{:?}", l.cost);
    }
    for w in f.fits.windows(2) {
        assert!(w[0].memory_bytes <= w[1].memory_bytes);
    }
    for g in &f.fits {
        assert!(g.headroom_bytes >= 0 && g.memory_bytes >= f.peak_bytes);
    }
}

#[test]
fn the_brief_examples_fit_with_cited_terms() {
    let ds = &loaded().dataset;
    let ws = parse_input(BRIEF_EXAMPLES).unwrap();
    assert_eq!(ws.len(), 3);
    for w in &ws {
        let f = fit(ds, w).unwrap();
        assert_consistent(&f);
        let terms: Vec<&str> = f.breakdown.iter().map(|t| t.term.as_str()).collect();
        assert!(terms.contains(&"cuda-context") && terms.contains(&"allocator-headroom"), "{terms:?}");
        assert!(terms.contains(&"weights"), "{terms:?}");
    }
    // Llama 3.1 8B at 32k in bf16: 16 GB of weights and 4 GiB of KV cache do not fit a 24 GB card;
    // a 4-bit format transformers loads (bitsandbytes nf4) does.
    let f = fit(ds, &ws[0]).unwrap();
    let kv = f.breakdown.iter().find(|t| t.term == "kv-cache").unwrap().bytes;
    assert_eq!(kv, 32768 * 131072, "128 KiB per token");
    assert!(!f.fits.iter().any(|g| g.gpu == "rtx-4090"));
    assert!(f.levers.iter().any(|l| l.lever == "weights: nf4" && l.peak_bytes < 24 * (1 << 30)));
}

#[test]
fn every_engine_path_cites_existing_claims() {
    let cases = vec![
        json!({"kind":"llm-inference","model":"qwen3-32b","weights":"Q4_K_M","kv_cache":"q8_0","context":32768,"engine":"ollama"}),
        json!({"kind":"llm-inference","model":"llama-3.1-70b","weights":"Q4_K_M","context":8192,"engine":"llama.cpp","gpu_layers":40}),
        json!({"kind":"llm-inference","model":"llama-3.1-8b","weights":"fp8","kv_cache":"fp8","context":16384,"batch":8,"engine":"vllm"}),
        json!({"kind":"llm-inference","model":"deepseek-v2-lite","context":4096,"engine":"transformers"}),
        json!({"kind":"llm-inference","model":"qwen3-30b-a3b","weights":"awq-int4","context":4096,"batch":4}),
        json!({"kind":"llm-inference","model":"llama-3.2-1b","context":4096,"all_logits":true}),
        json!({"kind":"training","model":"llama-3.1-8b","method":"qlora","seq":2048}),
        json!({"kind":"training","model":"llama-3.1-8b","method":"full","precision":"mixed-bf16","optimizer":"adamw-8bit","seq":4096,"gpus":8,"zero":3}),
        json!({"kind":"training","model":"qwen3-8b","method":"full","precision":"fp32","optimizer":"sgd","seq":1024,"gpus":4,"zero":2}),
        json!({"kind":"diffusion","model":"sdxl","precision":"fp16","batch":2}),
        json!({"kind":"diffusion","model":"sd-1.5","precision":"fp16","width":768,"height":768,"component":"vae-decode","tiled_vae":true}),
        json!({"kind":"diffusion","model":"flux.1-dev","precision":"Q4_K_S","text_encoders":"cpu","offload":"model"}),
        json!({"kind":"diffusion","model":"wan2.1-t2v-14b","frames":81,"block_swap":20}),
        json!({"kind":"diffusion","model":"wan2.2-t2v-a14b","precision":"fp8","frames":49,"offload":"sequential"}),
        json!({"kind":"diffusion","model":"hunyuanvideo","precision":"fp8","width":960,"height":544,"frames":61,"component":"denoiser"}),
        json!({"kind":"diffusion","model":"sd-3.5-large","component":"text-encoder"}),
    ];
    for w in cases {
        assert_consistent(&run(w));
    }
}

/// Issue 40, point 12: `max_split_size_mb` together with `expandable_segments:True` can make
/// reserved memory keep growing (pytorch/pytorch#193400). Nothing the calculator suggests writes
/// that combination: no tool setting's template, and no lever, plan or command for any engine's
/// workload on a small card. Its caution cites the claim, which the calculator's data keeps with
/// its statement and condition.
#[test]
fn no_lever_or_plan_suggests_max_split_with_expandable_segments() {
    use headroom_core::fit::setup::{settings_from, setup};
    use headroom_core::fit::{Card, MAX_SPLIT_WITH_EXPANDABLE_CLAIM, Workload, fit_on};
    let ds = &loaded().dataset;
    let both = |t: &str| t.contains("max_split_size_mb") && t.contains("expandable_segments");
    for tool in &ds.tools {
        for f in &tool.flags {
            for s in &f.sets {
                let texts = std::iter::once(&s.write).chain(std::iter::once(&s.fallback)).chain(s.values.values());
                for t in texts {
                    assert!(!both(t), "{} {}: {t}", tool.id, f.name);
                }
            }
        }
    }
    let cases = [
        json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"engine":"transformers"}),
        json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"batch":8,"engine":"vllm"}),
        json!({"kind":"llm-inference","model":"llama-3.1-70b","weights":"Q8_0","context":32768,"engine":"llama.cpp"}),
        json!({"kind":"llm-inference","model":"llama-3.1-70b","weights":"Q8_0","context":32768,"engine":"ollama"}),
        json!({"kind":"training","model":"llama-3.1-8b","method":"full","precision":"bf16","optimizer":"adamw","seq":4096,"batch":8}),
        json!({"kind":"training","model":"llama-3.1-8b","method":"lora","seq":4096,"batch":8}),
        json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024,"batch":2}),
        json!({"kind":"diffusion","model":"wan2.1-t2v-14b","frames":81}),
    ];
    let card = Card::parse(ds, "8GiB", 0.0).unwrap();
    let mut levers = 0;
    for w in cases {
        let f = fit_on(ds, &Workload::from_value(&w).unwrap(), &card).unwrap_or_else(|e| panic!("{w}: {e}"));
        let mut texts: Vec<String> = setup(ds, &f.workload, &[]).map(|s| vec![s.command]).unwrap_or_default();
        for l in &f.levers {
            levers += 1;
            let fields: Vec<&str> = l.changes.iter().map(|c| c.field.as_str()).collect();
            texts.extend(settings_from(ds, Some(&f.workload), &l.workload, &fields, &[]).into_iter().map(|s| s.text));
            texts.extend(setup(ds, &l.workload, &[]).map(|s| s.command));
            texts.push(l.lever.clone());
        }
        if let Some(p) = &f.plan {
            texts.extend(settings_from(ds, Some(&f.workload), &p.workload, &[], &[]).into_iter().map(|s| s.text));
            texts.push(p.workload.to_string());
        }
        for t in &texts {
            assert!(!both(t), "{w}: {t}");
        }
    }
    assert!(levers > 20, "only {levers} levers looked at");
    // The caution's claim, in the calculator's own data with what it says and under which condition.
    let calc = ds.for_calculator();
    let c = calc.claim(MAX_SPLIT_WITH_EXPANDABLE_CLAIM).expect("the calculator's data keeps the caution's claim");
    assert!(c.statement.en.contains("max_split_size_mb") && c.correction.is_some(), "{:?}", c.statement.en);
}

#[test]
fn levers_make_a_big_workload_fit_a_small_card() {
    let f = run(json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024}));
    assert!(!f.fits.iter().any(|g| g.gpu == "rtx-4060-ti-16gb"));
    let gguf = f.levers.iter().find(|l| l.lever.starts_with("precision: Q")).expect("a GGUF lever");
    assert!(gguf.saving_bytes > 10 * (1 << 30), "{}", gguf.saving_bytes);
}

fn fit_error(w: Value) -> String {
    let ds = &loaded().dataset;
    match parse_input(&w.to_string()) {
        Err(e) => e,
        Ok(ws) => fit(ds, &ws[0]).err().expect("an error"),
    }
}

/// Issue 39 point 4: a context beyond the trained maximum is answered (engines run it; llama.cpp
/// with a warning), with what the model was trained to and what extends it, per engine.
#[test]
fn a_context_beyond_the_trained_maximum_is_answered_with_what_the_model_was_trained_to() {
    let at = |engine: &str, context: u64| {
        let weights = if engine == "llama.cpp" || engine == "ollama" { "Q4_K_M" } else { "bf16" };
        run(json!({"kind":"llm-inference","model":"llama-3.1-8b","weights":weights,"kv_cache":"fp16","context":context,"engine":engine}))
    };
    for (engine, note) in
        [("llama.cpp", "beyond-trained-llamacpp"), ("vllm", "beyond-trained-vllm"), ("transformers", "beyond-trained"), ("ollama", "beyond-trained")]
    {
        let within = at(engine, 131_072);
        assert!(within.notes.iter().all(|n| !n.id.starts_with("beyond-trained")), "{engine}: {:?}", within.notes);
        let beyond = at(engine, 262_144);
        let n = beyond.notes.iter().find(|n| n.id == note).unwrap_or_else(|| panic!("{engine}: {:?}", beyond.notes));
        assert_eq!((n.values["max"].as_str(), n.values["context"].as_str()), ("131072", "262144"), "{engine}");
        assert!(n.text.contains("131072") && n.text.contains("llama-3.1-8b"), "{}", n.text);
        // The cache is priced for the context asked: twice the tokens, more memory.
        assert!(beyond.peak_bytes > within.peak_bytes, "{engine}");
    }
    // Ten million tokens is an answer too (it fits no card), not an error.
    let huge = at("llama.cpp", 10_000_000);
    assert!(huge.peak_bytes > 1u64 << 40, "{}", huge.peak_bytes);
}

#[test]
fn bad_workloads_get_errors_that_name_the_field() {
    assert!(fit_error(json!({"kind":"llm-inference","model":"llama-9b","context":10})).contains("field `model`: unknown LLM `llama-9b`"));
    assert!(fit_error(json!({"kind":"llm-inference","model":"llama-3.1-8b","context":10,"flavour":1})).contains("unknown field `flavour`"));
    assert!(fit_error(json!({"kind":"llm-inference","model":"llama-3.1-8b"})).contains("missing field `context`"));
    assert!(fit_error(json!({"kind":"llm-inference","model":"llama-3.1-8b","context":10,"weights":"q3"})).contains("field `weights`: unknown format `q3`"));
    assert!(fit_error(json!({"kind":"painting","model":"x"})).contains("unknown `kind` `painting`"));
    assert!(fit_error(json!({"model":"x"})).contains("missing field `kind`"));
    assert!(fit_error(json!({"kind":"diffusion","model":"llama-3.1-8b"})).contains("is an LLM"));
    assert!(fit_error(json!({"kind":"diffusion","model":"sdxl","frames":10})).contains("field `frames`"));
    assert!(fit_error(json!({"kind":"diffusion","model":"sdxl","width":1001})).contains("fields `width`/`height`"));
    assert!(fit_error(json!({"kind":"diffusion","model":"flux.1-dev","block_swap":99})).contains("field `block_swap`"));
    assert!(fit_error(json!({"kind":"training","model":"llama-3.2-1b","seq":10,"zero":4})).contains("field `zero`"));
    assert!(fit_error(json!({"kind":"training","model":"llama-3.2-1b","seq":10,"method":"dora"})).contains("unknown variant `dora`"));
}

#[test]
fn every_reference_run_is_predicted_within_5_percent_or_half_a_gib() {
    let dir = repo_root().join("dataset/measurements/reference");
    let mut refs = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "jsonl") {
            refs.extend(parse_references(&std::fs::read_to_string(e.path()).unwrap()).unwrap());
        }
    }
    let rows = accuracy(&loaded().dataset, &refs).unwrap();
    assert!(rows.len() >= 40, "{} reference cases", rows.len());
    for kind in ["llm-inference", "training", "diffusion"] {
        assert!(rows.iter().filter(|r| r.kind == kind).count() >= 10, "{kind}");
    }
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| (r.error_bytes.unsigned_abs() as f64) > tolerance(r.measured_allocated))
        .map(|r| format!("{}: {:+.1}% ({:+} bytes)", r.id, r.error * 100.0, r.error_bytes))
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_cli_fits_an_array_from_stdin_and_reports_bad_input() {
    let mut child = Command::new(bin("dataset", "dataset"))
        .args(["fit", "--input", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(BRIEF_EXAMPLES.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 3);
    for f in arr {
        assert!(f["peak_bytes"].as_u64().unwrap() > 0);
        assert!(f["breakdown"].as_array().unwrap().iter().all(|t| t["term"].is_string() && t["bytes"].is_u64() && t["claims"].is_array()));
        assert!(f["fits"].is_array() && f["levers"].is_array());
    }
    let file = std::env::temp_dir().join(format!("headroom-fit-{}.json", std::process::id()));
    std::fs::write(&file, r#"[{"kind":"training","model":"llama-3.2-1b","seq":10},{"kind":"training","model":"nope","seq":1}]"#).unwrap();
    let out = Command::new(bin("dataset", "dataset")).args(["fit", "--input"]).arg(&file).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("workload [1]: field `model`: unknown LLM `nope`"), "{err}");
}
