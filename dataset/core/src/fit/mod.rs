//! The fit engine: a workload in, a memory breakdown out, every term naming the claims it rests on.
//!
//! Terms are tensor memory (what PyTorch counts as allocated) except `cuda-context` (the driver
//! context, kernels and library handles, outside PyTorch's allocator) and `allocator-slack`
//! (memory the caching allocator holds but has not handed out at the peak). The mechanisms and
//! their constants are in the claims cited (dataset/data/claims/fit-engine.toml), measured with
//! dataset/measurements/harness on real GPUs.

pub mod accuracy;
pub mod diffusion;
pub mod query;
pub mod search;
mod llm;
mod training;
pub mod workload;

use serde::{Deserialize, Serialize};

pub use workload::*;
pub(crate) use llm::summary;

use crate::{Dataset, Quant};

pub const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
pub const MIB: f64 = 1024.0 * 1024.0;

/// One line of the breakdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Term {
    pub term: String,
    pub bytes: u64,
    pub claims: Vec<String>,
}

/// A GPU of the catalog the workload fits on, with what is left.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuFit {
    pub gpu: String,
    pub name: String,
    pub memory_bytes: u64,
    pub headroom_bytes: i64,
}

/// A change to the workload and what it saves.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lever {
    pub lever: String,
    /// The workload with the change applied.
    pub workload: serde_json::Value,
    pub peak_bytes: u64,
    pub saving_bytes: i64,
    /// What it costs: `quality`, `speed`, `capability` (shorter context, fewer trainable weights) or `throughput`.
    pub cost: String,
    pub claims: Vec<String>,
}

/// The LLM architecture a fit used and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Architecture {
    pub name: String,
    pub origin: crate::hf::ArchOrigin,
    pub params: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_params: Option<u64>,
    pub layers: u32,
    pub hidden: u32,
    pub heads: u32,
    pub kv_heads: u32,
    pub head_dim: u32,
    pub vocab: u32,
    pub tied_embeddings: bool,
    pub attention: crate::Attention,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts_per_token: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_layers: Option<u32>,
    pub max_context: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    pub workload: serde_json::Value,
    /// LLM workloads: the architecture used (catalog entry or the user's config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    /// Everything on the device at the peak: the sum of the breakdown.
    pub peak_bytes: u64,
    /// Tensor memory at the peak (what `torch.cuda.max_memory_allocated` reports).
    pub tensor_bytes: u64,
    pub breakdown: Vec<Term>,
    /// Catalog GPUs it fits on, most headroom last... sorted by memory ascending.
    pub fits: Vec<GpuFit>,
    pub levers: Vec<Lever>,
    /// Assumptions the engine made (defaults it filled in, engine-specific behaviour).
    pub notes: Vec<String>,
    /// The largest context/batch/size that fits a chosen card, and more (see [`search`]); only
    /// when a card was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<search::Answers>,
}

/// What the engine modules return before fits and levers are added.
pub(crate) struct Breakdown {
    pub terms: Vec<Term>,
    pub notes: Vec<String>,
    pub arch: Option<Architecture>,
}

impl Breakdown {
    pub fn new() -> Breakdown {
        Breakdown { terms: Vec::new(), notes: Vec::new(), arch: None }
    }

    pub fn add(&mut self, term: &str, bytes: f64, claims: &[&str]) {
        let bytes = bytes.max(0.0).round() as u64;
        if bytes == 0 && term != "allocator-slack" {
            return;
        }
        if let Some(t) = self.terms.iter_mut().find(|t| t.term == term) {
            t.bytes += bytes;
            for c in claims {
                if !t.claims.iter().any(|x| x == c) {
                    t.claims.push(c.to_string());
                }
            }
        } else {
            self.terms.push(Term { term: term.into(), bytes, claims: claims.iter().map(|s| s.to_string()).collect() });
        }
    }

    pub fn tensor_bytes(&self) -> u64 {
        self.terms.iter().filter(|t| t.term != "cuda-context" && t.term != "allocator-slack").map(|t| t.bytes).sum()
    }
}

/// A number the engine takes from a claim's value (so every constant has its evidence).
pub(crate) fn claim_number(ds: &Dataset, id: &str) -> Result<f64, String> {
    let c = ds.claim(id).ok_or_else(|| format!("the fit engine needs claim `{id}`, which the dataset lacks"))?;
    if c.verdict == crate::Verdict::Contradicted {
        return Err(format!("claim `{id}` is contradicted: its value is what was said, not what is true"));
    }
    let v = c.value.as_ref().ok_or_else(|| format!("claim `{id}` has no value"))?;
    let n = v.number.or(v.max).ok_or_else(|| format!("claim `{id}` has no number"))?;
    Ok(match v.unit.as_str() {
        "B" => n,
        "KB" => n * 1e3,
        "MB" => n * 1e6,
        "GB" => n * 1e9,
        "KiB" => n * 1024.0,
        "MiB" => n * MIB,
        "GiB" => n * GIB,
        _ => n,
    })
}

pub(crate) fn quant<'a>(ds: &'a Dataset, id: &str, field: &str) -> Result<&'a Quant, String> {
    ds.quant(id).ok_or_else(|| {
        let known: Vec<&str> = ds.quant.iter().map(|q| q.id.as_str()).collect();
        format!("field `{field}`: unknown format `{id}` (one of: {})", known.join(", "))
    })
}

/// Runtime overhead outside PyTorch's allocator, and the allocator's slack, common to every
/// PyTorch-based workload.
pub(crate) fn add_runtime(ds: &Dataset, b: &mut Breakdown, dynamic_bytes: f64) -> Result<(), String> {
    b.add("cuda-context", claim_number(ds, "fit-cuda-context-measured")?, &["fit-cuda-context-measured", "cuda-context-few-hundred-mb"]);
    let ratio = claim_number(ds, "fit-allocator-slack-measured")? / 100.0;
    b.add(
        "allocator-slack",
        dynamic_bytes * ratio,
        &["fit-allocator-slack-measured", "caching-allocator-keeps-freed-memory", "fragmentation-from-changing-shapes"],
    );
    Ok(())
}

/// The breakdown of one workload (no fits or levers).
pub(crate) fn breakdown(ds: &Dataset, w: &Workload) -> Result<Breakdown, String> {
    match w {
        Workload::LlmInference(l) => llm::breakdown(ds, l),
        Workload::Training(t) => training::breakdown(ds, t),
        Workload::Diffusion(d) => diffusion::breakdown(ds, d),
    }
}

fn total(b: &Breakdown) -> u64 {
    b.terms.iter().map(|t| t.bytes).sum()
}

/// Bytes of a GPU as the engine counts it: the vendor's nominal GB taken as GiB (what the driver
/// reports is within a few percent of that).
pub fn gpu_bytes(g: &crate::Gpu) -> u64 {
    (g.memory_gb * GIB) as u64
}

/// The full answer: breakdown, GPUs it fits on, levers.
pub fn fit(ds: &Dataset, w: &Workload) -> Result<Fit, String> {
    let b = breakdown(ds, w)?;
    let peak = total(&b);
    let mut gpus: Vec<&crate::Gpu> = ds.gpus.iter().collect();
    gpus.sort_by(|a, b| a.memory_gb.partial_cmp(&b.memory_gb).unwrap().then(a.id.cmp(&b.id)));
    let fits = gpus
        .iter()
        .filter(|g| gpu_bytes(g) >= peak)
        .map(|g| GpuFit {
            gpu: g.id.clone(),
            name: g.name.clone(),
            memory_bytes: gpu_bytes(g),
            headroom_bytes: gpu_bytes(g) as i64 - peak as i64,
        })
        .collect();
    let mut levers = Vec::new();
    for (name, cost, claims, alt) in levers_for(ds, w) {
        if let Ok(ab) = breakdown(ds, &alt) {
            let p = total(&ab);
            if p < peak {
                levers.push(Lever {
                    lever: name,
                    workload: alt.to_value(),
                    peak_bytes: p,
                    saving_bytes: peak as i64 - p as i64,
                    cost,
                    claims: claims.iter().map(|s| s.to_string()).collect(),
                });
            }
        }
    }
    levers.sort_by(|a, b| b.saving_bytes.cmp(&a.saving_bytes));
    Ok(Fit {
        workload: w.to_value(),
        architecture: b.arch.clone(),
        peak_bytes: peak,
        tensor_bytes: b.tensor_bytes(),
        breakdown: b.terms,
        fits,
        levers,
        notes: b.notes,
        answers: None,
    })
}

/// [`fit`] plus the answers for a card with `budget_bytes` free.
pub fn fit_on(ds: &Dataset, w: &Workload, budget_bytes: u64) -> Result<Fit, String> {
    let mut f = fit(ds, w)?;
    f.answers = Some(search::answers(ds, w, budget_bytes)?);
    Ok(f)
}

/// A card for `dataset fit --gpu`: a catalog id or a size such as `8GiB`, `12GB`, `24` (GiB).
pub fn budget(ds: &Dataset, gpu: &str, other_processes_gib: f64) -> Result<u64, String> {
    let total = match ds.gpu(gpu) {
        Some(g) => gpu_bytes(g) as f64,
        None => {
            let t = gpu.trim();
            let (num, mult) = if let Some(n) = t.strip_suffix("GiB") {
                (n, GIB)
            } else if let Some(n) = t.strip_suffix("GB") {
                (n, 1e9)
            } else {
                (t, GIB)
            };
            match num.trim().parse::<f64>() {
                Ok(x) if x > 0.0 && x.is_finite() => x * mult,
                _ => return Err(format!("`{gpu}` is neither a catalog GPU id nor a size such as 8GiB")),
            }
        }
    };
    if !(other_processes_gib >= 0.0 && other_processes_gib.is_finite()) {
        return Err("memory used by other processes must be 0 or more GiB".into());
    }
    let left = total - other_processes_gib * GIB;
    if left <= 0.0 {
        return Err("other processes already use the whole card".into());
    }
    Ok(left as u64)
}

type LeverSpec = (String, String, Vec<&'static str>, Workload);

/// Candidate changes for a workload; each is evaluated by running the engine on it.
fn levers_for(ds: &Dataset, w: &Workload) -> Vec<LeverSpec> {
    let mut out: Vec<LeverSpec> = Vec::new();
    match w {
        Workload::LlmInference(l) => {
            for (fmt, claims) in [
                ("fp8", vec!["fp8-halves-weights-native-ada-hopper-blackwell"]),
                ("Q8_0", vec!["llm-weights-8bit-8b-32b-70b"]),
                ("Q4_K_M", vec!["llm-weights-4bit-8b-32b-70b"]),
                ("awq-int4", vec!["awq-gptq-4bit-quarter-of-16bit"]),
            ] {
                if ds.quant(fmt).is_some() && !l.weights.eq_ignore_ascii_case(fmt) {
                    let mut alt = l.clone();
                    alt.weights = fmt.into();
                    out.push((format!("weights: {fmt}"), "quality".into(), claims, Workload::LlmInference(alt)));
                }
            }
            let kv = if matches!(l.engine, Engine::LlamaCpp | Engine::Ollama) { "q8_0" } else { "fp8" };
            if !l.kv_cache.eq_ignore_ascii_case(kv) && ds.quant(kv).is_some() {
                let mut alt = l.clone();
                alt.kv_cache = kv.into();
                out.push((
                    format!("kv_cache: {kv}"),
                    "quality".into(),
                    vec!["ollama-q8-kv-cache-halves-memory", "vllm-kv-cache-dtype-fp8-halves-cache"],
                    Workload::LlmInference(alt),
                ));
            }
            if l.context > 4096 {
                let mut alt = l.clone();
                alt.context = (l.context / 2).max(2048);
                out.push((
                    format!("context: {}", alt.context),
                    "capability".into(),
                    vec!["kv-cache-grows-with-context-and-users", "ollama-shorter-context-num-ctx"],
                    Workload::LlmInference(alt),
                ));
            }
            if l.batch > 1 {
                let mut alt = l.clone();
                alt.batch = 1;
                out.push(("batch: 1".into(), "throughput".into(), vec!["kv-cache-grows-with-context-and-users"], Workload::LlmInference(alt)));
            }
        }
        Workload::Training(t) => {
            if !t.gradient_checkpointing {
                let mut alt = t.clone();
                alt.gradient_checkpointing = true;
                out.push((
                    "gradient_checkpointing: true".into(),
                    "speed".into(),
                    vec!["training-gradient-checkpointing-cost", "training-hf-gradient-checkpointing-flag"],
                    Workload::Training(alt),
                ));
            }
            if t.optimizer == Optimizer::Adamw {
                let mut alt = t.clone();
                alt.optimizer = Optimizer::Adamw8bit;
                out.push(("optimizer: adamw-8bit".into(), "quality".into(), vec!["training-8bit-adamw-2-bytes-per-param"], Workload::Training(alt)));
            }
            if t.method != Method::Full && !t.gradient_checkpointing && t.lora_targets == LoraTargets::AllLinear {
                // Adapters on the attention projections only: the MLP keeps no inputs for backward.
                let mut alt = t.clone();
                alt.lora_targets = LoraTargets::Attention;
                out.push((
                    "lora_targets: attention".into(),
                    "capability".into(),
                    vec!["fit-training-lora-untargeted-inputs", "guide-own-model-peft-default-lora-targets"],
                    Workload::Training(alt),
                ));
            }
            if t.method == Method::Full {
                let mut alt = t.clone();
                alt.method = Method::Lora;
                out.push(("method: lora".into(), "capability".into(), vec!["training-fsdp-zero-shard-model-states"], Workload::Training(alt)));
                let mut alt = t.clone();
                alt.method = Method::Qlora;
                out.push(("method: qlora".into(), "capability".into(), vec!["training-qlora-loads-base-in-4bit"], Workload::Training(alt)));
            }
            if t.batch > 1 {
                let mut alt = t.clone();
                alt.batch = 1;
                out.push((
                    "batch: 1 (with gradient accumulation)".into(),
                    "speed".into(),
                    vec!["training-gradient-accumulation-same-effective-batch"],
                    Workload::Training(alt),
                ));
            }
        }
        Workload::Diffusion(d) => {
            for fmt in ["fp8", "Q8_0", "Q4_K_S"] {
                if ds.quant(fmt).is_some() && !d.precision.eq_ignore_ascii_case(fmt) {
                    let mut alt = d.clone();
                    alt.precision = fmt.into();
                    out.push((format!("precision: {fmt}"), "quality".into(), vec!["flux-dev-weights-16bit-24gb-fp8-12gb", "flux-gguf-levels-card-fit"], Workload::Diffusion(alt)));
                }
            }
            if d.text_encoders == Placement::Gpu {
                let mut alt = d.clone();
                alt.text_encoders = Placement::Cpu;
                out.push(("text_encoders: cpu".into(), "speed".into(), vec!["comfyui-lowvram-reserve-vram"], Workload::Diffusion(alt)));
            }
            if !d.tiled_vae {
                let mut alt = d.clone();
                alt.tiled_vae = true;
                out.push(("tiled_vae: true".into(), "speed".into(), vec!["comfyui-vae-decode-tiled"], Workload::Diffusion(alt)));
            }
            if d.offload == Offload::None {
                let mut alt = d.clone();
                alt.offload = Offload::Model;
                out.push(("offload: model".into(), "speed".into(), vec!["comfyui-keeps-models-loaded"], Workload::Diffusion(alt)));
            }
            if d.block_swap == 0 {
                let mut alt = d.clone();
                alt.block_swap = 16;
                out.push(("block_swap: 16".into(), "speed".into(), vec!["flux-blocks-to-swap-moves-weights", "wan-wrapper-block-swap"], Workload::Diffusion(alt)));
            }
            if d.batch > 1 {
                let mut alt = d.clone();
                alt.batch = 1;
                out.push(("batch: 1".into(), "throughput".into(), vec!["batch-vs-sequential-activations"], Workload::Diffusion(alt)));
            }
        }
    }
    out
}

/// Reads one workload or an array of them (the `dataset fit --input` format).
pub fn parse_input(text: &str) -> Result<Vec<Workload>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("input is not JSON: {e}"))?;
    match v {
        serde_json::Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| Workload::from_value(item).map_err(|e| format!("workload [{i}]: {e}")))
            .collect(),
        other => Ok(vec![Workload::from_value(&other)?]),
    }
}
