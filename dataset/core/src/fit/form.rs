//! The calculator form's rules: which fields a workload being edited offers, with which choices
//! and defaults, decided on the form's state (a JSON object that may not be a valid workload yet),
//! and how a change to one field carries over to the others. The site gives each field, and each
//! worded choice, its text in the reader's language and renders what these say; they are tested
//! here, natively.

use serde_json::{Map, Value, json};

use crate::format::NumberUnit;
use crate::{Dataset, Modality};

/// The model select's value that opens the "your model" panel.
pub const OWN_MODEL: &str = "custom";

/// A field of the form, by the workload key it sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Model,
    Method,
    Precision,
    Optimizer,
    Seq,
    Batch,
    GradientCheckpointing,
    LoraRank,
    Gpus,
    Zero,
    Fsdp,
    CpuOffload,
    TextEncoderPrecision,
    Width,
    Height,
    Frames,
    Cfg,
    Component,
    TextEncoders,
    Offload,
    BlockSwap,
    TiledVae,
    Engine,
    Weights,
    KvCache,
    Context,
    GpuMemoryUtilization,
    GpuLayers,
    FlashAttention,
    Ubatch,
    CpuMoeLayers,
    AllLogits,
}
crate::string_enum!(Field { Model = "model", Method = "method", Precision = "precision", Optimizer = "optimizer", Seq = "seq", Batch = "batch", GradientCheckpointing = "gradient_checkpointing", LoraRank = "lora_rank", Gpus = "gpus", Zero = "zero", Fsdp = "fsdp", CpuOffload = "cpu_offload", TextEncoderPrecision = "text_encoder_precision", Width = "width", Height = "height", Frames = "frames", Cfg = "cfg", Component = "component", TextEncoders = "text_encoders", Offload = "offload", BlockSwap = "block_swap", TiledVae = "tiled_vae", Engine = "engine", Weights = "weights", KvCache = "kv_cache", Context = "context", GpuMemoryUtilization = "gpu_memory_utilization", GpuLayers = "gpu_layers", FlashAttention = "flash_attention", Ubatch = "ubatch", CpuMoeLayers = "cpu_moe_layers", AllLogits = "all_logits" });

/// How a field is entered.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// One of these choices; unset means the first.
    Select(Vec<Choice>),
    /// A number, with the input's step, what an empty field means (shown as the placeholder; none
    /// when the field must be filled) and what it counts (what `16k` means in it).
    Number {
        step: &'static str,
        default: Option<String>,
        unit: NumberUnit,
    },
    Check,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub value: String,
    pub text: ChoiceText,
}

/// What a choice reads as.
#[derive(Clone, Debug, PartialEq)]
pub enum ChoiceText {
    /// The value itself (a format id, a ZeRO stage).
    Value,
    /// A name, the same in every language (a catalog model's name, "vLLM", "AdamW").
    Name(String),
    /// Worded in the reader's language.
    Word(Word),
    /// The engine's default format when the field is left empty, named.
    DefaultFormat(String),
}

/// The choices the site words in the reader's language.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    OwnModel,
    MethodFull,
    FsdpNone,
    FsdpFull,
    FsdpShardGradOp,
    FsdpHybrid,
    CpuOffloadNone,
    CpuOffloadOptimizer,
    CpuOffloadParams,
    ComponentPipeline,
    ComponentDenoiser,
    ComponentTextEncoder,
    ComponentVaeDecode,
    OnGpu,
    OnCpu,
    OffloadNone,
    OffloadModel,
    OffloadSequential,
    FlashAttentionOn,
    FlashAttentionOff,
}

fn named(items: &[(&str, &str)]) -> Vec<Choice> {
    items.iter().map(|&(v, name)| Choice { value: v.into(), text: ChoiceText::Name(name.into()) }).collect()
}

fn worded(items: &[(&str, Word)]) -> Vec<Choice> {
    items.iter().map(|&(v, w)| Choice { value: v.into(), text: ChoiceText::Word(w) }).collect()
}

/// The formats of `ids` the dataset has.
fn formats(ds: &Dataset, ids: &[&str]) -> Vec<Choice> {
    ids.iter().filter(|id| ds.quant(id).is_some()).map(|id| Choice { value: id.to_string(), text: ChoiceText::Value }).collect()
}

fn select(field: Field, choices: Vec<Choice>) -> (Field, Input) {
    (field, Input::Select(choices))
}

/// What a number field counts.
pub fn unit_of(field: Field) -> NumberUnit {
    match field {
        Field::Context | Field::Seq | Field::Ubatch => NumberUnit::Tokens,
        Field::Width | Field::Height => NumberUnit::Pixels,
        Field::GpuMemoryUtilization => NumberUnit::Fraction,
        _ => NumberUnit::Count,
    }
}

fn number(field: Field, step: &'static str) -> (Field, Input) {
    (field, Input::Number { step, default: None, unit: unit_of(field) })
}

fn number_or(field: Field, step: &'static str, default: String) -> (Field, Input) {
    (field, Input::Number { step, default: Some(default), unit: unit_of(field) })
}

/// Whether the form enters the field as a number.
pub fn is_number(field: Field) -> bool {
    use Field::*;
    matches!(field, Seq | Batch | LoraRank | Gpus | Width | Height | Frames | BlockSwap | Context | GpuMemoryUtilization | GpuLayers | Ubatch | CpuMoeLayers)
}

/// The field a state key is, if it is one.
pub fn field_of(key: &str) -> Option<Field> {
    Field::ALL.iter().copied().find(|f| f.as_str() == key)
}

/// The number field a workload of `kind` cannot do without.
pub fn required_number(kind: &str) -> Option<Field> {
    match kind {
        "training" => Some(Field::Seq),
        "diffusion" => None,
        _ => Some(Field::Context),
    }
}

/// Whether a workload cannot do without the field (the rest have a default the engine applies).
pub fn required(field: Field) -> bool {
    matches!(field, Field::Context | Field::Seq | Field::Model)
}

/// The weight formats an engine runs: llama.cpp and Ollama run GGUF files (their float types
/// included), transformers and vLLM the Hugging Face checkpoints and their quantizations.
pub fn engine_runs(ds: &Dataset, engine: &str, format: &str) -> bool {
    use crate::QuantFamily::*;
    let gguf = matches!(engine, "llama.cpp" | "ollama");
    match ds.quant(format).map(|q| q.family) {
        Some(GgufType | GgufScheme) => gguf,
        Some(Float) => !gguf || matches!(format, "fp32" | "bf16" | "fp16"),
        Some(Int | Bnb | Awq | Gptq) => !gguf,
        None => true,
    }
}

/// The KV-cache formats an engine offers, its default first: llama.cpp's and Ollama's cache types
/// (Ollama has no bf16), vLLM's `auto` (the model's bf16) and fp8, transformers' model dtype.
pub fn kv_formats(engine: &str) -> &'static [&'static str] {
    match engine {
        "llama.cpp" => &["fp16", "bf16", "q8_0", "q4_0"],
        "ollama" => &["fp16", "q8_0", "q4_0"],
        "vllm" => &["bf16", "fp8"],
        _ => &["bf16", "fp16"],
    }
}

/// The weight format a reader starts from with an engine: the 4-bit GGUF scheme that llama.cpp
/// and Ollama users download, the published bf16 checkpoint for transformers and vLLM.
pub fn default_weights(engine: &str) -> &'static str {
    if matches!(engine, "llama.cpp" | "ollama") { "Q4_K_M" } else { "bf16" }
}

/// The catalog's models of a kind, then the reader's own.
fn models<'a>(names: impl Iterator<Item = (&'a str, &'a str)>) -> Vec<Choice> {
    let mut c: Vec<Choice> = names.map(|(id, name)| Choice { value: id.into(), text: ChoiceText::Name(name.into()) }).collect();
    c.push(Choice { value: OWN_MODEL.into(), text: ChoiceText::Word(Word::OwnModel) });
    c
}

/// A text field of the state ("" when unset or not text).
fn text<'a>(s: &'a Map<String, Value>, field: &str) -> &'a str {
    s.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The fields the form shows for this state, in order.
pub fn fields(ds: &Dataset, s: &Map<String, Value>) -> Vec<(Field, Input)> {
    let llms = || models(ds.llms.iter().map(|m| (m.id.as_str(), m.name.as_str())));
    match s.get("kind").and_then(Value::as_str).unwrap_or("llm-inference") {
        "training" => training_fields(s, llms()),
        "diffusion" => diffusion_fields(ds, s),
        _ => inference_fields(ds, s, llms()),
    }
}

fn diffusion_fields(ds: &Dataset, s: &Map<String, Value>) -> Vec<(Field, Input)> {
    let video = ds.diffusion_model(text(s, "model")).is_some_and(|m| m.modality == Modality::Video);
    // Empty: the engine's default, the pipeline's compute format.
    let follows = super::diffusion::compute_format(ds, text(s, "precision"));
    let mut te = vec![Choice { value: String::new(), text: ChoiceText::DefaultFormat(follows) }];
    te.extend(formats(ds, &["fp32", "bf16", "fp16", "fp8"]));
    let mut c = vec![
        select(Field::Model, models(ds.diffusion.iter().map(|m| (m.id.as_str(), m.name.as_str())))),
        select(Field::Precision, formats(ds, &["fp32", "bf16", "fp16", "fp8", "Q8_0", "Q6_K", "Q5_K_S", "Q4_K_S", "Q3_K_S"])),
        select(Field::TextEncoderPrecision, te),
        number(Field::Width, "8"),
        number(Field::Height, "8"),
    ];
    if video {
        c.push(number(Field::Frames, "4"));
    }
    c.extend([
        number(Field::Batch, "1"),
        (Field::Cfg, Input::Check),
        select(
            Field::Component,
            worded(&[
                ("pipeline", Word::ComponentPipeline),
                ("denoiser", Word::ComponentDenoiser),
                ("text-encoder", Word::ComponentTextEncoder),
                ("vae-decode", Word::ComponentVaeDecode),
            ]),
        ),
        select(Field::TextEncoders, worded(&[("gpu", Word::OnGpu), ("cpu", Word::OnCpu)])),
        select(Field::Offload, worded(&[("none", Word::OffloadNone), ("model", Word::OffloadModel), ("sequential", Word::OffloadSequential)])),
        number(Field::BlockSwap, "1"),
        (Field::TiledVae, Input::Check),
    ]);
    c
}

fn training_fields(s: &Map<String, Value>, llms: Vec<Choice>) -> Vec<(Field, Input)> {
    let mut c = vec![
        select(Field::Model, llms),
        select(Field::Method, {
            let mut m = worded(&[("full", Word::MethodFull)]);
            m.extend(named(&[("lora", "LoRA"), ("qlora", "QLoRA")]));
            m
        }),
        select(Field::Precision, named(&[("bf16", "bf16"), ("fp16", "fp16"), ("mixed-bf16", "fp32 + bf16 autocast"), ("fp32", "fp32")])),
        select(Field::Optimizer, named(&[("adamw", "AdamW"), ("adamw-8bit", "AdamW 8-bit"), ("sgd", "SGD")])),
        number(Field::Seq, "1"),
        number(Field::Batch, "1"),
        (Field::GradientCheckpointing, Input::Check),
    ];
    if text(s, "method") != "full" {
        c.push(number(Field::LoraRank, "1"));
    }
    c.push(number_or(Field::Gpus, "1", machine_gpus(s).to_string()));
    c.push(select(Field::Zero, ["0", "1", "2", "3"].iter().map(|z| Choice { value: z.to_string(), text: ChoiceText::Value }).collect()));
    c.push(select(
        Field::Fsdp,
        worded(&[("", Word::FsdpNone), ("full", Word::FsdpFull), ("shard-grad-op", Word::FsdpShardGradOp), ("hybrid", Word::FsdpHybrid)]),
    ));
    if offers_cpu_offload(s) {
        c.push(select(Field::CpuOffload, worded(&[("", Word::CpuOffloadNone), ("optimizer", Word::CpuOffloadOptimizer), ("params", Word::CpuOffloadParams)])));
    }
    c
}

fn inference_fields(ds: &Dataset, s: &Map<String, Value>, llms: Vec<Choice>) -> Vec<(Field, Input)> {
    let engine = text(s, "engine");
    // A model file's own format joins the list when it is not one of the usual ones.
    let engine_or_default = if engine.is_empty() { "transformers" } else { engine };
    let mut weights =
        formats(ds, &["bf16", "fp16", "fp8", "int8", "awq-int4", "gptq-int4", "nf4", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_K_S", "Q3_K_M", "IQ4_XS", "Q2_K"]);
    weights.retain(|c| engine_runs(ds, engine_or_default, &c.value));
    let current = text(s, "weights").to_string();
    if !weights.iter().any(|c| c.value == current) && ds.quant(&current).is_some() {
        weights.push(Choice { value: current, text: ChoiceText::Value });
    }
    let mut c = vec![
        select(Field::Model, llms),
        select(Field::Engine, named(&[("transformers", "transformers"), ("vllm", "vLLM"), ("llama.cpp", "llama.cpp"), ("ollama", "Ollama")])),
        select(Field::Weights, weights),
        select(Field::KvCache, formats(ds, kv_formats(engine_or_default))),
        number(Field::Context, "256"),
        number(Field::Batch, "1"),
    ];
    if engine != "transformers" {
        // The GPUs the model is spread over (another card in the machine sets it too).
        c.push(number_or(Field::Gpus, "1", machine_gpus(s).to_string()));
    }
    match engine {
        "vllm" => c.push(number(Field::GpuMemoryUtilization, "0.01")),
        "llama.cpp" | "ollama" => {
            let m = ds.llm(text(s, "model"));
            // -ngl counts the output layer: the default is "every layer".
            c.push(number_or(Field::GpuLayers, "1", m.map(|m| (m.layers + 1).to_string()).unwrap_or_default()));
            c.push(select(Field::FlashAttention, worded(&[("true", Word::FlashAttentionOn), ("false", Word::FlashAttentionOff)])));
            // The micro-batch llama.cpp takes by default, or the one Ollama picks for this context.
            let num = |f: &str| s.get(f).and_then(Value::as_u64);
            let tokens = num("context").unwrap_or(0) * num("batch").unwrap_or(1).max(1);
            let fa_off = s.get("flash_attention").and_then(Value::as_bool) == Some(false);
            let ub = if engine == "ollama" {
                super::llamacpp::ollama_batch(ds, tokens, fa_off).ok()
            } else {
                ds.claim("fit-llamacpp-ubatch").and_then(|c| c.value.as_ref()).and_then(|v| v.number)
            };
            c.push(number_or(Field::Ubatch, "1", ub.map(|u| u.to_string()).unwrap_or_default()));
            // llama.cpp's --n-cpu-moe; Ollama has no setting for it.
            if engine == "llama.cpp" && m.is_some_and(|m| m.is_moe()) {
                c.push(number_or(Field::CpuMoeLayers, "1", "0".into()));
            }
        }
        _ => c.push((Field::AllLogits, Input::Check)),
    }
    c
}

/// The value a select's choice sets: none for the empty choice, a boolean for `true`/`false`, a
/// number for the ZeRO stage, else the text.
pub fn choice_value(field: Field, v: &str) -> Value {
    match v {
        "" => Value::Null,
        "true" | "false" => json!(v == "true"),
        _ => v.parse::<u64>().ok().filter(|_| field == Field::Zero).map(|n| json!(n)).unwrap_or_else(|| Value::String(v.into())),
    }
}

/// Sets one field (none removes it); a new model of a diffusion workload brings that model's
/// size, guidance and frames, and drops the checkpoint recognised for the previous one.
///
/// A new model starts from its own defaults: a diffusion model's format, size, guidance and
/// frames; an LLM's layer counts (`gpu_layers`, `cpu_moe_layers`) go back to "every layer". A new
/// engine keeps the weight and KV formats it runs and otherwise takes its defaults
/// ([`default_weights`], [`kv_formats`]), and drops the settings only the previous engine had.
pub fn set_field(ds: &Dataset, s: &mut Map<String, Value>, field: Field, value: Value) {
    let kind = s.get("kind").and_then(Value::as_str).unwrap_or("llm-inference").to_string();
    if field == Field::Engine && kind == "llm-inference" {
        let engine = value.as_str().unwrap_or("transformers");
        let weights = text(s, "weights").to_string();
        if weights.is_empty() || !engine_runs(ds, engine, &weights) {
            s.insert("weights".into(), json!(default_weights(engine)));
        }
        if !kv_formats(engine).contains(&text(s, "kv_cache")) {
            s.insert("kv_cache".into(), json!(kv_formats(engine)[0]));
        }
        let dropped: &[&str] = match engine {
            "vllm" => &["gpu_layers", "flash_attention", "ubatch", "cpu_moe_layers"],
            "transformers" => &["gpu_layers", "flash_attention", "ubatch", "cpu_moe_layers", "gpu_memory_utilization", "gpus", "cards"],
            "ollama" => &["gpu_memory_utilization", "cpu_moe_layers"],
            _ => &["gpu_memory_utilization"],
        };
        for f in dropped {
            s.remove(*f);
        }
        // Every logit is a transformers run's choice (the form offers it there only).
        if engine != "transformers" && s.contains_key("all_logits") {
            s.insert("all_logits".into(), json!(false));
        }
    }
    if field == Field::Model && kind != "diffusion" {
        s.remove("gpu_layers");
        s.remove("cpu_moe_layers");
    }
    if field == Field::Model && kind == "diffusion" {
        s.remove("file");
        s.remove("text_encoder_precision");
        // Counted in the previous model's blocks.
        if s.contains_key("block_swap") {
            s.insert("block_swap".into(), json!(0));
        }
        if let Some(m) = value.as_str().and_then(|id| ds.diffusion_model(id)) {
            s.insert("precision".into(), json!(super::diffusion::default_precision(m.family)));
            let (w, h) = super::diffusion::native_size(ds, m).unwrap_or((0, 0));
            s.insert("width".into(), json!(w));
            s.insert("height".into(), json!(h));
            s.insert("cfg".into(), json!(super::diffusion::default_cfg(m.family)));
            if m.modality == Modality::Video {
                s.insert("frames".into(), json!(super::diffusion::default_frames(ds, m).unwrap_or(1)));
            } else {
                s.remove("frames");
            }
        }
    }
    if value.is_null() {
        s.remove(field.as_str());
    } else {
        s.insert(field.as_str().into(), value);
    }
}

/// The GPUs of the machine the state describes: the card and the other cards listed with it
/// (`cards`, comma-separated), which is what an unset `gpus` spreads the workload over.
pub fn machine_gpus(state: &Map<String, Value>) -> usize {
    1 + text(state, "cards").split(',').filter(|c| !c.trim().is_empty()).count()
}

/// Whether the workload can be spread over several GPUs in one machine, so the form offers
/// another card: training (data parallel) and the engines that split a model (vLLM, llama.cpp,
/// Ollama); not transformers' single-process inference, not diffusion.
pub fn offers_more_cards(state: &Map<String, Value>) -> bool {
    match state.get("kind").and_then(Value::as_str) {
        Some("training") => true,
        Some("diffusion") => false,
        _ => state.get("engine").and_then(Value::as_str).is_some_and(|e| e != "transformers"),
    }
}

/// Whether a training workload's form offers CPU offload: once its states are sharded (a ZeRO
/// stage, or FSDP), or when the state already names an offload (so it can be taken back).
pub fn offers_cpu_offload(state: &Map<String, Value>) -> bool {
    let zero = state.get("zero").and_then(|v| v.as_u64().or_else(|| v.as_str().and_then(|x| x.parse().ok()))).unwrap_or(0);
    zero > 0 || !text(state, "fsdp").is_empty() || !text(state, "cpu_offload").is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_number_fields_are_those_the_form_enters_as_numbers() {
        let ds = crate::Dataset::default();
        for kind in ["llm-inference", "training", "diffusion"] {
            for engine in ["transformers", "vllm", "llama.cpp", "ollama"] {
                for (field, input) in fields(&ds, &state(json!({"kind": kind, "engine": engine, "method": "lora", "zero": 2}))) {
                    assert_eq!(is_number(field), matches!(input, Input::Number { .. }), "{field:?}");
                    assert_eq!(field_of(field.as_str()), Some(field));
                }
            }
        }
    }

    #[test]
    fn the_gpus_field_counts_the_cards_of_the_machine() {
        assert_eq!(machine_gpus(&state(json!({"kind": "training"}))), 1);
        assert_eq!(machine_gpus(&state(json!({"cards": "rtx-3090"}))), 2);
        assert_eq!(machine_gpus(&state(json!({"cards": "rtx-3090, rtx-3060-12gb,"}))), 3);
    }

    #[test]
    fn more_cards_where_the_workload_can_use_them() {
        assert!(offers_more_cards(&state(json!({"kind": "training"}))));
        assert!(!offers_more_cards(&state(json!({"kind": "diffusion", "engine": "vllm"}))));
        for (engine, offered) in [("vllm", true), ("llama.cpp", true), ("ollama", true), ("transformers", false)] {
            assert_eq!(offers_more_cards(&state(json!({"kind": "llm-inference", "engine": engine}))), offered, "{engine}");
        }
        // Not chosen yet: the default engine (transformers) runs on one GPU.
        assert!(!offers_more_cards(&state(json!({"kind": "llm-inference"}))));
    }

    #[test]
    fn cpu_offload_once_states_are_sharded() {
        assert!(!offers_cpu_offload(&state(json!({"kind": "training"}))));
        assert!(!offers_cpu_offload(&state(json!({"zero": 0}))));
        assert!(offers_cpu_offload(&state(json!({"zero": 2}))));
        assert!(offers_cpu_offload(&state(json!({"zero": "3"}))));
        assert!(offers_cpu_offload(&state(json!({"fsdp": "full"}))));
        assert!(!offers_cpu_offload(&state(json!({"fsdp": ""}))));
        // Chosen before the stage went back to 0: still shown, so it can be cleared.
        assert!(offers_cpu_offload(&state(json!({"zero": 0, "cpu_offload": "optimizer"}))));
    }
}
