//! Training: weights, gradients, optimizer states, saved activations, the loss's logits, and the
//! three moments where the peak can fall (end of forward, start of backward, optimizer step).

use super::llm::{embedding_params, model, summary};
use super::workload::TrainOffload;
use super::*;
use crate::Llm;

struct Precision {
    /// Bytes per weight of the trained (master) weights.
    weight: f64,
    /// Bytes per activation element.
    act: f64,
    /// bf16 autocast over fp32 weights.
    mixed: bool,
}

fn precision(p: &str) -> Result<Precision, String> {
    Ok(match p {
        "fp32" => Precision { weight: 4.0, act: 4.0, mixed: false },
        "bf16" | "fp16" => Precision { weight: 2.0, act: 2.0, mixed: false },
        "mixed-bf16" | "mixed-fp16" => Precision { weight: 4.0, act: 2.0, mixed: true },
        other => return Err(format!("field `precision`: `{other}` is not fp32, bf16, fp16 or mixed-bf16")),
    })
}

/// (in, out) features of each adapted projection of one decoder block, by PEFT module name.
fn projection_dims(m: &Llm) -> [(&'static str, f64, f64); 7] {
    let h = m.hidden as f64;
    let q = (m.heads * m.head_dim) as f64;
    let kv = (m.kv_heads * m.head_dim) as f64;
    let i = m.intermediate as f64;
    [("q_proj", h, q), ("k_proj", h, kv), ("v_proj", h, kv), ("o_proj", q, h), ("gate_proj", h, i), ("up_proj", h, i), ("down_proj", i, h)]
}

/// How much more pinned host memory than tensor bytes FSDP's offloaded parameters take: PyTorch's
/// caching host allocator rounds every allocation up to a power of two (claim
/// `pytorch-pinned-memory-power-of-two`), and FSDP keeps each weight's shard (its first dimension
/// divided over `shards` GPUs) as its own tensor. The ratio over a dense block and the
/// embeddings, applied to the whole model.
fn pinned_rounding(m: &Llm, shards: f64, bytes: f64) -> f64 {
    let pinned = |rows: f64, cols: f64| {
        let b = ((rows / shards).ceil() * cols * bytes).max(1.0);
        (b as u64).checked_next_power_of_two().map_or(b, |p| p as f64)
    };
    let layer: f64 = projection_dims(m).iter().map(|(_, i, o)| pinned(*o, *i)).sum();
    let layer_bytes: f64 = projection_dims(m).iter().map(|(_, i, o)| (o / shards).ceil() * i * bytes).sum();
    let embeddings = if m.tied_embeddings { 1.0 } else { 2.0 };
    let (v, h) = (m.vocab as f64, m.hidden as f64);
    let rounded = m.layers as f64 * layer + embeddings * pinned(v, h);
    let exact = m.layers as f64 * layer_bytes + embeddings * (v / shards).ceil() * h * bytes;
    rounded / exact
}

/// Trainable parameters of LoRA adapters on the targeted projections of every block: rank ×
/// (in + out) each.
fn lora_params(m: &Llm, rank: f64, targets: &LoraTargets) -> f64 {
    let per_layer: f64 = projection_dims(m).iter().filter(|(name, _, _)| targets.has(name)).map(|(_, i, o)| rank * (i + o)).sum();
    per_layer * m.layers as f64
}

/// Saved activations per token per layer, in elements of the activation dtype, without
/// checkpointing (the coefficients are measured: claim `fit-training-activations-per-layer`).
fn layer_elements(ds: &Dataset, m: &Llm, p: &Precision, lora: Option<&LoraTargets>, qk_norm: bool) -> Result<f64, String> {
    let h = m.hidden as f64;
    let mut a_h = if p.act >= 4.0 { claim_number(ds, "fit-training-activations-fp32")? } else { claim_number(ds, "fit-training-activations-per-layer")? };
    if p.mixed {
        a_h += claim_number(ds, "fit-training-autocast-extra")?;
    }
    if qk_norm {
        a_h += claim_number(ds, "fit-training-qk-norm-extra")?;
    }
    let mut untargeted = 0.0;
    if let Some(targets) = lora {
        // The adapter path casts the inputs of its six hidden-width projections to fp32.
        a_h += 12.0;
        // A frozen projection without an adapter keeps nothing for the backward pass, so each
        // one left out saves its input's fp32 copy (claim `fit-training-lora-untargeted-inputs`).
        let per_input = claim_number(ds, "fit-training-lora-untargeted-inputs")?;
        untargeted = projection_dims(m).iter().filter(|(name, _, _)| !targets.has(name)).map(|(_, i, _)| per_input * i).sum();
    }
    Ok(a_h * h + 4.0 * m.intermediate as f64 - untargeted)
}

pub(crate) fn breakdown(ds: &Dataset, t: &Training) -> Result<Breakdown, String> {
    breakdown_with(ds, t, true)
}

/// The breakdown; without `notes` only the terms (the searches over the engine need the peak).
pub(crate) fn breakdown_with(ds: &Dataset, t: &Training, notes: bool) -> Result<Breakdown, String> {
    let (m, origin) = model(ds, &t.model)?;
    let m: &Llm = &m;
    let p = precision(&t.precision)?;
    for (field, n) in [("seq", t.seq), ("batch", t.batch)] {
        if n == 0 {
            return Err(crate::messages::say("at-least-one", &[("field", field)]));
        }
    }
    check_gpus(t.gpus)?;
    if t.zero > 3 {
        return Err(format!("field `zero`: ZeRO stage {} does not exist (0, 1, 2 or 3)", t.zero));
    }
    if t.lora_rank == 0 && t.method != Method::Full {
        return Err(crate::messages::say("at-least-one", &[("field", "lora_rank")]));
    }
    let mut b = Breakdown::new();
    b.quiet = !notes;
    b.arch = Some(summary(m, origin));
    let n = t.gpus as f64;
    let params = m.params as f64;
    let tokens = (t.seq * t.batch) as f64;
    let h = m.hidden as f64;
    let v = m.vocab as f64;
    let lora = t.method != Method::Full;
    // Query/key norms (Qwen3, Gemma 3, OLMo 2) add fp32 copies of q and k.
    let qk_norm = m.qk_norm;

    // Weights, gradients, optimizer states (per GPU under ZeRO).
    let (weights, trainable, train_bytes) = match t.method {
        Method::Full => (params * p.weight, params, p.weight),
        Method::Lora => (params * 2.0, lora_params(m, t.lora_rank as f64, &t.lora_targets), 4.0),
        Method::Qlora => {
            let nf4 = quant(ds, "nf4", "method")?;
            let e = embedding_params(m);
            ((params - e) * nf4.bytes_per_weight() + e * 2.0, lora_params(m, t.lora_rank as f64, &t.lora_targets), 4.0)
        }
    };
    // FSDP shards like ZeRO: full (and hybrid, within its group) like stage 3; SHARD_GRAD_OP
    // shards gradients and optimizer states, and keeps the parameters whole from the forward pass
    // to the end of the backward pass, which is where the peak is (claim
    // `pytorch-fsdp-sharding-strategies`).
    let (stage, group) = match t.fsdp {
        None => (t.zero, n),
        Some(_) if t.zero > 0 => return Err(crate::messages::say("fsdp-and-zero", &[])),
        Some(Fsdp::Full) => (3, n),
        Some(Fsdp::ShardGradOp) => (2, n),
        Some(Fsdp::Hybrid) => {
            let g = t.shard_gpus.unwrap_or(t.gpus);
            if g == 0 || t.gpus % g != 0 {
                return Err(crate::messages::say("fsdp-shard-gpus", &[("shard", &g.to_string()), ("gpus", &t.gpus.to_string())]));
            }
            (3, g as f64)
        }
    };
    // CPU offload: ZeRO-Offload moves the optimizer (states and step) to system RAM; parameter
    // offload (FSDP's, or DeepSpeed's offload_param at stage 3) the parameters and gradients too.
    let offload = t.cpu_offload;
    match offload {
        Some(TrainOffload::Params) if t.fsdp.is_none() && t.zero < 3 => return Err(crate::messages::say("offload-params-needs-sharding", &[])),
        Some(TrainOffload::Optimizer) if t.fsdp.is_some() || t.zero == 0 => return Err(crate::messages::say("offload-optimizer-needs-zero", &[])),
        _ => {}
    }
    let params_off = offload == Some(TrainOffload::Params);
    // DeepSpeed's ZeRO training in 16 bit (its bf16 or fp16 setting) keeps an fp32 master copy of
    // each rank's partition beside the 16-bit weights and runs the optimizer on it, so the moments
    // are fp32 too; its step turns the partition's 16-bit gradients into fp32 (claim
    // `deepspeed-zero-16bit-fp32-master`).
    let ds_mixed = t.zero > 0 && t.fsdp.is_none() && t.method == Method::Full && p.weight == 2.0 && !p.mixed;
    let shard = |s: u8| if stage >= s { group } else { 1.0 };
    let w_claims: &[&str] = match t.method {
        Method::Full => &["training-mixed-precision-adamw-16-bytes-per-param"],
        Method::Lora => &["llm-weights-16bit-8b-32b-70b"],
        Method::Qlora => &["training-qlora-loads-base-in-4bit"],
    };
    let lora_w = if lora { trainable * 4.0 } else { 0.0 };
    // What stays on the GPU between uses (nothing under parameter offload).
    let resident_w = if params_off { 0.0 } else { weights / shard(3) + lora_w };
    b.add(TermId::Weights, resident_w, w_claims);
    let host_grads = trainable * train_bytes / shard(2);
    let grads = if params_off { 0.0 } else { host_grads };
    let (state_bytes, o_claims): (f64, &[&str]) = match (t.optimizer, ds_mixed) {
        (Optimizer::Adamw, false) => (2.0 * train_bytes, &["training-mixed-precision-adamw-16-bytes-per-param"]),
        (Optimizer::Adamw, true) => (12.0, &["training-mixed-precision-adamw-16-bytes-per-param", "deepspeed-zero-16bit-fp32-master"]),
        (Optimizer::Adamw8bit, false) => (2.0, &["training-8bit-adamw-2-bytes-per-param"]),
        (Optimizer::Adamw8bit, true) => (6.0, &["training-8bit-adamw-2-bytes-per-param", "deepspeed-zero-16bit-fp32-master"]),
        (Optimizer::Sgd, false) => (0.0, &["fit-training-optimizer-step"]),
        (Optimizer::Sgd, true) => (4.0, &["deepspeed-zero-16bit-fp32-master"]),
    };
    let host_states = trainable * state_bytes / shard(1);
    let host_step = match (t.optimizer, ds_mixed) {
        // The gradients of the group the optimizer steps turned into fp32 (the whole partition; at
        // stage 3 a sub-group of at most `sub_group_size`), and AdamW's temporary of that size.
        (o, true) => {
            let part = trainable / shard(1);
            let group = if t.zero == 3 { part.min(claim_number(ds, "deepspeed-zero3-sub-group-size")?) } else { part };
            group * if o == Optimizer::Adamw { 8.0 } else { 4.0 }
        }
        (Optimizer::Adamw, false) => trainable * train_bytes / shard(1),
        _ => 0.0,
    };
    let (states, step_temp) = if offload.is_some() { (0.0, 0.0) } else { (host_states, host_step) };

    // Activations and logits per token.
    let layer = layer_elements(ds, m, &p, lora.then_some(&t.lora_targets), qk_norm)? * p.act;
    let logits_saved = v * if p.act >= 4.0 { 8.0 } else { 4.0 };
    let logits_fwd = v * if p.act >= 4.0 { 4.0 } else { 6.0 };
    let logits_bwd = v * 8.0;
    let extra = if lora { 2.0 } else { 4.0 } * h * p.act;
    let layers = m.layers as f64;
    let autocast_copies = if p.mixed && !t.gradient_checkpointing { params * 2.0 } else { 0.0 };
    let saved = if t.gradient_checkpointing {
        // Only each block's input survives the forward pass (fp32 under autocast).
        let residual = if p.mixed { 4.0 } else { p.act };
        tokens * (layers * h * residual + logits_saved + extra)
    } else {
        tokens * (layers * layer + logits_saved + extra) + autocast_copies
    };
    // With checkpointing of a fully trained model, the output head's weight gradient appears while
    // the loss gradient is still alive (without checkpointing the saved activations dominate).
    // Under FSDP's parameter offload the head's gradient is not there at that moment (measured).
    let head_grad = if t.gradient_checkpointing && t.method == Method::Full && !params_off { v * h * train_bytes / shard(2) } else { 0.0 };
    // The three candidate peaks (from the second step on, optimizer states exist throughout).
    let forward_peak = saved + tokens * logits_fwd;
    let backward_start = saved + tokens * logits_bwd + head_grad;
    let backward_peak = backward_start.max(grads);
    // ZeRO stages 1 and 2 release the 16-bit gradients once they are in fp32; stage 3 keeps its
    // preallocated gradient partition.
    let step_grads = if ds_mixed && t.zero < 3 { 0.0 } else { grads };
    let step_peak = step_grads + step_temp;
    // With checkpointing only each block's input is kept and the rest recomputed: the claim
    // about the mechanism, not the coefficients measured without it.
    let mut act_claims: Vec<&str> = if t.gradient_checkpointing {
        vec!["training-gradient-checkpointing-cost", "fit-training-logits"]
    } else {
        vec!["fit-training-activations-per-layer", "fit-training-logits"]
    };
    if lora && t.lora_targets != LoraTargets::AllLinear && !t.gradient_checkpointing {
        act_claims.push("fit-training-lora-untargeted-inputs");
    }
    if step_peak >= forward_peak && step_peak >= backward_peak {
        b.add(TermId::Gradients, step_grads, &["training-mixed-precision-adamw-16-bytes-per-param"]);
        b.add(TermId::OptimizerStates, states, o_claims);
        let step_claims: &[&str] =
            if ds_mixed { &["fit-training-optimizer-step", "deepspeed-zero-16bit-fp32-master"] } else { &["fit-training-optimizer-step"] };
        b.add(TermId::OptimizerStep, step_temp, step_claims);
        b.note("peak-optimizer-step", &[], "the peak is the optimizer step: gradients, states and the step's temporary buffer");
    } else if backward_peak >= forward_peak {
        b.add(TermId::OptimizerStates, states, o_claims);
        if grads > backward_start {
            b.add(TermId::Gradients, grads, &["training-mixed-precision-adamw-16-bytes-per-param"]);
            b.note("peak-backward-end", &[], "the peak is the end of the backward pass, when every gradient exists");
        } else {
            b.add(TermId::Activations, saved - tokens * logits_saved, &act_claims);
            b.add(TermId::Logits, tokens * (logits_saved + logits_bwd), &["fit-training-logits"]);
            b.add(TermId::Gradients, head_grad, &["fit-training-logits"]);
            if autocast_copies > 0.0 {
                b.note("autocast-copies", &[], "includes the bf16 copies of the weights that autocast keeps for the backward pass");
            }
            b.note("peak-backward-start", &[], "the peak is the start of the backward pass: saved activations plus the loss gradient");
        }
    } else {
        b.add(TermId::OptimizerStates, states, o_claims);
        b.add(TermId::Activations, saved - tokens * logits_saved, &act_claims);
        b.add(TermId::Logits, tokens * (logits_saved + logits_fwd), &["fit-training-logits"]);
        b.note("peak-forward-end", &[], "the peak is the loss at the end of the forward pass");
    }
    if stage >= 3 && (group > 1.0 || params_off) {
        if t.fsdp.is_some() {
            // FSDP gathers each layer's full parameters while it runs and frees them after, so at
            // the peaks (the loss at the end of the forward pass, the start of the backward pass)
            // only the root unit is gathered: embeddings, final norm and output head, kept from
            // the forward pass to the backward pass. Measured with parameter offload: Llama 3.2
            // 1B and 3B within 2 % (dataset/measurements/reference/h200-torch2.11-multigpu.jsonl).
            let gathered = if lora { weights } else { params * p.act };
            b.add(
                TermId::FsdpGatheredLayers,
                gathered * embedding_params(m) / params,
                &["pytorch-fsdp-sharding-strategies", "pytorch-fsdp-root-stays-gathered"],
            );
        } else if params_off {
            // With parameters offloaded, ZeRO-3 keeps up to `stage3_max_live_parameters` of them
            // fetched on the GPU from the second step on (measured on one GPU: Qwen3 0.6B, Llama
            // 3.2 1B and 3B). Several GPUs without offload are not measured yet: one layer there.
            let live = params.min(claim_number(ds, "deepspeed-zero3-max-live-parameters")?) * weights / params;
            b.add(TermId::Zero3GatheredLayer, live, &["training-fsdp-zero-shard-model-states", "deepspeed-zero3-max-live-parameters"]);
        } else {
            // ZeRO-3 gathers one layer's full weights at a time.
            b.add(TermId::Zero3GatheredLayer, weights / layers, &["training-fsdp-zero-shard-model-states"]);
        }
    }
    // ZeRO-3 allocates its reduce bucket when it starts: `reduce_bucket_size` elements of the
    // trained type, whatever the world size.
    let bucket = if t.zero == 3 && t.fsdp.is_none() { claim_number(ds, "deepspeed-zero3-reduce-bucket")? * train_bytes } else { 0.0 };
    b.add(TermId::ZeroReduceBucket, bucket, &["deepspeed-zero3-reduce-bucket"]);
    if n > 1.0 && t.zero == 0 && t.fsdp.is_none() {
        // DistributedDataParallel all-reduces gradients through buckets that are a second copy of
        // them, kept for the whole run unless gradient_as_bucket_view is set.
        b.add(TermId::DdpGradientBuckets, trainable * train_bytes, &["pytorch-ddp-gradient-buckets"]);
    }
    if t.method == Method::Qlora {
        // One layer dequantized to 16 bit at a time.
        b.add(TermId::DequantizedLayer, (params - embedding_params(m)) / layers * 2.0, &["training-qlora-loads-base-in-4bit"]);
    }
    let dynamic =
        b.tensor_bytes() as f64 - resident_w - states - bucket - b.terms.iter().find(|t| t.term == "ddp-gradient-buckets").map_or(0.0, |t| t.bytes as f64);
    // Autocast's weight copies, made again by the recomputed forward under checkpointing, leave
    // more of the allocator's segments in pieces. The base is what a small step needs whatever its
    // size: with few transient bytes a share of them does not leave room for the loss's largest
    // blocks (the fp32 logits) among the cached segments.
    let (base, share) = match (p.mixed, t.gradient_checkpointing) {
        (true, true) => ("fit-allocator-headroom-training-base", "fit-allocator-headroom-training-autocast-checkpointing"),
        (true, false) => ("fit-allocator-headroom-training-autocast-base", "fit-allocator-headroom-training-autocast"),
        _ => ("fit-allocator-headroom-training-base", "fit-allocator-headroom-training"),
    };
    add_runtime(ds, &mut b, dynamic, Some(base), Some(share))?;
    // What the offloaded states take in system RAM, for every GPU of the machine.
    if let Some(o) = offload {
        if t.fsdp.is_some() {
            // FSDP keeps each GPU's shard of parameters, gradients and optimizer states in pinned
            // host memory and runs the optimizer step there.
            // Parameters and gradients are pinned, each tensor rounded up to a power of two.
            let c: &[&str] = &["pytorch-fsdp-cpu-offload", "pytorch-pinned-memory-power-of-two"];
            let round = pinned_rounding(m, group, if lora { 2.0 } else { p.weight });
            b.add_host(TermId::Weights, n * (weights / shard(3) * round + lora_w), c);
            b.add_host(TermId::Gradients, n * host_grads * if lora { 1.0 } else { round }, c);
            b.add_host(TermId::OptimizerStates, n * host_states, c);
        } else {
            // DeepSpeed's own estimate of the CPU memory its offload needs (fp32 master weights,
            // optimizer states and gradients, with its buffer factor).
            let (claim, per_param) = match (stage, o) {
                (3, TrainOffload::Params) => ("deepspeed-offload-cpu-bytes-zero3-params", claim_number(ds, "deepspeed-offload-cpu-bytes-zero3-params")?),
                (3, _) => ("deepspeed-offload-cpu-bytes-zero3", claim_number(ds, "deepspeed-offload-cpu-bytes-zero3")?),
                _ => (
                    "deepspeed-offload-cpu-bytes-zero2",
                    claim_number(ds, "deepspeed-offload-cpu-bytes-zero2")?.max(n * claim_number(ds, "deepspeed-offload-cpu-bytes-per-gpu")?),
                ),
            };
            // A LoRA run's frozen base weights go to system RAM with the parameters.
            let frozen = if lora && params_off { weights } else { 0.0 };
            b.add_host(TermId::ZeroOffload, trainable * per_param + frozen, &[claim]);
        }
        b.note("cpu-offload", &[], "Model states in system RAM: the optimizer step runs on the CPU, which is much slower than on the GPU.");
    }
    if n > 1.0 {
        // Data parallel: every GPU holds the same share.
        b.devices = vec![b.terms.clone(); t.gpus as usize];
        b.note(
            "data-parallel",
            &[("gpus", t.gpus.to_string())],
            "Data parallel over {gpus} GPUs: each holds the same share, so the card that runs out first is the smallest.",
        );
    }
    Ok(b)
}
