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
use crate::Llm;
use crate::modelfile::GgmlType;

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
    let mut out = vec![Tensor { cat: Cat::TokenEmbd, layer: None, ne0: h, elems: h * m.vocab as u64, expert: false }];
    let t = |cat, layer, ne0: u64, elems: u64, expert| Tensor { cat, layer: Some(layer), ne0, elems, expert };
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
        out.push(Tensor { cat: Cat::Output, layer: None, ne0: h, elems: h * m.vocab as u64, expert: false });
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
        out.push(Tensor { cat: Cat::Small, layer: None, ne0: last.max(1), elems: last, expert: false });
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
                    if matches!(s.as_str(), "Q2_K" | "Q3_K_S" | "Q3_K_M" | "IQ4_NL" | "Q4_K_S" | "Q4_K_M" | "IQ4_XS") { Q5_K } else { ty }
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
    Some(ts.iter().zip(&types).map(|(t, ty)| bytes(t, *ty) as u64).sum())
}

/// How a llama.cpp process is set up, from the workload and each engine's defaults.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
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
    if let Some(hit) = CACHE.with(|c| c.borrow().iter().find(|(k, _)| *k == key).map(|(_, l)| l.clone())) {
        return hit;
    }
    let ts = tensors(m);
    let types = tensor_types(m, &ts, scheme);
    let mut out = Layout { embd: 0.0, outside: 0.0, layers: vec![(0.0, 0.0); m.layers as usize], per_tensor: types.is_some() };
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

/// The GPU each repeating layer and the output layer go to (None: the CPU), as `load_tensors`
/// assigns them (`src/llama-model.cpp`): with `-ngl N` the layers from `n_layer + 1 − N` on (the
/// output layer counted as layer `n_layer`) are on GPUs; layer `il` of those goes to the first GPU
/// whose cumulative share of `split` (normalised, in f32 as llama.cpp computes it) is above
/// `(il − first) / N`. One share: every GPU layer on that GPU.
pub(crate) fn layer_devices(n_layer: u32, gpu_layers: u32, split: &[f64]) -> (Vec<Option<usize>>, Option<usize>) {
    let n = n_layer as i64;
    let first = (n + 1 - gpu_layers as i64).max(0);
    let active = (gpu_layers as i64).min(n + 1);
    let mut cum: Vec<f32> = Vec::with_capacity(split.len());
    let mut sum = 0f32;
    for &x in split {
        sum += x as f32;
        cum.push(sum);
    }
    for c in &mut cum {
        *c /= sum;
    }
    let dev = |il: i64| -> Option<usize> {
        if il < first || il - first >= active || cum.is_empty() {
            return None;
        }
        let x = (il - first) as f32 / active as f32;
        Some(cum.partition_point(|&c| c <= x).min(cum.len() - 1))
    };
    ((0..n).map(dev).collect(), dev(n))
}

/// Where the weights live: bytes on each GPU, and on the host.
pub(crate) fn weight_placement(m: &Llm, w: &Layout, s: &Setup, devices: &(Vec<Option<usize>>, Option<usize>), n_dev: usize) -> (Vec<f64>, f64) {
    // The embedding stays on the host; a tied output is a copy of it in the output layer's buffer.
    let (mut gpu, mut host) = (vec![0.0; n_dev], w.embd);
    match devices.1 {
        Some(d) => {
            gpu[d] += w.outside;
            if m.tied_embeddings {
                gpu[d] += w.embd;
            }
        }
        None => host += w.outside,
    }
    for (l, &(dense, expert)) in w.layers.iter().enumerate() {
        match devices.0[l] {
            Some(d) => {
                gpu[d] += dense;
                if (l as u32) < s.cpu_moe_layers {
                    host += expert;
                } else {
                    gpu[d] += expert;
                }
            }
            None => host += dense + expert,
        }
    }
    (gpu, host)
}

/// Each GPU's share for the layer split: `tensor_split` as given, else each card's free memory
/// when the cards are known (llama.cpp's default), else equal shares.
fn split_shares(l: &LlmInference) -> Result<Vec<f64>, String> {
    let n = l.gpus as usize;
    if let Some(ts) = &l.tensor_split {
        if ts.len() != n {
            return Err(crate::messages::say("tensor-split-count", &[("shares", &ts.len().to_string()), ("gpus", &n.to_string())]));
        }
        if ts.iter().any(|x| !(x.is_finite() && *x >= 0.0)) {
            return Err(crate::messages::say("tensor-split-negative", &[]));
        }
        // All zero is llama.cpp's "not given".
        if ts.iter().any(|x| *x > 0.0) {
            return Ok(ts.clone());
        }
    }
    if l.card_budgets.len() == n {
        return Ok(l.card_budgets.iter().map(|&b| b as f64).collect());
    }
    Ok(vec![1.0; n])
}

/// KV cells of one global and one sliding-window layer, over every sequence.
pub(crate) fn kv_cells(m: &Llm, context: u64, seqs: u64, ubatch: u64, swa_full: bool, swa_arch: bool) -> (u64, u64) {
    let pad = |x: u64| x.div_ceil(256) * 256;
    let total = pad(context * seqs);
    let per_stream = if seqs > 1 { pad(total / seqs) } else { total };
    let base = per_stream * seqs;
    let swa = match m.sliding() {
        Some((_, w)) if swa_arch && !swa_full => (pad((w + ubatch).min(per_stream)) * seqs).min(base),
        _ => base,
    };
    (base, swa)
}

/// Whether llama.cpp gives this architecture a sliding-window cache (`LLAMA_SWA_TYPE_*` set in
/// `src/llama-model.cpp`'s hyperparameters).
fn swa_arch(m: &Llm) -> bool {
    matches!(m.model_type.as_deref(), Some("gemma2" | "gemma3" | "gemma3_text" | "gpt_oss" | "cohere2"))
}

/// The llama.cpp / Ollama breakdown.
pub(crate) fn breakdown(ds: &Dataset, l: &LlmInference, m: &Llm, wq: &Quant, kvq: &Quant, file: Option<&FileWeights>, b: &mut Breakdown) -> Result<(), String> {
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
    let kv_quantized = !matches!(kvq.id.to_ascii_lowercase().as_str(), "fp16" | "bf16" | "f16" | "fp32");
    if kv_quantized && !fa {
        return Err(crate::messages::say("kv-quantized-needs-fa", &[]));
    }
    let s = Setup {
        cpu_moe_layers: l.cpu_moe_layers.unwrap_or(0).min(layers),
        ubatch: ubatch as u64,
        output_rows: if l.server || ollama { l.batch.min(ubatch as u64) } else { ubatch as u64 },
    };
    let n_dev = l.gpus.max(1) as usize;
    match l.split_mode {
        Some(SplitMode::Row) if n_dev > 1 => return Err(crate::messages::say("split-row", &[])),
        Some(SplitMode::Tensor) if n_dev > 1 => return Err(crate::messages::say("split-tensor", &[])),
        _ => {}
    }
    let shares = split_shares(l)?;
    let devices = layer_devices(layers, gpu_layers, &shares);
    // Weights: tensor by tensor where the scheme is modelled, else the scheme's average bits.
    let w = layout(m, &wq.id, wq.bytes_per_weight());
    let (mut gpu_w, mut host_w) = weight_placement(m, &w, &s, &devices, n_dev);
    if let Some(f) = file {
        // The user's file: its exact bytes, split as the modelled tensors split.
        let tied_copy = if m.tied_embeddings && devices.1.is_some() { embed_bytes(m, &w) } else { 0.0 };
        let scale = f.bytes as f64 / (gpu_w.iter().sum::<f64>() + host_w - tied_copy);
        for g in &mut gpu_w {
            *g *= scale;
        }
        host_w *= scale;
    }
    let mut wclaims = vec!["llamacpp-token-embedding-on-host", "llamacpp-gpu-layers-placement"];
    if n_dev > 1 {
        wclaims.push("llamacpp-layer-split");
    }
    if w.per_tensor {
        wclaims.push("llamacpp-quantize-tensor-types");
    } else {
        wclaims.extend(super::llm::weight_claims(ds, wq, &m.id));
    }
    // KV cache: the layers on a GPU keep theirs there.
    let (cells, swa_cells) = kv_cells(m, l.context, l.batch, s.ubatch, l.swa_full, swa_arch(m));
    // K and V elements of one token in one layer (MLA: the compressed latent and rotary key).
    let per_token = m.kv_elements_per_layer_token() as f64 * kvq.bytes_per_weight();
    let sliding = if swa_arch(m) { m.sliding().map(|x| x.0).unwrap_or(0) } else { 0 };
    let per_layer_global = per_token * cells as f64;
    let per_layer_swa = per_token * swa_cells as f64;
    // Sliding layers alternate with global ones; on a partial offload count them in proportion.
    let swa_share = sliding as f64 / layers as f64;
    let per_layer = swa_share * per_layer_swa + (1.0 - swa_share) * per_layer_global;
    let mut layers_on = vec![0u32; n_dev];
    for d in devices.0.iter().flatten() {
        layers_on[*d] += 1;
    }
    let gpu_repeating: u32 = layers_on.iter().sum();
    let kv_host = (layers - gpu_repeating) as f64 * per_layer;
    let mut kv_claims = vec!["llamacpp-kv-cache-cells", "llamacpp-context-layers-kv-type"];
    if ollama {
        kv_claims.push("ollama-context-times-parallel");
    }
    if m.sliding().is_some() {
        // Either the window cache, or the claim that says this architecture has none in llama.cpp.
        kv_claims.push("fit-llamacpp-sliding-window-cache");
    }
    if n_dev > 1 {
        kv_claims.push("llamacpp-layer-split");
    }
    // Compute buffer: the largest working set of one micro-batch.
    let ub = ubatch;
    let h = m.hidden as f64;
    let q = m.heads as f64 * m.head_dim as f64;
    let kv_elems = m.kv_elements_per_layer_token() as f64;
    let n_kv = cells as f64;
    let logits = s.output_rows as f64 * (m.vocab as f64 + h) * 4.0;
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
    let attention = if fa { activations + if kv_quantized { n_kv * kv_elems * 2.0 } else { 0.0 } } else { n_kv * ub * m.heads as f64 * 4.0 + activations };
    let layer_set = mask + mlp.max(attention);
    let mut overhead = claim_number(ds, "fit-llamacpp-process-overhead")?;
    let mut oclaims = vec!["fit-llamacpp-process-overhead"];
    if m.is_moe() {
        overhead += claim_number(ds, "fit-llamacpp-moe-overhead")?;
        oclaims.push("fit-llamacpp-moe-overhead");
    }
    if n_dev > 1 {
        oclaims.push("fit-llamacpp-overhead-per-gpu");
    }
    let no_fa_pool = if fa { 0.0 } else { claim_number(ds, "fit-llamacpp-no-fa-pool")? };
    // llama.cpp turns pipeline parallelism on with several GPUs in layer mode when every layer is
    // on them (`src/llama-context.cpp`); the copies were measured on virtual devices.
    let pipeline = n_dev > 1 && gpu_layers > layers;
    let copies = if pipeline { claim_number(ds, "fit-llamacpp-pipeline-copies")? } else { 0.0 };
    let all_masks = (n_kv + if sliding > 0 { swa_cells as f64 } else { 0.0 }) * ub * if fa { 2.0 } else { 4.0 };
    for d in 0..n_dev {
        let mut terms = Vec::new();
        put(&mut terms, TermId::Weights, gpu_w[d], &wclaims);
        put(&mut terms, TermId::KvCache, layers_on[d] as f64 * per_layer, &kv_claims);
        // With every layer on the host the CUDA backend still runs large prompt batches on the
        // first GPU (the weights copied in): its compute buffer stays. The output layer's GPU
        // holds the logits.
        let working = if layers_on[d] > 0 || d == 0 { layer_set } else { 0.0 };
        let compute = if devices.1 == Some(d) { logits.max(working) } else { working };
        put(&mut terms, TermId::ComputeBuffer, compute, &["fit-llamacpp-compute-buffer", "fit-llamacpp-ubatch"]);
        if pipeline {
            // Pipeline parallelism keeps four copies of each split's inputs (the masks and the
            // hidden state of one micro-batch) so that micro-batches can overlap across GPUs.
            let first = d == 0;
            let last = devices.1 == Some(d);
            let (a, e) = if first {
                (copies - 1.0, copies - 1.0)
            } else if last {
                (copies, 2.0 * copies)
            } else {
                (copies, copies - 1.0)
            };
            put(&mut terms, TermId::PipelineCopies, a * all_masks + e * ub * h * 4.0, &["fit-llamacpp-pipeline-copies", "llamacpp-layer-split"]);
        }
        if !fa && layers_on[d] > 0 {
            // cuBLAS multiplies V by the softmax in f16: the CUDA backend converts the whole softmax
            // of one micro-batch in its memory pool, which keeps the high-water mark.
            put(&mut terms, TermId::SoftmaxCopy, n_kv * ub * m.heads as f64 * 2.0 + no_fa_pool, &["fit-llamacpp-no-fa-pool"]);
        }
        put(&mut terms, TermId::CudaContext, overhead, &oclaims);
        if n_dev == 1 {
            b.terms = terms;
        } else {
            b.devices.push(terms);
        }
    }
    // System RAM: the token embedding, the layers and experts kept off the GPU with their KV
    // cache, and the host compute buffer (the graph inputs the CUDA backend copies in: the
    // embedded micro-batch and the attention masks).
    b.add_host(TermId::Weights, host_w, &["llamacpp-token-embedding-on-host", "llamacpp-gpu-layers-placement", "llamacpp-mmap-default"]);
    b.add_host(TermId::KvCache, kv_host, &kv_claims);
    let masks = if sliding > 0 { n_kv + swa_cells as f64 } else { n_kv };
    let host_compute =
        ub * h * claim_number(ds, "fit-llamacpp-host-compute-buffer")? + masks * ub * if fa { 2.0 } else { 4.0 } + if fa { 0.0 } else { ub * q * 2.0 };
    b.add_host(TermId::ComputeBuffer, host_compute, &["fit-llamacpp-host-compute-buffer"]);
    if pipeline {
        // The host's graph inputs are copied as the GPUs' are.
        let inputs = all_masks + ub * h * 4.0 + if fa { 0.0 } else { ub * q * 2.0 };
        b.add_host(TermId::PipelineCopies, (copies - 1.0) * inputs, &["fit-llamacpp-pipeline-copies"]);
    }
    if gpu_layers <= layers {
        b.note(
            "gpu-layers",
            &[("on_gpu", gpu_repeating.to_string()), ("layers", layers.to_string())],
            "{on_gpu} of {layers} layers on the GPU; the rest run on the CPU, much slower.",
        );
    }
    if n_dev > 1 {
        let counts: Vec<String> = layers_on.iter().map(|c| c.to_string()).collect();
        b.note(
            "layer-split",
            &[("counts", counts.join(" + ")), ("output", devices.1.map_or("CPU".into(), |d| format!("GPU {d}")))],
            "Layers per GPU: {counts}; the output layer on {output}. Each GPU keeps the KV cache of its own layers.",
        );
        if ollama {
            b.note(
                "ollama-split",
                &[],
                "Ollama chooses the split from its own estimate of each GPU's free memory; the split shown is llama.cpp's own, in proportion to the shares.",
            );
        }
    }
    if ollama {
        b.note(
            "ollama-settings",
            &[("ubatch", format!("{ub}")), ("context", (l.context * l.batch).to_string())],
            "Ollama starts llama.cpp's server with a {context}-token context and a batch of {ubatch}, flash attention on auto.",
        );
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
pub fn bytes_by_type(m: &Llm, scheme: &str) -> Option<std::collections::BTreeMap<&'static str, u64>> {
    let ts = tensors(m);
    let types = tensor_types(m, &ts, scheme)?;
    let mut out = std::collections::BTreeMap::new();
    for (t, ty) in ts.iter().zip(&types) {
        *out.entry(ty.name()).or_insert(0) += bytes(t, *ty) as u64;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::layer_devices;

    /// Layers per GPU and the output layer's GPU, from `layer_devices`.
    fn counts(n_layer: u32, ngl: u32, split: &[f64]) -> (Vec<u32>, Option<usize>) {
        let (layers, output) = layer_devices(n_layer, ngl, split);
        let mut c = vec![0; split.len()];
        for d in layers.iter().flatten() {
            c[*d] += 1;
        }
        (c, output)
    }

    #[test]
    fn layer_split_follows_llamacpps_split_points() {
        // 32 layers, all on the GPUs (-ngl 33 counts the output layer): with -ts 3,1 the split
        // point is 0.75, so layers 0..=24 (il/33 < 0.75) go to GPU 0 and 25..=31 with the output
        // layer (il = 32) to GPU 1.
        assert_eq!(counts(32, 33, &[3.0, 1.0]), (vec![25, 7], Some(1)));
        // Equal shares: il/33 < 0.5 up to il 16.
        assert_eq!(counts(32, 33, &[1.0, 1.0]), (vec![17, 15], Some(1)));
        // Three GPUs at 2:1:1: points 0.5 and 0.75.
        assert_eq!(counts(32, 33, &[2.0, 1.0, 1.0]), (vec![17, 8, 7], Some(2)));
        // -ngl 20 with -ts 1,3: the GPU range starts at layer 13; (il − 13)/20 < 0.25 for five
        // layers; the 13 first layers stay on the CPU.
        let (layers, output) = layer_devices(32, 20, &[1.0, 3.0]);
        assert_eq!(layers.iter().filter(|d| d.is_none()).count(), 13);
        assert_eq!(counts(32, 20, &[1.0, 3.0]), (vec![5, 14], Some(1)));
        assert_eq!(output, Some(1));
        // A zero share gets nothing; -ngl 0 puts nothing on any GPU.
        assert_eq!(counts(32, 33, &[0.0, 1.0]), (vec![0, 32], Some(1)));
        assert_eq!(counts(32, 0, &[1.0, 1.0]), (vec![0, 0], None));
        // One GPU: every GPU layer on it (the single-GPU placement).
        assert_eq!(counts(32, 16, &[1.0]), (vec![15], Some(0)));
    }
}
