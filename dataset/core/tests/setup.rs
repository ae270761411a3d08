//! The engine's own words (`fit::setup`) over the real tools catalog: what a person types in
//! Ollama, llama.cpp, vLLM and transformers for a workload, and the claims behind each setting.

use std::path::Path;

use headroom_core::Dataset;
use headroom_core::fit::setup::{settings, setup};
use serde_json::json;

fn dataset() -> Dataset {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data");
    let files = headroom_core::files::read_tree(&dir).expect("the data directory");
    headroom_core::load::load(&files).expect("the data loads").dataset
}

const GIB: u64 = 1 << 30;

#[test]
fn ollama_is_set_with_its_environment_not_llamacpp_flags() {
    let ds = dataset();
    let w = json!({"kind":"llm-inference","engine":"ollama","model":"qwen2.5-14b","weights":"Q4_K_M","kv_cache":"q8_0","flash_attention":true,"context":16384,"batch":1});
    let s = setup(&ds, &w, &[]).expect("Ollama has settings");
    assert_eq!(s.tool, "ollama");
    assert_eq!(s.command, "OLLAMA_CONTEXT_LENGTH=16384 OLLAMA_FLASH_ATTENTION=1 OLLAMA_KV_CACHE_TYPE=q8_0 ollama serve");
    assert!(!s.command.contains("--cache-type") && !s.command.contains("-ctk"), "{}", s.command);
    // The default cache type and one request at a time are Ollama's defaults: nothing to set.
    let w = json!({"kind":"llm-inference","engine":"ollama","model":"qwen2.5-14b","weights":"Q4_K_M","kv_cache":"fp16","context":8192,"batch":1});
    assert_eq!(setup(&ds, &w, &[]).unwrap().command, "OLLAMA_CONTEXT_LENGTH=8192 ollama serve");
    // Several requests: Ollama's parallel setting.
    let w = json!({"kind":"llm-inference","engine":"ollama","model":"qwen2.5-14b","weights":"Q4_K_M","context":8192,"batch":4});
    assert!(setup(&ds, &w, &[]).unwrap().command.starts_with("OLLAMA_CONTEXT_LENGTH=8192 OLLAMA_NUM_PARALLEL=4 "));
}

#[test]
fn llamacpp_over_two_cards_gets_its_split_and_every_layer_on_the_gpus() {
    let ds = dataset();
    let w = json!({"kind":"llm-inference","engine":"llama.cpp","model":"llama-3.1-70b","weights":"Q4_K_M","kv_cache":"q8_0","flash_attention":true,"context":8192,"batch":2,"gpus":2});
    let s = setup(&ds, &w, &[24 * GIB, 12 * GIB]).unwrap();
    // -c is the total over the two sequences; -ngl "all" is the 80 layers plus the output layer.
    assert_eq!(s.command, "llama-server -m Llama-3.1-70B-Q4_K_M.gguf -c 16384 -ngl 81 -fa on -ctk q8_0 -ctv q8_0 -np 2 -ts 24,12");
    // A split the person gave is kept as given.
    let mut given = w.clone();
    given["tensor_split"] = json!([3, 1]);
    assert!(setup(&ds, &given, &[24 * GIB, 12 * GIB]).unwrap().command.ends_with("-ts 3,1"));
    // Layers kept in RAM and experts on the CPU.
    let w = json!({"kind":"llm-inference","engine":"llama.cpp","model":"qwen3-30b-a3b","weights":"Q4_K_M","context":4096,"batch":1,"gpu_layers":30,"cpu_moe_layers":12,"ubatch":256});
    let c = setup(&ds, &w, &[]).unwrap().command;
    assert!(c.contains(" -ngl 30 ") && c.contains(" -ub 256") && c.contains(" --n-cpu-moe 12"), "{c}");
}

#[test]
fn vllm_and_transformers_take_their_arguments() {
    let ds = dataset();
    let w = json!({"kind":"llm-inference","engine":"vllm","model":"qwen3-32b","weights":"fp8","kv_cache":"fp8","context":32768,"batch":4,"gpus":2,"gpu_memory_utilization":0.85});
    assert_eq!(
        setup(&ds, &w, &[]).unwrap().command,
        "vllm serve Qwen/Qwen3-32B --gpu-memory-utilization 0.85 --max-model-len 32768 --kv-cache-dtype fp8 --max-num-seqs 4 --tensor-parallel-size 2 --quantization fp8"
    );
    let w = json!({"kind":"llm-inference","engine":"transformers","model":"qwen3-8b","weights":"nf4","context":8192,"batch":1});
    let c = setup(&ds, &w, &[]).unwrap().command;
    assert!(c.starts_with("AutoModelForCausalLM.from_pretrained(\"Qwen/Qwen3-8B\", quantization_config=BitsAndBytesConfig(load_in_4bit=True"), "{c}");
    let w = json!({"kind":"llm-inference","engine":"transformers","model":"qwen3-8b","weights":"bf16","context":8192,"batch":1});
    assert_eq!(setup(&ds, &w, &[]).unwrap().command, "AutoModelForCausalLM.from_pretrained(\"Qwen/Qwen3-8B\", dtype=torch.bfloat16)");
}

/// The reader's own model: the commands name it by its Hub id, never `hf:…`, a config or JSON.
#[test]
fn an_own_model_is_named_by_its_hub_id() {
    let ds = dataset();
    let config = json!({"model_type": "qwen3", "num_hidden_layers": 36, "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "max_position_embeddings": 40960, "torch_dtype": "bfloat16"});
    for (name, want) in [(json!("Qwen/Qwen3-8B"), "Qwen/Qwen3-8B"), (json!("hf:Qwen/Qwen3-8B"), "Qwen/Qwen3-8B"), (json!(null), "model")] {
        let mut model = json!({"hf_config": config});
        if !name.is_null() {
            model["name"] = name.clone();
        }
        let w = json!({"kind":"llm-inference","engine":"vllm","model":model,"weights":"bf16","context":8192,"batch":1});
        let c = setup(&ds, &w, &[]).unwrap().command;
        assert!(c.starts_with(&format!("vllm serve {want} ")), "{name}: {c}");
        let w = json!({"kind":"llm-inference","engine":"transformers","model":model,"weights":"bf16","context":8192,"batch":1});
        let c = setup(&ds, &w, &[]).unwrap().command;
        assert_eq!(c, format!("AutoModelForCausalLM.from_pretrained(\"{want}\", dtype=torch.bfloat16)"), "{name}");
    }
}

#[test]
fn a_levers_fields_get_only_their_own_settings_each_with_its_claims() {
    let ds = dataset();
    let w = json!({"kind":"llm-inference","engine":"ollama","model":"llama-3.1-8b","weights":"Q4_K_M","kv_cache":"q4_0","flash_attention":true,"context":32768,"batch":1});
    let s = settings(&ds, &w, &["kv_cache", "flash_attention"], &[]);
    let texts: Vec<&str> = s.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(texts, ["OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q4_0"]);
    for s in &settings(&ds, &w, &[], &[]) {
        assert!(!s.claims.is_empty(), "{s:?}");
        for id in &s.claims {
            assert!(ds.claim(id).is_some(), "{id}");
        }
    }
    // Training in the Trainer's words; a plan's smaller batch keeps the batch it started from.
    let from = json!({"kind":"training","model":"llama-3.1-8b","method":"qlora","precision":"mixed-bf16","optimizer":"adamw-8bit","seq":2048,"batch":16,"gradient_checkpointing":true});
    let mut to = from.clone();
    to["batch"] = json!(2);
    let c = headroom_core::fit::setup::setup_from(&ds, Some(&from), &to, &[]).unwrap().command;
    assert_eq!(
        c,
        "TrainingArguments(gradient_checkpointing=True, gradient_accumulation_steps=8, bf16=True, optim=\"adamw_bnb_8bit\", per_device_train_batch_size=2)"
    );
    assert_eq!(setup(&ds, &from, &[]).unwrap().command.matches("gradient_accumulation_steps").count(), 0);
    // Diffusion has no engine setup here yet.
    assert!(setup(&ds, &json!({"kind":"diffusion","model":"flux.1-dev"}), &[]).is_none());
}
