//! The calculator loads `data/calc-<lang>.json` (`Dataset::for_calculator` of the compact data:
//! contradicted claims without their texts, statements only for the claims the engine can cite,
//! no catalog sources, no topics, tools, related claims, seeds or guides). Whatever it leaves out, the fit engine must answer exactly as it does on the whole
//! dataset: same breakdown, same cited claims, notes, verdicts, levers and plans, in every
//! language, for every catalog model with each engine, format and kind of workload, the presets,
//! the reference runs' workloads (own models included) and a few cards.

use headroom_core::fit::{Card, Workload, fit_on, query};
use headroom_core::{Dataset, Lang, Verdict};
use headroom_e2e::data::loaded;
use headroom_e2e::repo_root;
use serde_json::{Value, json};

fn workloads(ds: &Dataset) -> Vec<Value> {
    let mut out: Vec<Value> = query::presets().into_iter().map(|(_, w)| w).collect();
    for m in &ds.llms {
        let ctx = 8192.min(m.max_context);
        for (engine, weights, kv) in [
            ("transformers", "bf16", "bf16"),
            ("transformers", "nf4", "bf16"),
            ("vllm", "fp8", "fp8"),
            ("llama.cpp", "Q4_K_M", "q8_0"),
            ("ollama", "Q8_0", "bf16"),
        ] {
            out.push(json!({"kind": "llm-inference", "model": m.id, "engine": engine, "weights": weights, "kv_cache": kv, "context": ctx, "batch": 1}));
        }
        for method in ["full", "lora", "qlora"] {
            out.push(json!({"kind": "training", "model": m.id, "method": method, "seq": 1024.min(m.max_context), "batch": 2, "gradient_checkpointing": method != "full"}));
        }
    }
    for m in &ds.diffusion {
        for precision in ["bf16", "fp16", "fp8", "Q8_0", "Q4_K_M", "nf4"] {
            out.push(json!({"kind": "diffusion", "model": m.id, "precision": precision, "width": 1024, "height": 1024, "batch": 1}));
        }
    }
    for dir in ["dataset/measurements/reference", "dataset/measurements/capped", "dataset/measurements/llamacpp"] {
        for e in std::fs::read_dir(repo_root().join(dir)).unwrap().flatten() {
            // (files-*.jsonl beside the llama.cpp runs describe model files, not workloads)
            if e.path().extension().is_some_and(|x| x == "jsonl") && !e.file_name().to_string_lossy().starts_with("files-") {
                for line in std::fs::read_to_string(e.path()).unwrap().lines().filter(|l| !l.trim().is_empty()) {
                    let r: Value = serde_json::from_str(line).unwrap();
                    out.push(r["workload"].clone());
                }
            }
        }
    }
    out
}

/// Everything the engine answers for a workload on a card, as JSON (an error is an answer too).
fn answer(ds: &Dataset, w: &Value, card: &str) -> Value {
    let workload = match Workload::from_value(w) {
        Ok(w) => w,
        Err(e) => return json!({"workload error": e}),
    };
    let card = Card::parse(ds, card, 0.0).unwrap();
    match fit_on(ds, &workload, &card) {
        Ok(f) => serde_json::to_value(&f).unwrap(),
        Err(e) => json!({"error": e}),
    }
}

#[test]
fn the_engine_answers_the_same_on_the_calculators_data_in_every_language() {
    let full = &loaded().dataset;
    let ws = workloads(full);
    assert!(ws.len() > 300, "{} workloads", ws.len());
    for lang in Lang::ALL {
        let calc = full.for_lang(lang).compact().for_calculator();
        // Through JSON, as the browser gets it.
        let calc = Dataset::from_json(&calc.to_json()).unwrap();
        // The page counts the claims by verdict (its footer): the same counts, though it holds
        // only the claims the engine cites or reads.
        let counts = |d: &Dataset| [Verdict::Verified, Verdict::Qualified, Verdict::Unverified, Verdict::Contradicted].map(|v| d.verdict_count(v));
        assert_eq!(counts(&calc), counts(full), "{}", lang.code());
        assert_eq!(counts(full).iter().sum::<usize>(), full.claims.len());
        assert!(calc.claims.len() < full.claims.len() / 2, "{} of {} claims", calc.claims.len(), full.claims.len());
        assert!(calc.claims.iter().filter(|c| c.verdict == Verdict::Contradicted).all(|c| c.statement.get(lang).is_empty() && c.correction.is_none()));
        for (i, w) in ws.iter().enumerate() {
            // Cards from small to large, so that verdicts, levers and plans both fit and not.
            let card = ["rtx-3060-12gb", "rtx-4090", "8", "80"][i % 4];
            let (a, b) = (answer(full, w, card), answer(&calc, w, card));
            assert!(a == b, "{}: {w} on {card} answers differently on calc-{}.json:\nfull: {a}\ncalc: {b}", lang.code(), lang.code());
            // Every claim a term cites keeps its statement (the calculator shows it).
            for t in b["breakdown"].as_array().into_iter().flatten() {
                for id in t["claims"].as_array().unwrap() {
                    let c = calc.claim(id.as_str().unwrap()).unwrap();
                    assert!(
                        c.verdict == Verdict::Contradicted || !c.statement.get(lang).is_empty(),
                        "{}: {id} is cited but has no statement in calc-{}.json",
                        lang.code(),
                        lang.code()
                    );
                }
            }
        }
    }
}

#[test]
fn the_calculators_data_is_smaller_and_keeps_derivation_expressions() {
    let full = &loaded().dataset;
    let compact = full.for_lang(Lang::En).compact();
    let calc = compact.for_calculator();
    assert!(calc.to_json().len() < compact.to_json().len() * 4 / 5, "{} vs {}", calc.to_json().len(), compact.to_json().len());
    // The engine finds diffusion weight claims by their expressions: they stay, without the rest
    // of their sources.
    let with_compute = calc.claims.iter().filter(|c| c.sources.iter().any(|s| s.compute.is_some())).count();
    assert!(with_compute > 40, "{with_compute} claims keep a derivation");
    assert!(calc.claims.iter().flat_map(|c| &c.sources).all(|s| s.compute.is_some() && s.passage.is_empty() && s.url.is_none()));
    assert!(calc.gpus.iter().all(|g| g.source.url.is_none() && g.source.title.is_empty()));
}
