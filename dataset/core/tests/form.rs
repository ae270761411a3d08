//! The calculator form's rules over the real dataset: which fields each workload offers, with
//! which choices and defaults, and how changing one field carries over to the others.

use std::path::Path;

use headroom_core::Dataset;
use headroom_core::fit::form::{Choice, ChoiceText, Field, Input, OWN_MODEL, Word, choice_value, fields, set_field};
use serde_json::{Map, Value, json};

fn dataset() -> Dataset {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data");
    let files = headroom_core::files::read_tree(&dir).expect("the data directory");
    headroom_core::load::load(&files).expect("the data loads").dataset
}

fn state(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn ids(f: &[(Field, Input)]) -> Vec<&'static str> {
    f.iter().map(|(field, _)| field.as_str()).collect()
}

fn input(f: &[(Field, Input)], field: Field) -> &Input {
    &f.iter().find(|(x, _)| *x == field).unwrap_or_else(|| panic!("no {field:?} in {:?}", ids(f))).1
}

fn choices(f: &[(Field, Input)], field: Field) -> &[Choice] {
    match input(f, field) {
        Input::Select(c) => c,
        other => panic!("{field:?} is {other:?}"),
    }
}

fn default(f: &[(Field, Input)], field: Field) -> Option<&str> {
    match input(f, field) {
        Input::Number { default, .. } => default.as_deref(),
        other => panic!("{field:?} is {other:?}"),
    }
}

#[test]
fn inference_fields_follow_the_engine() {
    let ds = dataset();
    let f = fields(&ds, &state(json!({"kind": "llm-inference", "model": "llama-3.1-8b", "engine": "transformers"})));
    assert_eq!(ids(&f), ["model", "engine", "weights", "kv_cache", "context", "batch", "all_logits"]);
    let models = choices(&f, Field::Model);
    assert_eq!(models.len(), ds.llms.len() + 1);
    assert_eq!(models.last().unwrap(), &Choice { value: OWN_MODEL.into(), text: ChoiceText::Word(Word::OwnModel) });
    assert!(matches!(&models[0].text, ChoiceText::Name(n) if *n == ds.llms[0].name));

    let f = fields(&ds, &state(json!({"model": "llama-3.1-8b", "engine": "vllm"})));
    assert_eq!(ids(&f)[6..], ["gpus", "gpu_memory_utilization"]);
    assert_eq!(default(&f, Field::Gpus), Some("1"));

    // llama.cpp: every layer (the output layer counts) and the micro-batch its claim gives.
    let f = fields(&ds, &state(json!({"model": "llama-3.1-8b", "engine": "llama.cpp", "context": 8192})));
    assert_eq!(ids(&f)[6..], ["gpus", "gpu_layers", "flash_attention", "ubatch"]);
    assert_eq!(default(&f, Field::GpuLayers), Some("33"));
    let ubatch = ds.claim("fit-llamacpp-ubatch").unwrap().value.as_ref().unwrap().number.unwrap();
    assert_eq!(default(&f, Field::Ubatch), Some(ubatch.to_string().as_str()));
    assert_eq!(choices(&f, Field::FlashAttention)[0].value, "true", "unset reads as the first choice: on");

    // Ollama picks its batch from the context; a mixture of experts offers experts on the CPU.
    let f = fields(&ds, &state(json!({"model": "qwen3-30b-a3b", "engine": "ollama", "context": 8192, "batch": 1})));
    let ollama = headroom_core::fit::llamacpp::ollama_batch(&ds, 8192, false).unwrap();
    assert_eq!(default(&f, Field::Ubatch), Some(ollama.to_string().as_str()));
    assert_eq!(default(&f, Field::CpuMoeLayers), Some("0"));
    assert_eq!(default(&f, Field::GpuLayers), Some("49"));
}

#[test]
fn a_model_files_own_format_joins_the_weights_list() {
    let ds = dataset();
    let usual = fields(&ds, &state(json!({"model": "llama-3.1-8b", "engine": "llama.cpp"})));
    assert!(!choices(&usual, Field::Weights).iter().any(|c| c.value == "Q5_K_S"));
    let f = fields(&ds, &state(json!({"model": "llama-3.1-8b", "engine": "llama.cpp", "weights": "Q5_K_S"})));
    assert_eq!(choices(&f, Field::Weights).last().unwrap().value, "Q5_K_S");
    // Not a format the dataset knows: not offered.
    let f = fields(&ds, &state(json!({"model": "llama-3.1-8b", "engine": "llama.cpp", "weights": "Q9_X"})));
    assert_eq!(choices(&f, Field::Weights).len(), choices(&usual, Field::Weights).len());
    // Every format offered is one the dataset has.
    for c in choices(&usual, Field::Weights).iter().chain(choices(&usual, Field::KvCache)) {
        assert!(ds.quant(&c.value).is_some(), "{}", c.value);
    }
}

#[test]
fn training_offers_lora_rank_and_offload_only_where_they_apply() {
    let ds = dataset();
    let f = fields(&ds, &state(json!({"kind": "training", "model": "llama-3.1-8b", "method": "lora"})));
    assert_eq!(ids(&f), ["model", "method", "precision", "optimizer", "seq", "batch", "gradient_checkpointing", "lora_rank", "gpus", "zero", "fsdp"]);
    let f = fields(&ds, &state(json!({"kind": "training", "method": "full", "zero": 2})));
    assert!(!ids(&f).contains(&"lora_rank"));
    let offload: Vec<&str> = choices(&f, Field::CpuOffload).iter().map(|c| c.value.as_str()).collect();
    assert_eq!(offload, ["", "optimizer", "params"]);
}

#[test]
fn diffusion_fields_follow_the_model() {
    let ds = dataset();
    let image = fields(&ds, &state(json!({"kind": "diffusion", "model": "flux.1-dev", "precision": "fp16"})));
    assert!(!ids(&image).contains(&"frames"));
    assert_eq!(choices(&image, Field::Model).len(), ds.diffusion.len() + 1);
    // The text encoders' default follows a float denoiser, and is bf16 under a GGUF one.
    assert_eq!(choices(&image, Field::TextEncoderPrecision)[0].text, ChoiceText::DefaultFormat("fp16".into()));
    let gguf = fields(&ds, &state(json!({"kind": "diffusion", "model": "flux.1-dev", "precision": "Q8_0"})));
    assert_eq!(choices(&gguf, Field::TextEncoderPrecision)[0].text, ChoiceText::DefaultFormat("bf16".into()));
    let video = fields(&ds, &state(json!({"kind": "diffusion", "model": "wan2.1-t2v-1.3b"})));
    let at = ids(&video).iter().position(|f| *f == "frames").expect("frames for a video model");
    assert_eq!(ids(&video)[at - 1], "height");
}

#[test]
fn a_choice_sets_a_typed_value_and_a_new_diffusion_model_brings_its_defaults() {
    let ds = dataset();
    assert_eq!(choice_value(Field::Fsdp, ""), Value::Null);
    assert_eq!(choice_value(Field::FlashAttention, "false"), json!(false));
    assert_eq!(choice_value(Field::Zero, "2"), json!(2));
    assert_eq!(choice_value(Field::Weights, "8"), json!("8"), "only the ZeRO stage is a number");

    let mut s = state(json!({"kind": "diffusion", "model": "sdxl", "file": {"format": "fp16", "bytes": 1}, "frames": 9}));
    set_field(&ds, &mut s, Field::Model, json!("wan2.1-t2v-1.3b"));
    let wan = ds.diffusion_model("wan2.1-t2v-1.3b").unwrap();
    let (w, h) = headroom_core::fit::diffusion::native_size(&ds, wan).unwrap();
    assert_eq!((s["width"].as_u64(), s["height"].as_u64()), (Some(w), Some(h)));
    assert_eq!(s["frames"], json!(headroom_core::fit::diffusion::default_frames(&ds, wan).unwrap()));
    assert_eq!(s["cfg"], json!(true));
    assert!(!s.contains_key("file"), "the checkpoint belonged to the previous model");
    set_field(&ds, &mut s, Field::Model, json!("flux.1-dev"));
    assert!(!s.contains_key("frames"));
    assert_eq!(s["cfg"], json!(false), "FLUX.1 is guidance-distilled");
    set_field(&ds, &mut s, Field::Cfg, Value::Null);
    assert!(!s.contains_key("cfg"));
}
