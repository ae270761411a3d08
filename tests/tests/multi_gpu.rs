//! Several GPUs in one machine: llama.cpp's layer split (checked per GPU against llama.cpp's own
//! buffers on virtual devices), vLLM's tensor and pipeline parallelism, data-parallel training,
//! and the verdict for a set of cards that says which one runs out first.

use headroom_core::fit::accuracy::{llama_accuracy, parse_llama_references};
use headroom_core::fit::{Card, Fit, Workload, fit, fit_on, fit_on_cards, parse_input};
use headroom_e2e::data::loaded;
use headroom_e2e::repo_root;
use serde_json::{Value, json};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn workload(v: &Value) -> Workload {
    parse_input(&v.to_string()).unwrap().remove(0)
}

fn term(terms: &[headroom_core::fit::Term], name: &str) -> u64 {
    terms.iter().find(|t| t.term == name).map_or(0, |t| t.bytes)
}

fn note<'a>(f: &'a Fit, id: &str) -> &'a headroom_core::fit::Note {
    f.notes.iter().find(|n| n.id == id).unwrap_or_else(|| panic!("no note {id}: {:?}", f.notes))
}

#[test]
fn every_gpu_of_the_split_runs_matches_llamacpps_own_buffers() {
    let text = std::fs::read_to_string(repo_root().join("dataset/measurements/llamacpp/h200-llamacpp-split-0c1e570.jsonl")).unwrap();
    let refs = parse_llama_references(&text).unwrap();
    let rows = llama_accuracy(&loaded().dataset, &refs).unwrap();
    assert!(rows.len() >= 10, "{} split runs", rows.len());
    let gpus: usize = rows.iter().map(|r| r.devices.len()).sum();
    assert!(gpus >= 20, "{gpus} GPUs");
    for r in &rows {
        assert!(r.within_tolerance && r.host_within_tolerance, "{}: {:?}", r.id, r);
        assert!(r.devices.len() >= 2, "{}: per-GPU rows", r.id);
        for d in &r.devices {
            assert!(d.within_tolerance, "{} GPU {}: llama.cpp {} engine {}", r.id, d.gpu, d.measured, d.predicted);
        }
    }
}

#[test]
fn llamacpp_layer_split_follows_tensor_split_and_names_the_limiting_card() {
    let ds = &loaded().dataset;
    let w = workload(
        &json!({"kind": "llm-inference", "model": "llama-3.1-8b", "weights": "Q4_K_M", "kv_cache": "fp16", "context": 8192, "engine": "llama.cpp", "gpus": 2, "tensor_split": [3, 1]}),
    );
    let f = fit(ds, &w).unwrap();
    assert_eq!(f.devices.len(), 2);
    assert_eq!(note(&f, "layer-split").values["counts"], "25 + 7");
    assert_eq!(note(&f, "layer-split").values["output"], "GPU 1");
    // Each layer's KV cache stays with it: 25 and 7 of 32 layers' 1 GiB at 8k tokens.
    let kv = |d: usize| term(&f.devices[d].breakdown, "kv-cache") as f64;
    assert!((kv(0) / kv(1) - 25.0 / 7.0).abs() < 1e-6);
    assert_eq!(f.peak_bytes, f.devices.iter().map(|d| d.peak_bytes).max().unwrap(), "the busiest GPU without cards");

    // Two different cards: the default split follows what each card offers, each card gets its
    // verdict, and the one with the least spare is named.
    let cards = [Card::parse(ds, "rtx-3090", 1.0).unwrap(), Card::parse(ds, "rtx-3060-12gb", 0.0).unwrap()];
    let big =
        workload(&json!({"kind": "llm-inference", "model": "llama-3.1-70b", "weights": "Q4_K_M", "kv_cache": "fp16", "context": 8192, "engine": "llama.cpp"}));
    let f = fit_on_cards(ds, &big, &cards).unwrap();
    let v = f.verdict.as_ref().unwrap();
    assert_eq!(v.gpus.len(), 2);
    assert!(!v.fits, "40 GiB of weights on 23 + 12 GiB");
    let limiting = v.limiting.unwrap();
    assert_eq!(v.card.name, cards[limiting].name);
    assert_eq!(v.spare_bytes, v.gpus.iter().map(|g| g.spare_bytes).min().unwrap());
    for (g, c) in v.gpus.iter().zip(&cards) {
        assert_eq!(g.budget_bytes, c.budget_bytes());
        assert_eq!(g.spare_bytes, g.budget_bytes as i64 - g.peak_bytes as i64);
    }
    // The plan fits both cards: fitted again on them, every GPU holds its share.
    let plan = f.plan.as_ref().expect("a plan with fewer GPU layers or a smaller format");
    let again = fit_on_cards(ds, &workload(&plan.workload), &cards).unwrap();
    let again = again.verdict.unwrap();
    assert!(again.fits, "{:?}", plan.changes);
    // Its spare is the least any card has left with it.
    assert_eq!(plan.spare_bytes, again.spare_bytes);
    assert_eq!(plan.spare_bytes, again.gpus.iter().map(|g| g.spare_bytes).min().unwrap());
    // What the answers show is the binding GPU's own peak, within its card.
    let layers = f.answers.as_ref().unwrap().gpu_layers.as_ref().unwrap();
    assert!(layers.peak_bytes <= cards.iter().map(Card::budget_bytes).max().unwrap());
}

#[test]
fn several_cards_are_checked_against_the_workload() {
    let ds = &loaded().dataset;
    let card = Card::parse(ds, "rtx-4090", 0.0).unwrap();
    let llm = |extra: Value| {
        let mut w = json!({"kind": "llm-inference", "model": "llama-3.1-8b", "weights": "Q4_K_M", "kv_cache": "fp16", "context": 8192, "engine": "llama.cpp"});
        w.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        workload(&w)
    };
    let err = fit_on_cards(ds, &llm(json!({"gpus": 3})), &[card.clone(), card.clone()]).unwrap_err();
    assert!(err.contains("3 GPUs") && err.contains("2 cards"), "{err}");
    let err = fit(ds, &llm(json!({"gpus": 2, "tensor_split": [1, 1, 1]}))).unwrap_err();
    assert!(err.contains("3 shares for 2 GPUs"), "{err}");
    let err = fit(ds, &llm(json!({"gpus": 2, "split_mode": "row"}))).unwrap_err();
    assert!(err.contains("no longer has the row split"), "{err}");
    let err = fit(ds, &llm(json!({"gpus": 2, "tensor_split": [1, -1]}))).unwrap_err();
    assert!(err.contains("0 or more"), "{err}");
    // A count no machine has is refused before anything is laid out per GPU.
    for n in [0u64, 1_000_000_000] {
        assert!(fit(ds, &llm(json!({"gpus": n}))).is_err(), "{n}");
        assert!(fit_on(ds, &llm(json!({"gpus": n})), &card).is_err(), "{n}");
    }
    let train = workload(&json!({"kind": "training", "model": "llama-3.2-1b", "seq": 512, "gpus": 1_000_000_000u64}));
    assert!(fit_on(ds, &train, &card).unwrap_err().contains("more than the 4096"));
    let diffusion = workload(&json!({"kind": "diffusion", "model": "flux.1-dev"}));
    assert!(fit_on_cards(ds, &diffusion, &[card.clone(), card.clone()]).unwrap_err().contains("not modelled"));
    // One card with `gpus: 2` is two of that card.
    let f = fit_on(ds, &llm(json!({"gpus": 2})), &card).unwrap();
    assert_eq!(f.verdict.unwrap().gpus.len(), 2);
}

#[test]
fn vllm_divides_weights_and_kv_heads_over_tensor_parallel_gpus() {
    let ds = &loaded().dataset;
    let vllm = |extra: Value| {
        let mut w = json!({"kind": "llm-inference", "model": "llama-3.1-70b", "weights": "bf16", "context": 8192, "batch": 4, "engine": "vllm"});
        w.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        fit(ds, &workload(&w))
    };
    let one = vllm(json!({})).unwrap();
    let four = vllm(json!({"gpus": 4})).unwrap();
    assert_eq!(four.devices.len(), 4);
    let w1 = term(&one.breakdown, "weights") as f64;
    let kv1 = term(&one.breakdown, "kv-cache") as f64;
    for d in &four.devices {
        // 8 KV heads over 4 GPUs: 2 each, a quarter of the cache.
        assert!((term(&d.breakdown, "weights") as f64 - w1 / 4.0).abs() < 2.0);
        assert!((term(&d.breakdown, "kv-cache") as f64 - kv1 / 4.0).abs() < 2.0);
    }
    // 16 GPUs and 8 KV heads: each KV head on two GPUs, an eighth of the cache each.
    let sixteen = vllm(json!({"gpus": 16})).unwrap();
    assert!((term(&sixteen.devices[0].breakdown, "kv-cache") as f64 - kv1 / 8.0).abs() < 2.0);
    // 64 attention heads do not split over 3 GPUs.
    assert!(vllm(json!({"gpus": 3})).unwrap_err().contains("must divide"));
    // Pipeline parallel: 80 layers in two stages of 40; the embedding on the first, the head on the last.
    let pp = vllm(json!({"gpus": 2, "pipeline_parallel": 2})).unwrap();
    let (a, b) = (term(&pp.devices[0].breakdown, "weights"), term(&pp.devices[1].breakdown, "weights"));
    assert_eq!(a, b, "an untied head is the same size as the embedding");
    assert!(((a + b) as f64 - w1).abs() < 4.0);
    assert!(vllm(json!({"gpus": 4, "pipeline_parallel": 3})).unwrap_err().contains("must divide"));
}

#[test]
fn data_parallel_training_holds_the_same_share_on_every_gpu() {
    let ds = &loaded().dataset;
    let train = |extra: Value| {
        let mut w = json!({"kind": "training", "model": "llama-3.1-8b", "method": "full", "precision": "bf16", "seq": 2048, "gradient_checkpointing": true});
        w.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        fit(ds, &workload(&w))
    };
    let one = train(json!({})).unwrap();
    let ddp = train(json!({"gpus": 4})).unwrap();
    assert_eq!(ddp.devices.len(), 4);
    assert!(ddp.devices.iter().all(|d| d.peak_bytes == ddp.peak_bytes));
    // DDP keeps a second copy of the gradients in its buckets.
    let params = one.architecture.as_ref().unwrap().params as f64;
    assert!((term(&ddp.breakdown, "ddp-gradient-buckets") as f64 - 2.0 * params).abs() < 2.0);
    assert!(ddp.breakdown.iter().find(|t| t.term == "ddp-gradient-buckets").unwrap().claims.contains(&"pytorch-ddp-gradient-buckets".to_string()));
    // FSDP full shard: the weights a quarter, and beside them the root unit gathered whole in
    // bf16 (Llama 3.1 8B: embeddings and output head, untied).
    let fsdp = train(json!({"gpus": 4, "fsdp": "full"})).unwrap();
    assert!((term(&fsdp.breakdown, "weights") as f64 - 2.0 * params / 4.0).abs() < 2.0);
    let a = fsdp.architecture.as_ref().unwrap();
    assert!(!a.tied_embeddings);
    let root = 2.0 * (a.vocab as f64 * a.hidden as f64) * 2.0;
    assert!((term(&fsdp.breakdown, "fsdp-gathered-layers") as f64 - root).abs() < 2.0, "{:?}", fsdp.breakdown);
    assert!(fsdp.peak_bytes < ddp.peak_bytes && fsdp.peak_bytes < one.peak_bytes);
    // Hybrid shard over groups of 2: half the weights.
    let hybrid = train(json!({"gpus": 4, "fsdp": "hybrid", "shard_gpus": 2})).unwrap();
    assert!((term(&hybrid.breakdown, "weights") as f64 - 2.0 * params / 2.0).abs() < 2.0);
    assert!(train(json!({"gpus": 4, "fsdp": "hybrid", "shard_gpus": 3})).unwrap_err().contains("must divide"));
    assert!(train(json!({"gpus": 4, "fsdp": "full", "zero": 2})).unwrap_err().contains("give one"));
    // On a 24 GiB and a 16 GiB card the smaller one limits.
    let cards = [Card::parse(ds, "24", 0.0).unwrap(), Card::parse(ds, "16", 0.0).unwrap()];
    let f = fit_on_cards(ds, &workload(&json!({"kind": "training", "model": "llama-3.2-1b", "method": "lora", "seq": 1024})), &cards).unwrap();
    assert_eq!(f.verdict.as_ref().unwrap().limiting, Some(1));
    assert!(f.verdict.unwrap().budget_bytes < (17.0 * GIB) as u64);
}

#[test]
fn every_rank_of_the_data_parallel_runs_is_within_tolerance() {
    // DDP ranks (two, sharing the H200 over Gloo), FSDP and DeepSpeed ZeRO 1-3 (a world of one
    // through the same path): each rank's own peak against the engine's per-GPU tensors.
    let ds = &loaded().dataset;
    let text = std::fs::read_to_string(repo_root().join("dataset/measurements/reference/h200-torch2.11-multigpu.jsonl")).unwrap();
    let mut ranks = 0;
    let mut buckets = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let r: Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["ok"], json!(true), "{}", r["id"]);
        let f = fit(ds, &workload(&r["workload"])).unwrap();
        if term(&f.breakdown, "ddp-gradient-buckets") > 0 {
            buckets += 1;
        }
        for rank in r["ranks"].as_array().unwrap() {
            let measured = rank["peak_allocated"].as_u64().unwrap();
            let err = f.tensor_bytes as f64 - measured as f64;
            assert!(err.abs() <= headroom_core::fit::accuracy::tolerance(measured), "{} rank {}: {err:+.0} bytes", r["id"], rank["rank"]);
            // PyTorch's own wrappers are modelled to the tensor; DeepSpeed's parameter coordinator
            // keeps a little more than its live-parameter cap fetched (measurements/experiments/).
            let guard = if r["mode"].as_str().unwrap().starts_with("zero") { 0.15 } else { 0.1 };
            assert!(err.abs() < guard * GIB, "{} rank {}: {err:+.0} bytes", r["id"], rank["rank"]);
            ranks += 1;
        }
    }
    assert!(ranks >= 11 && buckets >= 5, "{ranks} ranks, {buckets} runs with DDP buckets");
}

#[test]
fn cpu_offload_moves_model_states_to_system_ram() {
    let ds = &loaded().dataset;
    // FSDP2 parameter offload runs: the GPU within tolerance (the same check as above covers the
    // peak), and the pinned host memory PyTorch's host allocator held is the parameters plus the
    // gradients the engine puts in system RAM.
    let text = std::fs::read_to_string(repo_root().join("dataset/measurements/reference/h200-torch2.11-multigpu.jsonl")).unwrap();
    let mut offloaded = 0;
    for line in text.lines().filter(|l| l.contains("\"fsdp2-offload\"")) {
        let r: Value = serde_json::from_str(line).unwrap();
        let f = fit(ds, &workload(&r["workload"])).unwrap();
        assert_eq!(term(&f.breakdown, "weights") + term(&f.breakdown, "optimizer-states"), 0, "{}", r["id"]);
        let pinned = r["ranks"][0]["host_after"]["pinned_allocated"].as_u64().unwrap() as f64;
        let host = (term(&f.host, "weights") + term(&f.host, "gradients")) as f64;
        assert!((host - pinned).abs() < 0.02 * pinned, "{}: pinned {pinned} engine {host}", r["id"]);
        assert!(term(&f.host, "optimizer-states") > 0);
        offloaded += 1;
    }
    assert!(offloaded >= 3);

    let train = |extra: Value| {
        let mut w =
            json!({"kind": "training", "model": "llama-3.1-8b", "method": "full", "precision": "bf16", "seq": 2048, "gradient_checkpointing": true, "gpus": 2});
        w.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        fit(ds, &workload(&w))
    };
    let params = 8_030_261_248.0;
    // ZeRO-2 with the optimizer on the CPU: the GPU keeps weights and its half of the gradients;
    // system RAM is DeepSpeed's own estimate, 24 bytes per parameter up to four GPUs.
    let zero2 = train(json!({"zero": 2})).unwrap();
    let off = train(json!({"zero": 2, "cpu_offload": "optimizer"})).unwrap();
    assert_eq!(term(&off.breakdown, "optimizer-states"), 0);
    assert_eq!(term(&off.breakdown, "weights"), term(&zero2.breakdown, "weights"));
    assert!(off.peak_bytes < zero2.peak_bytes);
    let arch = off.architecture.as_ref().unwrap().params as f64;
    assert_eq!(arch, params);
    assert!((term(&off.host, "zero-offload") as f64 - 24.0 * params).abs() < 2.0);
    // Past four GPUs DeepSpeed counts 6 bytes per parameter per GPU.
    let eight = train(json!({"zero": 2, "cpu_offload": "optimizer", "gpus": 8})).unwrap();
    assert!((term(&eight.host, "zero-offload") as f64 - 48.0 * params).abs() < 2.0);
    // ZeRO-3 with parameters offloaded: 27 bytes per parameter, nothing resident on the GPU.
    let z3 = train(json!({"zero": 3, "cpu_offload": "params"})).unwrap();
    assert!((term(&z3.host, "zero-offload") as f64 - 27.0 * params).abs() < 2.0);
    assert_eq!(term(&z3.breakdown, "weights"), 0);
    assert!(term(&z3.breakdown, "zero3-gathered-layer") > 0);
    // With parameters offloaded, up to stage3_max_live_parameters (1e9) stay fetched in bf16.
    assert_eq!(term(&z3.breakdown, "zero3-gathered-layer"), 2_000_000_000);
    // DeepSpeed's 16-bit layout: an fp32 master and fp32 moments (12 bytes per parameter) shared
    // by the two GPUs; at the step the 16-bit gradients are gone and each GPU's half is in fp32
    // with AdamW's temporary beside it (8 bytes); stage 3 adds its reduce bucket of 5e8 elements.
    assert!((term(&zero2.breakdown, "optimizer-states") as f64 - 6.0 * params).abs() < 2.0);
    assert_eq!(term(&zero2.breakdown, "gradients"), 0);
    assert!((term(&zero2.breakdown, "optimizer-step") as f64 - 4.0 * params).abs() < 2.0);
    let z3_gpu = train(json!({"zero": 3})).unwrap();
    assert_eq!(term(&z3_gpu.breakdown, "zero-reduce-bucket"), 1_000_000_000);
    // Without DeepSpeed the same bf16 run keeps bf16 moments: 4 bytes per parameter, unsharded.
    let plain = train(json!({"gpus": 1})).unwrap();
    assert!((term(&plain.breakdown, "optimizer-states") as f64 - 4.0 * params).abs() < 2.0);
    // The verdict checks system RAM too: 64 GiB is short of what ZeRO-3 offload needs for 8B.
    let mut card = Card::parse(ds, "rtx-4090", 0.0).unwrap();
    card.ram_bytes = Some((64.0 * GIB) as u64);
    let w = workload(
        &json!({"kind": "training", "model": "llama-3.1-8b", "method": "full", "precision": "bf16", "seq": 2048, "gradient_checkpointing": true, "zero": 3, "cpu_offload": "params"}),
    );
    let ram = fit_on(ds, &w, &card).unwrap().verdict.unwrap().ram.unwrap();
    assert!(!ram.fits && ram.host_bytes > ram.ram_bytes, "{ram:?}");
    // Offloading needs sharded states: refused with the reason otherwise.
    assert!(train(json!({"cpu_offload": "params"})).unwrap_err().contains("parameter offload needs"));
    assert!(train(json!({"zero": 0, "cpu_offload": "optimizer"})).unwrap_err().contains("optimizer offload is DeepSpeed's"));
    assert!(train(json!({"fsdp": "full", "cpu_offload": "optimizer"})).unwrap_err().contains("optimizer offload is DeepSpeed's"));
}
