//! Image and video diffusion: component weights, the denoiser's working set, the VAE decode, the
//! text encoders; offload, block swap and tiled decoding change what is resident.

use super::*;
use crate::{Diffusion as Model, DiffusionFamily as Family, Modality};

/// Text tokens that join the image tokens in a diffusion transformer's attention (MMDiT-style
/// models), by the pipeline's default prompt length (claims `fit-default-text-tokens-*`);
/// cross-attention models (UNets, Wan) keep them apart.
fn joint_text_tokens(ds: &Dataset, family: Family) -> Result<f64, String> {
    match family {
        Family::Flux => claim_number(ds, "fit-default-text-tokens-flux"),
        Family::Sd3 => claim_number(ds, "fit-default-text-tokens-sd3"),
        Family::HunyuanVideo => claim_number(ds, "fit-default-text-tokens-hunyuanvideo"),
        Family::Sd15 | Family::Sdxl | Family::Wan => Ok(0.0),
    }
}

/// The claims that give a denoiser's allocator headroom, a base in GiB and a share of its working
/// set (measured per architecture: SD 1.5 and SDXL for the UNets; FLUX.1, SD 3.5, Wan 2.1 and
/// HunyuanVideo for the transformers).
fn headroom_claims(family: Family) -> (Option<&'static str>, Option<&'static str>) {
    match family {
        Family::Sd15 => (Some("fit-allocator-headroom-sd15"), None),
        Family::Sdxl => (Some("fit-allocator-headroom-sdxl"), Some("fit-allocator-headroom-sdxl-share")),
        Family::Flux => (Some("fit-allocator-headroom-flux"), Some("fit-allocator-headroom-flux-share")),
        Family::Sd3 => (Some("fit-allocator-headroom-sd3"), None),
        Family::HunyuanVideo => (None, Some("fit-allocator-headroom-hunyuanvideo-share")),
        Family::Wan => (Some("fit-allocator-headroom-wan"), Some("fit-allocator-headroom-wan-share")),
    }
}

/// Whether the model's pipeline runs classifier-free guidance by default.
pub fn default_cfg(family: Family) -> bool {
    // FLUX.1 and HunyuanVideo are guidance-distilled: one denoiser pass per step.
    !matches!(family, Family::Flux | Family::HunyuanVideo)
}

/// The format a model's pipeline is published and run in, where a reader starts: half precision
/// for Stable Diffusion 1.5 and XL (their fp16 checkpoints), bf16 for the later families.
pub fn default_precision(family: Family) -> &'static str {
    match family {
        Family::Sd15 | Family::Sdxl => "fp16",
        _ => "bf16",
    }
}

/// How the model's diffusers pipeline runs classifier-free guidance: the two predictions as one
/// batch (true) or one pass after the other (false), with the claim that says so.
pub fn guidance_batched(family: Family) -> (bool, &'static str) {
    match family {
        Family::Sd15 | Family::Sdxl | Family::Sd3 => (true, "diffusers-cfg-batched-stable-diffusion"),
        Family::Wan => (false, "diffusers-cfg-sequential-wan"),
        Family::Flux | Family::HunyuanVideo => (false, "diffusers-true-cfg-sequential"),
    }
}

/// The format a pipeline computes in, and its text encoders default to: the denoiser's when it is
/// a float format, bf16 under a quantized (GGUF) one.
pub fn compute_format(ds: &Dataset, precision: &str) -> String {
    if ds.quant(precision).is_some_and(|q| q.family == crate::QuantFamily::Float) { precision.to_string() } else { "bf16".to_string() }
}

/// The model's native output size (width, height).
/// The size a model was trained at, which its pipeline uses by default (claims
/// `fit-default-size-*`, `fit-default-width-wan`, `fit-default-height-wan`).
pub fn native_size(ds: &Dataset, m: &Model) -> Result<(u64, u64), String> {
    let px = |id: &str| claim_number(ds, id).map(|x| x as u64);
    Ok(match m.family {
        Family::Sd15 => (px("fit-default-size-sd15")?, px("fit-default-size-sd15")?),
        Family::HunyuanVideo => {
            let w = px("fit-default-size-hunyuanvideo")?;
            // 16:9, the pipeline's 1280 × 720.
            (w, w * 9 / 16)
        }
        Family::Wan => (px("fit-default-width-wan")?, px("fit-default-height-wan")?),
        Family::Sdxl | Family::Sd3 | Family::Flux => (px("fit-default-size-sdxl")?, px("fit-default-size-sdxl")?),
    })
}

/// Frames of a video workload that does not say (claims `fit-default-frames-*`; the Wan default
/// for the other video models).
pub fn default_frames(ds: &Dataset, m: &Model) -> Result<u64, String> {
    let id = if m.family == Family::HunyuanVideo { "fit-default-frames-hunyuanvideo" } else { "fit-default-frames-wan" };
    claim_number(ds, id).map(|x| x as u64)
}

/// Each weights term cites the claims about this model's component in this kind of format:
/// derivations over `params(<model>, <role>)` (or claims naming the model that derive the same
/// role), a GGUF claim only for a GGUF format and a float one only for a float format; when the
/// dataset has none for the model, the claim that gives the format's bytes per parameter.
fn weight_claims(ds: &Dataset, m: &Model, role: &str, q: &crate::Quant) -> Vec<String> {
    let is_gguf = |q: &crate::Quant| matches!(q.family, crate::QuantFamily::GgufType | crate::QuantFamily::GgufScheme);
    let own = format!("params({}, {role}", m.id);
    let any_role = format!(", {role}");
    let mut found: Vec<String> = ds
        .claims
        .iter()
        .filter(|c| c.verdict != crate::Verdict::Contradicted)
        .filter(|c| {
            c.sources.iter().any(|s| s.compute.as_deref().is_some_and(|e| e.contains(&own)))
                || (c.models.iter().any(|x| *x == m.id) && c.sources.iter().any(|s| s.compute.as_deref().is_some_and(|e| e.contains(&any_role))))
        })
        .filter(|c| {
            // A claim about GGUF files only for a GGUF format, and the other way round (from
            // its conditions and its derivations, the same in every language's data).
            let exprs = c.sources.iter().filter_map(|s| s.compute.as_ref());
            let gguf = c.conditions.values().chain(exprs).any(|v| v.contains("GGUF") || v.contains("Q4_K") || v.contains("Q8_0"));
            gguf == is_gguf(q)
        })
        .take(2)
        .map(|c| c.id.clone())
        .collect();
    if found.is_empty() {
        let generic = if is_gguf(q) {
            if q.bits >= 8.0 { "bits-per-weight-q8-0" } else { "bits-per-weight-q4-k-m" }
        } else if q.bits >= 32.0 {
            "bytes-per-param-fp32"
        } else if q.bits >= 16.0 {
            "bytes-per-param-16bit"
        } else {
            "bytes-per-param-8bit"
        };
        found.push(generic.to_string());
    }
    // The rule that a checkpoint file is not its runtime memory, for the models it names.
    let rule = "checkpoint-file-size-vs-runtime-vram";
    if role == "denoiser" && !found.iter().any(|c| c == rule) && ds.claim(rule).is_some_and(|c| c.models.iter().any(|x| *x == m.id)) {
        found.push(rule.into());
    }
    found
}

pub(crate) fn breakdown(ds: &Dataset, d: &Diffusion) -> Result<Breakdown, String> {
    breakdown_with(ds, d, true)
}

/// The breakdown; without `cite` the weights terms skip looking up their claims (the searches
/// over the engine only need the peak, and the lookup scans every claim).
pub(crate) fn breakdown_with(ds: &Dataset, d: &Diffusion, cite: bool) -> Result<Breakdown, String> {
    let m = model_of(ds, d)?;
    let s = shape(ds, m, d)?;
    let mut b = Breakdown::new();
    b.quiet = !cite;
    let den = denoiser(ds, m, d, &s, &mut b, cite)?;
    let vae = vae_decode(ds, m, d, &s, cite)?;
    let te = text_encoders(ds, m, &s, cite)?;
    gpu_terms(&mut b, m, d, &den, &vae, &te)?;
    host_terms(&mut b, d, &den, &vae, &te);
    b.add(TermId::Workspace, claim_number(ds, "fit-transformers-workspace")?, &["fit-transformers-workspace"]);
    // The headroom follows the denoiser step (measured per architecture as a share of its working
    // set); a text encode or a VAE decode alone needs none beyond the engine's working set.
    let (base, share) = match d.component {
        Component::Pipeline | Component::Denoiser => headroom_claims(m.family),
        Component::TextEncoder | Component::VaeDecode => (None, None),
    };
    add_runtime(ds, &mut b, den.part.act, base, share)?;
    Ok(b)
}

fn model_of<'a>(ds: &'a Dataset, d: &Diffusion) -> Result<&'a Model, String> {
    ds.diffusion_model(&d.model).ok_or_else(|| {
        if ds.llm(&d.model).is_some() {
            format!("field `model`: `{}` is an LLM; use \"kind\": \"llm-inference\" or \"training\"", d.model)
        } else {
            let known: Vec<&str> = ds.diffusion.iter().map(|m| m.id.as_str()).collect();
            format!("field `model`: unknown diffusion model `{}` (one of: {})", d.model, known.join(", "))
        }
    })
}

/// The workload once the model's defaults fill in what it leaves out.
struct Shape<'a> {
    w: u64,
    h: u64,
    frames: u64,
    latent_frames: f64,
    /// Latent height and width.
    lh: f64,
    lw: f64,
    /// Classifier-free guidance, whether its two predictions run as one batch, and the claim.
    cfg: bool,
    batched: bool,
    guidance_claim: &'static str,
    /// The denoiser's weight format, and the bytes of one activation value in the compute format.
    den_fmt: &'a crate::Quant,
    act_bytes: f64,
    te_fmt: String,
}

fn shape<'a>(ds: &'a Dataset, m: &Model, d: &Diffusion) -> Result<Shape<'a>, String> {
    let (nw, nh) = native_size(ds, m)?;
    let (w, h) = (d.width.unwrap_or(nw), d.height.unwrap_or(nh));
    let sc = m.spatial_compression as u64;
    if w == 0 || h == 0 || w % sc != 0 || h % sc != 0 {
        return Err(format!("fields `width`/`height`: {w}×{h} must be positive multiples of {sc}"));
    }
    if d.batch == 0 {
        return Err(crate::messages::say("at-least-one", &[("field", "batch")]));
    }
    let frames = match (m.modality, d.frames) {
        (Modality::Video, Some(f)) if f >= 1 => f,
        (Modality::Video, None) => default_frames(ds, m)?,
        (Modality::Video, Some(_)) => return Err(crate::messages::say("at-least-one", &[("field", "frames")])),
        (Modality::Image, Some(_)) => return Err(format!("field `frames`: `{}` makes images, not video", m.id)),
        (Modality::Image, None) => 1,
    };
    let tc = m.temporal_compression.unwrap_or(1) as u64;
    let (batched, guidance_claim) = guidance_batched(m.family);
    let den_fmt = quant(ds, &d.precision, "precision")?;
    let compute_fmt = compute_format(ds, &d.precision);
    Ok(Shape {
        w,
        h,
        frames,
        latent_frames: ((frames - 1) / tc + 1) as f64,
        lh: (h / sc) as f64,
        lw: (w / sc) as f64,
        cfg: d.cfg.unwrap_or_else(|| default_cfg(m.family)),
        batched,
        guidance_claim,
        den_fmt,
        act_bytes: if compute_fmt == "fp32" { 4.0 } else { 2.0 },
        te_fmt: d.text_encoder_precision.clone().unwrap_or(compute_fmt),
    })
}

/// One component on the GPU: its weights and its working set, each with the claims it cites.
struct Part {
    weights: f64,
    weight_claims: Vec<String>,
    act: f64,
    act_claims: Vec<&'static str>,
}

impl Part {
    fn add_to(&self, b: &mut Breakdown, term: TermId) {
        b.add(term, self.weights, &self.weight_claims());
        b.add(TermId::Activations, self.act, &self.act_claims);
    }

    fn weight_claims(&self) -> Vec<&str> {
        self.weight_claims.iter().map(String::as_str).collect()
    }
}

/// The denoiser: `part.weights` is what stays on the GPU of the first denoiser after block swap.
struct Denoiser {
    part: Part,
    /// The first denoiser's whole weights, its blocks, and the other denoisers' weights (Wan
    /// 2.2's second expert).
    one: f64,
    layers: u32,
    others: f64,
}

fn denoiser(ds: &Dataset, m: &Model, d: &Diffusion, s: &Shape, b: &mut Breakdown, cite: bool) -> Result<Denoiser, String> {
    // The user's checkpoint, when it is in the format asked for, gives the denoiser's exact bytes.
    let file = d.file.as_ref().filter(|f| ds.quant(&f.format).is_some_and(|q| q.id == s.den_fmt.id));
    if let Some(f) = file {
        b.note("checkpoint-weights", &[("bytes", f.bytes.to_string())], "denoiser weights: the {bytes} bytes of the checkpoint's tensors");
    }
    let denoisers: Vec<&crate::Component> = m.components.iter().filter(|c| c.role.starts_with("denoiser")).collect();
    let den = denoisers[0];
    let one = file.map(|f| f.bytes as f64).unwrap_or(den.params as f64 * s.den_fmt.bytes_per_weight());
    let layers = den.layers.unwrap_or(0);
    if d.block_swap > 0 && (layers == 0 || d.block_swap >= layers) {
        return Err(crate::messages::say("block-swap-too-many", &[("value", &d.block_swap.to_string()), ("model", &m.id), ("blocks", &layers.to_string())]));
    }
    let swapped = if layers > 0 { d.block_swap as f64 / layers as f64 } else { 0.0 };

    // The working set of one step.
    let b_eff = (d.batch * if s.cfg && s.batched { 2 } else { 1 }) as f64;
    let act = if m.family.is_unet() {
        let per_px = claim_number(ds, if m.family == Family::Sd15 { "fit-unet-sd15-working-set" } else { "fit-unet-sdxl-working-set" })?;
        b_eff * s.lh * s.lw * per_px * s.act_bytes / 2.0
    } else {
        let hidden = den.hidden.ok_or_else(|| format!("the catalog lacks the denoiser hidden size of `{}`", m.id))? as f64;
        let p = m.patch_size.unwrap_or(2) as f64;
        let tokens = s.latent_frames * (s.lh / p) * (s.lw / p) + joint_text_tokens(ds, m.family)?;
        b_eff * tokens * claim_number(ds, "fit-dit-working-set")? * hidden * s.act_bytes
    };
    // Guidance one pass after the other keeps the first prediction (one latent) meanwhile.
    let act = if s.cfg && !s.batched {
        if matches!(d.component, Component::Denoiser | Component::Pipeline) {
            b.note("cfg-sequential", &[], "guidance runs the denoiser twice per step, one pass after the other: it doubles the time, not the memory");
        }
        act + d.batch as f64 * m.latent_channels as f64 * s.latent_frames * s.lh * s.lw * s.act_bytes
    } else {
        act
    };
    // The working-set claim of the architecture, and the pixels rule for the models it is about.
    let scales = ds.claim("activations-scale-with-pixels").is_some_and(|c| c.models.iter().any(|x| *x == m.id));
    let mut act_claims = vec![if m.family == Family::Sd15 {
        "fit-unet-sd15-working-set"
    } else if m.family == Family::Sdxl {
        "fit-unet-sdxl-working-set"
    } else {
        "fit-dit-working-set"
    }];
    if scales && m.family != Family::Sd15 {
        act_claims.push("activations-scale-with-pixels");
    }
    if s.cfg {
        act_claims.push(s.guidance_claim);
    }
    Ok(Denoiser {
        part: Part { weights: one * (1.0 - swapped), weight_claims: weight_claims_if(cite, ds, m, "denoiser", s.den_fmt), act, act_claims },
        one,
        layers,
        others: denoisers.iter().skip(1).map(|c| c.params as f64 * s.den_fmt.bytes_per_weight()).sum(),
    })
}

fn weight_claims_if(cite: bool, ds: &Dataset, m: &Model, role: &str, q: &crate::Quant) -> Vec<String> {
    if cite { weight_claims(ds, m, role, q) } else { Vec::new() }
}

/// The VAE decode: the working set per decoded pixel, one chunk at a time, and the output (no
/// weights when the catalog has no VAE for the model).
fn vae_decode(ds: &Dataset, m: &Model, d: &Diffusion, s: &Shape, cite: bool) -> Result<Part, String> {
    let vae = m.component("vae");
    let px_per_image = (s.w * s.h) as f64;
    let tc = m.temporal_compression.unwrap_or(1) as f64;
    let chunk_px = if m.modality == Modality::Video { px_per_image * tc } else { px_per_image * d.batch as f64 };
    let chunk_px = if d.tiled_vae { chunk_px.min(claim_number(ds, "fit-tiled-vae-tile")?.powi(2)) } else { chunk_px };
    let output = d.batch as f64 * s.frames as f64 * px_per_image * 3.0 * s.act_bytes;
    let vae_q = quant(ds, if s.act_bytes == 4.0 { "fp32" } else { "bf16" }, "precision")?;
    Ok(Part {
        weights: vae.map(|c| c.params as f64 * s.act_bytes).unwrap_or(0.0),
        weight_claims: weight_claims_if(cite, ds, m, "vae", vae_q),
        act: chunk_px * claim_number(ds, "fit-vae-decode-working-set")? * s.act_bytes / 2.0 + output,
        act_claims: if d.tiled_vae { vec!["fit-vae-decode-working-set", "comfyui-vae-decode-tiled"] } else { vec!["fit-vae-decode-working-set"] },
    })
}

fn text_encoders(ds: &Dataset, m: &Model, s: &Shape, cite: bool) -> Result<Part, String> {
    let te_q = quant(ds, &s.te_fmt, "text_encoder_precision")?;
    let weights: f64 = m.components.iter().filter(|c| c.role.starts_with("text-encoder")).map(|c| c.params as f64 * te_q.bytes_per_weight()).sum();
    Ok(Part {
        weights,
        weight_claims: weight_claims_if(cite, ds, m, "text-encoder", te_q),
        act: weights * claim_number(ds, "fit-text-encoder-working-set")? / 100.0,
        act_claims: vec!["fit-text-encoder-working-set"],
    })
}

/// What the GPU holds at the workload's peak: one component alone, or the pipeline with every
/// component resident (the largest working set) or with offload (the largest stage).
fn gpu_terms(b: &mut Breakdown, m: &Model, d: &Diffusion, den: &Denoiser, vae: &Part, te: &Part) -> Result<(), String> {
    let te_on_gpu = d.text_encoders == Placement::Gpu;
    match d.component {
        Component::Denoiser => den.part.add_to(b, TermId::Weights),
        Component::TextEncoder => te.add_to(b, TermId::TextEncoderWeights),
        Component::VaeDecode => {
            if m.component("vae").is_none() {
                return Err(format!("the catalog has no VAE for `{}`", m.id));
            }
            vae.add_to(b, TermId::VaeWeights);
        }
        Component::Pipeline => {
            if m.component("vae").is_none() {
                b.note("no-vae", &[("model", m.name.clone())], "the catalog has no VAE size for {model}; the decode is not counted");
            }
            match d.offload {
                Offload::None => {
                    b.add(TermId::Weights, den.part.weights + den.others, &den.part.weight_claims());
                    if te_on_gpu {
                        b.add(TermId::TextEncoderWeights, te.weights, &te.weight_claims());
                    }
                    b.add(TermId::VaeWeights, vae.weights, &vae.weight_claims());
                    let te_act = if te_on_gpu { te.act } else { 0.0 };
                    let (act, claims) = [(den.part.act, &den.part.act_claims), (vae.act, &vae.act_claims), (te_act, &te.act_claims)]
                        .into_iter()
                        .fold((0.0, &den.part.act_claims), |acc, x| if x.0 > acc.0 { x } else { acc });
                    b.add(TermId::Activations, act, claims);
                }
                Offload::Model | Offload::Sequential => {
                    let per_layer = if den.layers > 0 { den.one / den.layers as f64 } else { den.one };
                    let den_stage = if d.offload == Offload::Sequential { per_layer } else { den.part.weights };
                    let stages = [
                        ("denoiser", den_stage + den.part.act),
                        ("vae-decode", vae.weights + vae.act),
                        ("text-encoder", if te_on_gpu { te.weights + te.act } else { 0.0 }),
                    ];
                    let (stage, _) = stages.iter().copied().fold(("denoiser", 0.0), |a, s| if s.1 > a.1 { s } else { a });
                    match stage {
                        "denoiser" => {
                            b.add(TermId::Weights, den_stage, &den.part.weight_claims());
                            b.add(TermId::Activations, den.part.act, &den.part.act_claims);
                        }
                        "vae-decode" => vae.add_to(b, TermId::VaeWeights),
                        _ => te.add_to(b, TermId::TextEncoderWeights),
                    }
                    b.note("offload-stage", &[("stage", stage.to_string())], "components move to the GPU one at a time; the peak is the {stage} stage");
                }
            }
        }
    }
    Ok(())
}

/// System RAM: with model or sequential offload the whole pipeline's weights wait there; text
/// encoders run there when placed on the CPU; swapped blocks live there.
fn host_terms(b: &mut Breakdown, d: &Diffusion, den: &Denoiser, vae: &Part, te: &Part) {
    if d.component == Component::Pipeline && d.offload != Offload::None {
        b.add_host(TermId::Weights, den.one + den.others, &["diffusers-offload-weights-in-ram"]);
        b.add_host(TermId::TextEncoderWeights, te.weights, &["diffusers-offload-weights-in-ram"]);
        b.add_host(TermId::VaeWeights, vae.weights, &["diffusers-offload-weights-in-ram"]);
    } else {
        if d.block_swap > 0 && matches!(d.component, Component::Pipeline | Component::Denoiser) {
            b.add_host(TermId::Weights, den.one - den.part.weights, &["wan-wrapper-block-swap"]);
        }
        if d.text_encoders == Placement::Cpu && d.component == Component::Pipeline {
            b.add_host(TermId::TextEncoderWeights, te.weights, &te.weight_claims());
        }
    }
    if d.block_swap > 0 {
        b.note(
            "block-swap",
            &[("swapped", d.block_swap.to_string()), ("blocks", den.layers.to_string())],
            "{swapped} of {blocks} denoiser blocks live in system RAM and are copied in as needed (slower)",
        );
    }
}
