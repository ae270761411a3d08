//! LLM inference: weights, KV cache, the prefill working set, logits; per engine.

use super::*;
use std::borrow::Cow;

use crate::hf::ArchOrigin;
use crate::{Llm, QuantFamily};

/// The architecture a workload names: a catalog entry, or one built from the user's config.
pub(crate) fn model<'a>(ds: &'a Dataset, r: &ModelRef) -> Result<(Cow<'a, Llm>, ArchOrigin), String> {
    match r {
        ModelRef::Id(id) => {
            let m = ds.llm(id).ok_or_else(|| {
                if ds.diffusion_model(id).is_some() {
                    format!("field `model`: `{id}` is a diffusion model; use \"kind\": \"diffusion\"")
                } else {
                    let known: Vec<&str> = ds.llms.iter().map(|m| m.id.as_str()).collect();
                    format!("field `model`: unknown LLM `{id}` (one of: {}; or give the model's config.json as {{\"hf_config\": {{…}}}})", known.join(", "))
                }
            })?;
            Ok((Cow::Borrowed(m), ArchOrigin { source: "catalog".into(), model_type: None, counted: None, assumed_layout: false }))
        }
        ModelRef::Spec(spec) => {
            let (mut m, origin) =
                crate::hf::llm_from_config(&spec.hf_config, spec.name.as_deref()).map_err(|e| crate::messages::say("in-model", &[("error", &e)]))?;
            if let Some(p) = spec.params {
                if p == 0 {
                    return Err(crate::messages::say("at-least-one", &[("field", "model.params")]));
                }
                m.params = p;
            }
            Ok((Cow::Owned(m), origin))
        }
    }
}

/// What the fit result says about the architecture it used.
pub(crate) fn summary(m: &Llm, origin: ArchOrigin) -> Architecture {
    Architecture {
        name: m.name.clone(),
        origin,
        params: m.params,
        active_params: m.active_params,
        layers: m.layers,
        hidden: m.hidden,
        heads: m.heads,
        kv_heads: m.kv_heads,
        head_dim: m.head_dim,
        vocab: m.vocab,
        tied_embeddings: m.tied_embeddings,
        attention: m.attention,
        experts: m.experts,
        experts_per_token: m.experts_per_token,
        sliding_window: m.sliding().map(|s| s.1 as u32),
        sliding_layers: m.sliding().map(|s| s.0),
        max_context: m.max_context,
    }
}

/// Parameters of the input embedding and output head.
pub(crate) fn embedding_params(m: &Llm) -> f64 {
    let e = m.vocab as f64 * m.hidden as f64;
    if m.tied_embeddings { e } else { 2.0 * e }
}

/// Weight bytes in a format. AWQ/GPTQ checkpoints keep embeddings and the output head in 16 bit;
/// GGUF schemes' bits are already an average over the whole file.
pub(crate) fn weight_bytes(m: &Llm, q: &Quant) -> f64 {
    let p = m.params as f64;
    match q.family {
        QuantFamily::Awq | QuantFamily::Gptq | QuantFamily::Bnb => {
            let e = embedding_params(m);
            (p - e) * q.bytes_per_weight() + e * 2.0
        }
        _ => p * q.bytes_per_weight(),
    }
}

/// The claims that give a weight format's bytes per parameter: the generic ones by precision,
/// and for GGUF types the claims that derive that type's size. A claim derived for one model
/// (Llama 3.1 8B's file sizes) is cited for that model only; another model's GGUF scheme cites
/// how llama-quantize picks each tensor's type, which the engine follows.
pub(crate) fn weight_claims(ds: &Dataset, q: &Quant, model: &str) -> Vec<&'static str> {
    let llama8b = model == "llama-3.1-8b";
    // A claim scoped to other models is not this model's evidence: the format's generic claim.
    let about = |id: &'static str, generic: &'static str| if super::about_model(ds, id, model) { id } else { generic };
    let id = q.id.to_ascii_uppercase();
    match q.family {
        QuantFamily::Float if q.bits >= 32.0 => vec!["bytes-per-param-fp32"],
        QuantFamily::Float if q.bits >= 16.0 => vec!["bytes-per-param-16bit"],
        QuantFamily::Float | QuantFamily::Int if q.bits >= 8.0 => vec!["bytes-per-param-8bit"],
        QuantFamily::Awq | QuantFamily::Gptq => vec![about("awq-gptq-4bit-quarter-of-16bit", "bytes-per-param-4bit")],
        QuantFamily::Bnb | QuantFamily::Int => {
            vec!["bytes-per-param-4bit", "training-qlora-loads-base-in-4bit"]
        }
        QuantFamily::Float => vec!["bytes-per-param-8bit"],
        QuantFamily::GgufType | QuantFamily::GgufScheme => match id.as_str() {
            "Q8_0" => vec!["bits-per-weight-q8-0"],
            "Q6_K" if llama8b => vec!["llama31-8b-weights-q6-k"],
            "Q5_K" | "Q5_K_M" | "Q5_K_S" | "Q5_0" | "Q5_1" if llama8b => vec!["llama31-8b-weights-q5-k-m"],
            "Q3_K" | "Q3_K_M" | "Q3_K_S" | "Q3_K_L" if llama8b => vec!["llama31-8b-weights-q3-k-m"],
            "Q4_K" | "Q4_K_M" | "Q4_K_S" | "Q4_0" | "Q4_1" | "IQ4_XS" | "IQ4_NL" => {
                vec!["bits-per-weight-q4-k-m"]
            }
            "F16" | "BF16" => vec!["bytes-per-param-16bit"],
            _ if q.bits >= 8.0 => vec!["bits-per-weight-q8-0"],
            _ => vec!["llamacpp-quantize-tensor-types"],
        },
    }
}

/// Bytes per element of activations: 16-bit unless the weights are fp32.
fn activation_bytes(q: &Quant) -> f64 {
    if q.family == QuantFamily::Float && q.bits >= 32.0 { 4.0 } else { 2.0 }
}

/// Working set per token of one decoder layer's MLP at its peak, in elements: three
/// intermediate-width tensors (gate after activation, up, their product) plus four hidden-width
/// ones (residual stream, norm output, attention output, MLP output). MoE layers gather each
/// token once per routed expert.
pub(crate) fn prefill_elements_per_token(m: &Llm) -> f64 {
    let h = m.hidden as f64;
    if m.is_moe() {
        let k = m.experts_per_token.unwrap_or(1) as f64;
        let mi = m.moe_intermediate.unwrap_or(m.intermediate) as f64;
        k * (3.0 * h + 3.0 * mi) + 4.0 * h
    } else {
        3.0 * m.intermediate as f64 + 4.0 * h
    }
}

pub(crate) fn breakdown(ds: &Dataset, l: &LlmInference) -> Result<Breakdown, String> {
    breakdown_with(ds, l, true)
}

/// The breakdown; without `notes` only the terms (the searches over the engine need the peak).
pub(crate) fn breakdown_with(ds: &Dataset, l: &LlmInference, notes: bool) -> Result<Breakdown, String> {
    let (m, origin) = model(ds, &l.model)?;
    let m: &Llm = &m;
    let wq = quant(ds, &l.weights, "weights")?;
    let kvq = quant(ds, &l.kv_cache, "kv_cache")?;
    if l.context == 0 {
        return Err(crate::messages::say("at-least-one", &[("field", "context")]));
    }
    if l.batch == 0 {
        return Err(crate::messages::say("at-least-one", &[("field", "batch")]));
    }
    super::check_gpus(l.gpus)?;
    // Every engine multiplies the two; a product beyond any cache is refused, not overflowed.
    if l.context.checked_mul(l.batch).is_none_or(|t| t > 1 << 40) {
        return Err(format!("fields `context` and `batch`: {} × {} tokens is more than any cache can hold", l.context, l.batch));
    }
    let mut b = Breakdown::new();
    b.quiet = !notes;
    // Beyond the trained context: engines run it (llama.cpp with a warning), so the answer is the
    // memory for the context asked, with what the model was trained to and what extends it.
    if l.context > m.max_context {
        let values = [("context", l.context.to_string()), ("max", m.max_context.to_string()), ("model", m.id.clone())];
        match l.engine {
            Engine::LlamaCpp => b.note(
                "beyond-trained-llamacpp",
                &values,
                "{model} was trained on contexts up to {max} tokens. llama.cpp allocates the cache for the {context} asked and runs with a warning, but llama-server caps each slot at {max} tokens, so the rest of that cache holds nothing; past {max} tokens answers weaken unless RoPE scaling (--rope-scaling yarn) extends the model.",
            ),
            Engine::Vllm => b.note(
                "beyond-trained-vllm",
                &values,
                "{model} was trained on contexts up to {max} tokens. vLLM refuses a longer --max-model-len unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set or the model's rope_scaling extends it; the memory shown is for {context} tokens.",
            ),
            Engine::Transformers | Engine::Ollama => b.note(
                "beyond-trained",
                &values,
                "{model} was trained on contexts up to {max} tokens; the memory shown is for the {context} asked. Past {max} tokens answers weaken unless the model's RoPE scaling (rope_scaling in its config) extends it.",
            ),
        }
    }
    b.arch = Some(summary(m, origin));
    let tokens = (l.context * l.batch) as f64;
    let ubatch = claim_number(ds, "fit-llamacpp-ubatch")?;
    // Cache bytes of every sequence in flight, sliding-window layers holding what this engine keeps.
    let (kv_bytes, window_claims) = kv_cache_bytes(ds, m, l, kvq.bytes_per_weight(), ubatch)?;
    let ab = activation_bytes(wq);
    // The user's file, when it is in the format asked for, gives the exact bytes.
    let file = match &l.model {
        ModelRef::Spec(s) => s.file.as_ref().filter(|f| ds.quant(&f.format).is_some_and(|q| q.id == wq.id)),
        ModelRef::Id(_) => None,
    };
    let weights = file.map(|f| f.bytes as f64).unwrap_or_else(|| weight_bytes(m, wq));
    if let Some(f) = file {
        b.note("file-weights", &[("bytes", f.bytes.to_string())], "weights: the {bytes} bytes of the model file's tensors");
    }
    match l.engine {
        Engine::Transformers => {
            b.add(TermId::Weights, weights, &weight_claims(ds, wq, &m.id));
            if l.all_logits {
                // One forward over every position; no cache; the logits of all positions are the peak.
                b.add(TermId::Logits, tokens * m.vocab as f64 * ab, &["fit-logits-all-positions"]);
                b.add(TermId::Activations, tokens * 2.0 * m.hidden as f64 * ab, &["fit-logits-all-positions"]);
            } else {
                b.add(TermId::KvCache, kv_bytes, &["transformers-dynamic-cache-per-token"]);
                let mlp = tokens * prefill_elements_per_token(m) * ab;
                match m.sliding() {
                    // A sliding window longer context than the window: transformers materialises a
                    // boolean mask of batch × prompt² for the prefill, and SDPA turns it into an
                    // additive mask in the activation dtype while each sliding layer runs.
                    Some((_, w)) if l.context > w => {
                        let square = l.batch as f64 * (l.context as f64).powi(2);
                        b.add(TermId::AttentionMask, square, &["fit-transformers-sliding-window-mask"]);
                        let attention = square * ab + tokens * 4.0 * m.hidden as f64 * ab;
                        if attention > mlp {
                            b.add(TermId::Activations, attention, &["fit-transformers-sliding-window-mask"]);
                        } else {
                            b.add(TermId::Activations, mlp, &["fit-transformers-prefill-working-set"]);
                        }
                    }
                    _ => b.add(TermId::Activations, mlp, &["fit-transformers-prefill-working-set"]),
                }
            }
            b.add(TermId::Workspace, claim_number(ds, "fit-transformers-workspace")?, &["fit-transformers-workspace"]);
            let dynamic = b.tensor_bytes() as f64 - weights;
            // A single forward pass fragments little; generate() grows its cache and fragments more.
            let share = if l.all_logits { "fit-allocator-headroom-llm-forward" } else { "fit-allocator-headroom-llm" };
            add_runtime(ds, &mut b, dynamic, None, Some(share))?;
        }
        Engine::Vllm => {
            let util = match l.gpu_memory_utilization {
                Some(u) if u > 0.0 && u <= 1.0 => u,
                Some(u) => {
                    return Err(format!("field `gpu_memory_utilization`: {u} must be in (0, 1]"));
                }
                None => claim_number(ds, "fit-vllm-default-utilization")?,
            };
            let kv_claims = ["vllm-max-seq-len-exceeds-kv-cache", "kv-cache-grows-with-context-and-users"];
            let context = claim_number(ds, "fit-cuda-context-measured")?;
            let gpus = vllm_gpus(m, l)?;
            for (w_share, kv_share) in &gpus {
                let mut terms = Vec::new();
                let mut wc = weight_claims(ds, wq, &m.id);
                let mut kc = kv_claims.to_vec();
                if gpus.len() > 1 {
                    wc.push("vllm-parallel-shards");
                    kc.push("vllm-parallel-shards");
                }
                put(&mut terms, TermId::Weights, weights * w_share, &wc);
                put(&mut terms, TermId::KvCache, kv_bytes * kv_share, &kc);
                put(&mut terms, TermId::CudaContext, context, &["fit-cuda-context-measured"]);
                // vLLM takes `util` of each card and fills what is left after weights with KV blocks.
                let needed: f64 = terms.iter().map(|t| t.bytes as f64).sum();
                put(&mut terms, TermId::GpuMemoryUtilizationHeadroom, needed / util - needed, &["vllm-gpu-memory-utilization-meaning"]);
                if gpus.len() == 1 {
                    b.terms = terms;
                } else {
                    b.devices.push(terms);
                }
            }
            b.note(
                "vllm-share",
                &[("util", util.to_string()), ("tokens", (l.context * l.batch).to_string())],
                "vLLM reserves {util} of the card at start; the peak shown is the smallest card whose share holds the weights and a KV pool for {tokens} tokens. On a bigger card vLLM fills the share with more KV blocks.",
            );
            b.note("vllm-unmodelled", &[], "vLLM's profiling activations and CUDA graphs are not modelled yet; keep a few GiB of margin.");
            if gpus.len() > 1 {
                b.note("vllm-parallel-unmodelled", &[], "The buffers NCCL and vLLM's own all-reduce keep on each GPU are not modelled yet.");
            }
        }
        Engine::LlamaCpp | Engine::Ollama => {
            super::llamacpp::breakdown(ds, l, m, wq, kvq, file, &mut b)?;
            return Ok(b);
        }
    }
    if let Some(t) = b.terms.iter_mut().find(|t| t.term == "kv-cache") {
        for c in window_claims {
            t.claims.push(c.to_string());
        }
    }
    Ok(b)
}

/// Each GPU's share of the weights and of the KV cache under vLLM's tensor and pipeline
/// parallelism (claim `vllm-parallel-shards`), in pipeline-stage order then tensor rank: a stage
/// holds its own layers (`get_pp_indices`: an even share, the remainder to the stages before the
/// last), the first stage the token embedding, the last the output head; tensor parallelism divides
/// a stage's weights and its KV heads over its GPUs (a KV head is replicated when there are more
/// GPUs than KV heads; an MLA latent is kept whole on every GPU).
fn vllm_gpus(m: &Llm, l: &LlmInference) -> Result<Vec<(f64, f64)>, String> {
    let n = l.gpus.max(1);
    let pp = l.pipeline_parallel.unwrap_or(1);
    if pp == 0 {
        return Err(crate::messages::say("at-least-one", &[("field", "pipeline_parallel")]));
    }
    if n % pp != 0 || pp > m.layers as u64 {
        return Err(crate::messages::say("vllm-pp", &[("gpus", &n.to_string()), ("pp", &pp.to_string()), ("layers", &m.layers.to_string())]));
    }
    let tp = n / pp;
    if m.heads as u64 % tp != 0 {
        return Err(crate::messages::say("vllm-tp-heads", &[("heads", &m.heads.to_string()), ("tp", &tp.to_string())]));
    }
    let kv_share = match m.attention {
        crate::Attention::Mla => 1.0,
        _ => (m.kv_heads as u64).div_ceil(tp) as f64 / m.kv_heads as f64,
    };
    let layers = m.layers as u64;
    let params = m.params as f64;
    let embed = m.vocab as f64 * m.hidden as f64;
    // Layer parameters, and the embedding and output head (tied: one matrix, kept by both ends).
    let per_layer = (params - embedding_params(m)) / layers as f64;
    let mut out = Vec::new();
    for stage in 0..pp {
        let (lo, hi) = pp_indices(layers, stage, pp);
        let mut p = per_layer * (hi - lo) as f64;
        if stage == 0 {
            p += embed;
        }
        if stage == pp - 1 && (!m.tied_embeddings || pp > 1) {
            p += embed;
        }
        let share = p / params;
        let kv = (hi - lo) as f64 / layers as f64 * kv_share;
        for _ in 0..tp {
            out.push((share / tp as f64, kv));
        }
    }
    Ok(out)
}

/// The layers `[lo, hi)` of pipeline stage `rank` of `pp` (vLLM's `get_pp_indices` without
/// `VLLM_PP_LAYER_PARTITION`).
pub(crate) fn pp_indices(layers: u64, rank: u64, pp: u64) -> (u64, u64) {
    let mut sizes = vec![layers / pp; pp as usize];
    for i in 2..(layers % pp + 2) {
        let k = sizes.len() as i64 - i as i64;
        if k >= 0 {
            sizes[k as usize] += 1;
        }
    }
    let lo: u64 = sizes[..rank as usize].iter().sum();
    (lo, lo + sizes[rank as usize])
}

/// KV-cache bytes of the whole batch. Global-attention layers keep every token; sliding-window
/// layers keep what the engine keeps for them (the claims say how many tokens).
fn kv_cache_bytes(ds: &Dataset, m: &Llm, l: &LlmInference, bytes_per_element: f64, ubatch: f64) -> Result<(f64, Vec<&'static str>), String> {
    let _ = ds;
    let full = |_: u64| l.context;
    let (per_seq, claims): (u64, Vec<&'static str>) = match (m.sliding(), &l.engine) {
        (None, _) => (m.kv_elements(l.context, full), vec![]),
        // generate()'s peak still holds the whole prompt on sliding layers (a view keeps the
        // prefill's storage alive until the first decoding step).
        (Some(_), Engine::Transformers) => (m.kv_elements(l.context, full), vec!["fit-transformers-sliding-window-cache"]),
        (Some(_), Engine::Vllm) => (m.kv_elements(l.context, |w| w), vec!["fit-vllm-sliding-window-cache"]),
        (Some(_), Engine::LlamaCpp | Engine::Ollama) => {
            let swa = matches!(m.model_type.as_deref(), Some("gemma2" | "gemma3" | "gemma3_text" | "gpt_oss" | "cohere2"));
            // The window plus one micro-batch, padded to 256 cells, per sequence.
            let cells = |w: u64| (w + ubatch as u64).div_ceil(256) * 256;
            let n = if swa { m.kv_elements(l.context, cells) } else { m.kv_elements(l.context, full) };
            (n, vec!["fit-llamacpp-sliding-window-cache"])
        }
    };
    Ok((per_seq as f64 * l.batch as f64 * bytes_per_element, claims))
}

#[cfg(test)]
mod tests {
    use super::pp_indices;

    #[test]
    fn pipeline_stages_take_vllms_layer_ranges() {
        // vLLM's get_pp_indices: an even share, the remainder to the stages before the last,
        // starting with the second to last.
        let split = |layers, pp| (0..pp).map(|r| pp_indices(layers, r, pp)).collect::<Vec<_>>();
        assert_eq!(split(20, 4), vec![(0, 5), (5, 10), (10, 15), (15, 20)]);
        assert_eq!(split(61, 4), vec![(0, 15), (15, 30), (30, 46), (46, 61)]);
        assert_eq!(split(30, 4), vec![(0, 7), (7, 15), (15, 23), (23, 30)]);
        assert_eq!(split(80, 3), vec![(0, 27), (27, 54), (54, 80)]);
        assert_eq!(split(28, 8).iter().map(|(a, b)| b - a).collect::<Vec<_>>(), vec![3, 3, 3, 4, 4, 4, 4, 3]);
    }
}
