//! The workload a user asks about, as JSON (`dataset fit --input`). Every field is documented in
//! dataset/README.md ("Fit engine"); unknown fields are an error that names the field.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    Transformers,
    Vllm,
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    Ollama,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmInference {
    pub model: String,
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
    /// llama.cpp / Ollama: layers kept on the GPU (default: all).
    #[serde(default)]
    pub gpu_layers: Option<u32>,
    /// A forward pass that returns the logits of every position (perplexity, scoring) instead of
    /// generation.
    #[serde(default)]
    pub all_logits: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Method {
    Full,
    Lora,
    Qlora,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    Adamw,
    #[serde(rename = "adamw-8bit")]
    Adamw8bit,
    Sgd,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Training {
    pub model: String,
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
    /// GPUs the model states are spread over (data parallel).
    #[serde(default = "one")]
    pub gpus: u64,
    /// DeepSpeed ZeRO stage (0 = plain data parallel).
    #[serde(default)]
    pub zero: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Component {
    Pipeline,
    Denoiser,
    TextEncoder,
    VaeDecode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    Gpu,
    Cpu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Offload {
    None,
    /// Whole components move to the GPU one at a time (diffusers `enable_model_cpu_offload`,
    /// ComfyUI's default model management).
    Model,
    /// Weights stream to the GPU layer by layer (diffusers `enable_sequential_cpu_offload`).
    Sequential,
}

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
fn one() -> u64 {
    1
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
        let kind = obj
            .get("kind")
            .ok_or("missing field `kind` (llm-inference, training or diffusion)")?
            .as_str()
            .ok_or("field `kind` must be a string")?;
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

    pub fn model(&self) -> &str {
        match self {
            Workload::LlmInference(w) => &w.model,
            Workload::Training(w) => &w.model,
            Workload::Diffusion(w) => &w.model,
        }
    }
}
