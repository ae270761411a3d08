//! Levers: the changes to a workload that lower its peak, each valid for the workload's engine and
//! each with what it costs; for a card, every lever says whether it alone fits, and the plan is the
//! cheapest combination of levers that fits.
//!
//! A lever moves one *dimension* of the workload (weight format, KV-cache format, context, GPU
//! layers, optimizer, text-encoder placement, …) one or more steps away from what the user chose.
//! Steps carry a rank: how much the user gives up (quality, speed, capability), comparable across
//! dimensions. The plan is the combination with the lowest total rank that fits (a best-first
//! search over the dimensions; every candidate is a run of the engine), then each numeric change
//! is moved back towards the user's value as far as the card allows (the most context, the most
//! GPU layers, the fewest swapped blocks that still fit).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use serde_json::{Value, json};

use super::*;

/// One field set to one value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub field: String,
    pub value: Value,
}

/// The cheapest combination of levers that fits the card.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Every field that changes, in the order the levers were listed.
    pub changes: Vec<Change>,
    /// The workload with every change applied.
    pub workload: Value,
    pub peak_bytes: u64,
    /// What the workload then keeps in system RAM.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    pub host_bytes: u64,
    /// Budget left with the plan applied.
    pub spare_bytes: i64,
    /// What the plan costs: the distinct costs of its levers.
    pub costs: Vec<Cost>,
    pub claims: Vec<String>,
}

/// One option along a dimension.
struct Step {
    changes: Vec<(&'static str, Value)>,
    rank: u32,
    cost: Cost,
    claims: Vec<&'static str>,
}

/// A numeric dimension whose chosen step can be moved back towards the user's value.
#[derive(Clone, Copy)]
struct Refine {
    field: &'static str,
    /// The user's value (the mildest end).
    from: u64,
    grain: u64,
}

struct Dimension {
    /// Options, mildest first; ranks never decrease along them.
    steps: Vec<Step>,
    refine: Option<Refine>,
}

fn step(changes: Vec<(&'static str, Value)>, rank: u32, cost: Cost, claims: Vec<&'static str>) -> Step {
    Step { changes, rank, cost, claims }
}

/// How much quality a weight format gives up, by its bits per weight.
fn quality_rank(q: &Quant) -> u32 {
    match q.bits {
        b if b >= 8.0 => 2,
        b if b >= 6.0 => 3,
        b if b >= 5.0 => 4,
        b if b >= 4.0 => 5,
        b if b >= 3.0 => 8,
        _ => 12,
    }
}

/// Weight formats each engine loads, most precise first.
fn weight_formats(engine: &Engine) -> &'static [&'static str] {
    match engine {
        Engine::Transformers => &["bf16", "fp8", "int8", "nf4"],
        Engine::Vllm => &["bf16", "fp8", "awq-int4"],
        Engine::LlamaCpp | Engine::Ollama => &["fp16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q3_K_M", "Q2_K"],
    }
}

/// Diffusion denoiser formats, most precise first (what the calculator offers).
const DIFFUSION_FORMATS: [&str; 8] = ["bf16", "fp8", "Q8_0", "Q6_K", "Q5_K_S", "Q4_K_S", "Q3_K_S", "fp32"];

/// Formats smaller than `current` among `ladder`, mildest first.
fn smaller<'a>(ds: &'a Dataset, ladder: &[&str], current: &str) -> Vec<&'a Quant> {
    let cur = ds.quant(current).map(|q| q.bytes_per_weight()).unwrap_or(f64::INFINITY);
    let mut out: Vec<&Quant> =
        ladder.iter().filter_map(|f| ds.quant(f)).filter(|q| q.bytes_per_weight() < cur && !q.id.eq_ignore_ascii_case(current)).collect();
    crate::sort_short_by(&mut out, |a, b| b.bytes_per_weight().total_cmp(&a.bytes_per_weight()));
    out
}

/// Halvings of `value` down to `floor` (at least one when `value` is above `floor`).
fn halvings(value: u64, floor: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut v = value;
    while v > floor && out.len() < 4 {
        v = (v / 2).max(floor);
        out.push(v);
    }
    out
}

/// The dimensions a workload can move along. On unified memory (`unified`: Apple silicon) there is
/// no system RAM apart from the GPU's: nothing is moved "to system RAM" there (no GPU layers or
/// experts left to the CPU, no offload, no block swap); the GPU's limit itself is what a Mac
/// raises (note `apple-card`).
fn dimensions(ds: &Dataset, w: &Workload, unified: bool) -> Result<Vec<Dimension>, String> {
    let mut dims = Vec::new();
    match w {
        Workload::LlmInference(l) => {
            let (m, _) = llm::model(ds, &l.model)?;
            let weights = smaller(ds, weight_formats(&l.engine), &l.weights)
                .into_iter()
                .map(|q| step(vec![("weights", json!(q.id))], quality_rank(q), Cost::Quality, llm::weight_claims(ds, q, &m.id)))
                .collect();
            dims.push(Dimension { steps: weights, refine: None });
            // KV-cache formats each engine takes, with the claim that says so for that engine.
            let kv_ladder: &[(&str, u32, &[&str])] = match l.engine {
                Engine::LlamaCpp => &[("q8_0", 1, &["llamacpp-context-layers-kv-type"]), ("q4_0", 3, &["llamacpp-context-layers-kv-type"])],
                // Ollama's q8_0 claim is derived for one model; for another, llama.cpp's cache
                // types, which Ollama passes on.
                Engine::Ollama if ds.claim("ollama-q8-kv-cache-halves-memory").is_some_and(|c| c.models.is_empty() || c.models.contains(&m.id)) => {
                    &[("q8_0", 1, &["ollama-q8-kv-cache-halves-memory"]), ("q4_0", 3, &["ollama-kv-q4-0-quarter"])]
                }
                Engine::Ollama => &[("q8_0", 1, &["llamacpp-context-layers-kv-type"]), ("q4_0", 3, &["ollama-kv-q4-0-quarter"])],
                // The halving is derived for Llama 3.1 8B; for another model, the 8-bit size.
                Engine::Vllm if ds.claim("vllm-kv-cache-dtype-fp8-halves-cache").is_some_and(|c| c.models.is_empty() || c.models.contains(&m.id)) => {
                    &[("fp8", 1, &["vllm-kv-cache-dtype-fp8-halves-cache"])]
                }
                Engine::Vllm => &[("fp8", 1, &["bytes-per-param-8bit"])],
                // transformers' quantized caches are a different class (not the `kv_cache` format).
                Engine::Transformers => &[],
            };
            let llamacpp = matches!(l.engine, Engine::LlamaCpp | Engine::Ollama);
            let fa_off = llamacpp && l.flash_attention == Some(false);
            let cur_kv = ds.quant(&l.kv_cache).map(|q| q.bytes_per_weight()).unwrap_or(f64::INFINITY);
            let kv = kv_ladder
                .iter()
                .filter(|(f, _, _)| ds.quant(f).is_some_and(|q| q.bytes_per_weight() < cur_kv))
                .map(|(f, r, claims)| {
                    let mut changes = vec![("kv_cache", json!(f))];
                    let mut claims = claims.to_vec();
                    if fa_off {
                        // llama.cpp keeps a quantized cache only with flash attention on.
                        changes.push(("flash_attention", json!(true)));
                        claims.push("llamacpp-quantized-v-cache-needs-flash-attention");
                    }
                    step(changes, *r, Cost::Quality, claims)
                })
                .collect();
            dims.push(Dimension { steps: kv, refine: None });
            if fa_off {
                // Flash attention never materialises the attention scores (nor their f16 copy).
                dims.push(Dimension {
                    steps: vec![step(
                        vec![("flash_attention", json!(true))],
                        1,
                        Cost::Capability,
                        vec!["fit-llamacpp-compute-buffer", "fit-llamacpp-no-fa-pool"],
                    )],
                    refine: None,
                });
            }
            if llamacpp {
                // A smaller micro-batch shrinks the compute buffer; prompts are processed slower.
                let ub = l.ubatch.unwrap_or(claim_number(ds, "fit-llamacpp-ubatch")? as u64);
                let steps = halvings(ub, 128)
                    .into_iter()
                    .enumerate()
                    .map(|(i, u)| step(vec![("ubatch", json!(u))], 3 + 2 * i as u32, Cost::Speed, vec!["fit-llamacpp-compute-buffer", "fit-llamacpp-ubatch"]))
                    .collect();
                dims.push(Dimension { steps, refine: None });
            }
            // Ollama has no setting for it (none in api/types.go, envconfig or its llama-server
            // flags at b7871fc): only llama.cpp's --n-cpu-moe.
            if l.engine == Engine::LlamaCpp && m.is_moe() && !unified {
                // Experts of the first N layers in system RAM: the rest of the model stays on the GPU.
                let layers = m.layers;
                let now = l.cpu_moe_layers.unwrap_or(0).min(layers);
                let steps = [(1u32, 4u32, 5u32), (1, 2, 7), (1, 1, 9)]
                    .iter()
                    .map(|(num, den, rank)| (layers * num / den, *rank))
                    .filter(|(n, _)| *n > now)
                    .map(|(n, r)| step(vec![("cpu_moe_layers", json!(n))], r, Cost::Speed, vec!["llamacpp-cpu-moe-flags", "llamacpp-gpu-layers-placement"]))
                    .collect();
                dims.push(Dimension { steps, refine: Some(Refine { field: "cpu_moe_layers", from: now as u64, grain: 1 }) });
            }
            if l.engine == Engine::Vllm && l.gpu_memory_utilization.unwrap_or(claim_number(ds, "fit-vllm-default-utilization")?) < 0.95 {
                dims.push(Dimension {
                    steps: vec![step(vec![("gpu_memory_utilization", json!(0.95))], 1, Cost::Capability, vec!["vllm-gpu-memory-utilization-meaning"])],
                    refine: None,
                });
            }
            if l.batch > 1 {
                let steps = halvings(l.batch, 1)
                    .into_iter()
                    .enumerate()
                    .map(|(i, b)| step(vec![("batch", json!(b))], 2 + 2 * i as u32, Cost::Throughput, vec!["kv-cache-grows-with-context-and-users"]))
                    .collect();
                dims.push(Dimension { steps, refine: Some(Refine { field: "batch", from: l.batch, grain: 1 }) });
            }
            // How each engine is told a shorter context.
            let context_claims = match l.engine {
                Engine::Ollama => vec!["ollama-shorter-context-num-ctx"],
                Engine::LlamaCpp => vec!["llamacpp-context-layers-kv-type"],
                Engine::Vllm => vec!["vllm-max-seq-len-exceeds-kv-cache"],
                Engine::Transformers if ds.claim("kv-cache-per-token-16bit").is_some_and(|c| c.models.is_empty() || c.models.contains(&m.id)) => {
                    vec!["kv-cache-per-token-16bit"]
                }
                Engine::Transformers => vec!["kv-cache-grows-with-context-and-users"],
            };
            let floor = l.context.min(2048);
            let steps = halvings(l.context, floor)
                .into_iter()
                .enumerate()
                .map(|(i, c)| step(vec![("context", json!(c))], 4 * (i as u32 + 1), Cost::Capability, context_claims.clone()))
                .collect();
            dims.push(Dimension { steps, refine: Some(Refine { field: "context", from: l.context, grain: 256 }) });
            if matches!(l.engine, Engine::LlamaCpp | Engine::Ollama) && !unified {
                // -ngl counts the output layer as one.
                let layers = m.layers + 1;
                let now = l.gpu_layers.unwrap_or(layers).min(layers);
                let steps = [(9u32, 10u32, 6u32), (3, 4, 8), (1, 2, 11), (1, 4, 15)]
                    .iter()
                    .map(|(num, den, rank)| ((layers * num / den).min(now.saturating_sub(1)), *rank))
                    .collect::<Vec<_>>();
                let mut seen = BTreeSet::new();
                let steps = steps
                    .into_iter()
                    .filter(|(n, _)| *n < now && seen.insert(*n))
                    .map(|(n, r)| {
                        step(vec![("gpu_layers", json!(n))], r, Cost::Speed, vec!["ollama-offloads-layers-to-cpu", "llamacpp-context-layers-kv-type"])
                    })
                    .collect();
                dims.push(Dimension { steps, refine: Some(Refine { field: "gpu_layers", from: now as u64, grain: 1 }) });
            }
        }
        Workload::Training(t) => {
            if t.optimizer == Optimizer::Adamw {
                dims.push(Dimension {
                    steps: vec![step(vec![("optimizer", json!("adamw-8bit"))], 1, Cost::Quality, vec!["training-8bit-adamw-2-bytes-per-param"])],
                    refine: None,
                });
            }
            if !t.gradient_checkpointing {
                dims.push(Dimension {
                    steps: vec![step(
                        vec![("gradient_checkpointing", json!(true))],
                        2,
                        Cost::Speed,
                        vec!["training-gradient-checkpointing-cost", "training-hf-gradient-checkpointing-flag"],
                    )],
                    refine: None,
                });
            }
            // Model states to system RAM, once they are sharded: DeepSpeed's optimizer offload,
            // then the parameters too (ZeRO-3, or FSDP's offload).
            if t.cpu_offload.is_none() && (t.zero > 0 || t.fsdp.is_some()) && !unified {
                let mut steps = Vec::new();
                if t.fsdp.is_none() {
                    steps.push(step(vec![("cpu_offload", json!("optimizer"))], 3, Cost::Speed, vec!["deepspeed-offload-cpu-bytes-zero2"]));
                }
                if t.fsdp.is_some() || t.zero == 3 {
                    let claim = if t.fsdp.is_some() { "pytorch-fsdp-cpu-offload" } else { "deepspeed-offload-cpu-bytes-zero3-params" };
                    steps.push(step(vec![("cpu_offload", json!("params"))], 4, Cost::Speed, vec![claim]));
                }
                dims.push(Dimension { steps, refine: None });
            }
            if t.batch > 1 {
                let steps = halvings(t.batch, 1)
                    .into_iter()
                    .enumerate()
                    .map(|(i, b)| step(vec![("batch", json!(b))], 1 + i as u32, Cost::Speed, vec!["training-gradient-accumulation-same-effective-batch"]))
                    .collect();
                dims.push(Dimension { steps, refine: Some(Refine { field: "batch", from: t.batch, grain: 1 }) });
            }
            // With checkpointing the MLP keeps no inputs anyway: the targets hardly matter then.
            if t.method != Method::Full && !t.gradient_checkpointing && t.lora_targets == LoraTargets::AllLinear {
                dims.push(Dimension {
                    steps: vec![step(
                        vec![("lora_targets", json!("attention"))],
                        3,
                        Cost::Capability,
                        vec!["fit-training-lora-untargeted-inputs", "guide-own-model-peft-default-lora-targets"],
                    )],
                    refine: None,
                });
            }
            let method = match t.method {
                Method::Full => vec![
                    step(
                        vec![("method", json!("lora"))],
                        4,
                        Cost::Capability,
                        vec!["training-qlora-loads-base-in-4bit", "guide-training-lora-paper-memory-3x"],
                    ),
                    step(vec![("method", json!("qlora"))], 6, Cost::Capability, vec!["training-qlora-loads-base-in-4bit"]),
                ],
                Method::Lora => vec![step(vec![("method", json!("qlora"))], 3, Cost::Quality, vec!["training-qlora-loads-base-in-4bit"])],
                Method::Qlora => vec![],
            };
            dims.push(Dimension { steps: method, refine: None });
            let steps = halvings(t.seq, t.seq.min(512))
                .into_iter()
                .enumerate()
                .map(|(i, s)| step(vec![("seq", json!(s))], 5 * (i as u32 + 1), Cost::Capability, vec!["kv-cache-grows-with-context-and-users"]))
                .collect();
            dims.push(Dimension { steps, refine: Some(Refine { field: "seq", from: t.seq, grain: 128 }) });
        }
        Workload::Diffusion(d) => {
            let m = ds.diffusion_model(&d.model).ok_or_else(|| format!("unknown diffusion model `{}`", d.model))?;
            let den = quant(ds, &d.precision, "precision")?;
            let te_now =
                d.text_encoder_precision.clone().unwrap_or_else(|| if den.family == crate::QuantFamily::Float { den.id.clone() } else { "bf16".into() });
            let has_te = m.components.iter().any(|c| c.role.starts_with("text-encoder"));
            if !d.tiled_vae {
                dims.push(Dimension { steps: vec![step(vec![("tiled_vae", json!(true))], 1, Cost::Speed, vec!["comfyui-vae-decode-tiled"])], refine: None });
            }
            if d.batch > 1 {
                let steps = halvings(d.batch, 1)
                    .into_iter()
                    .enumerate()
                    .map(|(i, b)| step(vec![("batch", json!(b))], 1 + i as u32, Cost::Throughput, vec!["batch-vs-sequential-activations"]))
                    .collect();
                dims.push(Dimension { steps, refine: Some(Refine { field: "batch", from: d.batch, grain: 1 }) });
            }
            if has_te {
                let mut steps = Vec::new();
                if ds.quant(&te_now).is_some_and(|q| q.bits >= 16.0) && ds.quant("fp8").is_some() {
                    let mut claims = vec!["guide-image-comfyui-fp8-cpu-vae-flags"];
                    if m.family == crate::DiffusionFamily::Flux {
                        claims.push("flux-t5xxl-16bit-9.5gb-fp8-5gb");
                    }
                    steps.push(step(vec![("text_encoder_precision", json!("fp8"))], 1, Cost::Quality, claims));
                }
                dims.push(Dimension { steps, refine: None });
                if d.text_encoders == Placement::Gpu && !unified {
                    dims.push(Dimension {
                        steps: vec![step(vec![("text_encoders", json!("cpu"))], 2, Cost::Speed, vec!["guide-image-diffusers-offload-modes"])],
                        refine: None,
                    });
                }
            }
            // A denoiser format alone: the text encoders keep the precision they have now (a GGUF
            // denoiser would otherwise bring them back to bf16, an fp8 one take them to fp8).
            // A format is offered where a claim covers it for this model: 8-bit for every model,
            // GGUF levels for the models whose GGUF builds the claims describe.
            let gguf_claim = match m.id.as_str() {
                "flux.1-dev" => Some("flux-gguf-levels-card-fit"),
                "wan2.1-t2v-14b" | "wan2.2-t2v-a14b" => Some("guide-video-wan-14b-q4k"),
                _ => None,
            };
            let model_claim = match m.id.as_str() {
                "flux.1-dev" => Some("flux-dev-weights-16bit-24gb-fp8-12gb"),
                "hunyuanvideo" => Some("hunyuanvideo-fp8-halves-weights"),
                "wan2.1-t2v-14b" => Some("guide-video-wan21-14b-bf16"),
                _ => None,
            };
            let steps = smaller(ds, &DIFFUSION_FORMATS, &d.precision)
                .into_iter()
                .filter_map(|q| {
                    let gguf = matches!(q.family, crate::QuantFamily::GgufType | crate::QuantFamily::GgufScheme);
                    let claims: Vec<&'static str> = match (gguf, gguf_claim) {
                        (true, Some(c)) => vec![c],
                        (true, None) => return None,
                        (false, _) if q.bits >= 8.0 => std::iter::once("bytes-per-param-8bit").chain(model_claim).collect(),
                        (false, _) => return None,
                    };
                    Some((q, claims))
                })
                .map(|(q, claims)| {
                    let mut ch = vec![("precision", json!(q.id))];
                    if has_te && d.text_encoder_precision.is_none() {
                        ch.push(("text_encoder_precision", json!(te_now)));
                    }
                    step(ch, quality_rank(q), Cost::Quality, claims)
                })
                .collect();
            dims.push(Dimension { steps, refine: None });
            let layers = m.components.iter().find(|c| c.role.starts_with("denoiser")).and_then(|c| c.layers).unwrap_or(0);
            let mut offload = Vec::new();
            if d.offload == Offload::None && !unified {
                offload.push(step(
                    vec![("offload", json!("model"))],
                    3,
                    Cost::Speed,
                    vec!["guide-image-diffusers-offload-modes", "comfyui-keeps-models-loaded"],
                ));
            }
            if d.offload != Offload::Sequential && !unified {
                offload.push(step(vec![("offload", json!("sequential"))], 12, Cost::Speed, vec!["guide-image-diffusers-offload-modes"]));
            }
            dims.push(Dimension { steps: offload, refine: None });
            // Block swap where a claim describes it for inference: the Wan video wrapper's.
            let swap_claim = ds.claim("wan-wrapper-block-swap").filter(|c| c.models.iter().any(|x| *x == m.id)).is_some();
            if swap_claim && layers > 1 && d.offload != Offload::Sequential && !unified {
                let mut seen = BTreeSet::new();
                let steps = [(1u32, 4u32, 4u32), (1, 2, 5), (3, 4, 6), (9, 10, 8)]
                    .iter()
                    .map(|(n, dn, r)| ((layers * n / dn).clamp(1, layers - 1), *r))
                    .filter(|(b, _)| *b > d.block_swap && seen.insert(*b))
                    .map(|(b, r)| step(vec![("block_swap", json!(b))], r, Cost::Speed, vec!["wan-wrapper-block-swap"]))
                    .collect();
                dims.push(Dimension { steps, refine: Some(Refine { field: "block_swap", from: d.block_swap as u64, grain: 1 }) });
            }
        }
    }
    dims.retain(|d| !d.steps.is_empty());
    Ok(dims)
}

/// Sets one field of a workload (the fields levers change).
pub(crate) fn set(w: &mut Workload, field: &str, v: &Value) {
    let s = || v.as_str().unwrap_or_default().to_string();
    let n = || v.as_u64().unwrap_or(0);
    match w {
        Workload::LlmInference(l) => match field {
            "weights" => l.weights = s(),
            "kv_cache" => l.kv_cache = s(),
            "context" => l.context = n(),
            "batch" => l.batch = n(),
            "gpu_layers" => l.gpu_layers = Some(n() as u32),
            "cpu_moe_layers" => l.cpu_moe_layers = Some(n() as u32),
            "ubatch" => l.ubatch = Some(n()),
            "flash_attention" => l.flash_attention = v.as_bool(),
            "gpu_memory_utilization" => l.gpu_memory_utilization = v.as_f64(),
            _ => {}
        },
        Workload::Training(t) => match field {
            "optimizer" => t.optimizer = serde_json::from_value(v.clone()).unwrap_or(t.optimizer),
            "gradient_checkpointing" => t.gradient_checkpointing = v.as_bool().unwrap_or(false),
            "cpu_offload" => t.cpu_offload = serde_json::from_value(v.clone()).ok(),
            "batch" => t.batch = n(),
            "lora_targets" => t.lora_targets = LoraTargets::try_from(v.clone()).unwrap_or(LoraTargets::AllLinear),
            "method" => t.method = serde_json::from_value(v.clone()).unwrap_or(t.method),
            "seq" => t.seq = n(),
            _ => {}
        },
        Workload::Diffusion(d) => match field {
            "tiled_vae" => d.tiled_vae = v.as_bool().unwrap_or(false),
            "batch" => d.batch = n(),
            "text_encoder_precision" => d.text_encoder_precision = Some(s()),
            "text_encoders" => d.text_encoders = serde_json::from_value(v.clone()).unwrap_or(d.text_encoders),
            "precision" => d.precision = s(),
            "offload" => d.offload = serde_json::from_value(v.clone()).unwrap_or(d.offload),
            "block_swap" => d.block_swap = n() as u32,
            _ => {}
        },
    }
}

fn apply(base: &Workload, changes: &[(&'static str, Value)]) -> Workload {
    let mut w = base.clone();
    for (f, v) in changes {
        set(&mut w, f, v);
    }
    w
}

fn peak(ds: &Dataset, w: &Workload) -> Option<u64> {
    peak_of(ds, w)
}

fn label(changes: &[(&'static str, Value)]) -> String {
    changes.iter().map(|(f, v)| format!("{f}: {}", v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect::<Vec<_>>().join(", ")
}

fn lever_of(ds: &Dataset, base: &Workload, base_peak: u64, s: &Step, budget: Option<u64>) -> Option<Lever> {
    let alt = apply(base, &s.changes);
    let p = peak(ds, &alt)?;
    (p < base_peak).then(|| Lever {
        lever: label(&s.changes),
        changes: s.changes.iter().map(|(f, v)| Change { field: f.to_string(), value: v.clone() }).collect(),
        workload: alt.to_value(),
        peak_bytes: p,
        saving_bytes: base_peak as i64 - p as i64,
        cost: s.cost,
        claims: s.claims.iter().map(|c| c.to_string()).collect(),
        fits: budget.map(|b| p <= b),
    })
}

/// The single levers: per dimension, its mildest step; with a card, the mildest step that fits on
/// its own (or, when none does, the strongest, marked as not fitting); without one, also the
/// strongest step of a ladder.
pub(crate) fn levers(ds: &Dataset, w: &Workload, base_peak: u64, budget: Option<u64>, unified: bool) -> Vec<Lever> {
    let Ok(dims) = dimensions(ds, w, unified) else {
        return Vec::new();
    };
    let mut out: Vec<Lever> = Vec::new();
    for d in &dims {
        let first = d.steps.first().and_then(|s| lever_of(ds, w, base_peak, s, budget));
        let last = || d.steps.last().and_then(|s| lever_of(ds, w, base_peak, s, budget));
        match budget {
            Some(b) if base_peak > b => {
                let fitting = d.steps.iter().filter_map(|s| lever_of(ds, w, base_peak, s, budget)).find(|l| l.peak_bytes <= b);
                out.extend(fitting.or_else(last));
            }
            Some(_) => out.extend(first),
            None => {
                out.extend(first);
                if d.steps.len() > 1 {
                    out.extend(last());
                }
            }
        }
    }
    crate::sort_short_by(&mut out, |a, b| b.saving_bytes.cmp(&a.saving_bytes).then(a.lever.cmp(&b.lever)));
    out.dedup_by(|a, b| a.lever == b.lever);
    out
}

/// Candidates the plan search may run the engine on before it gives up.
const MAX_EVALUATIONS: usize = 1500;

/// The cheapest combination of levers that brings the workload within `budget` bytes of the GPU
/// (and, when `ram` is given, within that much system RAM; on unified memory, `ram` is the whole
/// memory left to the workload and holds the GPU's peak and the system RAM together); `None` when
/// it already fits or when nothing the levers reach fits. `base` is the workload's (GPU peak,
/// system RAM).
pub(crate) fn plan(ds: &Dataset, w: &Workload, base: (u64, u64), budget: u64, ram: Option<u64>, unified: bool) -> Option<Plan> {
    let within = |(gpu, host): (u64, u64)| gpu <= budget && ram.is_none_or(|r| host + if unified { gpu } else { 0 } <= r);
    if within(base) {
        return None;
    }
    let dims = dimensions(ds, w, unified).ok()?;
    let changes_of = |idx: &[u8]| -> Vec<(&'static str, Value)> {
        idx.iter().zip(&dims).filter(|(i, _)| **i > 0).flat_map(|(i, d)| d.steps[*i as usize - 1].changes.clone()).collect()
    };
    let rank_of = |idx: &[u8]| -> u32 { idx.iter().zip(&dims).filter(|(i, _)| **i > 0).map(|(i, d)| d.steps[*i as usize - 1].rank).sum() };
    let start = vec![0u8; dims.len()];
    let mut heap = BinaryHeap::new();
    let mut seen = BTreeSet::new();
    heap.push(Reverse((0u32, 0usize, start.clone())));
    seen.insert(start);
    let mut evaluations = 0;
    while let Some(Reverse((rank, _, idx))) = heap.pop() {
        evaluations += 1;
        if evaluations > MAX_EVALUATIONS {
            return None;
        }
        let candidate = apply(w, &changes_of(&idx));
        if rank > 0 && super::usage_of(ds, &candidate).is_some_and(within) {
            return Some(finish(ds, w, &dims, &idx, &within, budget));
        }
        for d in 0..dims.len() {
            if (idx[d] as usize) < dims[d].steps.len() {
                let mut next = idx.clone();
                next[d] += 1;
                if seen.insert(next.clone()) {
                    let moved = next.iter().filter(|i| **i > 0).count();
                    heap.push(Reverse((rank_of(&next), moved, next)));
                }
            }
        }
    }
    None
}

/// The plan from the chosen steps: numeric changes moved back towards the user's value as far as
/// the budget allows.
fn finish(ds: &Dataset, base: &Workload, dims: &[Dimension], idx: &[u8], within: &dyn Fn((u64, u64)) -> bool, budget: u64) -> Plan {
    let mut chosen: Vec<(&'static str, Value)> =
        idx.iter().zip(dims).filter(|(i, _)| **i > 0).flat_map(|(i, d)| d.steps[*i as usize - 1].changes.clone()).collect();
    for (i, d) in idx.iter().zip(dims) {
        let (Some(r), true) = (d.refine, *i > 0) else {
            continue;
        };
        let Some(pos) = chosen.iter().position(|(f, _)| *f == r.field) else {
            continue;
        };
        let at = chosen[pos].1.as_u64().unwrap_or(r.from);
        // Values between the chosen one and the user's, in grains, mildest last.
        let (lo, hi) = (at.min(r.from), at.max(r.from));
        let up = r.from > at; // the user's value is larger: search upwards
        let steps = (hi - lo) / r.grain;
        let value_at = |k: u64| {
            if up { at + k * r.grain } else { at - k * r.grain }
        };
        let mut good = 0u64;
        let mut bad = steps + 1;
        while bad - good > 1 {
            let mid = good + (bad - good) / 2;
            let v = value_at(mid);
            if v == r.from {
                bad = mid;
                continue;
            }
            let mut trial = chosen.clone();
            trial[pos].1 = json!(v);
            if super::usage_of(ds, &apply(base, &trial)).is_some_and(within) {
                good = mid;
            } else {
                bad = mid;
            }
        }
        chosen[pos].1 = json!(value_at(good));
    }
    let alt = apply(base, &chosen);
    let (p, host) = super::usage_of(ds, &alt).unwrap_or((u64::MAX, 0));
    let mut costs: Vec<Cost> = Vec::new();
    let mut claims: Vec<String> = Vec::new();
    for (i, d) in idx.iter().zip(dims).filter(|(i, _)| **i > 0) {
        let s = &d.steps[*i as usize - 1];
        if !costs.contains(&s.cost) {
            costs.push(s.cost);
        }
        for c in &s.claims {
            if !claims.iter().any(|x| x == c) {
                claims.push(c.to_string());
            }
        }
    }
    Plan {
        changes: chosen.into_iter().map(|(f, v)| Change { field: f.into(), value: v }).collect(),
        workload: alt.to_value(),
        peak_bytes: p,
        host_bytes: host,
        spare_bytes: budget as i64 - p as i64,
        costs,
        claims,
    }
}
