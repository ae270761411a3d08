//! The fit for a card: the verdict, levers valid for the engine that say whether they alone fit,
//! and the plan (the cheapest combination of levers that fits), checked by running the engine on
//! what they propose. Also the calculator's link completion.

use headroom_core::fit::query::{complete, decode, parse_query};
use headroom_core::fit::{Card, Fit, Workload, fit, fit_on, parse_input};
use headroom_e2e::data::loaded;
use serde_json::{Value, json};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn workload(w: &Value) -> Workload {
    parse_input(&w.to_string()).unwrap_or_else(|e| panic!("{w}: {e}")).remove(0)
}

fn on(w: Value, card: &str) -> Fit {
    let ds = &loaded().dataset;
    fit_on(ds, &workload(&w), &Card::parse(ds, card, 0.0).unwrap()).unwrap_or_else(|e| panic!("{w}: {e}"))
}

/// A proposed workload, run through the engine again.
fn peak_of(w: &Value) -> u64 {
    fit(&loaded().dataset, &Workload::from_value(w).unwrap()).unwrap().peak_bytes
}

#[test]
fn the_verdict_says_fits_or_short_by_how_much() {
    let f = on(json!({"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"bf16","context":32768,"engine":"ollama"}), "rtx-3060-12gb");
    let v = f.verdict.clone().expect("a verdict for the card");
    assert_eq!(v.card.name, loaded().dataset.gpu("rtx-3060-12gb").unwrap().name);
    assert_eq!(v.budget_bytes, (12.0 * GIB) as u64);
    assert_eq!(v.spare_bytes, v.budget_bytes as i64 - f.peak_bytes as i64);
    assert_eq!(v.fits, f.peak_bytes <= v.budget_bytes);
    assert!(v.fits, "an 8B Q4_K_M at 32k fits 12 GiB: peak {}", f.peak_bytes as f64 / GIB);
    assert!(f.plan.is_none(), "no plan when it fits");
    // Other processes shrink the budget, in GiB.
    let ds = &loaded().dataset;
    let card = Card::parse(ds, "rtx-3060-12gb", 1.5).unwrap();
    assert_eq!(card.budget_bytes(), (10.5 * GIB) as u64);
    // A typed size is GiB unless it says GB.
    assert_eq!(Card::parse(ds, "12", 0.0).unwrap().memory_bytes, (12.0 * GIB) as u64);
    assert_eq!(Card::parse(ds, "12GB", 0.0).unwrap().memory_bytes, 12_000_000_000);
    assert!(Card::parse(ds, "rtx-9999", 0.0).unwrap_err().contains("neither a catalog GPU id nor a size"));
    assert!(Card::parse(ds, "8", 8.0).unwrap_err().contains("whole card"));
    assert!(Card::parse(ds, "8", -1.0).is_err());
}

#[test]
fn flux_dev_on_a_12_gb_card_gets_a_plan_that_fits_when_applied() {
    let f = on(json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16","width":1024,"height":1024}), "rtx-3060-12gb");
    let v = f.verdict.clone().unwrap();
    assert!(!v.fits && v.spare_bytes < 0);
    let plan = f.plan.clone().expect("a plan");
    assert!(plan.peak_bytes <= v.budget_bytes);
    assert_eq!(plan.spare_bytes, v.budget_bytes as i64 - plan.peak_bytes as i64);
    assert_eq!(peak_of(&plan.workload), plan.peak_bytes, "the plan's peak is the engine's on its workload");
    for c in &plan.changes {
        assert_eq!(plan.workload[&c.field], c.value, "{}", c.field);
    }
    for c in &plan.claims {
        assert!(loaded().dataset.claim(c).is_some(), "{c}");
    }
    // The cheapest combination: the plan is not dominated by one single lever that fits alone
    // with fewer changes and the same or a milder cost.
    assert!(!plan.changes.is_empty());
    // Every lever reports its own result against the card.
    for l in &f.levers {
        assert_eq!(l.fits, Some(l.peak_bytes <= v.budget_bytes), "{}", l.lever);
        assert_eq!(peak_of(&l.workload), l.peak_bytes, "{}", l.lever);
    }
    assert!(f.levers.iter().any(|l| l.fits == Some(false)) || f.levers.iter().all(|l| l.fits == Some(true)));
}

#[test]
fn a_denoiser_format_lever_keeps_the_text_encoders_where_they_were() {
    // bf16 denoiser: the text encoders follow it in bf16; an fp8 lever must not take them along.
    let f = on(json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16"}), "rtx-4090");
    let fp8 = f.levers.iter().find(|l| l.changes.iter().any(|c| c.field == "precision")).expect("a precision lever");
    assert!(fp8.changes.iter().any(|c| c.field == "text_encoder_precision" && c.value == json!("bf16")), "{:?}", fp8.changes);
    assert_eq!(fp8.workload["text_encoder_precision"], json!("bf16"));
    // The text encoders' own lever is separate.
    let f = run_free(json!({"kind":"diffusion","model":"flux.1-dev","precision":"bf16"}));
    assert!(f.levers.iter().any(|l| l.changes.len() == 1 && l.changes[0].field == "text_encoder_precision" && l.changes[0].value == json!("fp8")));
}

fn run_free(w: Value) -> Fit {
    fit(&loaded().dataset, &workload(&w)).unwrap()
}

#[test]
fn levers_are_valid_for_the_engine() {
    let ds = &loaded().dataset;
    let gguf = |f: &str| ds.quant(f).is_some_and(|q| matches!(q.family, headroom_core::QuantFamily::GgufType | headroom_core::QuantFamily::GgufScheme));
    for engine in ["ollama", "llama.cpp"] {
        let f = run_free(json!({"kind":"llm-inference","model":"qwen3-32b","weights":"Q8_0","context":32768,"batch":4,"engine":engine}));
        for l in &f.levers {
            for c in &l.changes {
                match c.field.as_str() {
                    "weights" => assert!(gguf(c.value.as_str().unwrap()), "{engine} offered {}", l.lever),
                    "kv_cache" => assert!(["q8_0", "q4_0"].contains(&c.value.as_str().unwrap()), "{engine}: {}", l.lever),
                    "context" | "batch" | "gpu_layers" | "ubatch" | "cpu_moe_layers" => {}
                    "flash_attention" => assert_eq!(c.value, json!(true), "{engine}: {}", l.lever),
                    other => panic!("{engine}: unexpected lever field {other}"),
                }
            }
        }
        assert!(f.levers.iter().any(|l| l.changes[0].field == "kv_cache"));
        // With flash attention off, llama.cpp's levers turn it on, and a quantized cache comes with it.
        let f = run_free(json!({"kind":"llm-inference","model":"qwen3-32b","weights":"Q8_0","context":32768,"engine":engine,"flash_attention":false}));
        assert!(f.levers.iter().any(|l| l.changes.len() == 1 && l.changes[0].field == "flash_attention"), "{engine}");
        for l in f.levers.iter().filter(|l| l.changes.iter().any(|c| c.field == "kv_cache")) {
            assert!(l.changes.iter().any(|c| c.field == "flash_attention" && c.value == json!(true)), "{engine}: {}", l.lever);
        }
    }
    let f = run_free(json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"engine":"vllm"}));
    for l in &f.levers {
        for c in l.changes.iter().filter(|c| c.field == "weights") {
            assert!(!gguf(c.value.as_str().unwrap()), "vLLM offered {}", l.lever);
        }
    }
    let f = run_free(json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"engine":"transformers"}));
    assert!(f.levers.iter().all(|l| l.changes.iter().all(|c| c.field != "kv_cache" && !(c.field == "weights" && gguf(c.value.as_str().unwrap())))));
}

#[test]
fn a_qlora_change_gets_a_full_fine_tune_onto_a_24_gb_card() {
    let w = json!({"kind":"training","model":"llama-3.1-8b","method":"full","precision":"bf16","optimizer":"adamw","seq":2048,"batch":1,"gradient_checkpointing":true});
    let small = on(w.clone(), "rtx-4070");
    let big = on(w, "rtx-4090");
    assert!(!big.verdict.as_ref().unwrap().fits);
    let plan = big.plan.expect("a plan for 24 GB");
    assert!(plan.changes.iter().any(|c| c.field == "method"), "{:?}", plan.changes);
    assert!(plan.peak_bytes <= big.verdict.unwrap().budget_bytes);
    assert_eq!(peak_of(&plan.workload), plan.peak_bytes);
    // A 12 GB card needs at least as much.
    if let Some(p) = small.plan {
        assert!(p.changes.len() >= plan.changes.len() || p.costs.len() >= plan.costs.len());
    }
}

#[test]
fn numeric_plan_changes_keep_as_much_as_the_card_allows() {
    // Ollama with a long context on an 8 GB card: if the plan shortens the context, one more
    // grain of context would not fit.
    let ds = &loaded().dataset;
    let w = json!({"kind":"llm-inference","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"bf16","context":131072,"engine":"ollama"});
    let f = on(w, "rtx-4060");
    let budget = f.verdict.as_ref().unwrap().budget_bytes;
    let plan = f.plan.expect("a plan");
    assert!(plan.peak_bytes <= budget);
    if let Some(c) = plan.changes.iter().find(|c| c.field == "context") {
        let mut more = plan.workload.clone();
        more["context"] = json!(c.value.as_u64().unwrap() + 256);
        let p = fit(ds, &Workload::from_value(&more).unwrap()).unwrap().peak_bytes;
        assert!(p > budget, "context {} + 256 still fits", c.value);
    }
    if let Some(c) = plan.changes.iter().find(|c| c.field == "gpu_layers") {
        let mut more = plan.workload.clone();
        more["gpu_layers"] = json!(c.value.as_u64().unwrap() + 1);
        let p = fit(ds, &Workload::from_value(&more).unwrap()).unwrap().peak_bytes;
        assert!(p > budget, "one more layer still fits");
    }
}

#[test]
fn a_partial_link_opens_with_every_field_at_its_default() {
    let ds = &loaded().dataset;
    let s = parse_query(ds, "?kind=llm-inference&model=qwen3-8b&context=32768&card=rtx-4090");
    for key in ["weights", "kv_cache", "batch", "engine", "all_logits"] {
        assert!(s.contains_key(key), "{key} missing: {s:?}");
    }
    // As the form opens: the task's preset engine and that engine's format.
    assert_eq!((&s["engine"], &s["weights"]), (&json!("ollama"), &json!("Q4_K_M")));
    assert_eq!(s["card"], json!("rtx-4090"), "the card stays");
    let s = parse_query(ds, "?kind=diffusion&model=wan2.1-t2v-1.3b");
    for key in ["width", "height", "frames", "cfg", "precision", "offload", "text_encoders"] {
        assert!(s.contains_key(key), "{key} missing: {s:?}");
    }
    let s = parse_query(ds, "?kind=training&model=llama-3.2-1b");
    assert!(s.contains_key("seq") && s.contains_key("method") && s.contains_key("optimizer"));
    // A bad value stays as given, so the engine's error names it.
    let bad = parse_query(ds, "?kind=llm-inference&model=qwen3-8b&context=32768&weights=q3");
    assert_eq!(bad["weights"], json!("q3"));
    assert!(fit(ds, &Workload::from_value(&Value::Object(bad)).unwrap()).unwrap_err().contains("field `weights`"));
    // A state the workload parser refuses keeps every field as given.
    let refused = decode("?kind=llm-inference&model=qwen3-8b&context=32768&flavour=1");
    assert_eq!(complete(ds, &refused), refused);
}

#[test]
fn levers_and_plans_cite_existing_claims_that_are_not_contradicted() {
    let ds = &loaded().dataset;
    let cases = [
        (json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"batch":4,"engine":"ollama"}), "rtx-3060-12gb"),
        (json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"batch":4,"engine":"vllm"}), "rtx-4090"),
        (json!({"kind":"llm-inference","model":"qwen3-32b","weights":"bf16","context":32768,"engine":"transformers"}), "rtx-4090"),
        (json!({"kind":"training","model":"llama-3.1-8b","method":"full","seq":4096,"batch":8}), "rtx-4090"),
        (json!({"kind":"diffusion","model":"wan2.1-t2v-14b","precision":"bf16","frames":81,"batch":2}), "rtx-4070"),
        (json!({"kind":"diffusion","model":"sdxl","precision":"fp32","batch":4}), "rtx-3050-8gb"),
        (json!({"kind":"diffusion","model":"hunyuanvideo","precision":"bf16"}), "rtx-4090"),
    ];
    for (w, card) in cases {
        let f = on(w.clone(), card);
        let mut cited: Vec<&String> = f.levers.iter().flat_map(|l| &l.claims).collect();
        if let Some(p) = &f.plan {
            cited.extend(&p.claims);
        }
        assert!(!cited.is_empty(), "{w}");
        for id in cited {
            let c = ds.claim(id).unwrap_or_else(|| panic!("{w}: unknown claim {id}"));
            assert_ne!(c.verdict, headroom_core::Verdict::Contradicted, "{w}: a lever cites contradicted {id}");
        }
    }
}

#[test]
fn every_calculator_link_in_the_guides_opens_with_every_control_filled() {
    let ds = &loaded().dataset;
    let mut n = 0;
    for entry in std::fs::read_dir(headroom_e2e::repo_root().join("i18n/en/guides")).unwrap().flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        for link in text.split("(calc:").skip(1) {
            let query = &link[..link.find(')').unwrap()];
            let s = parse_query(ds, query);
            let controls: &[&str] = match s["kind"].as_str().unwrap() {
                "training" => &["model", "method", "precision", "optimizer", "seq", "batch", "gradient_checkpointing", "lora_rank", "gpus", "zero"],
                "diffusion" => &["model", "precision", "width", "height", "batch", "cfg", "component", "text_encoders", "offload", "block_swap", "tiled_vae"],
                _ => &["model", "engine", "weights", "kv_cache", "context", "batch"],
            };
            for c in controls {
                assert!(s.contains_key(*c), "{}: {query} opens without `{c}`", entry.path().display());
            }
            // The completed link computes what the link meant (the card fields are not the
            // workload's).
            let workload_of = |mut state: serde_json::Map<String, Value>| {
                for key in headroom_core::fit::query::CARD_KEYS {
                    state.remove(key);
                }
                Workload::from_value(&Value::Object(state)).unwrap()
            };
            let short = fit(ds, &workload_of(decode(query))).unwrap();
            let full = fit(ds, &workload_of(s)).unwrap();
            assert_eq!(short.peak_bytes, full.peak_bytes, "{query}");
            n += 1;
        }
    }
    assert!(n >= 30, "{n} calculator links");
}
