//! The workload a user asks about, as JSON (`dataset fit --input`). Every field is documented in
//! dataset/README.md ("Fit engine"); unknown fields are an error that names the field.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq)]
pub enum Engine {
    Transformers,
    Vllm,
    LlamaCpp,
    Ollama,
}
crate::string_enum!(Engine { Transformers = "transformers", Vllm = "vllm", LlamaCpp = "llama.cpp", Ollama = "ollama" });

/// Which LLM: a catalog id, or a description the user brings (`config.json`, hand-typed fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value", into = "serde_json::Value")]
pub enum ModelRef {
    Id(String),
    Spec(ModelSpec),
}

/// A model described by the user instead of a catalog id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// The model's Hugging Face `config.json`, as published (or as built from a GGUF's metadata).
    pub hf_config: serde_json::Value,
    /// A label for results (default: the config's `_name_or_path` or `model_type`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The parameter count, when the user knows it better than the architecture count (e.g. from
    /// the checkpoint's index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<u64>,
    /// The weights as stored in the user's file (`dataset model PATH` writes it): used for the
    /// `weights` term whenever the workload's `weights` is this format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileWeights>,
}

/// Exact weight bytes read from a model file's tensor table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileWeights {
    /// The format the file is in, as `weights` names it (`Q4_K_M`, `bf16`, …).
    pub format: String,
    /// Bytes of every tensor in the file.
    pub bytes: u64,
}

impl TryFrom<serde_json::Value> for ModelRef {
    type Error = String;
    fn try_from(v: serde_json::Value) -> Result<ModelRef, String> {
        match v {
            serde_json::Value::String(s) => Ok(ModelRef::Id(s)),
            serde_json::Value::Object(_) => serde_json::from_value(v)
                .map(ModelRef::Spec)
                .map_err(|e| format!("field `model`: {e} (a model object holds `hf_config` and optionally `name`, `params` and `file`)")),
            other => Err(format!("field `model` must be a catalog id or an object with `hf_config`, found {other}")),
        }
    }
}

impl From<ModelRef> for serde_json::Value {
    fn from(m: ModelRef) -> serde_json::Value {
        match m {
            ModelRef::Id(s) => serde_json::Value::String(s),
            ModelRef::Spec(s) => serde_json::to_value(s).expect("model specs serialize"),
        }
    }
}

impl ModelRef {
    /// The catalog id, if this is one.
    pub fn id(&self) -> Option<&str> {
        match self {
            ModelRef::Id(s) => Some(s),
            ModelRef::Spec(_) => None,
        }
    }
}

impl From<&str> for ModelRef {
    fn from(s: &str) -> ModelRef {
        ModelRef::Id(s.to_string())
    }
}

/// Which parts of each decoder block carry LoRA adapters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "serde_json::Value", into = "serde_json::Value")]
pub enum LoraTargets {
    /// Every linear layer of every block (PEFT's `"all-linear"`; the output head excluded).
    AllLinear,
    /// The attention projections: q, k, v, o.
    Attention,
    /// Module names as PEFT takes them (`["q_proj", "v_proj"]`).
    Modules(Vec<String>),
}

/// Projection names the engine knows, as transformers' Llama-family modules name them.
pub const LORA_MODULES: [&str; 7] = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

impl TryFrom<serde_json::Value> for LoraTargets {
    type Error = String;
    fn try_from(v: serde_json::Value) -> Result<LoraTargets, String> {
        match &v {
            serde_json::Value::String(s) if s == "all-linear" => Ok(LoraTargets::AllLinear),
            serde_json::Value::String(s) if s == "attention" => Ok(LoraTargets::Attention),
            serde_json::Value::Array(a) => {
                let mut out = Vec::new();
                for x in a {
                    let name = x.as_str().ok_or("field `lora_targets`: module names must be strings")?;
                    if !LORA_MODULES.contains(&name) {
                        return Err(format!("field `lora_targets`: unknown module `{name}` (one of: {})", LORA_MODULES.join(", ")));
                    }
                    if !out.iter().any(|o: &String| o == name) {
                        out.push(name.to_string());
                    }
                }
                if out.is_empty() {
                    return Err("field `lora_targets`: name at least one module".into());
                }
                Ok(LoraTargets::Modules(out))
            }
            other => Err(format!("field `lora_targets` must be \"all-linear\", \"attention\" or an array of module names, found {other}")),
        }
    }
}

impl From<LoraTargets> for serde_json::Value {
    fn from(t: LoraTargets) -> serde_json::Value {
        match t {
            LoraTargets::AllLinear => "all-linear".into(),
            LoraTargets::Attention => "attention".into(),
            LoraTargets::Modules(m) => m.into(),
        }
    }
}

impl LoraTargets {
    /// Whether a projection carries an adapter.
    pub fn has(&self, module: &str) -> bool {
        match self {
            LoraTargets::AllLinear => true,
            LoraTargets::Attention => matches!(module, "q_proj" | "k_proj" | "v_proj" | "o_proj"),
            LoraTargets::Modules(m) => m.iter().any(|x| x == module),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmInference {
    pub model: ModelRef,
    /// Weight format: fp32, bf16, fp16, fp8, int8, int4, nf4, awq-int4, gptq-int4 or a GGUF type/scheme.
    #[serde(default = "bf16")]
    pub weights: String,
    /// KV-cache format: bf16, fp16, fp8, q8_0, q4_0 (default bf16; llama.cpp/Ollama store f16).
    #[serde(default = "bf16")]
    pub kv_cache: String,
    /// Every token of the sequence: prompt plus generated.
    pub context: u64,
    /// Sequences in flight at once (batch size, or concurrent requests for a server).
    #[serde(default = "one")]
    pub batch: u64,
    #[serde(default = "transformers")]
    pub engine: Engine,
    /// vLLM: fraction of the GPU's memory it takes (default from the vLLM claim).
    #[serde(default)]
    pub gpu_memory_utilization: Option<f64>,
    /// llama.cpp / Ollama: `-ngl`, the layers on the GPU counting the output layer as one (N puts
    /// the last N − 1 repeating layers and the output layer there; default: every layer).
    #[serde(default)]
    pub gpu_layers: Option<u32>,
    /// llama.cpp / Ollama: `--n-cpu-moe`, MoE layers whose expert weights stay in system RAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_moe_layers: Option<u32>,
    /// llama.cpp: flash attention (`-fa`; default on, what `auto` picks on CUDA GPUs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flash_attention: Option<bool>,
    /// llama.cpp: the micro-batch, `-ub` (default 512; Ollama picks its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ubatch: Option<u64>,
    /// llama.cpp: `--swa-full`, sliding-window layers keep the whole context.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub swa_full: bool,
    /// llama.cpp: run as `llama-server` (its compute buffer holds one row of logits per slot).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server: bool,
    /// A forward pass that returns the logits of every position (perplexity, scoring) instead of
    /// generation.
    #[serde(default)]
    pub all_logits: bool,
    /// GPUs the model is spread over (default 1). llama.cpp / Ollama: the layer split over this
    /// many cards; vLLM: `tensor_parallel_size × pipeline_parallel_size`.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub gpus: u64,
    /// llama.cpp: `--split-mode` across several GPUs (default `layer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_mode: Option<SplitMode>,
    /// llama.cpp: `--tensor-split`, each GPU's share of the layers in proportion (default: each
    /// card's free memory when the cards are known, else equal shares).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tensor_split: Option<Vec<f64>>,
    /// vLLM: `--pipeline-parallel-size` (default 1); the tensor-parallel size is `gpus` divided by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline_parallel: Option<u64>,
    /// What each card offers (the card less other processes), when the fit is for known cards:
    /// llama.cpp's default split follows it, and the binding GPU is the one with the least spare.
    /// Not part of the workload's JSON.
    #[serde(skip)]
    pub card_budgets: Vec<u64>,
}

/// llama.cpp `--split-mode` (`none` is one GPU: `gpus: 1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitMode {
    /// Each GPU holds a contiguous run of layers with their KV cache (pipeline parallel).
    Layer,
    /// Matrix rows divided across the GPUs (deprecated; the CUDA backend no longer has it).
    Row,
    /// Weights and KV cache divided across the GPUs (experimental tensor parallelism).
    Tensor,
}
crate::string_enum!(SplitMode { Layer = "layer", Row = "row", Tensor = "tensor" });

/// FSDP sharding strategies (PyTorch `ShardingStrategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsdp {
    /// `FULL_SHARD`: parameters, gradients and optimizer states sharded over every GPU.
    Full,
    /// `SHARD_GRAD_OP`: gradients and optimizer states sharded; parameters kept whole after the forward pass.
    ShardGradOp,
    /// `HYBRID_SHARD`: full sharding inside each group of `shard_gpus`, replicas across groups.
    Hybrid,
}
crate::string_enum!(Fsdp { Full = "full", ShardGradOp = "shard-grad-op", Hybrid = "hybrid" });

/// Training state moved to system RAM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrainOffload {
    /// DeepSpeed ZeRO-Offload (`offload_optimizer: {device: cpu}`, ZeRO stage 1 to 3): optimizer
    /// states and step on the CPU; the GPU keeps the 16-bit parameters and gradients.
    Optimizer,
    /// Parameters too: PyTorch FSDP's `CPUOffload(offload_params=True)` / FSDP2's
    /// `CPUOffloadPolicy`, or DeepSpeed's `offload_param` (ZeRO stage 3 only). The GPU holds the
    /// layers being computed.
    Params,
}
crate::string_enum!(TrainOffload { Optimizer = "optimizer", Params = "params" });

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Full,
    Lora,
    Qlora,
}
crate::string_enum!(Method { Full = "full", Lora = "lora", Qlora = "qlora" });

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Optimizer {
    Adamw,
    Adamw8bit,
    Sgd,
}
crate::string_enum!(Optimizer { Adamw = "adamw", Adamw8bit = "adamw-8bit", Sgd = "sgd" });

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    pub model: ModelRef,
    #[serde(default = "full")]
    pub method: Method,
    /// fp32, bf16, fp16, or mixed-bf16 (fp32 master weights with bf16 autocast).
    #[serde(default = "bf16")]
    pub precision: String,
    #[serde(default = "adamw")]
    pub optimizer: Optimizer,
    /// Tokens per sequence.
    pub seq: u64,
    /// Sequences per step (micro-batch).
    #[serde(default = "one")]
    pub batch: u64,
    #[serde(default)]
    pub gradient_checkpointing: bool,
    #[serde(default = "sixteen")]
    pub lora_rank: u64,
    /// LoRA/QLoRA: which projections carry adapters (default `"all-linear"`).
    #[serde(default = "all_linear", skip_serializing_if = "is_all_linear")]
    pub lora_targets: LoraTargets,
    /// GPUs the model states are spread over (data parallel).
    #[serde(default = "one")]
    pub gpus: u64,
    /// DeepSpeed ZeRO stage (0 = plain data parallel).
    #[serde(default)]
    pub zero: u8,
    /// PyTorch FSDP instead of DeepSpeed: how the model states are sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fsdp: Option<Fsdp>,
    /// FSDP hybrid shard: GPUs in each sharding group (default: every GPU, which is full sharding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_gpus: Option<u64>,
    /// Model states in system RAM (ZeRO-Offload, FSDP CPU offload).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_offload: Option<TrainOffload>,
    /// What each card offers, when the fit is for known cards (see [`LlmInference::card_budgets`]).
    #[serde(skip)]
    pub card_budgets: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    Pipeline,
    Denoiser,
    TextEncoder,
    VaeDecode,
}
crate::string_enum!(Component { Pipeline = "pipeline", Denoiser = "denoiser", TextEncoder = "text-encoder", VaeDecode = "vae-decode" });

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    Gpu,
    Cpu,
}
crate::string_enum!(Placement { Gpu = "gpu", Cpu = "cpu" });

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    None,
    /// Whole components move to the GPU one at a time (diffusers `enable_model_cpu_offload`,
    /// ComfyUI's default model management).
    Model,
    /// Weights stream to the GPU layer by layer (diffusers `enable_sequential_cpu_offload`).
    Sequential,
}
crate::string_enum!(Offload { None = "none", Model = "model", Sequential = "sequential" });

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diffusion {
    pub model: String,
    /// Denoiser weight format: fp32, bf16, fp16, fp8 or a GGUF type/scheme.
    #[serde(default = "bf16")]
    pub precision: String,
    /// Text-encoder weight format (default: the denoiser's, or bf16 when that is GGUF).
    #[serde(default)]
    pub text_encoder_precision: Option<String>,
    #[serde(default)]
    pub width: Option<u64>,
    #[serde(default)]
    pub height: Option<u64>,
    #[serde(default = "one")]
    pub batch: u64,
    /// Video frames (video models).
    #[serde(default)]
    pub frames: Option<u64>,
    /// Classifier-free guidance: doubles the denoiser batch (default per model).
    #[serde(default)]
    pub cfg: Option<bool>,
    #[serde(default = "pipeline")]
    pub component: Component,
    #[serde(default = "gpu")]
    pub text_encoders: Placement,
    #[serde(default = "no_offload")]
    pub offload: Offload,
    /// Denoiser blocks kept in system RAM and swapped in as needed.
    #[serde(default)]
    pub block_swap: u32,
    #[serde(default)]
    pub tiled_vae: bool,
    /// The denoiser as stored in the user's checkpoint (`dataset model PATH` writes it): its exact
    /// bytes count whenever `precision` is this format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileWeights>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Workload {
    LlmInference(LlmInference),
    Training(Training),
    Diffusion(Diffusion),
}

fn bf16() -> String {
    "bf16".into()
}
fn all_linear() -> LoraTargets {
    LoraTargets::AllLinear
}
fn is_all_linear(t: &LoraTargets) -> bool {
    *t == LoraTargets::AllLinear
}
fn one() -> u64 {
    1
}
fn is_one(n: &u64) -> bool {
    *n == 1
}
fn sixteen() -> u64 {
    16
}
fn transformers() -> Engine {
    Engine::Transformers
}
fn full() -> Method {
    Method::Full
}
fn adamw() -> Optimizer {
    Optimizer::Adamw
}
fn pipeline() -> Component {
    Component::Pipeline
}
fn gpu() -> Placement {
    Placement::Gpu
}
fn no_offload() -> Offload {
    Offload::None
}

impl Workload {
    /// Parses one workload object; errors name the offending field.
    pub fn from_value(v: &serde_json::Value) -> Result<Workload, String> {
        let obj = v.as_object().ok_or("a workload must be a JSON object")?;
        let kind = obj.get("kind").ok_or("missing field `kind` (llm-inference, training or diffusion)")?.as_str().ok_or("field `kind` must be a string")?;
        let mut rest = obj.clone();
        rest.remove("kind");
        let rest = serde_json::Value::Object(rest);
        let err = |e: serde_json::Error| format!("{kind} workload: {e}");
        match kind {
            "llm-inference" => serde_json::from_value(rest).map(Workload::LlmInference).map_err(err),
            "training" => serde_json::from_value(rest).map(Workload::Training).map_err(err),
            "diffusion" => serde_json::from_value(rest).map(Workload::Diffusion).map_err(err),
            other => Err(format!("unknown `kind` `{other}` (llm-inference, training or diffusion)")),
        }
    }

    pub fn to_value(&self) -> serde_json::Value {
        let (kind, v) = match self {
            Workload::LlmInference(w) => ("llm-inference", serde_json::to_value(w)),
            Workload::Training(w) => ("training", serde_json::to_value(w)),
            Workload::Diffusion(w) => ("diffusion", serde_json::to_value(w)),
        };
        let mut v = v.expect("workloads serialize");
        v.as_object_mut().expect("object").insert("kind".into(), kind.into());
        v
    }

    /// GPUs the workload is spread over.
    pub fn gpus(&self) -> u64 {
        match self {
            Workload::LlmInference(w) => w.gpus,
            Workload::Training(w) => w.gpus,
            Workload::Diffusion(_) => 1,
        }
    }

    /// Spreads the workload over `n` GPUs (see [`Workload::gpus`]).
    pub fn set_gpus(&mut self, n: u64) {
        match self {
            Workload::LlmInference(w) => w.gpus = n,
            Workload::Training(w) => w.gpus = n,
            Workload::Diffusion(_) => {}
        }
    }

    /// The budgets of the cards the fit is for (one per GPU), which the engine uses to place
    /// layers the way llama.cpp does by default and to find the GPU that runs out first.
    pub fn set_card_budgets(&mut self, budgets: Vec<u64>) {
        match self {
            Workload::LlmInference(w) => w.card_budgets = budgets,
            Workload::Training(w) => w.card_budgets = budgets,
            Workload::Diffusion(_) => {}
        }
    }

    /// See [`Workload::set_card_budgets`] (empty: not set).
    pub fn card_budgets(&self) -> &[u64] {
        match self {
            Workload::LlmInference(w) => &w.card_budgets,
            Workload::Training(w) => &w.card_budgets,
            Workload::Diffusion(_) => &[],
        }
    }

    /// The catalog id of the model, or the label of a user-described one.
    pub fn model(&self) -> String {
        let r = match self {
            Workload::LlmInference(w) => &w.model,
            Workload::Training(w) => &w.model,
            Workload::Diffusion(w) => return w.model.clone(),
        };
        match r {
            ModelRef::Id(s) => s.clone(),
            ModelRef::Spec(s) => s.name.clone().unwrap_or_else(|| "config.json".into()),
        }
    }
}
