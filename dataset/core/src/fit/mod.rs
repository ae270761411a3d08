//! The fit engine: a workload in, a memory breakdown out, every term naming the claims it rests on.
//!
//! Terms are tensor memory (what PyTorch counts as allocated) except `cuda-context` (the driver
//! context, kernels and library handles, outside PyTorch's allocator) and `allocator-headroom`
//! (what the caching allocator needs beyond the live tensors to finish under a memory cap: the
//! total is what a card must have for the run, measured in dataset/measurements/capped/). The mechanisms and
//! their constants are in the claims cited (dataset/data/claims/fit-engine.toml), measured with
//! dataset/measurements/harness on real GPUs.

pub mod accuracy;
pub mod diffusion;
pub mod form;
pub mod levers;
pub mod llamacpp;
mod llm;
pub mod query;
pub mod search;
pub mod setup;
mod training;
pub mod workload;

use serde::{Deserialize, Serialize};

pub(crate) use llm::summary;
pub use workload::*;

use crate::{Dataset, Quant};

pub use crate::units::{GIB, MIB};

/// What a lever costs: output quality, speed, capability (a shorter context, fewer trainable
/// weights) or throughput. The site labels every variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    Quality,
    Speed,
    Capability,
    Throughput,
}
crate::string_enum!(Cost { Quality = "quality", Speed = "speed", Capability = "capability", Throughput = "throughput" });

/// What a term of a breakdown is. Serialised as its id (`kv-cache`); the site labels every
/// variant in every language, so a new term without labels does not compile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TermId {
    Weights,
    KvCache,
    Activations,
    Logits,
    Workspace,
    CudaContext,
    AllocatorHeadroom,
    Gradients,
    OptimizerStates,
    OptimizerStep,
    TextEncoderWeights,
    VaeWeights,
    ComputeBuffer,
    GpuMemoryUtilizationHeadroom,
    Zero3GatheredLayer,
    DequantizedLayer,
    AttentionMask,
    SoftmaxCopy,
    PipelineCopies,
    DdpGradientBuckets,
    FsdpGatheredLayers,
    ZeroOffload,
    ZeroReduceBucket,
}
crate::string_enum!(TermId { Weights = "weights", KvCache = "kv-cache", Activations = "activations", Logits = "logits", Workspace = "workspace", CudaContext = "cuda-context", AllocatorHeadroom = "allocator-headroom", Gradients = "gradients", OptimizerStates = "optimizer-states", OptimizerStep = "optimizer-step", TextEncoderWeights = "text-encoder-weights", VaeWeights = "vae-weights", ComputeBuffer = "compute-buffer", GpuMemoryUtilizationHeadroom = "gpu-memory-utilization-headroom", Zero3GatheredLayer = "zero3-gathered-layer", DequantizedLayer = "dequantized-layer", AttentionMask = "attention-mask", SoftmaxCopy = "softmax-copy", PipelineCopies = "pipeline-copies", DdpGradientBuckets = "ddp-gradient-buckets", FsdpGatheredLayers = "fsdp-gathered-layers", ZeroOffload = "zero-offload", ZeroReduceBucket = "zero-reduce-bucket" });

impl PartialEq<&str> for TermId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Display for TermId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of the breakdown.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Term {
    pub term: TermId,
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
    /// The changes as text (`weights: Q4_K_M, text_encoder_precision: bf16`).
    pub lever: String,
    /// The same changes, field by field.
    pub changes: Vec<levers::Change>,
    /// The workload with the change applied.
    pub workload: serde_json::Value,
    pub peak_bytes: u64,
    pub saving_bytes: i64,
    /// What it costs.
    pub cost: Cost,
    pub claims: Vec<String>,
    /// With a card: whether the workload fits it with this lever alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fits: Option<bool>,
}

/// The card a fit is for: a catalog GPU or a size the user typed, less what other processes use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// As given: a catalog id or a size (`12GB`, `16GiB`, `24`).
    pub spec: String,
    pub name: String,
    pub memory_bytes: u64,
    /// Memory other processes already use on it.
    pub other_bytes: u64,
    /// System RAM the workload may use, when the user gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram_bytes: Option<u64>,
    /// Unified memory (Apple silicon): what the GPU may use of `memory_bytes` by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_limit_bytes: Option<u64>,
}

/// The verdict for the card: the budget and what is left of it (negative: short by that much).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub card: Card,
    pub budget_bytes: u64,
    pub spare_bytes: i64,
    pub fits: bool,
    /// With the system RAM given and a workload that keeps something there: whether it holds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ram: Option<RamVerdict>,
    /// With several GPUs: each card's verdict (`card`, `budget_bytes`, `spare_bytes` above are the
    /// binding card's; `fits` is whether every card holds its share).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuVerdict>,
    /// With several GPUs: which card runs out first (or has the least spare).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limiting: Option<usize>,
}

/// Whether system RAM holds what the workload keeps there (negative spare: short by that much).
/// On unified memory `ram_bytes` is what the memory has left beside the GPU's peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RamVerdict {
    pub ram_bytes: u64,
    pub host_bytes: u64,
    pub spare_bytes: i64,
    pub fits: bool,
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
    /// With several GPUs: what each one holds at the peak (`breakdown` and `peak_bytes` are then
    /// the binding GPU's: the one with the least spare, or the most memory without cards).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<DeviceFit>,
    /// What the workload holds in system RAM at the same time (weights and caches kept off the
    /// GPU, offloaded components, buffers), term by term; empty when nothing is kept there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host: Vec<Term>,
    /// The sum of `host`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub host_bytes: u64,
    /// Catalog GPUs it fits on, most headroom last... sorted by memory ascending.
    pub fits: Vec<GpuFit>,
    pub levers: Vec<Lever>,
    /// Assumptions the engine made (defaults it filled in, engine-specific behaviour).
    pub notes: Vec<Note>,
    /// The largest context/batch/size that fits a chosen card, and more (see [`search`]); only
    /// when a card was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<search::Answers>,
    /// With a card: fits or not, and by how much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// With a card it does not fit: the cheapest combination of levers that fits (absent when
    /// nothing the levers reach fits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<levers::Plan>,
}

/// One GPU of several and what it holds at the peak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceFit {
    /// Its position among the GPUs (llama.cpp's device order, the data-parallel rank).
    pub gpu: usize,
    pub peak_bytes: u64,
    pub breakdown: Vec<Term>,
}

/// One card of several: its budget against what its GPU holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuVerdict {
    pub card: Card,
    pub budget_bytes: u64,
    pub peak_bytes: u64,
    pub spare_bytes: i64,
    pub fits: bool,
}

/// An assumption or remark of the engine: `id` names it (the site shows it in the reader's
/// language from `note.<id>` with `values`), `text` is the English sentence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub id: String,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub values: std::collections::BTreeMap<String, String>,
    pub text: String,
}

/// What the engine modules return before fits and levers are added.
pub(crate) struct Breakdown {
    pub terms: Vec<Term>,
    /// What is held in system RAM (see [`Fit::host`]).
    pub host: Vec<Term>,
    pub notes: Vec<Note>,
    pub arch: Option<Architecture>,
    /// Only the peak is wanted (the searches over the engine): notes are not written.
    pub quiet: bool,
    /// With several GPUs, each GPU's terms; [`settle`] then makes `terms` the binding GPU's.
    pub devices: Vec<Vec<Term>>,
    /// Which of `devices` runs out first (the least spare, or the most memory without cards).
    pub binding: usize,
}

impl Breakdown {
    pub fn new() -> Breakdown {
        Breakdown { terms: Vec::new(), host: Vec::new(), notes: Vec::new(), arch: None, quiet: false, devices: Vec::new(), binding: 0 }
    }

    pub fn add(&mut self, term: TermId, bytes: f64, claims: &[&str]) {
        put(&mut self.terms, term, bytes, claims);
    }

    /// Adds to what the workload holds in system RAM.
    pub fn add_host(&mut self, term: TermId, bytes: f64, claims: &[&str]) {
        put(&mut self.host, term, bytes, claims);
    }

    /// Adds a note: `text` with `{name}` placeholders filled from `values`.
    pub fn note(&mut self, id: &str, values: &[(&str, String)], text: &str) {
        if self.quiet {
            return;
        }
        let mut t = text.to_string();
        for (k, v) in values {
            t = t.replace(&format!("{{{k}}}"), v);
        }
        // Inserted one by one: collecting into a map would sort, and each sort costs the browser
        // bundle a few KB.
        let mut kv = std::collections::BTreeMap::new();
        for (k, v) in values {
            kv.insert(k.to_string(), v.clone());
        }
        self.notes.push(Note { id: id.into(), values: kv, text: t });
    }

    pub fn host_bytes(&self) -> u64 {
        self.host.iter().map(|t| t.bytes).sum()
    }

    pub fn tensor_bytes(&self) -> u64 {
        self.terms.iter().filter(|t| t.term != "cuda-context" && t.term != "allocator-headroom").map(|t| t.bytes).sum()
    }
}

/// Adds `bytes` to `term` in `terms` (a new term at the end), with its claims.
fn put(terms: &mut Vec<Term>, term: TermId, bytes: f64, claims: &[&str]) {
    let bytes = bytes.max(0.0).round() as u64;
    if bytes == 0 && term != TermId::AllocatorHeadroom {
        return;
    }
    if let Some(t) = terms.iter_mut().find(|t| t.term == term) {
        t.bytes += bytes;
        for c in claims {
            if !t.claims.iter().any(|x| x == c) {
                t.claims.push(c.to_string());
            }
        }
    } else {
        terms.push(Term { term, bytes, claims: claims.iter().map(|s| s.to_string()).collect() });
    }
}

/// With several GPUs: picks the binding GPU, the one with the least spare against `budgets` (one
/// per GPU; empty: the one holding the most) and makes its terms the breakdown's.
fn settle(b: &mut Breakdown, budgets: &[u64]) {
    if b.devices.is_empty() {
        return;
    }
    let mut best = (i128::MIN, 0);
    for (i, d) in b.devices.iter().enumerate() {
        let need = d.iter().map(|t| t.bytes as i128).sum::<i128>() - budgets.get(i).map_or(0, |&x| x as i128);
        if need > best.0 {
            best = (need, i);
        }
    }
    b.binding = best.1;
    b.terms = b.devices[best.1].clone();
}

/// What the searches compare against a budget: the peak; with several cards of different sizes,
/// the binding GPU's shortfall counted against the largest card (the busiest GPU's peak plus how
/// much smaller its card is), so that "within the largest card's budget" means every GPU fits.
fn scalar(b: &Breakdown, budgets: &[u64]) -> u64 {
    match budgets.iter().max() {
        Some(&top) if b.devices.len() > 1 => {
            let need = total(b) as i128 - budgets.get(b.binding).copied().unwrap_or(top) as i128;
            (need + top as i128).max(0) as u64
        }
        _ => total(b),
    }
}

/// GPUs a workload may name: at least one, and no more than any one job spreads over (the
/// per-GPU breakdowns are kept one by one).
pub(crate) const MAX_GPUS: u64 = 4096;

pub(crate) fn check_gpus(n: u64) -> Result<(), String> {
    if n == 0 {
        return Err(crate::messages::say("at-least-one", &[("field", "gpus")]));
    }
    if n > MAX_GPUS {
        return Err(crate::messages::say("gpus-too-many", &[("gpus", &n.to_string()), ("max", &MAX_GPUS.to_string())]));
    }
    Ok(())
}

pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A number the engine takes from a claim's value (so every constant has its evidence).
pub(crate) fn claim_number(ds: &Dataset, id: &str) -> Result<f64, String> {
    let c = ds.claim(id).ok_or_else(|| format!("the fit engine needs claim `{id}`, which the dataset lacks"))?;
    if c.verdict == crate::Verdict::Contradicted {
        return Err(format!("claim `{id}` is contradicted: its value is what was said, not what is true"));
    }
    let v = c.value.as_ref().ok_or_else(|| format!("claim `{id}` has no value"))?;
    let n = v.number.or(v.max).ok_or_else(|| format!("claim `{id}` has no number"))?;
    // Sizes in bytes; other units (counts, shares, bytes per parameter) as they are.
    Ok(n * crate::units::bytes_per(&v.unit).unwrap_or(1.0))
}

pub(crate) fn quant<'a>(ds: &'a Dataset, id: &str, field: &str) -> Result<&'a Quant, String> {
    ds.quant(id).ok_or_else(|| {
        let known: Vec<&str> = ds.quant.iter().map(|q| q.id.as_str()).collect();
        format!("field `{field}`: unknown format `{id}` (one of: {})", known.join(", "))
    })
}

/// Runtime memory beyond the tensors, common to every PyTorch-based workload: the CUDA context
/// (outside the allocator) and the allocator's headroom, what the caching allocator needs beyond
/// the live tensors to finish the run under a cap (block rounding, fragmentation, kernel
/// workspaces): `base_claim` GiB plus `share_claim` percent of `transient_bytes`, both measured
/// as the smallest total each reference case ran in (dataset/measurements/capped/).
pub(crate) fn add_runtime(ds: &Dataset, b: &mut Breakdown, transient_bytes: f64, base_claim: Option<&str>, share_claim: Option<&str>) -> Result<(), String> {
    b.add(TermId::CudaContext, claim_number(ds, "fit-cuda-context-measured")?, &["fit-cuda-context-measured", "cuda-context-few-hundred-mb"]);
    let base = base_claim.map(|c| claim_number(ds, c)).transpose()?.unwrap_or(0.0);
    let share = share_claim.map(|c| claim_number(ds, c)).transpose()?.unwrap_or(0.0) / 100.0;
    let mut claims: Vec<&str> = base_claim.into_iter().chain(share_claim).collect();
    claims.push("fragmentation-from-changing-shapes");
    b.add(TermId::AllocatorHeadroom, base + transient_bytes * share, &claims);
    Ok(())
}

/// The breakdown of one workload (no fits or levers).
pub(crate) fn breakdown(ds: &Dataset, w: &Workload) -> Result<Breakdown, String> {
    let mut b = match w {
        Workload::LlmInference(l) => llm::breakdown(ds, l),
        Workload::Training(t) => training::breakdown(ds, t),
        Workload::Diffusion(d) => diffusion::breakdown(ds, d),
    }?;
    settle(&mut b, w.card_budgets());
    Ok(b)
}

/// The peak alone (what the searches over the engine need): the same breakdown, without the
/// notes and claim lookups that only the shown result needs.
pub(crate) fn peak_of(ds: &Dataset, w: &Workload) -> Option<u64> {
    usage_of(ds, w).map(|u| u.0)
}

/// The peak on the GPU and what is held in system RAM, the same way as [`peak_of`].
pub(crate) fn usage_of(ds: &Dataset, w: &Workload) -> Option<(u64, u64)> {
    let b = match w {
        Workload::LlmInference(l) => llm::breakdown_with(ds, l, false),
        Workload::Training(t) => training::breakdown_with(ds, t, false),
        Workload::Diffusion(d) => diffusion::breakdown_with(ds, d, false),
    };
    let mut b = b.ok()?;
    settle(&mut b, w.card_budgets());
    Some((scalar(&b, w.card_budgets()), b.host_bytes()))
}

fn total(b: &Breakdown) -> u64 {
    b.terms.iter().map(|t| t.bytes).sum()
}

/// Bytes of a GPU as the engine counts it: the vendor's nominal GB taken as GiB (what the driver
/// reports is within a few percent of that).
pub fn gpu_bytes(g: &crate::Gpu) -> u64 {
    (g.memory_gb * GIB) as u64
}

/// What the GPU may use of a catalog card by default: the whole memory, except on Apple silicon,
/// where macOS lets the GPU wire only a share of the unified memory (claims
/// `apple-gpu-working-set-up-to-32gb` and `apple-gpu-working-set-above-32gb`; the rest stays for
/// the system and other programs).
pub fn gpu_limit_bytes(ds: &Dataset, g: &crate::Gpu) -> Result<u64, String> {
    if g.vendor != crate::Vendor::Apple {
        return Ok(gpu_bytes(g));
    }
    unified_limit_bytes(ds, g.memory_gb)
}

/// The GPU's default share of `memory_gb` GB of unified memory (Apple's GB, taken as GiB as for
/// every catalog card).
fn unified_limit_bytes(ds: &Dataset, memory_gb: f64) -> Result<u64, String> {
    let claim = if memory_gb <= 32.0 { "apple-gpu-working-set-up-to-32gb" } else { "apple-gpu-working-set-above-32gb" };
    Ok((memory_gb * GIB * claim_number(ds, claim)? / 100.0) as u64)
}

/// What a desktop session and a browser commonly hold of a card that drives the display (claim
/// `desktop-and-browser-hold-about-half-a-gib`): a card that fits with less than this to spare is
/// a close call on such a machine.
pub const THIN_MARGIN_CLAIM: &str = "desktop-and-browser-hold-about-half-a-gib";

/// The caution beside the calculator's levers: none of them sets a PyTorch allocator option, and
/// a reader who sets `max_split_size_mb` together with `expandable_segments:True` can see reserved
/// memory keep growing past the estimate (pytorch/pytorch#193400). Named here so the calculator's
/// data keeps its statement; the allocator lab warns with the same claim
/// (`headroom_alloc::config::MAX_SPLIT_WITH_EXPANDABLE_CLAIM`).
pub const MAX_SPLIT_WITH_EXPANDABLE_CLAIM: &str = "expandable-with-max-split-reserved-keeps-growing";

/// [`THIN_MARGIN_CLAIM`]'s bytes (the allocator lab recommends a setting that keeps them).
pub fn thin_margin_bytes(ds: &Dataset) -> Option<u64> {
    claim_number(ds, THIN_MARGIN_CLAIM).ok().map(|b| b as u64)
}

/// A note when `v` fits with less to spare than [`THIN_MARGIN_CLAIM`]'s bytes: how much is spare,
/// that margin, and what other processes were already counted.
pub fn thin_margin(ds: &Dataset, v: &Verdict) -> Option<Note> {
    thin_margin_of(ds, v.spare_bytes, v.card.other_bytes)
}

/// [`thin_margin`] for a spare of `spare_bytes` (a plan's, say) with `other_bytes` already counted.
pub fn thin_margin_of(ds: &Dataset, spare_bytes: i64, other_bytes: u64) -> Option<Note> {
    let margin = thin_margin_bytes(ds)? as i64;
    if !(0..margin).contains(&spare_bytes) {
        return None;
    }
    let mut values = std::collections::BTreeMap::new();
    values.insert("spare".to_string(), spare_bytes.to_string());
    values.insert("margin".to_string(), margin.to_string());
    values.insert("other".to_string(), other_bytes.to_string());
    Some(Note {
        id: "thin-margin".into(),
        text: format!(
            "Only {spare_bytes} bytes to spare: on a card that also drives the display, the desktop and a browser commonly hold about {margin} bytes, and a second program more. Count what they use as other processes (nvidia-smi lists them; {other_bytes} bytes are counted now)."
        ),
        values,
    })
}

/// The prefix of a card spec that names a Mac by its memory size (`apple:32`): unified memory,
/// judged as the catalog's Macs are.
pub const APPLE_SIZE_PREFIX: &str = "apple:";

/// What a PyTorch process holds on a GPU before its first tensor (the allocator lab counts it as
/// taken before a replay starts): where probe reports for the GPU were aggregated, the GPU's
/// bytes less their median usable capacity; else the CUDA context of claim
/// `fit-cuda-context-measured`. Bytes, and what they come from: the aggregate's key or the claim
/// id.
pub fn process_context(ds: &Dataset, gpu: Option<&crate::Gpu>) -> Result<(u64, String), String> {
    if let Some(g) = gpu
        && let Some(a) = ds.aggregate(&format!("{}/usable_bytes", g.id))
        && a.median > 0.0
        && (a.median as u64) < gpu_bytes(g)
    {
        return Ok((gpu_bytes(g) - a.median as u64, a.key()));
    }
    let id = "fit-cuda-context-measured";
    Ok((claim_number(ds, id)? as u64, id.to_string()))
}

/// The full answer: breakdown, GPUs it fits on, levers.
pub fn fit(ds: &Dataset, w: &Workload) -> Result<Fit, String> {
    fit_with(ds, w).map(|(f, _)| f)
}

/// [`fit`] and what the searches compare against a budget (see [`scalar`]).
fn fit_with(ds: &Dataset, w: &Workload) -> Result<(Fit, u64), String> {
    let b = breakdown(ds, w)?;
    let peak = total(&b);
    let need = scalar(&b, w.card_budgets());
    let mut gpus: Vec<&crate::Gpu> = ds.gpus.iter().collect();
    crate::sort_short_by(&mut gpus, |a, b| a.memory_gb.partial_cmp(&b.memory_gb).unwrap().then(a.id.cmp(&b.id)));
    // With several GPUs: the catalog GPUs of which that many hold every share.
    let mut fits = Vec::new();
    for g in gpus {
        let limit = gpu_limit_bytes(ds, g)?;
        if limit >= peak {
            fits.push(GpuFit { gpu: g.id.clone(), name: g.name.clone(), memory_bytes: gpu_bytes(g), headroom_bytes: limit as i64 - peak as i64 });
        }
    }
    let levers = levers::levers(ds, w, need, None, false);
    let devices = if b.devices.len() > 1 {
        b.devices.iter().enumerate().map(|(gpu, terms)| DeviceFit { gpu, peak_bytes: terms.iter().map(|t| t.bytes).sum(), breakdown: terms.clone() }).collect()
    } else {
        Vec::new()
    };
    Ok((
        Fit {
            workload: w.to_value(),
            architecture: b.arch.clone(),
            peak_bytes: peak,
            tensor_bytes: b.tensor_bytes(),
            host_bytes: b.host_bytes(),
            breakdown: b.terms,
            devices,
            host: b.host,
            fits,
            levers,
            notes: b.notes,
            answers: None,
            verdict: None,
            plan: None,
        },
        need,
    ))
}

/// [`fit`] for a card: the verdict, levers that say whether each alone fits, the plan when it does
/// not fit, and the answers (largest context, batch, …) for that card. With `gpus` above 1 in
/// the workload, that many of this card.
pub fn fit_on(ds: &Dataset, w: &Workload, card: &Card) -> Result<Fit, String> {
    fit_on_cards(ds, w, std::slice::from_ref(card))
}

/// Whether a claim can be a model's evidence: it exists and is scoped to no model or to this one.
pub(crate) fn about_model(ds: &Dataset, id: &str, model: &str) -> bool {
    ds.claim(id).is_some_and(|c| c.models.is_empty() || c.models.iter().any(|m| m == model))
}

/// [`fit_on`] for several cards in one machine, in the engine's device order: the workload is
/// spread over all of them (its `gpus` must be 1 or their number), each card gets its verdict,
/// and the levers, plan and answers are for every card holding its share.
pub fn fit_on_cards(ds: &Dataset, w: &Workload, cards: &[Card]) -> Result<Fit, String> {
    let Some(first) = cards.first() else {
        return Err("name at least one card".into());
    };
    let mut w = w.clone();
    check_gpus(w.gpus().max(1))?;
    let n = w.gpus() as usize;
    let cards: Vec<Card> = if cards.len() == 1 {
        vec![first.clone(); n.max(1)]
    } else if n == 1 || n == cards.len() {
        if matches!(w, Workload::Diffusion(_)) {
            return Err(crate::messages::say("gpus-diffusion", &[]));
        }
        w.set_gpus(cards.len() as u64);
        cards.to_vec()
    } else {
        return Err(crate::messages::say("gpus-cards", &[("gpus", &n.to_string()), ("cards", &cards.len().to_string())]));
    };
    if cards.len() > 1 {
        w.set_card_budgets(cards.iter().map(Card::budget_bytes).collect());
    }
    let (mut f, need) = fit_with(ds, &w)?;
    let binding = f.devices.iter().zip(&cards).enumerate().min_by_key(|(_, (d, c))| c.budget_bytes() as i128 - d.peak_bytes as i128).map_or(0, |(i, _)| i);
    let card = &cards[binding];
    // The searches count against the largest card (see `scalar`); with one card, that card.
    let budget = cards.iter().map(Card::budget_bytes).max().unwrap_or(0);
    // Unified memory (Apple silicon): no lever moves anything "to system RAM", and the plan keeps
    // the GPU's peak and what stays in host memory within the Mac's memory together.
    let unified = card.gpu_limit_bytes.is_some();
    f.levers = levers::levers(ds, &w, need, Some(budget), unified);
    let plan_ram = if unified { Some(card.ram_bytes.unwrap_or(card.memory_bytes).saturating_sub(card.other_bytes)) } else { card.ram_bytes };
    f.plan = levers::plan(ds, &w, (need, f.host_bytes), budget, plan_ram, unified);
    let mut v = Verdict::of(card, f.peak_bytes);
    if cards.len() > 1 {
        v.gpus = f
            .devices
            .iter()
            .zip(&cards)
            .map(|(d, c)| GpuVerdict {
                card: c.clone(),
                budget_bytes: c.budget_bytes(),
                peak_bytes: d.peak_bytes,
                spare_bytes: c.budget_bytes() as i64 - d.peak_bytes as i64,
                fits: d.peak_bytes <= c.budget_bytes(),
            })
            .collect();
        v.fits = v.gpus.iter().all(|g| g.fits);
        v.limiting = Some(binding);
    }
    // Unified memory (Apple silicon): what the process keeps "in system RAM" comes out of the same
    // memory, beside what the GPU uses; there the RAM is the Mac's memory unless given.
    let ram = match card.gpu_limit_bytes {
        Some(_) => Some(card.ram_bytes.unwrap_or(card.memory_bytes).saturating_sub(f.peak_bytes + card.other_bytes)),
        None => card.ram_bytes,
    };
    v.ram = ram.filter(|_| f.host_bytes > 0).map(|ram| RamVerdict {
        ram_bytes: ram,
        host_bytes: f.host_bytes,
        spare_bytes: ram as i64 - f.host_bytes as i64,
        fits: f.host_bytes <= ram,
    });
    let thin = thin_margin(ds, &v);
    f.verdict = Some(v);
    f.notes.extend(thin);
    if let Some(limit) = card.gpu_limit_bytes {
        // Unified memory: the GPU's default share, and how to raise it (claims
        // `apple-gpu-working-set-*`, `apple-wired-limit-sysctl`).
        let mut values = std::collections::BTreeMap::new();
        values.insert("card".to_string(), card.name.clone());
        values.insert("limit".to_string(), limit.to_string());
        values.insert("left".to_string(), (card.memory_bytes - limit).to_string());
        f.notes.push(Note {
            id: "apple-card".into(),
            text: format!("On the {} the GPU shares the memory with macOS: by default it may use about {limit} bytes, and {} stay for the system and other programs. On macOS 15 or newer sudo sysctl iogpu.wired_limit_mb=N raises the limit; llama.cpp prints the real one at start (recommendedMaxWorkingSetSize). The runtime's own memory was measured on NVIDIA GPUs, not on Metal.", card.name, card.memory_bytes - limit),
            values,
        });
    }
    if let Some(g) = ds.gpu(&card.spec).filter(|g| g.vendor == crate::Vendor::Amd) {
        // The same allocator (claim `pytorch-rocm-same-caching-allocator`); the runtime terms
        // were measured under CUDA.
        // Inserted, not collected: collecting into a map sorts, and a sort costs the browser
        // bundle a few KB.
        let mut values = std::collections::BTreeMap::new();
        values.insert("card".to_string(), g.name.clone());
        f.notes.push(Note {
            id: "rocm-card".into(),
            values,
            text: format!("The {} runs ROCm: PyTorch keeps the same caching allocator there (PYTORCH_CUDA_ALLOC_CONF, or PYTORCH_HIP_ALLOC_CONF when that is unset), and llama.cpp the same buffers; the runtime's own memory was measured on NVIDIA GPUs, not under ROCm.", g.name),
        });
    }
    f.answers = Some(search::answers(ds, &w, budget, unified)?);
    if cards.len() > 1 {
        show_binding_peaks(ds, &w, &mut f);
    }
    Ok(f)
}

/// With several cards the searches compare what each change needs against the largest card (see
/// [`scalar`]); what the levers, the plan and the answers show is the binding GPU's own peak.
fn show_binding_peaks(ds: &Dataset, w: &Workload, f: &mut Fit) {
    let peak = |changes: &[(&str, serde_json::Value)]| {
        let mut c = w.clone();
        for (field, v) in changes {
            levers::set(&mut c, field, v);
        }
        // The binding GPU's peak, and what its own card has left (the least spare of all).
        breakdown(ds, &c).ok().map(|b| {
            let p = total(&b);
            (p, w.card_budgets().get(b.binding).map_or(0, |&x| x as i64) - p as i64)
        })
    };
    let of = |changes: &[levers::Change]| peak(&changes.iter().map(|c| (c.field.as_str(), c.value.clone())).collect::<Vec<_>>());
    for l in &mut f.levers {
        if let Some((p, _)) = of(&l.changes) {
            l.peak_bytes = p;
            l.saving_bytes = f.peak_bytes as i64 - p as i64;
        }
    }
    if let Some(plan) = &mut f.plan
        && let Some((p, spare)) = of(&plan.changes)
    {
        plan.peak_bytes = p;
        plan.spare_bytes = spare;
    }
    let Some(a) = &mut f.answers else { return };
    for (field, l) in [("context", &mut a.max_context), ("batch", &mut a.max_batch), ("seq", &mut a.max_seq)] {
        if let Some(l) = l
            && let Some((p, _)) = peak(&[(field, l.value.into())])
        {
            l.peak_bytes = p;
        }
    }
    if let Some(g) = &mut a.gpu_layers
        && let Some((p, _)) = peak(&[("gpu_layers", g.layers.into())])
    {
        g.peak_bytes = p;
    }
    if let Some(b) = &mut a.best_weights
        && let Some((p, _)) = peak(&[("weights", b.format.clone().into())])
    {
        b.peak_bytes = p;
    }
}

impl Verdict {
    /// The verdict for a peak on a card.
    pub fn of(card: &Card, peak_bytes: u64) -> Verdict {
        let budget = card.budget_bytes();
        Verdict {
            card: card.clone(),
            budget_bytes: budget,
            spare_bytes: budget as i64 - peak_bytes as i64,
            fits: peak_bytes <= budget,
            ram: None,
            gpus: Vec::new(),
            limiting: None,
        }
    }
}

impl Card {
    /// A catalog id or a size such as `8GiB`, `12GB`, `24` (GiB), with `other_processes_gib` in use.
    pub fn parse(ds: &Dataset, spec: &str, other_processes_gib: f64) -> Result<Card, String> {
        let spec = spec.trim();
        let mut limit = None;
        let (name, total) = match ds.gpu(spec) {
            Some(g) => {
                if g.vendor == crate::Vendor::Apple {
                    limit = Some(gpu_limit_bytes(ds, g)?);
                }
                (g.name.clone(), gpu_bytes(g) as f64)
            }
            None => {
                // A size in GiB or GB (a bare number is GiB); `apple:` before it, a Mac's unified
                // memory in Apple's GB (taken as GiB, as the catalog's Macs are).
                let (apple, size) = match spec.strip_prefix(APPLE_SIZE_PREFIX) {
                    Some(rest) => (true, rest.trim()),
                    None => (false, spec),
                };
                let (num, unit) = ["GiB", "GB"].iter().find_map(|u| size.strip_suffix(u).map(|n| (n, *u))).unwrap_or((size, "GiB"));
                let mult = crate::units::bytes_per(unit).expect("a size unit");
                match crate::format::parse_decimal(num) {
                    Some(x) if apple && x > 0.0 && x <= 4096.0 => {
                        limit = Some(unified_limit_bytes(ds, x)?);
                        (format!("Apple {} GB", num.trim()), x * GIB)
                    }
                    Some(x) if x > 0.0 && x <= 4096.0 => (format!("{} {unit}", num.trim()), x * mult),
                    _ => return Err(crate::messages::say("card-unknown", &[("spec", spec)])),
                }
            }
        };
        if !(other_processes_gib >= 0.0 && other_processes_gib.is_finite()) {
            return Err(crate::messages::say("card-other-negative", &[]));
        }
        let other = other_processes_gib * GIB;
        if other >= limit.map_or(total, |l| l as f64) {
            return Err(crate::messages::say("card-other-whole", &[]));
        }
        Ok(Card { spec: spec.to_string(), name, memory_bytes: total as u64, other_bytes: other as u64, ram_bytes: None, gpu_limit_bytes: limit })
    }

    /// The card with the system RAM the workload may use, in GiB (none: not asked).
    pub fn with_ram(mut self, ram_gib: Option<f64>) -> Result<Card, String> {
        if let Some(g) = ram_gib {
            if !(g > 0.0 && g <= 65536.0) {
                return Err(crate::messages::say("card-ram-invalid", &[]));
            }
            self.ram_bytes = Some((g * GIB) as u64);
        }
        Ok(self)
    }

    /// What the workload may use: the card (on Apple silicon, the GPU's share of it) less what
    /// other processes hold.
    pub fn budget_bytes(&self) -> u64 {
        self.gpu_limit_bytes.unwrap_or(self.memory_bytes) - self.other_bytes
    }
}

/// A card for `dataset fit --gpu`: its budget in bytes (see [`Card::parse`]).
pub fn budget(ds: &Dataset, gpu: &str, other_processes_gib: f64) -> Result<u64, String> {
    Card::parse(ds, gpu, other_processes_gib).map(|c| c.budget_bytes())
}

/// Reads one workload or an array of them (the `dataset fit --input` format).
pub fn parse_input(text: &str) -> Result<Vec<Workload>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("input is not JSON: {e}"))?;
    match v {
        serde_json::Value::Array(items) => {
            items.iter().enumerate().map(|(i, item)| Workload::from_value(item).map_err(|e| format!("workload [{i}]: {e}"))).collect()
        }
        other => Ok(vec![Workload::from_value(&other)?]),
    }
}

/// The engine's own source: every claim it can cite in a breakdown term is a string literal in
/// one of these files (or a derivation it looks up), which is how the calculator's data knows
/// which statements the calculator can show (`Dataset::for_calculator`).
const ENGINE_SOURCE: [(&str, &str); 10] = [
    ("accuracy.rs", include_str!("accuracy.rs")),
    ("diffusion.rs", include_str!("diffusion.rs")),
    ("levers.rs", include_str!("levers.rs")),
    ("llamacpp.rs", include_str!("llamacpp.rs")),
    ("llm.rs", include_str!("llm.rs")),
    ("mod.rs", include_str!("mod.rs")),
    ("query.rs", include_str!("query.rs")),
    ("search.rs", include_str!("search.rs")),
    ("training.rs", include_str!("training.rs")),
    ("workload.rs", include_str!("workload.rs")),
];

/// Whether the engine's source names this claim id (as a string literal).
pub fn engine_names_claim(id: &str) -> bool {
    let quoted = format!("\"{id}\"");
    ENGINE_SOURCE.iter().any(|(_, s)| s.contains(&quoted))
}

/// Whether a breakdown term can cite this claim or the engine reads it: named anywhere in the
/// engine's source but the levers' (whose claims only label a lever and are not shown by the
/// calculator), or read there (`claim_number(ds, "…")`, `.claim("…")`).
pub fn engine_cites_claim(id: &str) -> bool {
    let quoted = format!("\"{id}\"");
    ENGINE_SOURCE.iter().any(|(file, s)| match *file {
        "levers.rs" => s.contains(&format!("claim_number(ds, {quoted})")) || s.contains(&format!(".claim({quoted})")),
        _ => s.contains(&quoted),
    })
}
