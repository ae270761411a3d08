//! llama.cpp (and Ollama, which runs llama.cpp's server) as llama.cpp itself lays memory out, at
//! the pinned commit 0c1e57098bba43ac29e6e3b677cdceebdd22334f:
//!
//! - the file: every tensor of the converter's layout with the type `llama-quantize` gives it for a
//!   file scheme (`src/llama-quant.cpp`, `llama_tensor_get_type_impl` and its shape fallback);
//! - where each tensor lives for `-ngl N` (`src/llama-model.cpp`: the token embedding on the host,
//!   repeating layer `i` on the GPU when `i >= n_layer + 1 - N`, the output layer when `N >= 1`; a
//!   tied output is a copy of the embedding in the output layer's buffer) and `--n-cpu-moe N` (the
//!   expert tensors of the first N layers on the host);
//! - the KV cache per layer (`src/llama-kv-cache*.cpp`: cells padded to 256, sliding-window layers
//!   holding the window times the sequences plus one micro-batch, padded to 256);
//! - the compute buffer (the largest of the logits, the MLP and the attention working sets of one
//!   micro-batch; checked against llama.cpp's own figures) and, with flash attention off, the f16
//!   copy of the softmax that the CUDA backend makes outside it; the process's own overhead.
//!
//! Constants come from claims; dataset/measurements/llamacpp/ holds the runs that check them.

use super::*;
use crate::modelfile::GgmlType;
use crate::Llm;

/// One tensor of the file: what `llama-quantize` sees.
#[derive(Clone, Debug)]
pub(crate) struct Tensor {
    pub cat: Cat,
    /// Repeating layer, or None for the embedding, the output and the final norm.
    pub layer: Option<u32>,
    /// Row length (`ne[0]`) and element count.
    pub ne0: u64,
    pub elems: u64,
    /// An MoE expert tensor (`ffn_*_exps`).
    pub expert: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cat {
    TokenEmbd,
    Output,
    AttnQ,
    AttnK,
    AttnV,
    AttnOut,
    FfnGate,
    FfnUp,
    FfnDown,
    /// Norms, biases, the MoE router: kept in F32 by the converter, never quantized.
    Small,
}

/// The converter's tensors of a decoder-only model (dense, or MoE with stacked experts).
/// Parameters the architecture counts beyond these (norms, biases) are one F32 remainder.
pub(crate) fn tensors(m: &Llm) -> Vec<Tensor> {
    let h = m.hidden as u64;
    let q = m.heads as u64 * m.head_dim as u64;
    let kv = m.kv_heads as u64 * m.head_dim as u64;
    let mut out = vec![Tensor {
        cat: Cat::TokenEmbd,
        layer: None,
        ne0: h,
        elems: h * m.vocab as u64,
        expert: false,
    }];
    let t = |cat, layer, ne0: u64, elems: u64, expert| Tensor {
        cat,
        layer: Some(layer),
        ne0,
        elems,
        expert,
    };
    let dense = m.dense_layers.unwrap_or(0);
    for i in 0..m.layers {
        out.push(t(Cat::AttnQ, i, h, h * q, false));
        out.push(t(Cat::AttnK, i, h, h * kv, false));
        out.push(t(Cat::AttnV, i, h, h * kv, false));
        out.push(t(Cat::AttnOut, i, q, q * h, false));
        if m.is_moe() && i >= dense {
            let e = m.experts.unwrap_or(0) as u64;
            let mi = m.moe_intermediate.unwrap_or(m.intermediate) as u64;
            out.push(t(Cat::Small, i, h, h * e, false));
            out.push(t(Cat::FfnGate, i, h, h * mi * e, true));
            out.push(t(Cat::FfnUp, i, h, h * mi * e, true));
            out.push(t(Cat::FfnDown, i, mi, mi * h * e, true));
            let shared = m.shared_experts.unwrap_or(0) as u64;
            if shared > 0 {
                out.push(t(Cat::FfnGate, i, h, h * mi * shared, false));
                out.push(t(Cat::FfnUp, i, h, h * mi * shared, false));
                out.push(t(Cat::FfnDown, i, mi * shared, mi * shared * h, false));
            }
        } else {
            let ff = m.intermediate as u64;
            out.push(t(Cat::FfnGate, i, h, h * ff, false));
            out.push(t(Cat::FfnUp, i, h, h * ff, false));
            out.push(t(Cat::FfnDown, i, ff, ff * h, false));
        }
    }
    if !m.tied_embeddings {
        out.push(Tensor {
            cat: Cat::Output,
            layer: None,
            ne0: h,
            elems: h * m.vocab as u64,
            expert: false,
        });
    }
    let counted: u64 = out.iter().map(|t| t.elems).sum();
    let rest = m.params.saturating_sub(counted);
    if rest > 0 {
        // Norms and biases: one F32 share per layer, the rest with the output layer.
        let per = rest / (m.layers as u64 + 1);
        for i in 0..m.layers {
            out.push(t(Cat::Small, i, per.max(1), per, false));
        }
        let last = rest - per * m.layers as u64;
        out.push(Tensor {
            cat: Cat::Small,
            layer: None,
            ne0: last.max(1),
            elems: last,
            expert: false,
        });
    }
    out
}

/// The file schemes `llama-quantize` takes that are modelled tensor by tensor (the IQ1–IQ3
/// schemes need an importance matrix and fall back to the scheme's average bits).
fn scheme_default(id: &str) -> Option<GgmlType> {
    use GgmlType::*;
    Some(match id.to_ascii_uppercase().as_str() {
        "F16" | "FP16" => F16,
        "BF16" => BF16,
        "F32" | "FP32" => F32,
        "Q8_0" => Q8_0,
        "Q6_K" => Q6_K,
        "Q5_K_M" | "Q5_K_S" | "Q5_K" => Q5_K,
        "Q5_0" => Q5_0,
        "Q5_1" => Q5_1,
        "Q4_K_M" | "Q4_K_S" | "Q4_K" => Q4_K,
        "Q4_0" => Q4_0,
        "Q4_1" => Q4_1,
        "Q3_K_M" | "Q3_K_S" | "Q3_K_L" | "Q3_K" => Q3_K,
        "Q2_K" => Q2_K,
        "IQ4_XS" => IQ4_XS,
        "IQ4_NL" => IQ4_NL,
        _ => return None,
    })
}

/// `use_more_bits` of llama-quant.cpp: the first and last eighth of the layers and every third
/// one between them.
fn more_bits(i: i64, n: i64) -> bool {
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The type `llama-quantize` gives each tensor of `m` for file scheme `scheme`, in tensor order;
/// None when the scheme is not modelled tensor by tensor.
pub(crate) fn tensor_types(m: &Llm, ts: &[Tensor], scheme: &str) -> Option<Vec<GgmlType>> {
    use GgmlType::*;
    let s = scheme.to_ascii_uppercase();
    let default = scheme_default(&s)?;
    let n_layer = m.layers as i64;
    let gqa = m.heads / m.kv_heads.max(1);
    let n_expert = m.experts.unwrap_or(0);
    let quantized = default.is_quantized();
    let mut i_attn_v = 0i64;
    let n_attn_v = ts.iter().filter(|t| t.cat == Cat::AttnV).count() as i64;
    let mut out = Vec::with_capacity(ts.len());
    for t in ts {
        if t.cat == Cat::Small {
            out.push(F32);
            continue;
        }
        if !quantized {
            out.push(default);
            continue;
        }
        let layer = t.layer.map(|l| l as i64).unwrap_or(0);
        let mut ty = default;
        match t.cat {
            Cat::Output | Cat::TokenEmbd if t.cat == Cat::Output || m.tied_embeddings => {
                ty = if t.ne0 % ty.block_size() != 0 {
                    Q8_0
                } else if ty != Q8_0 {
                    Q6_K
                } else {
                    ty
                };
            }
            Cat::TokenEmbd => {}
            Cat::AttnV => {
                ty = match s.as_str() {
                    "Q2_K" => {
                        if gqa >= 4 {
                            Q4_K
                        } else {
                            Q3_K
                        }
                    }
                    "Q3_K_M" => {
                        if i_attn_v < 2 {
                            Q5_K
                        } else {
                            Q4_K
                        }
                    }
                    "Q3_K_L" => Q5_K,
                    "IQ4_NL" | "IQ4_XS" if gqa >= 4 => Q5_K,
                    "Q4_K_M" | "Q5_K_M" if more_bits(i_attn_v, n_attn_v) => Q6_K,
                    "Q4_K_S" if i_attn_v < 4 => Q5_K,
                    _ => ty,
                };
                if m.layers == 80 && matches!(ty, Q3_K | Q4_K) {
                    ty = Q5_K; // LLM_TYPE_70B
                }
                if n_expert == 8 {
                    ty = Q8_0;
                }
                i_attn_v += 1;
            }
            Cat::AttnK if n_expert == 8 => ty = Q8_0,
            Cat::FfnDown => {
                ty = match s.as_str() {
                    "Q2_K" => Q3_K,
                    "Q3_K_M" => {
                        if layer < n_layer / 16 {
                            Q5_K
                        } else {
                            Q4_K
                        }
                    }
                    "Q3_K_L" => Q5_K,
                    "Q4_K_M" if more_bits(layer, n_layer) => Q6_K,
                    "IQ4_NL" | "IQ4_XS" if layer < n_layer / 8 => Q5_K,
                    "Q5_K_M" if more_bits(layer, n_layer) => Q6_K,
                    "Q4_K_S" if layer < n_layer / 8 => Q5_K,
                    _ => ty,
                };
            }
            Cat::AttnOut => {
                ty = if n_expert == 8 {
                    if matches!(
                        s.as_str(),
                        "Q2_K" | "Q3_K_S" | "Q3_K_M" | "IQ4_NL" | "Q4_K_S" | "Q4_K_M" | "IQ4_XS"
                    ) {
                        Q5_K
                    } else {
                        ty
                    }
                } else {
                    match s.as_str() {
                        "Q2_K" => Q3_K,
                        "Q3_K_M" => Q4_K,
                        "Q3_K_L" => Q5_K,
                        _ => ty,
                    }
                };
            }
            _ => {}
        }
        // Rows that are not a whole number of blocks fall back to a type with smaller blocks.
        if t.ne0 % ty.block_size() != 0 {
            ty = match ty {
                IQ4_XS => IQ4_NL,
                Q2_K | Q3_K => Q4_0,
                Q4_K => Q5_0,
                Q5_K => Q5_1,
                Q6_K => Q8_0,
                other => other,
            };
            if t.ne0 % ty.block_size() != 0 {
                ty = F16;
            }
        }
        out.push(ty);
    }
    Some(out)
}

/// Bytes of one tensor in a type.
fn bytes(t: &Tensor, ty: GgmlType) -> f64 {
    (t.elems / ty.block_size()) as f64 * ty.type_size() as f64
}

/// The file's tensor bytes for a scheme, when it is modelled tensor by tensor.
pub fn file_bytes(m: &Llm, scheme: &str) -> Option<u64> {
    let ts = tensors(m);
    let types = tensor_types(m, &ts, scheme)?;
    Some(
        ts.iter()
            .zip(&types)
            .map(|(t, ty)| bytes(t, *ty) as u64)
            .sum(),
    )
}

/// How a llama.cpp process is set up, from the workload and each engine's defaults.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    pub gpu_layers: u32,
    pub cpu_moe_layers: u32,
    pub ubatch: u64,
    /// Logits rows the compute buffer is reserved for: the micro-batch, or for llama-server one
    /// per slot.
    pub output_rows: u64,
}

/// A model file's bytes as placement needs them: the token embedding, the tensors outside the
/// repeating layers (output, final norm), and each layer's dense and expert bytes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Layout {
    pub embd: f64,
    pub outside: f64,
    pub layers: Vec<(f64, f64)>,
    /// Whether the scheme is modelled tensor by tensor (else the scheme's average bits).
    pub per_tensor: bool,
}

/// The layout of `m` in file scheme `scheme` (`avg_bytes` per weight where the scheme is not
/// modelled tensor by tensor). The calculator asks for the same model and scheme many times per
/// keystroke (every lever, every step of the plan search), so the last few layouts are kept: the
/// key is every architecture value the tensor list and the type rules read.
pub(crate) fn layout(m: &Llm, scheme: &str, avg_bytes: f64) -> std::rc::Rc<Layout> {
    type Key = ([u64; 13], String, u64);
    thread_local! {
        static CACHE: std::cell::RefCell<Vec<(Key, std::rc::Rc<Layout>)>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let key: Key = (
        [
            m.hidden as u64,
            m.heads as u64,
            m.kv_heads as u64,
            m.head_dim as u64,
            m.layers as u64,
            m.vocab as u64,
            m.intermediate as u64,
            m.params,
            m.experts.unwrap_or(0) as u64,
            m.moe_intermediate.map_or(u64::MAX, |x| x as u64),
            m.shared_experts.unwrap_or(0) as u64,
            m.dense_layers.unwrap_or(0) as u64,
            m.tied_embeddings as u64,
        ],
        scheme.to_ascii_uppercase(),
        avg_bytes.to_bits(),
    );
    if let Some(hit) = CACHE.with(|c| {
        c.borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, l)| l.clone())
    }) {
        return hit;
    }
    let ts = tensors(m);
    let types = tensor_types(m, &ts, scheme);
    let mut out = Layout {
        embd: 0.0,
        outside: 0.0,
        layers: vec![(0.0, 0.0); m.layers as usize],
        per_tensor: types.is_some(),
    };
    for (i, t) in ts.iter().enumerate() {
        let b = match &types {
            Some(ty) => bytes(t, ty[i]),
            None if t.cat == Cat::Small => t.elems as f64 * 4.0,
            None => t.elems as f64 * avg_bytes,
        };
        match (t.cat, t.layer) {
            (Cat::TokenEmbd, _) => out.embd += b,
            (_, None) => out.outside += b,
            (_, Some(l)) if t.expert => out.layers[l as usize].1 += b,
            (_, Some(l)) => out.layers[l as usize].0 += b,
        }
    }
    let out = std::rc::Rc::new(out);
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= 8 {
            c.remove(0);
        }
        c.push((key, out.clone()));
    });
    out
}

/// Where the weights live: (GPU bytes, host bytes).
pub(crate) fn weight_placement(m: &Llm, w: &Layout, s: &Setup) -> (f64, f64) {
    let n = m.layers as i64;
    let first_gpu = n + 1 - s.gpu_layers as i64;
    let output_on_gpu = s.gpu_layers >= 1;
    // The embedding stays on the host; a tied output is a copy of it in the output layer's buffer.
    let (mut gpu, mut host) = (0.0, w.embd);
    if m.tied_embeddings && output_on_gpu {
        gpu += w.embd;
    }
    if output_on_gpu {
        gpu += w.outside;
    } else {
        host += w.outside;
    }
    for (l, &(dense, expert)) in w.layers.iter().enumerate() {
        if (l as i64) >= first_gpu {
            gpu += dense;
            if (l as u32) < s.cpu_moe_layers {
                host += expert;
            } else {
                gpu += expert;
            }
        } else {
            host += dense + expert;
        }
    }
    (gpu, host)
}

/// KV cells of one global and one sliding-window layer, over every sequence.
pub(crate) fn kv_cells(
    m: &Llm,
    context: u64,
    seqs: u64,
    ubatch: u64,
    swa_full: bool,
    swa_arch: bool,
) -> (u64, u64) {
    let pad = |x: u64| x.div_ceil(256) * 256;
    let total = pad(context * seqs);
    let per_stream = if seqs > 1 { pad(total / seqs) } else { total };
    let base = per_stream * seqs;
    let swa = match m.sliding() {
        Some((_, w)) if swa_arch && !swa_full => {
            (pad((w + ubatch).min(per_stream)) * seqs).min(base)
        }
        _ => base,
    };
    (base, swa)
}

/// Whether llama.cpp gives this architecture a sliding-window cache (`LLAMA_SWA_TYPE_*` set in
/// `src/llama-model.cpp`'s hyperparameters).
fn swa_arch(m: &Llm) -> bool {
    matches!(
        m.model_type.as_deref(),
        Some("gemma2" | "gemma3" | "gemma3_text" | "gpt_oss" | "cohere2")
    )
}

/// The llama.cpp / Ollama breakdown.
pub(crate) fn breakdown(
    ds: &Dataset,
    l: &LlmInference,
    m: &Llm,
    wq: &Quant,
    kvq: &Quant,
    file: Option<&FileWeights>,
    b: &mut Breakdown,
) -> Result<(), String> {
    let ollama = l.engine == Engine::Ollama;
    let layers = m.layers;
    let gpu_layers = l.gpu_layers.unwrap_or(layers + 1).min(layers + 1);
    let ubatch = match l.ubatch {
        Some(0) => return Err(crate::messages::say("at-least-one", &[("field", "ubatch")])),
        Some(u) => u as f64,
        None if ollama => ollama_batch(ds, l.context * l.batch, l.flash_attention == Some(false))?,
        None => claim_number(ds, "fit-llamacpp-ubatch")?,
    };
    let fa = l.flash_attention.unwrap_or(true);
    let kv_quantized = !matches!(
        kvq.id.to_ascii_lowercase().as_str(),
        "fp16" | "bf16" | "f16" | "fp32"
    );
    if kv_quantized && !fa {
        return Err(crate::messages::say("kv-quantized-needs-fa", &[]));
    }
    let s = Setup {
        gpu_layers,
        cpu_moe_layers: l.cpu_moe_layers.unwrap_or(0).min(layers),
        ubatch: ubatch as u64,
        output_rows: if l.server || ollama {
            l.batch.min(ubatch as u64)
        } else {
            ubatch as u64
        },
    };
    // Weights: tensor by tensor where the scheme is modelled, else the scheme's average bits.
    let w = layout(m, &wq.id, wq.bytes_per_weight());
    let (mut gpu_w, mut host_w) = weight_placement(m, &w, &s);
    if let Some(f) = file {
        // The user's file: its exact bytes, split as the modelled tensors split.
        let scale = f.bytes as f64
            / (gpu_w + host_w
                - if m.tied_embeddings && gpu_layers >= 1 {
                    embed_bytes(m, &w)
                } else {
                    0.0
                });
        gpu_w *= scale;
        host_w *= scale;
    }
    let mut wclaims = vec![
        "llamacpp-token-embedding-on-host",
        "llamacpp-gpu-layers-placement",
    ];
    if w.per_tensor {
        wclaims.push("llamacpp-quantize-tensor-types");
    } else {
        wclaims.extend(super::llm::weight_claims(wq));
    }
    b.add("weights", gpu_w, &wclaims);
    // KV cache: the layers on the GPU keep theirs there.
    let (cells, swa_cells) = kv_cells(m, l.context, l.batch, s.ubatch, l.swa_full, swa_arch(m));
    // K and V elements of one token in one layer (MLA: the compressed latent and rotary key).
    let per_token = m.kv_elements_per_layer_token() as f64 * kvq.bytes_per_weight();
    let sliding = if swa_arch(m) {
        m.sliding().map(|x| x.0).unwrap_or(0)
    } else {
        0
    };
    let gpu_repeating = gpu_layers.saturating_sub(1).min(layers);
    let per_layer_global = per_token * cells as f64;
    let per_layer_swa = per_token * swa_cells as f64;
    // Sliding layers alternate with global ones; on a partial offload count them in proportion.
    let swa_share = sliding as f64 / layers as f64;
    let kv_gpu =
        gpu_repeating as f64 * (swa_share * per_layer_swa + (1.0 - swa_share) * per_layer_global);
    let kv_host = (layers - gpu_repeating) as f64
        * (swa_share * per_layer_swa + (1.0 - swa_share) * per_layer_global);
    let mut kv_claims = vec!["llamacpp-kv-cache-cells", "llamacpp-context-layers-kv-type"];
    if ollama {
        kv_claims.push("ollama-context-times-parallel");
    }
    if m.sliding().is_some() {
        // Either the window cache, or the claim that says this architecture has none in llama.cpp.
        kv_claims.push("fit-llamacpp-sliding-window-cache");
    }
    b.add("kv-cache", kv_gpu, &kv_claims);
    // Compute buffer: the largest working set of one micro-batch.
    let ub = ubatch;
    let h = m.hidden as f64;
    let q = m.heads as f64 * m.head_dim as f64;
    let kv_elems = m.kv_elements_per_layer_token() as f64;
    let n_kv = cells as f64;
    let logits = if gpu_layers >= 1 {
        s.output_rows as f64 * (m.vocab as f64 + h) * 4.0
    } else {
        0.0
    };
    let ff = if m.is_moe() && m.dense_layers.unwrap_or(0) == 0 {
        (m.experts_per_token.unwrap_or(1) * m.moe_intermediate.unwrap_or(m.intermediate)) as f64
    } else {
        m.intermediate as f64
    };
    let mlp = ub * 4.0 * 4.0 * ff;
    let activations = ub * 4.0 * (2.0 * q + 2.0 * h);
    // The attention mask is a graph input (f16 for flash attention, f32 without): it stays
    // allocated from the first layer's attention to the last, so every layer's MLP working set
    // comes on top of it.
    let mask = n_kv * ub * if fa { 2.0 } else { 4.0 };
    let attention = if fa {
        activations
            + if kv_quantized {
                n_kv * kv_elems * 2.0
            } else {
                0.0
            }
    } else {
        n_kv * ub * m.heads as f64 * 4.0 + activations
    };
    // With every layer on the host the CUDA backend still runs large prompt batches (the weights
    // copied in): its compute buffer stays.
    let compute = logits.max(mask + mlp.max(attention));
    b.add(
        "compute-buffer",
        compute,
        &["fit-llamacpp-compute-buffer", "fit-llamacpp-ubatch"],
    );
    if !fa && gpu_repeating > 0 {
        // cuBLAS multiplies V by the softmax in f16: the CUDA backend converts the whole softmax
        // of one micro-batch in its memory pool, which keeps the high-water mark.
        let copy = n_kv * ub * m.heads as f64 * 2.0 + claim_number(ds, "fit-llamacpp-no-fa-pool")?;
        b.add("softmax-copy", copy, &["fit-llamacpp-no-fa-pool"]);
    }
    let mut overhead = claim_number(ds, "fit-llamacpp-process-overhead")?;
    let mut oclaims = vec!["fit-llamacpp-process-overhead"];
    if m.is_moe() {
        overhead += claim_number(ds, "fit-llamacpp-moe-overhead")?;
        oclaims.push("fit-llamacpp-moe-overhead");
    }
    b.add("cuda-context", overhead, &oclaims);
    // System RAM: the token embedding, the layers and experts kept off the GPU with their KV
    // cache, and the host compute buffer (the graph inputs the CUDA backend copies in: the
    // embedded micro-batch and the attention masks).
    b.add_host("weights", host_w, &["llamacpp-token-embedding-on-host", "llamacpp-gpu-layers-placement", "llamacpp-mmap-default"]);
    b.add_host("kv-cache", kv_host, &kv_claims);
    let masks = if sliding > 0 { n_kv + swa_cells as f64 } else { n_kv };
    let host_compute = ub * h * claim_number(ds, "fit-llamacpp-host-compute-buffer")?
        + masks * ub * if fa { 2.0 } else { 4.0 }
        + if fa { 0.0 } else { ub * q * 2.0 };
    b.add_host("compute-buffer", host_compute, &["fit-llamacpp-host-compute-buffer"]);
    if gpu_layers <= layers {
        b.note(
            "gpu-layers",
            &[
                ("on_gpu", gpu_repeating.to_string()),
                ("layers", layers.to_string()),
            ],
            "{on_gpu} of {layers} layers on the GPU; the rest run on the CPU, much slower.",
        );
    }
    if ollama {
        b.note("ollama-settings", &[("ubatch", format!("{ub}")), ("context", (l.context * l.batch).to_string())], "Ollama starts llama.cpp's server with a {context}-token context and a batch of {ubatch}, flash attention on auto.");
    }
    Ok(())
}

/// Bytes of the token embedding (what a tied output copies to the GPU).
fn embed_bytes(m: &Llm, w: &Layout) -> f64 {
    w.embd.min(m.vocab as f64 * m.hidden as f64 * 4.0)
}

/// Ollama's automatic batch (`server/sched.go`, v0.32.15): 2048 above 32k tokens of context,
/// 1024 above 4k, else 512; with flash attention off, 512 (256 on cards of 8 GiB or less above 4k
/// tokens, and the memory check that can lower the batch, are not modelled).
pub fn ollama_batch(ds: &Dataset, context: u64, flash_attention_off: bool) -> Result<f64, String> {
    let base = claim_number(ds, "fit-llamacpp-ubatch")?;
    Ok(if flash_attention_off {
        base
    } else if context > 32768 {
        4.0 * base
    } else if context > 4096 {
        2.0 * base
    } else {
        base
    })
}

/// Bytes of each tensor type in the file `llama-quantize` writes for a scheme (type name →
/// bytes), when the scheme is modelled tensor by tensor.
pub fn bytes_by_type(
    m: &Llm,
    scheme: &str,
) -> Option<std::collections::BTreeMap<&'static str, u64>> {
    let ts = tensors(m);
    let types = tensor_types(m, &ts, scheme)?;
    let mut out = std::collections::BTreeMap::new();
    for (t, ty) in ts.iter().zip(&types) {
        *out.entry(ty.name()).or_insert(0) += bytes(t, *ty) as u64;
    }
    Some(out)
}
