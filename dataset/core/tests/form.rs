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
    // Ollama has no setting for experts in system RAM; llama.cpp has --n-cpu-moe.
    assert!(!ids(&f).contains(&"cpu_moe_layers"), "{:?}", ids(&f));
    let f = fields(&ds, &state(json!({"model": "qwen3-30b-a3b", "engine": "llama.cpp", "context": 8192, "batch": 1})));
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

use headroom_core::fit::query::{decode, parse_query, preset, resolve, to_query};

/// A small deterministic generator (xorshift64*), so the property tests need no dependency and a
/// failure names its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A state the form reaches: a kind's preset, then random edits through the form's own fields,
/// choices and `set_field` (numbers as a person types them, read by the core).
fn random_state(ds: &Dataset, rng: &mut Rng) -> Map<String, Value> {
    let kind = ["llm-inference", "training", "diffusion"][rng.below(3)];
    let mut s = parse_query(ds, &format!("?kind={kind}"));
    for _ in 0..1 + rng.below(8) {
        let f = fields(ds, &s);
        let (field, input) = &f[rng.below(f.len())];
        let value = match input {
            Input::Select(c) => {
                let c = &c[rng.below(c.len())];
                if c.value == OWN_MODEL || c.value.is_empty() {
                    continue;
                }
                choice_value(*field, &c.value)
            }
            Input::Check => json!(rng.below(2) == 1),
            Input::Number { unit, .. } => match unit {
                headroom_core::format::NumberUnit::Fraction => json!([0.5, 0.85, 0.9][rng.below(3)]),
                _ => json!([1, 2, 4, 512, 2048, 16384][rng.below(6)]),
            },
        };
        set_field(ds, &mut s, *field, value);
    }
    s
}

#[test]
fn a_state_survives_its_url_unchanged() {
    let ds = dataset();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..3000 {
        let s = random_state(&ds, &mut rng);
        let back = parse_query(&ds, &to_query(&s));
        assert_eq!(back, s, "case {case}: {}", to_query(&s));
    }
}

#[test]
fn an_omitted_field_resolves_as_the_form_would_set_it() {
    let ds = dataset();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for case in 0..3000 {
        let full = random_state(&ds, &mut rng);
        // A link naming some of the fields (kind and model may be left out too).
        let named: Map<String, Value> = full.iter().filter(|_| rng.below(3) > 0).map(|(k, v)| (k.clone(), v.clone())).collect();
        let linked = resolve(&ds, &named);
        // The form: the kind (named, or the model's), its preset, the engine, the model, then the
        // other named fields typed one by one.
        let kind = named.get("kind").and_then(Value::as_str).unwrap_or(headroom_core::fit::query::infer_kind(&ds, &named)).to_string();
        let mut by_hand = parse_query(&ds, &format!("?kind={kind}"));
        for (field, key) in [(Field::Engine, "engine"), (Field::Model, "model")] {
            if let Some(v) = named.get(key) {
                set_field(&ds, &mut by_hand, field, v.clone());
            }
        }
        for (k, v) in &named {
            if let Some(field) = Field::ALL.iter().copied().find(|f| f.as_str() == k && !matches!(f, Field::Engine | Field::Model)) {
                set_field(&ds, &mut by_hand, field, v.clone());
            } else if !matches!(k.as_str(), "kind" | "engine" | "model") {
                by_hand.insert(k.clone(), v.clone());
            }
        }
        let by_hand = headroom_core::fit::query::complete(&ds, &by_hand);
        assert_eq!(linked, by_hand, "case {case}: {}", to_query(&named));
    }
}

#[test]
fn links_that_disagreed_with_the_form_now_open_what_it_shows() {
    let ds = dataset();
    // Ollama's usual 4-bit file, as the form shows after choosing the model and the context.
    let s = parse_query(&ds, "?kind=llm-inference&model=qwen2.5-14b&card=rtx-3060-12gb&context=16384&engine=ollama");
    assert_eq!((&s["weights"], &s["kv_cache"]), (&json!("Q4_K_M"), &json!("fp16")));
    // Training: the task's preset (QLoRA with checkpointing), not the engine's bare defaults.
    let s = parse_query(&ds, "?kind=training&model=llama-3.1-8b");
    assert_eq!((&s["method"], &s["gradient_checkpointing"]), (&json!("qlora"), &json!(true)));
    // No kind: the model's own task.
    let s = parse_query(&ds, "?model=qwen2.5-14b");
    assert_eq!((&s["kind"], &s["model"]), (&json!("llm-inference"), &json!("qwen2.5-14b")));
    let s = parse_query(&ds, "?model=sdxl");
    assert_eq!((&s["kind"], &s["precision"]), (&json!("diffusion"), &json!("fp16")));
    // An unknown kind is kept, so the engine's message names it.
    assert_eq!(parse_query(&ds, "?kind=poetry&model=x")["kind"], json!("poetry"));
    // The URL encoding: a model object, text with spaces and ampersands, arrays.
    let mut s = preset("training");
    s.insert("model".into(), json!({"hf_config": {"model_type": "qwen2", "hidden_size": 896}, "name": "Qwen2.5 0.5B & co"}));
    s.insert("lora_targets".into(), json!(["q_proj", "v_proj"]));
    assert_eq!(decode(&to_query(&s)), s);
    assert_eq!(decode("?kind=training&model={oops")["model"], json!("{oops"), "text that only looks like JSON stays text");
    let q = to_query(&preset("training"));
    assert!(q.starts_with("?kind=training&model=llama-3.1-8b"), "{q}");
}

#[test]
fn a_new_model_or_engine_starts_from_its_own_defaults() {
    let ds = dataset();
    // FLUX in fp8, then SDXL: SDXL's own half precision, not FLUX's fp8.
    let mut s = parse_query(&ds, "?kind=diffusion&model=flux.1-dev&precision=fp8&block_swap=16");
    set_field(&ds, &mut s, Field::Model, json!("sdxl"));
    assert_eq!((&s["precision"], &s["block_swap"]), (&json!("fp16"), &json!(0)));
    // Ollama to vLLM: a GGUF scheme is not what vLLM runs; Ollama's KV types are not vLLM's.
    let mut s = parse_query(&ds, "?kind=llm-inference&engine=ollama&gpu_layers=20");
    set_field(&ds, &mut s, Field::Engine, json!("vllm"));
    assert_eq!((&s["weights"], &s["kv_cache"]), (&json!("bf16"), &json!("bf16")));
    assert!(!s.contains_key("gpu_layers"));
    // And back: bf16 is a GGUF type too, so it stays; Ollama has no bf16 cache.
    set_field(&ds, &mut s, Field::Engine, json!("ollama"));
    assert_eq!((&s["weights"], &s["kv_cache"]), (&json!("bf16"), &json!("fp16")));
    // A model change drops the layer counts of the previous one.
    let mut s = parse_query(&ds, "?kind=llm-inference&engine=llama.cpp&gpu_layers=20&cpu_moe_layers=4");
    set_field(&ds, &mut s, Field::Model, json!("qwen3-8b"));
    assert!(!s.contains_key("gpu_layers") && !s.contains_key("cpu_moe_layers"));
    // Ollama's KV choices are Ollama's.
    let kv: Vec<String> = choices(&fields(&ds, &s), Field::KvCache).iter().map(|c| c.value.clone()).collect();
    assert!(!kv.contains(&"fp8".to_string()));
    let f = fields(&ds, &parse_query(&ds, "?engine=ollama"));
    let kv: Vec<&str> = choices(&f, Field::KvCache).iter().map(|c| c.value.as_str()).collect();
    assert_eq!(kv, ["fp16", "q8_0", "q4_0"]);
}
