//! The catalogs the claims talk about: GPUs, LLMs, diffusion models, quantization formats, tools,
//! and the seed articles. Field names are those of the TOML files (dataset/README.md).

use serde::{Deserialize, Serialize};

use crate::{Source, Text};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    Desktop,
    Laptop,
    Workstation,
    Datacenter,
}
crate::string_enum!(Segment { Desktop = "desktop", Laptop = "laptop", Workstation = "workstation", Datacenter = "datacenter" });

/// Who makes a GPU: which software stack runs on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Vendor {
    /// CUDA.
    #[default]
    Nvidia,
    /// ROCm / HIP.
    Amd,
    /// Apple silicon: Metal, unified memory shared with the system.
    Apple,
}
crate::string_enum!(Vendor { Nvidia = "nvidia", Amd = "amd", Apple = "apple" });

impl Vendor {
    fn is_nvidia(&self) -> bool {
        *self == Vendor::Nvidia
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(feature = "slim"), serde(deny_unknown_fields))]
pub struct Gpu {
    pub id: String,
    pub name: String,
    /// `nvidia` (the default), `amd` or `apple`.
    #[serde(default, skip_serializing_if = "Vendor::is_nvidia")]
    pub vendor: Vendor,
    pub segment: Segment,
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub architecture: String,
    /// NVIDIA: the CUDA compute capability ("8.9").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub compute_capability: String,
    /// AMD: the LLVM target name (`gfx1100`), what ROCm's libraries are built for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub llvm_target: Option<String>,
    /// AMD: the ROCm release whose Linux support list (the one its source quotes) names the card
    /// (`7.0`), or `none` when that list does not (Windows HIP SDK only, or unlisted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub rocm_linux: Option<String>,
    /// The vendor's nominal capacity, in the vendor's "GB" (for GPU memory these are GiB); for
    /// Apple silicon the unified memory the GPU shares with the system.
    pub memory_gb: f64,
    /// Empty where no source states it (some AMD cards).
    #[serde(default)]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub memory_type: String,
    /// 0 where no source states it (some AMD cards).
    #[serde(default)]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub bus_width_bits: u32,
    /// GB/s as the vendor states it; absent where the vendor gives none (laptop parts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub bandwidth_gbs: Option<f64>,
    /// The host link; empty where no source states it (some AMD cards).
    #[serde(default)]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub interface: String,
    pub source: Source,
    /// Further documents for values the main source does not state (e.g. compute capability).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub extra_sources: Vec<Source>,
}

/// A measurement the probe cannot make (it talks to NVIDIA's driver) that an owner of another
/// platform can, for a claim that rests on documents and others' logs
/// (`measurements/wanted.toml`; the probe page lists them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wanted {
    pub claim: String,
    pub platform: WantedPlatform,
    /// What to run (a command line, the same in every language).
    pub command: String,
    /// What to copy from what it prints.
    pub look_for: crate::Text,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WantedPlatform {
    Apple,
    Amd,
}

/// A `PYTORCH_CUDA_ALLOC_CONF` setting that the allocator lab and `probe replay --sweep` try
/// (`catalog/alloc-recipes.toml`, cheapest change first), with the claims that say what it does
/// and who recommends it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocRecipe {
    pub id: String,
    /// The setting as PyTorch reads it (`""`: the default).
    pub conf: String,
    /// Claim ids: the first says what the setting does; recipes from the seeds cite the claim
    /// with their verdict.
    pub claims: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attention {
    Mha,
    Gqa,
    Mla,
}
crate::string_enum!(Attention { Mha = "mha", Gqa = "gqa", Mla = "mla" });

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Llm {
    pub id: String,
    pub name: String,
    pub params: u64,
    pub layers: u32,
    pub hidden: u32,
    pub intermediate: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub vocab: u32,
    pub max_context: u64,
    pub tied_embeddings: bool,
    pub attention: Attention,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_token: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_intermediate: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_experts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_layers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_lora_rank: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_rope_head_dim: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qk_nope_head_dim: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub v_head_dim: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub q_lora_rank: Option<u32>,
    /// Tokens a sliding-window attention layer looks back over (`sliding_window` in config.json).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    /// How many of the layers use that window (the others attend over the whole context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_layers: Option<u32>,
    /// The `model_type` of the model's config.json, where engine behaviour depends on it (which
    /// architectures llama.cpp gives a sliding-window cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_type: Option<String>,
    /// Query and key pass through their own RMS norms (Qwen3, Gemma 3, OLMo 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
    /// The Hugging Face repository (`org/name`) a command line names; the built data fills it
    /// from `source.url` (`Dataset::compact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    pub source: Source,
}

impl Llm {
    pub fn is_moe(&self) -> bool {
        self.experts.unwrap_or(0) > 0
    }

    /// Parameters active per token (all of them for a dense model).
    pub fn active(&self) -> u64 {
        self.active_params.unwrap_or(self.params)
    }

    /// KV-cache elements per token over all layers (MLA caches the compressed latent and the
    /// shared rotary key instead of per-head keys and values).
    pub fn kv_elements_per_token(&self) -> u64 {
        self.layers as u64 * self.kv_elements_per_layer_token()
    }

    /// KV-cache elements one layer keeps per token.
    pub fn kv_elements_per_layer_token(&self) -> u64 {
        match self.attention {
            Attention::Mla => self.kv_lora_rank.unwrap_or(0) as u64 + self.qk_rope_head_dim.unwrap_or(0) as u64,
            _ => 2 * self.kv_heads as u64 * self.head_dim as u64,
        }
    }

    /// Layers that keep a sliding window of tokens, and the window.
    pub fn sliding(&self) -> Option<(u32, u64)> {
        match (self.sliding_window, self.sliding_layers) {
            (Some(w), Some(n)) if w > 0 && n > 0 => Some((n.min(self.layers), w as u64)),
            (Some(w), None) if w > 0 => Some((self.layers, w as u64)),
            _ => None,
        }
    }

    /// KV-cache elements of one sequence whose cache holds `tokens` tokens on global layers and
    /// `window_tokens(tokens)` on sliding-window layers (each engine says how many it keeps).
    pub fn kv_elements(&self, tokens: u64, window_tokens: impl Fn(u64) -> u64) -> u64 {
        let per = self.kv_elements_per_layer_token();
        match self.sliding() {
            None => self.layers as u64 * per * tokens,
            Some((n, w)) => {
                let full = (self.layers - n) as u64;
                per * (full * tokens + n as u64 * window_tokens(w).min(tokens))
            }
        }
    }

    /// Parameters counted from the architecture: embeddings, attention, MLP or experts, norms and
    /// the output head (unless tied). Biases and small extras (attention sinks) are left out, so
    /// this lands within a fraction of a percent of the published count for text-only models.
    pub fn architecture_params(&self) -> u64 {
        let h = self.hidden as u64;
        let heads = self.heads as u64;
        let embed = self.vocab as u64 * h;
        let head = if self.tied_embeddings { 0 } else { embed };
        let attention = match self.attention {
            Attention::Mla => {
                let rope = self.qk_rope_head_dim.unwrap_or(0) as u64;
                let nope = self.qk_nope_head_dim.unwrap_or(self.head_dim) as u64;
                let v = self.v_head_dim.unwrap_or(self.head_dim) as u64;
                let kv_rank = self.kv_lora_rank.unwrap_or(0) as u64;
                let q = match self.q_lora_rank.unwrap_or(0) as u64 {
                    0 => h * heads * (nope + rope),
                    r => h * r + r + r * heads * (nope + rope),
                };
                q + h * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v) + heads * v * h
            }
            _ => {
                let d = self.head_dim as u64;
                h * heads * d + 2 * h * self.kv_heads as u64 * d + heads * d * h
            }
        };
        let dense_mlp = 3 * h * self.intermediate as u64;
        let layers = self.layers as u64;
        let mlp_total = if self.is_moe() {
            let dense_layers = self.dense_layers.unwrap_or(0) as u64;
            let e = self.experts.unwrap_or(0) as u64;
            let mi = self.moe_intermediate.unwrap_or(self.intermediate) as u64;
            let shared = self.shared_experts.unwrap_or(0) as u64;
            let moe = e * 3 * h * mi + h * e + shared * 3 * h * mi;
            dense_layers * dense_mlp + (layers - dense_layers) * moe
        } else {
            layers * dense_mlp
        };
        embed + head + layers * (attention + 2 * h) + mlp_total + h
    }

    /// A numeric field by its catalog name (used by derivations).
    pub fn field(&self, name: &str) -> Option<f64> {
        let v = match name {
            "params" => Some(self.params as f64),
            "active_params" => Some(self.active() as f64),
            "layers" => Some(self.layers as f64),
            "hidden" => Some(self.hidden as f64),
            "intermediate" => Some(self.intermediate as f64),
            "heads" => Some(self.heads as f64),
            "kv_heads" => Some(self.kv_heads as f64),
            "head_dim" => Some(self.head_dim as f64),
            "vocab" => Some(self.vocab as f64),
            "max_context" => Some(self.max_context as f64),
            "experts" => self.experts.map(f64::from),
            "experts_per_token" => self.experts_per_token.map(f64::from),
            "moe_intermediate" => self.moe_intermediate.map(f64::from),
            "shared_experts" => self.shared_experts.map(f64::from),
            "dense_layers" => self.dense_layers.map(f64::from),
            "kv_lora_rank" => self.kv_lora_rank.map(f64::from),
            "qk_rope_head_dim" => self.qk_rope_head_dim.map(f64::from),
            "qk_nope_head_dim" => self.qk_nope_head_dim.map(f64::from),
            "v_head_dim" => self.v_head_dim.map(f64::from),
            "q_lora_rank" => self.q_lora_rank.map(f64::from),
            _ => None,
        };
        v
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modality {
    Image,
    Video,
}
crate::string_enum!(Modality { Image = "image", Video = "video" });

/// Component roles of a diffusion pipeline.
pub const COMPONENT_ROLES: [&str; 8] = ["denoiser", "denoiser-2", "text-encoder", "text-encoder-2", "text-encoder-3", "vae", "image-encoder", "upsampler"];

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Component {
    pub role: String,
    pub name: String,
    pub params: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hidden: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heads: Option<u32>,
    pub source: Source,
}

/// A diffusion model's family: what the engine's per-architecture measurements and the pipelines'
/// defaults (size, frames, guidance, joint text tokens, allocator headroom) are keyed by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffusionFamily {
    /// Stable Diffusion 1.x (UNet).
    Sd15,
    /// Stable Diffusion XL (UNet).
    Sdxl,
    /// Stable Diffusion 3.x (MMDiT).
    Sd3,
    /// FLUX.1 (rectified-flow transformer, guidance-distilled).
    Flux,
    /// Wan 2.x (video DiT).
    Wan,
    /// HunyuanVideo (video transformer, guidance-distilled).
    HunyuanVideo,
}
crate::string_enum!(DiffusionFamily { Sd15 = "sd15", Sdxl = "sdxl", Sd3 = "sd3", Flux = "flux", Wan = "wan", HunyuanVideo = "hunyuanvideo" });

impl DiffusionFamily {
    /// UNet denoisers (their working set is measured per pixel, not per token).
    pub fn is_unet(self) -> bool {
        matches!(self, DiffusionFamily::Sd15 | DiffusionFamily::Sdxl)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diffusion {
    pub id: String,
    pub name: String,
    pub modality: Modality,
    pub family: DiffusionFamily,
    pub latent_channels: u32,
    pub spatial_compression: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal_compression: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patch_size: Option<u32>,
    pub components: Vec<Component>,
    pub source: Source,
}

impl Diffusion {
    pub fn component(&self, role: &str) -> Option<&Component> {
        self.components.iter().find(|c| c.role == role)
    }

    pub fn total_params(&self) -> u64 {
        self.components.iter().map(|c| c.params).sum()
    }

    pub fn field(&self, name: &str) -> Option<f64> {
        match name {
            "latent_channels" => Some(self.latent_channels as f64),
            "spatial_compression" => Some(self.spatial_compression as f64),
            "temporal_compression" => self.temporal_compression.map(f64::from),
            "patch_size" => self.patch_size.map(f64::from),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantFamily {
    Float,
    Int,
    GgufType,
    GgufScheme,
    Bnb,
    Awq,
    Gptq,
}
crate::string_enum!(QuantFamily { Float = "float", Int = "int", GgufType = "gguf-type", GgufScheme = "gguf-scheme", Bnb = "bnb", Awq = "awq", Gptq = "gptq" });

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Quant {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub family: QuantFamily,
    /// Bits per weight, block scales included.
    pub bits: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_elements: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_bytes: Option<u32>,
    /// `bits` is an average over a mix of block types.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approx: bool,
    pub source: Source,
}

impl Quant {
    pub fn bytes_per_weight(&self) -> f64 {
        self.bits / 8.0
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(feature = "slim"), serde(deny_unknown_fields))]
pub struct Flag {
    pub name: String,
    // The calculator's bundle (`slim`) reads only the name and the settings.
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub kind: String,
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub default: String,
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub effect: Text,
    #[cfg_attr(feature = "slim", serde(skip_deserializing, default = "slim_source"))]
    pub source: Source,
    /// How the calculator writes a workload field with this flag (`fit::setup`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sets: Vec<Sets>,
}

/// What a flag's source is in the calculator's bundle, which does not read it.
#[cfg(feature = "slim")]
fn slim_source() -> Source {
    Source::bare(crate::SourceKind::SourceCode, None)
}

/// One way a flag sets a calculator field, in the tool's own words: `write` is a template over
/// the workload (`{value}`: the field's value, through `values`; other names: `fit::setup`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sets {
    /// The workload field (a `fit::form::Field` name).
    pub field: String,
    /// Only for these workload kinds (empty: any the tool runs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kinds: Vec<String>,
    /// Where it goes: `env` (before the command), `args` (in the command), `lines` (a line of
    /// its own after it, e.g. a Modelfile parameter).
    pub at: String,
    pub write: String,
    /// Only for these values (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub when: Vec<String>,
    /// Nothing is written for these values (the tool's default).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
    /// The tool's word for a value (`fp16` → `f16`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub values: std::collections::BTreeMap<String, String>,
    /// What to write when the workload leaves the field out (empty: nothing).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fallback: String,
    /// The claims that say this setting does what the calculator assumes.
    pub claims: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(feature = "slim"), serde(deny_unknown_fields))]
pub struct Tool {
    pub id: String,
    pub name: String,
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub version: String,
    /// How the tool is started with its settings, per workload kind (`fit::setup`): `{env}` and
    /// `{args}` are the flags' settings, `{repo}` the model's Hugging Face repository, `{gguf}` a
    /// GGUF file name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub run: std::collections::BTreeMap<String, String>,
    /// What separates the settings in `{args}` (a space when empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub join: String,
    #[serde(default)]
    pub flags: Vec<Flag>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Seed {
    /// The file name in dataset/sources/seeds/.
    pub file: String,
    /// The file's SHA-256 (hex): `dataset check` holds the text to it.
    pub sha256: String,
    pub lang: crate::Lang,
    pub title: String,
    pub publisher: String,
    pub date: String,
}
