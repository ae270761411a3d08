//! Any model: workloads that bring their own config.json, LoRA targets, and the answers for a card
//! (largest context, batch, layers, format, size, frames), on the real dataset and through the CLI.

use std::io::Write;
use std::process::{Command, Stdio};

use headroom_core::fit::search::answers;
use headroom_core::fit::{Fit, GIB, Workload, fit, parse_input};
use headroom_e2e::bin;
use headroom_e2e::data::loaded;
use serde_json::{Value, json};

fn workload(w: Value) -> Workload {
    parse_input(&w.to_string()).unwrap_or_else(|e| panic!("{w}: {e}")).remove(0)
}

/// Fits a workload and checks that every term and lever cites claims the dataset holds.
fn run(w: Value) -> Fit {
    let ds = &loaded().dataset;
    let f = fit(ds, &workload(w.clone())).unwrap_or_else(|e| panic!("{w}: {e}"));
    for t in &f.breakdown {
        assert!(!t.claims.is_empty(), "term {} cites no claim", t.term);
        for c in &t.claims {
            assert!(ds.claim(c).is_some(), "term {} cites unknown claim {c}", t.term);
        }
    }
    f
}

fn term(f: &Fit, name: &str) -> u64 {
    f.breakdown.iter().find(|t| t.term == name).map(|t| t.bytes).unwrap_or(0)
}

/// Llama 3.1 8B's config.json values (the catalog entry's quoted passage) as a config object.
fn llama_31_8b_config() -> Value {
    json!({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "max_position_embeddings": 131072, "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
        "tie_word_embeddings": false, "vocab_size": 128256, "rms_norm_eps": 1e-05, "rope_theta": 500000.0
    })
}

#[test]
fn a_config_of_a_catalog_model_gives_the_catalog_answer() {
    let ds = &loaded().dataset;
    let m = ds.llm("llama-3.1-8b").unwrap();
    for engine in ["transformers", "vllm", "llama.cpp", "ollama"] {
        let base = json!({"kind": "llm-inference", "weights": "bf16", "context": 8192, "batch": 2, "engine": engine});
        let mut by_id = base.clone();
        by_id["model"] = json!("llama-3.1-8b");
        let mut by_config = base.clone();
        by_config["model"] = json!({"hf_config": llama_31_8b_config(), "name": "Llama 3.1 8B"});
        let (a, b) = (run(by_id), run(by_config));
        assert_eq!(a.breakdown, b.breakdown, "{engine}");
        let arch = b.architecture.unwrap();
        assert_eq!(arch.params, m.params, "the architecture count is the published count");
        assert_eq!(arch.origin.source, "hf_config");
        assert_eq!(arch.origin.model_type.as_deref(), Some("llama"));
        assert_eq!(a.architecture.unwrap().origin.source, "catalog");
    }
    let t = json!({"kind": "training", "model": {"hf_config": llama_31_8b_config()}, "method": "qlora", "seq": 2048, "gradient_checkpointing": true});
    let mut by_id = t.clone();
    by_id["model"] = json!("llama-3.1-8b");
    assert_eq!(run(t).breakdown, run(by_id).breakdown);
}

#[test]
fn sliding_window_layers_follow_the_config_not_the_name() {
    let kv = |cfg: &Value, engine: &str| {
        let f = run(json!({"kind": "llm-inference", "model": {"hf_config": cfg}, "weights": "Q8_0", "context": 32768, "engine": engine}));
        let t = f.breakdown.iter().find(|t| t.term == "kv-cache").unwrap().clone();
        (t.bytes, t.claims, f.architecture.unwrap())
    };
    // A Mistral-layout config with and without a window: vLLM keeps only the window on every
    // layer; llama.cpp converts Mistral without its window and transformers' generate() holds the
    // whole prompt at its peak, so both charge the full cache.
    let mut mistral = llama_31_8b_config();
    mistral["model_type"] = json!("mistral");
    let mut windowed = mistral.clone();
    windowed["sliding_window"] = json!(4096);
    let (full, _, _) = kv(&mistral, "vllm");
    let (slid, claims, arch) = kv(&windowed, "vllm");
    assert_eq!(slid * 8, full, "a 4096-token window of a 32768-token context");
    assert!(claims.contains(&"fit-vllm-sliding-window-cache".to_string()));
    assert_eq!((arch.sliding_window, arch.sliding_layers), (Some(4096), Some(32)));
    for engine in ["llama.cpp", "transformers"] {
        let (b, claims, _) = kv(&windowed, engine);
        assert_eq!(b, full, "{engine}");
        assert!(claims.iter().any(|c| c.ends_with("sliding-window-cache")), "{engine}: {claims:?}");
    }
    // Gemma 2's layout (even layers slide): llama.cpp keeps window + one micro-batch on half the layers.
    let mut gemma2 = windowed.clone();
    gemma2["model_type"] = json!("gemma2");
    gemma2["head_dim"] = json!(128);
    let (b, _, arch) = kv(&gemma2, "llama.cpp");
    assert_eq!(arch.sliding_layers, Some(16));
    let per_layer_token = full / 32 / 32768;
    assert_eq!(b, per_layer_token * (16 * 32768 + 16 * (4096 + 512)));
}

#[test]
fn unknown_model_types_and_bad_fields_get_clear_errors() {
    let ds = &loaded().dataset;
    let err = |w: Value| fit(ds, &workload(w)).map(|_| ()).unwrap_err();
    let e = err(json!({"kind": "llm-inference", "model": {"hf_config": {"model_type": "rwkv", "hidden_size": 2048}}, "context": 1024}));
    assert!(e.contains("`rwkv`") && e.contains("num_key_value_heads") && e.contains("max_position_embeddings"), "{e}");
    let e = parse_input(&json!({"kind": "llm-inference", "model": {"config": {}}, "context": 1}).to_string()).unwrap_err();
    assert!(e.contains("hf_config"), "{e}");
    let e = parse_input(&json!({"kind": "llm-inference", "model": 7, "context": 1}).to_string()).unwrap_err();
    assert!(e.contains("field `model`"), "{e}");
    let e = err(json!({"kind": "llm-inference", "model": "my-finetune", "context": 1}));
    assert!(e.contains("unknown LLM `my-finetune`") && e.contains("hf_config"), "{e}");
    let e = parse_input(&json!({"kind": "training", "model": "llama-3.2-1b", "seq": 8, "method": "lora", "lora_targets": ["qkv"]}).to_string()).unwrap_err();
    assert!(e.contains("unknown module `qkv`") && e.contains("q_proj"), "{e}");
}

#[test]
fn lora_targets_change_the_trainable_parameters() {
    let t = |targets: Value| {
        run(json!({"kind": "training", "model": "llama-3.1-8b", "method": "lora", "seq": 2048, "gradient_checkpointing": true, "lora_targets": targets}))
    };
    let all = t(json!("all-linear"));
    let attention = t(json!("attention"));
    let qv = t(json!(["q_proj", "v_proj"]));
    let opt = |f: &Fit| term(f, "optimizer-states");
    // AdamW keeps two fp32 moments per trainable parameter: rank 16 × (in + out) per projection.
    let per_layer_qv = 16 * ((4096 + 4096) + (4096 + 1024));
    assert_eq!(opt(&qv), 32 * per_layer_qv * 8);
    assert!(opt(&all) > opt(&attention) && opt(&attention) > opt(&qv));
    assert_eq!(t(json!(["v_proj", "q_proj", "q_proj"])).breakdown, qv.breakdown, "order and repeats do not matter");
}

/// Every answer fits and one step more does not (unless the model's own limit stopped it).
#[test]
fn answers_are_the_largest_values_that_fit() {
    let ds = &loaded().dataset;
    let budget = (8.0 * GIB) as u64;
    let peak = |w: Value| fit(ds, &workload(w)).map(|f| f.peak_bytes).unwrap_or(u64::MAX);
    let llm = json!({"kind": "llm-inference", "model": "qwen3-8b", "weights": "Q4_K_M", "kv_cache": "q8_0", "context": 8192, "engine": "ollama"});
    let a = answers(ds, &workload(llm.clone()), budget, false).unwrap();
    let ctx = a.max_context.unwrap();
    assert!(ctx.peak_bytes <= budget && !ctx.limit_reached);
    let mut over = llm.clone();
    over["context"] = json!(ctx.value + 1);
    assert!(peak(over) > budget);
    let b = a.max_batch.unwrap();
    let mut over = llm.clone();
    over["batch"] = json!(b.value + 1);
    assert!(peak(over) > budget && b.peak_bytes <= budget);
    // The best format fits; the one above it on the ladder does not.
    let best = a.best_weights.unwrap();
    let ladder = headroom_core::fit::search::weight_ladder(&headroom_core::fit::Engine::Ollama);
    let i = ladder.iter().position(|f| *f == best.format).unwrap();
    assert!(i > 0 && best.peak_bytes <= budget, "{best:?}");
    let mut above = llm.clone();
    above["weights"] = json!(ladder[i - 1]);
    assert!(peak(above) > budget);

    // A 70B model on a 24 GiB card: some layers on the GPU, the rest in system RAM.
    let big = json!({"kind": "llm-inference", "model": "llama-3.1-70b", "weights": "Q4_K_M", "context": 8192, "engine": "llama.cpp"});
    let a = answers(ds, &workload(big.clone()), (24.0 * GIB) as u64, false).unwrap();
    let g = a.gpu_layers.unwrap();
    assert!(g.layers > 0 && g.layers < g.of, "{g:?}");
    let mut more = big.clone();
    more["gpu_layers"] = json!(g.layers + 1);
    assert!(peak(more) > (24.0 * GIB) as u64);
    let full = fit(ds, &workload(big)).unwrap();
    let resident = term(&full, "weights") + term(&full, "kv-cache");
    // The layers left off the GPU hold their weights and KV cache in system RAM.
    assert!(g.ram_bytes > 0 && g.ram_bytes < resident, "{g:?}");

    // Training and diffusion.
    let train = json!({"kind": "training", "model": "llama-3.2-1b", "method": "full", "seq": 2048, "gradient_checkpointing": true});
    let a = answers(ds, &workload(train.clone()), (16.0 * GIB) as u64, false).unwrap();
    let s = a.max_seq.unwrap();
    let mut over = train.clone();
    over["seq"] = json!(s.value + 1);
    assert!(s.peak_bytes <= (16.0 * GIB) as u64 && peak(over) > (16.0 * GIB) as u64);
    let video = json!({"kind": "diffusion", "model": "wan2.1-t2v-1.3b", "width": 832, "height": 480, "frames": 81, "text_encoders": "cpu"});
    let a = answers(ds, &workload(video.clone()), (8.0 * GIB) as u64, false).unwrap();
    let f = a.max_frames.unwrap();
    assert_eq!(f.value % 4, 1);
    let mut over = video.clone();
    over["frames"] = json!(f.value + 4);
    assert!(peak(over) > (8.0 * GIB) as u64);
    let size = a.max_size.unwrap();
    assert!(size.width % 16 == 0 && size.height % 16 == 0 && size.width > size.height, "{size:?}");
    // Nothing fits: no answers, not an error.
    let a = answers(ds, &workload(json!({"kind": "llm-inference", "model": "llama-3.1-405b", "weights": "bf16", "context": 1024})), (8.0 * GIB) as u64, false)
        .unwrap();
    assert!(a.max_context.is_none() && a.max_batch.is_none() && a.best_weights.is_none());
}

#[test]
fn the_cli_answers_for_a_card() {
    let w = json!({"kind": "llm-inference", "model": {"hf_config": llama_31_8b_config(), "name": "my 8B"}, "weights": "Q4_K_M", "context": 4096, "engine": "ollama"});
    let out = |args: &[&str]| {
        let mut child = Command::new(bin("dataset", "dataset"))
            .args(["fit", "--input", "-"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(w.to_string().as_bytes()).unwrap();
        child.wait_with_output().unwrap()
    };
    let o = out(&["--gpu", "rtx-3060-12gb", "--other-gib", "1.5"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["architecture"]["name"], "my 8B");
    assert_eq!(v["answers"]["budget_bytes"], json!((10.5 * GIB) as u64));
    assert!(v["answers"]["max_context"]["value"].as_u64().unwrap() > 4096);
    // -ngl 33: the 32 repeating layers and the output layer.
    assert_eq!(v["answers"]["gpu_layers"]["layers"], json!(33));
    let o = out(&["--gpu", "a-card-I-made-up"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("neither a catalog GPU id nor a size"));
    let o = out(&["--gpu", "8GiB", "--other-gib", "9"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("whole card"));
    // System RAM: the verdict says whether it holds what llama.cpp keeps there (the token
    // embedding at least); a size of 0 is refused with the option's name.
    let o = out(&["--gpu", "rtx-3060-12gb", "--ram-gib", "16"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["verdict"]["ram"]["ram_bytes"], json!((16.0 * GIB) as u64));
    assert_eq!(v["verdict"]["ram"]["host_bytes"], v["host_bytes"]);
    assert_eq!(v["verdict"]["ram"]["fits"], json!(true));
    let o = out(&["--gpu", "rtx-3060-12gb", "--ram-gib", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--ram-gib: system RAM must be"), "{}", String::from_utf8_lossy(&o.stderr));
}

fn fixtures() -> std::path::PathBuf {
    headroom_e2e::repo_root().join("dataset/core/tests/fixtures/modelfiles")
}

/// Every fixture GGUF (written by gguf-py) described by the engine: the architecture count equals
/// the elements in the file's tensor table, and its `model` object fits as a workload with the
/// file's exact bytes as the weights.
#[test]
fn model_files_give_exact_counts_and_bytes() {
    use headroom_core::modelfile::{
        ModelFile,
        describe::{describe, facts},
        parse,
    };
    let ds = &loaded().dataset;
    let mut seen = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "gguf") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let file = parse(&bytes).unwrap();
        let ModelFile::Gguf(g) = &file else { panic!("{}", path.display()) };
        let d = describe(ds, &facts(&file), None);
        let arch = d.architecture.as_ref().unwrap_or_else(|| panic!("{}: {:?}", path.display(), d.notes));
        assert_eq!(arch.params, g.total_elements(), "{}", path.display());
        assert_eq!(d.weight_bytes, Some(g.total_tensor_bytes()));
        let format = d.weights_format.clone().unwrap();
        let w = json!({"kind": "llm-inference", "model": d.model.clone().unwrap(), "weights": format, "context": 256, "engine": "llama.cpp"});
        let f = run(w.clone());
        // The file's bytes, split as llama.cpp splits them: the token embedding in system RAM
        // (a tied output keeps a copy of it on the GPU).
        let ram = f.host.iter().find(|t| t.term == "weights").map_or(0.0, |t| t.bytes as f64);
        let tied = f.architecture.as_ref().unwrap().tied_embeddings;
        let total = term(&f, "weights") as f64 + if tied { 0.0 } else { ram };
        assert!((total - g.total_tensor_bytes() as f64).abs() <= 2.0, "{}: {total} vs {}", path.display(), g.total_tensor_bytes());
        // Another format than the file's falls back to the format's estimate.
        let mut other = w.clone();
        other["weights"] = json!(if format == "Q8_0" { "Q4_K_M" } else { "Q8_0" });
        assert_ne!(term(&run(other), "weights"), g.total_tensor_bytes());
        seen += 1;
    }
    assert!(seen >= 5, "{seen} GGUF fixtures");
}

#[test]
fn the_cli_describes_model_files() {
    let run_cli = |args: &[&str]| Command::new(bin("dataset", "dataset")).arg("model").args(args).output().unwrap();
    let dir = fixtures();
    let p = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let o = run_cli(&[&p("sharded/model.safetensors.index.json"), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], "safetensors-index");
    assert_eq!(v["weights_format"], "bf16");
    // The config beside the index gives the architecture; bf16 bytes are two per parameter.
    assert_eq!(v["weight_bytes"].as_u64().unwrap(), 2 * v["architecture"]["params"].as_u64().unwrap());
    let o = run_cli(&[&p("llama-bf16.safetensors")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && text.contains("config.json") && text.contains("give it too"), "{text}");
    let o = run_cli(&[&p("llama-bf16.safetensors"), "--config", &p("llama-bf16.config.json")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("model_type llama") && text.contains("for dataset fit"), "{text}");
    let o = run_cli(&[&p("gemma3.gguf")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("sliding window 512"), "{text}");
    // A diffusion checkpoint's header: recognised, with the workload fields to size it.
    let flux = headroom_e2e::repo_root().join("dataset/core/tests/fixtures/diffusion/flux1-dev-Q4_K_S.gguf.header");
    let o = run_cli(&[&flux.to_string_lossy(), "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["diffusion"]["model"], "flux.1-dev");
    let w = v["diffusion_workload"].clone();
    assert_eq!((w["precision"].as_str(), w["file"]["bytes"].as_u64()), (Some("Q4_K_S"), Some(6925472000)));
    let f = run(w);
    assert_eq!(term(&f, "weights"), 6925472000, "the denoiser's bytes are the file's");
    let o = run_cli(&[&headroom_e2e::repo_root().join("README.md").to_string_lossy()]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("not a model file"));
    // A GGUF cut inside its header is reported as truncated.
    let tmp = std::env::temp_dir().join(format!("headroom-cut-{}.gguf", std::process::id()));
    std::fs::write(&tmp, &std::fs::read(p("qwen3moe.gguf")).unwrap()[..200]).unwrap();
    let o = run_cli(&[&tmp.to_string_lossy()]);
    std::fs::remove_file(&tmp).ok();
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("truncated"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The engine's parameter count of every config a reference run built equals what transformers
/// counted on the GPU (`param_count` in the run's record); DeepSeek-V3-layout models add the
/// router's score-correction bias, which transformers keeps as a buffer and the GPU still holds.
/// Configs too large to build are checked against transformers' meta-device counts (configs/llm/SOURCES.md).
#[test]
fn config_counts_equal_what_transformers_builds() {
    let ds = &loaded().dataset;
    let root = headroom_e2e::repo_root().join("dataset/measurements");
    let arch = |cfg: &Value| {
        let f = run(json!({"kind": "llm-inference", "model": {"hf_config": cfg}, "context": 16, "engine": "vllm"}));
        f.architecture.unwrap()
    };
    let score_bias = |cfg: &Value| -> u64 {
        let t = cfg["model_type"].as_str().unwrap();
        if t != "deepseek_v3" && t != "kimi_k2" {
            return 0;
        }
        let layers = cfg["num_hidden_layers"].as_u64().unwrap();
        let first = cfg["first_k_dense_replace"].as_u64().unwrap_or(0);
        cfg["n_routed_experts"].as_u64().unwrap() * (layers - first)
    };
    let mut checked = 0;
    for entry in std::fs::read_dir(root.join("reference")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let r: Value = serde_json::from_str(line).unwrap();
            let Some(cfg) = r["workload"]["model"].get("hf_config") else {
                continue;
            };
            let measured = r["param_count"].as_u64().expect("hf_config runs record param_count");
            assert_eq!(arch(cfg).params, measured + score_bias(cfg), "{}", r["id"]);
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} reference runs with a config");
    let _ = ds;
    for (file, transformers_count) in [
        ("deepseek-ai__DeepSeek-V3.json", 671_026_404_352u64),
        ("moonshotai__Kimi-K2.json", 1_026_408_209_408),
        ("Qwen__Qwen3-0.6B.json", 596_049_920),
        ("microsoft__Phi-4-mini-instruct.json", 3_836_021_760),
    ] {
        let cfg: Value = serde_json::from_str(&std::fs::read_to_string(root.join("harness/configs/llm").join(file)).unwrap()).unwrap();
        assert_eq!(arch(&cfg).params, transformers_count + score_bias(&cfg), "{file}");
    }
}

/// A config cut to the keys the engine reads (what a shared link carries) describes the same model.
#[test]
fn the_essential_config_is_the_same_model() {
    let dir = headroom_e2e::repo_root().join("dataset/measurements/harness/configs/llm");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let cfg: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let short = headroom_core::hf::essential(&cfg);
        assert!(short.to_string().len() <= cfg.to_string().len());
        let a = headroom_core::hf::llm_from_config(&cfg, None).map(|x| x.0);
        let b = headroom_core::hf::llm_from_config(&short, None).map(|x| x.0);
        assert_eq!(a, b, "{}", path.display());
        n += 1;
    }
    assert!(n >= 10);
}

#[test]
fn lora_on_attention_only_is_a_lever_without_checkpointing() {
    let f = run(json!({"kind": "training", "model": "llama-3.1-8b", "method": "lora", "seq": 2048, "batch": 2}));
    let lever = f.levers.iter().find(|l| l.lever == "lora_targets: attention").expect("the lever is offered");
    assert_eq!(lever.workload["lora_targets"], "attention");
    assert!(lever.saving_bytes > 0 && lever.cost == headroom_core::fit::Cost::Capability);
    let with_gc = run(json!({"kind": "training", "model": "llama-3.1-8b", "method": "lora", "seq": 2048, "gradient_checkpointing": true}));
    assert!(with_gc.levers.iter().all(|l| l.lever != "lora_targets: attention"), "with checkpointing the targets hardly matter");
}
