//! Which catalog diffusion model a checkpoint is, from its tensor table (names, shapes, types,
//! bytes), as people download them for ComfyUI and diffusers.
//!
//! A file is split into components by name prefix (`model.diffusion_model.` the denoiser,
//! `first_stage_model.` / `vae.` the VAE, `cond_stage_model.`, `conditioner.embedders.N.` and
//! `text_encoders.*.` the text encoders; a file with none of these prefixes is a bare denoiser),
//! then the denoiser's names say its family and its shapes its size. The distinguishing keys are
//! those of the reference loaders:
//!
//! * ComfyUI `comfy/model_detection.py` `detect_unet_config` (Comfy-Org/ComfyUI at commit
//!   0b61ce5baa9ea03d8484729b7eb00e77c6fca227): FLUX by `double_blocks.0.img_attn.norm.key_norm`
//!   plus `img_in.weight`, FLUX.2 by `double_stream_modulation_img.lin.weight`, Chroma by
//!   `distilled_guidance_layer.`, `guidance_in.in_layer.weight` for the guidance-distilled
//!   [dev]; HunyuanVideo by `txt_in.individual_token_refiner.blocks.0.norm1.weight`; SD3 by
//!   `joint_blocks.0.context_block.attn.qkv.weight`, its depth from `x_embedder.proj.weight`'s
//!   width / 64 and MMDiT-X by `x_block.attn2.`; Wan 2.1 by `head.modulation` (width = its last
//!   dimension), blocks counted from `blocks.N.`, input channels from `patch_embedding.weight`,
//!   image-to-video by `img_emb.`, VACE by `vace_patch_embedding`; the LDM UNet's context width
//!   from `…transformer_blocks.0.attn2.to_k.weight`.
//! * diffusers `src/diffusers/loaders/single_file_utils.py` `CHECKPOINT_KEY_NAMES` and
//!   `infer_diffusers_model_type` (huggingface/diffusers at commit
//!   58eb52c0803ea9af3abec60841c2a093bdf1f951): `model.diffusion_model.output_blocks.11.0.skip_connection.weight`
//!   (SD 1.x), `conditioner.embedders.1.model.transformer.resblocks.9.mlp.c_proj.bias` (SDXL base),
//!   `joint_blocks.37.x_block.mlp.fc1.weight` (SD 3.5 Large), FLUX [dev] versus [schnell] by
//!   `guidance_in.in_layer.bias`, Fill / Depth by `img_in.weight`'s 384 / 128 input features, Wan
//!   1.3B versus 14B by `patch_embedding.weight`'s 1536 / 5120 output channels,
//!   `txt_in.individual_token_refiner.blocks.0.adaLN_modulation.1.bias` (HunyuanVideo).
//! * city96's ComfyUI-GGUF `tools/convert.py` (`ModelFlux`, `ModelSD3`, `ModelWan`, `ModelSDXL`,
//!   `ModelSD1` `keys_detect`; city96/ComfyUI-GGUF at commit
//!   795e45156ece99afbc3efef911e63fcb46e6a20d): its GGUF files keep the original checkpoints'
//!   names (diffusers FLUX/SD3 files are refused there, `transformer_blocks.0.attn.norm_added_k.weight`
//!   and `…add_q_proj.weight` being the diffusers markers), and `tools/lcpp.patch`
//!   (`img_tensor_get_type`) says which ggml types each `llama-quantize` scheme gives an image
//!   model: `Q4_K_S` all Q4_K (Q5_K for a few `to_v` / FFN-down tensors), `Q4_K_M` Q4_K with Q5_K
//!   and Q6_K, `Q5_K_S` all Q5_K, `Q5_K_M` with Q6_K, `Q3_K_S` all Q3_K, `Q3_K_M` / `Q3_K_L` with
//!   Q4_K and Q5_K; 1-D tensors and the embedders stay F32/F16/BF16.
//!
//! Shapes are not relied on in any particular order (a GGUF stores them innermost first, a
//! safetensors header outermost first): widths come from 1-D tensors (biases, norms) and the
//! other dimensions from element counts.
//!
//! Pure: no I/O, builds for wasm32.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::gguf::GgmlType;
use super::{GGUF_ARCHITECTURES, ModelFile};
use crate::{Dataset, Diffusion, DiffusionFamily, QuantFamily};

/// One tensor of a model file's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TensorEntry<'a> {
    pub name: &'a str,
    /// As the file stores it: PyTorch order for safetensors, ggml order (innermost first) for GGUF.
    pub shape: &'a [u64],
    /// Bytes of its data in the file.
    pub bytes: u64,
    /// The file's type name: a safetensors dtype (`BF16`, `F8_E4M3`, …) or a ggml type (`Q4_K`, …).
    pub dtype: &'a str,
}

impl TensorEntry<'_> {
    /// Number of values (1 for a scalar).
    pub fn elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }
}

/// What a checkpoint was recognised as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recognized {
    /// The catalog id (`flux.1-dev`, `sd-1.5`, …).
    pub model: String,
    /// How the file names its tensors: `bfl`, `bfl single file`, `diffusers`, `ldm single file`,
    /// `ldm unet`, `mmdit`, `wan`, `hunyuanvideo`, `comfyui-gguf` (city96's GGUF conversions).
    pub layout: String,
    /// (catalog role or `other`, bytes in this file, values), the denoiser first, then the
    /// catalog's order.
    pub components: Vec<(String, u64, u64)>,
    /// The denoiser's storage as the catalog names formats (`bf16`, `fp8`, `Q8_0`, `Q4_K_S`, …).
    pub format: Option<String>,
    pub notes: Vec<String>,
}

/// The tensor table of a parsed GGUF or safetensors file (empty for an index or a config).
pub fn entries_of(file: &ModelFile) -> Vec<TensorEntry<'_>> {
    match file {
        ModelFile::Gguf(g) => g.tensors.iter().map(|t| TensorEntry { name: &t.name, shape: &t.dims, bytes: t.bytes, dtype: t.ggml_type.name() }).collect(),
        ModelFile::Safetensors(s) => s.tensors.iter().map(|t| TensorEntry { name: &t.name, shape: &t.shape, bytes: t.bytes, dtype: t.dtype.name() }).collect(),
        ModelFile::SafetensorsIndex(_) | ModelFile::Config(_) => Vec::new(),
    }
}

/// [`recognize`] on a parsed file, with what the container adds: a GGUF of a language-model
/// architecture is refused by its `general.architecture`, a GGUF's layout is `comfyui-gguf`, and
/// a `general.architecture` that disagrees with the tensors is noted.
pub fn recognize_file(ds: &Dataset, file: &ModelFile) -> Result<Recognized, String> {
    match file {
        ModelFile::Gguf(g) => {
            let arch = g.architecture();
            if let Some(a) = arch.filter(|a| GGUF_ARCHITECTURES.iter().any(|(x, _)| x == a)) {
                return Err(format!("this is a language-model GGUF (general.architecture = `{a}`), not a diffusion checkpoint"));
            }
            let mut r = recognize(ds, &entries_of(file))?;
            r.layout = "comfyui-gguf".into();
            let want = ds.diffusion_model(&r.model).map(|m| gguf_arch_of(m.family));
            if let (Some(a), Some(w)) = (arch, want)
                && a != w
            {
                r.notes.push(format!("the GGUF says general.architecture = `{a}`, but its tensors are those of `{w}` ({})", r.model));
            }
            Ok(r)
        }
        ModelFile::Safetensors(_) => recognize(ds, &entries_of(file)),
        ModelFile::SafetensorsIndex(_) => {
            Err("a sharded checkpoint's index lists tensor names without shapes: open one of its .safetensors shards instead".into())
        }
        ModelFile::Config(_) => Err("a config.json holds no tensors: open the .safetensors or .gguf file instead".into()),
    }
}

/// The `general.architecture` city96's converter writes for a model family.
fn gguf_arch_of(family: DiffusionFamily) -> &'static str {
    use DiffusionFamily as F;
    match family {
        F::Flux => "flux",
        F::Sd15 => "sd1",
        F::Sdxl => "sdxl",
        F::Sd3 => "sd3",
        F::Wan => "wan",
        F::HunyuanVideo => "hyvid",
    }
}

/// Largest relative difference between the denoiser's values and the catalog's `params` that
/// passes without a note.
pub const PARAMS_TOLERANCE: f64 = 0.02;

/// Recognises a diffusion checkpoint from its tensor table and checks it against the catalog.
///
/// `Err` names the first tensors and the layouts tried when no layout matches, or says what the
/// file is when it is recognisably something else (a language model, a VAE or text encoder on
/// its own, a LoRA, a diffusion model the catalog lacks).
pub fn recognize(ds: &Dataset, tensors: &[TensorEntry]) -> Result<Recognized, String> {
    if tensors.is_empty() {
        return Err("the file has no tensors".into());
    }
    let parts = split(tensors);
    let den = Table::new(&parts.denoiser);
    let found = if den.is_empty() { None } else { detect(&den)? };
    let Some(found) = found else {
        return Err(unrecognised(tensors, &parts));
    };
    let mut notes = found.notes;
    let find = |id: &str| ds.diffusion.iter().find(|d| d.id == id);
    let model: &Diffusion = match (find(found.model), found.alt.and_then(find)) {
        (Some(m), _) => m,
        (None, Some(alt)) => {
            notes.push(format!("the tensors are those of `{}`, which the catalog does not have; counted as its same-sized sibling `{}`", found.model, alt.id));
            alt
        }
        (None, None) => {
            return Err(format!("the tensors are those of `{}`, which the catalog does not have", found.model));
        }
    };

    // Components, by catalog role.
    let mut comps: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut add = |role: &str, t: &TensorEntry| {
        let c = comps.entry(role.to_string()).or_insert((0, 0));
        c.0 += t.bytes;
        c.1 += t.elements();
    };
    for (_, t) in &parts.denoiser {
        add("denoiser", t);
    }
    for t in &parts.vae {
        add("vae", t);
    }
    let mut unplaced: BTreeSet<&str> = BTreeSet::new();
    for (enc, t) in &parts.text {
        match encoder_role(found.family, *enc).filter(|r| model.component(r).is_some()) {
            Some(role) => add(role, t),
            None => {
                unplaced.insert(enc.name());
                add("other", t)
            }
        }
    }
    for t in &parts.other {
        add("other", t);
    }
    for e in unplaced {
        notes.push(format!("a {e} text encoder, which {} does not use, is counted under `other`", model.name));
    }
    let mut components = Vec::new();
    for c in &model.components {
        if let Some((bytes, elements)) = comps.remove(&c.role) {
            check_params(&c.role, elements, c.params, &model.name, &mut notes);
            components.push((c.role.clone(), bytes, elements));
        }
    }
    // A role the catalog lacks (a VAE in a Wan 2.2 file, say) is kept under its own name.
    let other = comps.remove("other");
    components.extend(comps.into_iter().map(|(role, (b, e))| (role, b, e)));
    if let Some((b, e)) = other {
        components.push(("other".into(), b, e));
    }

    let den_entries: Vec<&TensorEntry> = parts.denoiser.iter().map(|(_, t)| *t).collect();
    let (format, gguf) = storage_format(ds, &den_entries, &mut notes);
    let layout = match (gguf, parts.prefixed, found.layout.as_str()) {
        (true, _, _) => "comfyui-gguf".to_string(),
        (false, true, l) => format!("{l} single file"),
        (false, false, "ldm") => "ldm unet".to_string(),
        (false, false, l) => l.to_string(),
    };
    Ok(Recognized { model: model.id.clone(), layout, components, format, notes })
}

fn check_params(role: &str, elements: u64, params: u64, name: &str, notes: &mut Vec<String>) {
    if params == 0 {
        return;
    }
    let diff = (elements as f64 - params as f64) / params as f64;
    if diff.abs() > PARAMS_TOLERANCE {
        let what = if role == "denoiser" { ": a pruned, merged or extended model, or the catalog's figure is a rounded one" } else { "" };
        notes.push(format!(
            "{role}: {elements} values in the file ({}), the catalog gives {name} {} ({:+.1} %){what}",
            short(elements),
            short(params),
            diff * 100.0
        ));
    }
}

/// `1.42 B`, `83.7 M`.
fn short(n: u64) -> String {
    let x = n as f64;
    if x >= 1e9 { format!("{:.2} B", x / 1e9) } else { format!("{:.1} M", x / 1e6) }
}

// ---------------------------------------------------------------------------------------------
// Components by prefix
// ---------------------------------------------------------------------------------------------

/// A text encoder, by what it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Encoder {
    ClipL,
    ClipG,
    OpenClipH,
    T5,
    Llm,
    Unknown,
}

impl Encoder {
    fn name(self) -> &'static str {
        match self {
            Encoder::ClipL => "CLIP ViT-L",
            Encoder::ClipG => "OpenCLIP ViT-bigG",
            Encoder::OpenClipH => "OpenCLIP ViT-H",
            Encoder::T5 => "T5",
            Encoder::Llm => "language-model",
            Encoder::Unknown => "unidentified",
        }
    }
}

/// The denoiser prefix of LDM-style single files (SD 1.x/2.x/XL/3.x, ComfyUI's saved checkpoints).
const LDM_DENOISER: &str = "model.diffusion_model.";

/// Prefixes of the other components of single-file checkpoints.
const PREFIXES: &[(&str, Part)] = &[
    ("first_stage_model.", Part::Vae),
    ("vae.", Part::Vae),
    // SD 1.x: transformers' CLIPTextModel; SD 2.x: open_clip's ViT-H.
    ("cond_stage_model.transformer.", Part::Text(Encoder::ClipL)),
    ("cond_stage_model.model.", Part::Text(Encoder::OpenClipH)),
    ("cond_stage_model.", Part::Text(Encoder::Unknown)),
    // SDXL base: CLIP ViT-L then OpenCLIP bigG; the refiner has bigG alone as embedder 0.
    ("conditioner.embedders.0.transformer.", Part::Text(Encoder::ClipL)),
    ("conditioner.embedders.0.model.", Part::Text(Encoder::ClipG)),
    ("conditioner.embedders.1.model.", Part::Text(Encoder::ClipG)),
    ("conditioner.", Part::Text(Encoder::Unknown)),
    // ComfyUI's saved checkpoints (SD3, FLUX).
    ("text_encoders.clip_l.", Part::Text(Encoder::ClipL)),
    ("text_encoders.clip_g.", Part::Text(Encoder::ClipG)),
    ("text_encoders.t5xxl.", Part::Text(Encoder::T5)),
    ("text_encoders.umt5xxl.", Part::Text(Encoder::T5)),
    ("text_encoders.llama.", Part::Text(Encoder::Llm)),
    ("text_encoders.", Part::Text(Encoder::Unknown)),
    ("model_ema.", Part::Other),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Vae,
    Text(Encoder),
    Other,
}

struct Parts<'t, 'a> {
    /// (name without the denoiser prefix, entry).
    denoiser: Vec<(&'a str, &'t TensorEntry<'a>)>,
    prefixed: bool,
    vae: Vec<&'t TensorEntry<'a>>,
    text: Vec<(Encoder, &'t TensorEntry<'a>)>,
    other: Vec<&'t TensorEntry<'a>>,
}

fn split<'t, 'a>(tensors: &'t [TensorEntry<'a>]) -> Parts<'t, 'a> {
    let prefixed = tensors.iter().any(|t| t.name.starts_with(LDM_DENOISER));
    let mut p = Parts { denoiser: Vec::new(), prefixed, vae: Vec::new(), text: Vec::new(), other: Vec::new() };
    for t in tensors {
        if let Some(rest) = t.name.strip_prefix(LDM_DENOISER) {
            p.denoiser.push((rest, t));
            continue;
        }
        match PREFIXES.iter().find(|(pre, _)| t.name.starts_with(pre)).map(|(_, part)| *part) {
            Some(Part::Vae) => p.vae.push(t),
            Some(Part::Text(e)) => p.text.push((e, t)),
            Some(Part::Other) => p.other.push(t),
            // In a single file, what is left are the sampler's buffers (`alphas_cumprod`, …).
            None if prefixed => p.other.push(t),
            None => p.denoiser.push((t.name, t)),
        }
    }
    p
}

// ---------------------------------------------------------------------------------------------
// The denoiser's table
// ---------------------------------------------------------------------------------------------

struct Table<'t, 'a> {
    by_name: BTreeMap<&'a str, &'t TensorEntry<'a>>,
}

impl<'t, 'a> Table<'t, 'a> {
    fn new(entries: &[(&'a str, &'t TensorEntry<'a>)]) -> Self {
        Table { by_name: entries.iter().copied().collect() }
    }

    fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    fn has(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    fn any_prefix(&self, prefix: &str) -> bool {
        self.by_name.range(prefix..).next().is_some_and(|(k, _)| k.starts_with(prefix))
    }

    fn any_containing(&self, part: &str) -> bool {
        self.by_name.keys().any(|k| k.contains(part))
    }

    /// Values of a tensor (a 1-D tensor's length).
    fn elements(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).map(|t| t.elements())
    }

    /// How many `{prefix}N.` blocks there are (distinct N).
    fn count_blocks(&self, prefix: &str) -> u32 {
        let mut seen = BTreeSet::new();
        for (k, _) in self.by_name.range(prefix..) {
            let Some(rest) = k.strip_prefix(prefix) else {
                break;
            };
            if let Some((n, _)) = rest.split_once('.')
                && let Ok(i) = n.parse::<u32>()
            {
                seen.insert(i);
            }
        }
        seen.len() as u32
    }

    /// `elements(name) / div`, when the tensor exists and `div` divides it.
    fn ratio(&self, name: &str, div: u64) -> Option<u64> {
        self.elements(name).filter(|&e| div > 0 && e % div == 0).map(|e| e / div)
    }
}

/// The catalog role of a text encoder in a family's pipelines.
fn encoder_role(family: DiffusionFamily, e: Encoder) -> Option<&'static str> {
    use DiffusionFamily as F;
    use Encoder::*;
    Some(match (family, e) {
        (F::Sd15 | F::Sdxl | F::Sd3 | F::Flux, ClipL) => "text-encoder",
        (F::Sdxl | F::Sd3, ClipG) => "text-encoder-2",
        (F::Sd3, T5) => "text-encoder-3",
        (F::Flux, T5) => "text-encoder-2",
        (F::HunyuanVideo, Llm) | (F::Wan, T5) => "text-encoder",
        (F::HunyuanVideo, ClipL) => "text-encoder-2",
        _ => return None,
    })
}

struct Found {
    model: &'static str,
    /// A catalog model of the same size to fall back on when the catalog lacks `model` (FLUX.1
    /// [dev] and [schnell] differ only by the guidance embedder).
    alt: Option<&'static str>,
    family: DiffusionFamily,
    layout: String,
    notes: Vec<String>,
}

/// The layouts tried, in order, for the error message.
const LAYOUTS_TRIED: &str = "FLUX.1 (Black Forest Labs' `double_blocks`/`single_blocks`, diffusers' `transformer_blocks`/`single_transformer_blocks`), \
HunyuanVideo (original, diffusers), SD 3.5 (`joint_blocks`, diffusers), Wan 2.1/2.2 (`blocks.N.self_attn`, diffusers), \
SD 1.5 / SDXL UNet (LDM `input_blocks`, diffusers `down_blocks`)";

/// `Ok(None)`: no layout matched. `Err`: a layout matched, but not a catalog model.
fn detect(t: &Table) -> Result<Option<Found>, String> {
    // HunyuanVideo shares FLUX's double/single blocks; its token refiner tells it apart.
    if t.any_prefix("txt_in.individual_token_refiner.") {
        return hunyuan(t, "hunyuanvideo").map(Some);
    }
    let bfl_flux = (t.has("double_blocks.0.img_attn.norm.key_norm.scale") || t.has("double_blocks.0.img_attn.norm.key_norm.weight"))
        && (t.has("img_in.weight") || t.any_prefix("distilled_guidance_layer."));
    if bfl_flux {
        return flux_bfl(t).map(Some);
    }
    if t.any_prefix("context_embedder.token_refiner.") && t.any_prefix("transformer_blocks.") {
        return hunyuan(t, "diffusers").map(Some);
    }
    if t.has("transformer_blocks.0.attn.norm_added_k.weight") && t.any_prefix("single_transformer_blocks.") {
        return flux_diffusers(t).map(Some);
    }
    if t.has("joint_blocks.0.context_block.attn.qkv.weight") || t.has("joint_blocks.0.context_block.adaLN_modulation.1.bias") {
        let depth = t.count_blocks("joint_blocks.");
        let hidden = t.elements("x_embedder.proj.bias");
        let x = t.any_containing(".x_block.attn2.");
        return sd3(depth, hidden, x, "mmdit").map(Some);
    }
    if t.has("transformer_blocks.0.attn.add_q_proj.weight") && t.has("pos_embed.proj.weight") {
        let depth = t.count_blocks("transformer_blocks.");
        let hidden = t.elements("pos_embed.proj.bias");
        let x = t.has("transformer_blocks.0.attn2.to_q.weight") || t.by_name.keys().any(|k| k.starts_with("transformer_blocks.") && k.contains(".attn2."));
        return sd3(depth, hidden, x, "diffusers").map(Some);
    }
    if t.has("head.modulation") && (t.has("blocks.0.self_attn.q.weight") || t.has("blocks.0.self_attn.norm_q.weight")) {
        let dim = t.ratio("head.modulation", 2);
        let in_dim = dim.and_then(|d| t.ratio("patch_embedding.weight", d * 4));
        let wan = Wan {
            dim,
            layers: t.count_blocks("blocks."),
            in_dim,
            has_patch: t.has("patch_embedding.weight"),
            i2v: t.any_prefix("img_emb."),
            vace: t.any_prefix("vace_blocks.") || t.has("vace_patch_embedding.weight"),
            layout: "wan",
        };
        return wan.decide().map(Some);
    }
    if t.has("condition_embedder.time_proj.weight") && t.has("blocks.0.attn1.to_q.weight") {
        let dim = t.elements("patch_embedding.bias");
        let wan = Wan {
            dim,
            layers: t.count_blocks("blocks."),
            in_dim: dim.and_then(|d| t.ratio("patch_embedding.weight", d * 4)),
            has_patch: t.has("patch_embedding.weight"),
            i2v: t.any_prefix("condition_embedder.image_embedder."),
            vace: t.any_prefix("vace_blocks."),
            layout: "diffusers",
        };
        return wan.decide().map(Some);
    }
    if t.has("input_blocks.0.0.weight") && (t.has("out.2.weight") || t.any_prefix("middle_block.")) {
        let mc = t.elements("input_blocks.0.0.bias");
        let unet = Unet {
            channels: mc,
            in_channels: mc.and_then(|c| t.ratio("input_blocks.0.0.weight", c * 9)),
            context: context_width(t, "input_blocks.", ".1.transformer_blocks.0.attn2."),
            sdxl: t.any_prefix("label_emb."),
            layout: "ldm",
        };
        return unet.decide().map(Some);
    }
    if t.has("conv_in.weight") && t.any_prefix("down_blocks.0.resnets.0.") && t.any_prefix("mid_block.") {
        let mc = t.elements("conv_in.bias");
        let unet = Unet {
            channels: mc,
            in_channels: mc.and_then(|c| t.ratio("conv_in.weight", c * 9)),
            context: context_width(t, "down_blocks.", ".attentions.0.transformer_blocks.0.attn2."),
            sdxl: t.any_prefix("add_embedding."),
            layout: "diffusers",
        };
        return unet.decide().map(Some);
    }
    Ok(None)
}

/// The cross-attention context width of a UNet: `to_k`'s values over the block's width (its
/// `to_out.0.bias`), at the first block `{blocks}N{inner}` that has cross-attention.
fn context_width(t: &Table, blocks: &str, inner: &str) -> Option<u64> {
    (0..16).find_map(|n| {
        let p = format!("{blocks}{n}{inner}");
        let width = t.elements(&format!("{p}to_out.0.bias"))?;
        t.ratio(&format!("{p}to_k.weight"), width)
    })
}

fn flux_bfl(t: &Table) -> Result<Found, String> {
    if t.has("double_stream_modulation_img.lin.weight") {
        return Err("a FLUX.2 transformer (`double_stream_modulation_img`), which the catalog does not have".into());
    }
    if t.any_prefix("distilled_guidance_layer.") {
        return Err("a Chroma transformer (FLUX.1 [schnell] derivative with `distilled_guidance_layer`), which the catalog does not have".into());
    }
    let hidden = t.elements("img_in.bias").or_else(|| t.elements("double_blocks.0.img_attn.proj.bias"));
    flux(Flux {
        double: t.count_blocks("double_blocks."),
        single: t.count_blocks("single_blocks."),
        hidden,
        in_channels: hidden.and_then(|h| t.ratio("img_in.weight", h)),
        guidance: t.any_prefix("guidance_in."),
        layout: "bfl",
    })
}

fn flux_diffusers(t: &Table) -> Result<Found, String> {
    let hidden = t.elements("x_embedder.bias");
    flux(Flux {
        double: t.count_blocks("transformer_blocks."),
        single: t.count_blocks("single_transformer_blocks."),
        hidden,
        in_channels: hidden.and_then(|h| t.ratio("x_embedder.weight", h)),
        guidance: t.any_prefix("time_text_embed.guidance_embedder."),
        layout: "diffusers",
    })
}

struct Flux {
    double: u32,
    single: u32,
    hidden: Option<u64>,
    in_channels: Option<u64>,
    guidance: bool,
    layout: &'static str,
}

/// FLUX.1: 19 double-stream and 38 single-stream blocks of width 3072 (BFL's `flux/model.py`
/// `FluxParams`); [dev] embeds the guidance scale (`guidance_in`), [schnell] does not.
fn flux(f: Flux) -> Result<Found, String> {
    let hidden = f.hidden.unwrap_or(0);
    if (f.double, f.single, hidden) != (19, 38, 3072) {
        return Err(format!(
            "a FLUX-style transformer ({} layout) with {} double-stream and {} single-stream blocks of width {hidden}: \
             FLUX.1 has 19 and 38 of width 3072, so this is another model (a pruned or extended derivative), which the catalog does not have",
            f.layout, f.double, f.single
        ));
    }
    let mut notes = Vec::new();
    match f.in_channels {
        Some(64) => {}
        Some(384) => notes.push("FLUX.1 Fill (384 input channels: image and mask conditioning); the same transformer otherwise".into()),
        Some(128) => notes.push("FLUX.1 Depth or Canny (128 input channels: control-image conditioning); the same transformer otherwise".into()),
        Some(c) => notes.push(format!("{c} input channels where FLUX.1 has 64")),
        None => notes.push("the input projection (`img_in` / `x_embedder`) is missing or unreadable".into()),
    }
    let model = if f.guidance { "flux.1-dev" } else { "flux.1-schnell" };
    let alt = Some(if f.guidance { "flux.1-schnell" } else { "flux.1-dev" });
    Ok(Found { model, alt, family: DiffusionFamily::Flux, layout: f.layout.into(), notes })
}

/// HunyuanVideo (T2V): 20 dual-stream and 40 single-stream blocks of width 3072
/// (Tencent/HunyuanVideo `HYVideoDiffusionTransformer` "HYVideo-T/2-cfgdistill").
fn hunyuan(t: &Table, layout: &str) -> Result<Found, String> {
    let (double, single, hidden, patch) = if layout == "diffusers" {
        (t.count_blocks("transformer_blocks."), t.count_blocks("single_transformer_blocks."), t.elements("x_embedder.proj.bias"), "x_embedder.proj.weight")
    } else {
        (t.count_blocks("double_blocks."), t.count_blocks("single_blocks."), t.elements("img_in.proj.bias"), "img_in.proj.weight")
    };
    if t.any_prefix("byt5_in.") || t.has("cond_type_embedding.weight") {
        return Err("a HunyuanVideo 1.5 transformer (`byt5_in` / `cond_type_embedding`), which the catalog does not have".into());
    }
    let h = hidden.unwrap_or(0);
    if (double, single, h) != (20, 40, 3072) {
        return Err(format!(
            "a HunyuanVideo-style transformer ({layout} layout) with {double} dual-stream and {single} single-stream blocks of width {h}: \
             HunyuanVideo has 20 and 40 of width 3072, so this is another model, which the catalog does not have"
        ));
    }
    let mut notes = Vec::new();
    match hidden.and_then(|h| t.ratio(patch, h * 4)) {
        Some(16) => {}
        Some(c) => notes.push(format!("{c} input channels where HunyuanVideo T2V has 16 (an image-to-video variant); the same transformer otherwise")),
        None => notes.push(format!("`{patch}` is missing or unreadable")),
    }
    Ok(Found { model: "hunyuanvideo", alt: None, family: DiffusionFamily::HunyuanVideo, layout: layout.into(), notes })
}

/// SD 3.5: Large is 38 MMDiT blocks of width 2432 (64 per block), Medium 24 MMDiT-X blocks
/// (with `attn2`) of width 1536; SD 3 Medium has 24 plain MMDiT blocks.
fn sd3(depth: u32, hidden: Option<u64>, mmdit_x: bool, layout: &str) -> Result<Found, String> {
    let h = hidden.unwrap_or(0);
    let model = match (depth, h, mmdit_x) {
        (38, 2432, false) => "sd-3.5-large",
        (24, 1536, true) => "sd-3.5-medium",
        (24, 1536, false) => {
            return Err("Stable Diffusion 3 Medium (24 MMDiT blocks of width 1536 without MMDiT-X attention), which the catalog does not have".into());
        }
        _ => {
            return Err(format!(
                "an SD3-style MMDiT ({layout} layout) with {depth} blocks of width {h}: SD 3.5 Large has 38 of width 2432, \
                 Medium 24 of width 1536; this is another model, which the catalog does not have"
            ));
        }
    };
    Ok(Found { model, alt: None, family: DiffusionFamily::Sd3, layout: layout.into(), notes: Vec::new() })
}

struct Wan {
    dim: Option<u64>,
    layers: u32,
    in_dim: Option<u64>,
    has_patch: bool,
    i2v: bool,
    vace: bool,
    layout: &'static str,
}

impl Wan {
    /// Wan 2.1 T2V 1.3B: 30 blocks of width 1536; 14B: 40 of 5120 (Wan-Video/Wan2.1 README);
    /// Wan 2.2 TI2V 5B: 30 of 3072 with 48 input channels. 16 input channels is text-to-video,
    /// 36 image-to-video.
    fn decide(self) -> Result<Found, String> {
        let dim = self.dim.unwrap_or(0);
        let mut notes = Vec::new();
        if self.vace {
            return Err(format!("a Wan VACE model ({} blocks of width {dim}), which the catalog does not have", self.layers));
        }
        if self.i2v || self.in_dim == Some(36) {
            return Err(format!("a Wan image-to-video model ({} blocks of width {dim}, image conditioning), which the catalog does not have", self.layers));
        }
        if !self.has_patch {
            notes.push("`patch_embedding.weight` is missing (a city96 conversion before `fix_5d_tensors.py`?)".to_string());
        }
        let fits = |want: u64| self.in_dim.is_none_or(|c| c == want);
        let model = match (dim, self.layers) {
            (1536, 30) if fits(16) => "wan2.1-t2v-1.3b",
            (5120, 40) if fits(16) => {
                notes.push("Wan 2.2 T2V-A14B's two experts each have this same table: for one of them the model is wan2.2-t2v-a14b".into());
                "wan2.1-t2v-14b"
            }
            (3072, 30) if fits(48) => "wan2.2-ti2v-5b",
            _ => {
                return Err(format!(
                    "a Wan-style video transformer ({} layout) with {} blocks of width {dim} and {} input channels: \
                     Wan 2.1 T2V has 30 of 1536 (1.3B) or 40 of 5120 (14B), Wan 2.2 TI2V 30 of 3072; this is another model, which the catalog does not have",
                    self.layout,
                    self.layers,
                    self.in_dim.map_or("unknown".to_string(), |c| c.to_string())
                ));
            }
        };
        Ok(Found { model, alt: None, family: DiffusionFamily::Wan, layout: self.layout.into(), notes })
    }
}

struct Unet {
    channels: Option<u64>,
    in_channels: Option<u64>,
    context: Option<u64>,
    sdxl: bool,
    layout: &'static str,
}

impl Unet {
    /// SD 1.x: 320 base channels, cross-attention to CLIP-L's 768; SDXL base: 320 channels,
    /// context 2048 (CLIP-L and bigG concatenated) and the `label_emb` / `add_embedding` of its
    /// size conditioning; SDXL refiner: 384 channels, context 1280; SD 2.x: context 1024.
    fn decide(self) -> Result<Found, String> {
        let mc = self.channels.unwrap_or(0);
        let ctx = self.context.unwrap_or(0);
        let (model, family) = match (self.sdxl, mc, ctx) {
            (true, 320, 2048) => ("sdxl", DiffusionFamily::Sdxl),
            (true, 384, 1280) => return Err("the SDXL refiner UNet, which the catalog does not have".into()),
            (false, 320, 768) => ("sd-1.5", DiffusionFamily::Sd15),
            (_, 320, 1024) => return Err("a Stable Diffusion 2.x UNet (cross-attention width 1024), which the catalog does not have".into()),
            _ => {
                return Err(format!(
                    "a UNet ({} layout) with {mc} base channels and cross-attention width {ctx}{}: SD 1.5 has 320 and 768, SDXL 320 and 2048; \
                     this is another model, which the catalog does not have",
                    self.layout,
                    if self.sdxl { ", with SDXL's size conditioning" } else { "" }
                ));
            }
        };
        let mut notes = Vec::new();
        match self.in_channels {
            Some(4) => {}
            Some(9) => notes.push("an inpainting UNet (9 input channels); the same network otherwise".into()),
            Some(8) => notes.push("an InstructPix2Pix UNet (8 input channels); the same network otherwise".into()),
            Some(c) => notes.push(format!("{c} input channels where the base model has 4")),
            None => {}
        }
        Ok(Found { model, alt: None, family, layout: self.layout.into(), notes })
    }
}

/// The error for a table no layout matched: what it looks like, its first names, the layouts tried.
fn unrecognised(tensors: &[TensorEntry], parts: &Parts) -> String {
    let first: Vec<String> = tensors.iter().take(5).map(|t| format!("`{}`", t.name)).collect();
    let names = || tensors.iter().map(|t| t.name);
    let what = if names().any(|n| n == "token_embd.weight" || n.starts_with("blk.")) {
        "these are a llama.cpp language model's tensors (`token_embd.weight`, `blk.N.…`), not a diffusion model's. "
    } else if names().any(|n| n.starts_with("model.layers.") || n == "lm_head.weight") {
        "these are a transformers language model's tensors (`model.layers.N.…`), not a diffusion model's. "
    } else if names().any(|n| n.contains("lora_") || n.contains(".lora.") || n.contains("lora_A")) {
        "this is a LoRA (low-rank adapter weights), not a full model. "
    } else if parts.denoiser.is_empty() && !parts.vae.is_empty() && parts.text.is_empty() {
        "this holds only a VAE, no denoiser. "
    } else if parts.denoiser.is_empty() && !parts.text.is_empty() {
        "this holds text encoders and no denoiser. "
    } else if parts.denoiser.iter().all(|(n, _)| n.starts_with("encoder.") || n.starts_with("decoder.") || n.contains("quant_conv.")) {
        "this looks like a VAE on its own (`encoder.…`, `decoder.…`), no denoiser. "
    } else if parts
        .denoiser
        .iter()
        .all(|(n, _)| n.starts_with("text_model.") || n.starts_with("encoder.block.") || n == &"shared.weight" || n.starts_with("transformer.resblocks."))
    {
        "this looks like a text encoder on its own, no denoiser. "
    } else {
        ""
    };
    format!(
        "not a diffusion checkpoint Headroom recognises: {what}The file's first tensors are {}{} ({} in all). Layouts tried: {LAYOUTS_TRIED}.",
        first.join(", "),
        if tensors.len() > first.len() { ", …" } else { "" },
        tensors.len()
    )
}

// ---------------------------------------------------------------------------------------------
// Storage format
// ---------------------------------------------------------------------------------------------

/// The denoiser's format as the catalog names it, and whether the tensors are GGUF-quantized.
fn storage_format(ds: &Dataset, den: &[&TensorEntry], notes: &mut Vec<String>) -> (Option<String>, bool) {
    let ggml = |name: &str| GgmlType::all().find(|g| g.name() == name);
    // Values per type name.
    let mut by_type: BTreeMap<&str, (u64, u64, u32)> = BTreeMap::new();
    for t in den {
        let e = by_type.entry(t.dtype).or_insert((0, 0, 0));
        e.0 += t.elements();
        e.1 += t.bytes;
        e.2 += 1;
    }
    let quantized: BTreeMap<&str, u64> = by_type.iter().filter(|(n, _)| ggml(n).is_some_and(|g| g.is_quantized())).map(|(n, v)| (*n, v.0)).collect();
    let elements: u64 = by_type.values().map(|v| v.0).sum();
    let bytes: u64 = by_type.values().map(|v| v.1).sum();
    let bpw = if elements > 0 { bytes as f64 * 8.0 / elements as f64 } else { 0.0 };

    if !quantized.is_empty() {
        let mix: Vec<String> = by_type.iter().map(|(n, v)| format!("{n} ×{}", v.2)).collect();
        notes.push(format!("denoiser: {bpw:.2} bits per weight in this file ({})", mix.join(", ")));
        let name = gguf_scheme(&quantized);
        return (Some(catalog_format(ds, &name, bpw, true, notes)), true);
    }
    // Float or integer storage: the type holding the most values.
    let Some((dominant, _)) = by_type.iter().max_by_key(|(_, v)| v.0) else {
        return (None, false);
    };
    let id = match *dominant {
        "F32" => "fp32",
        "F16" => "fp16",
        "BF16" => "bf16",
        "F8_E4M3" | "F8_E5M2" | "F8_E4M3FNUZ" | "F8_E5M2FNUZ" => "fp8",
        "I8" => "int8",
        "U8" if den.iter().any(|t| t.name.contains("bitsandbytes__nf4")) => "nf4",
        other => {
            notes.push(format!("the denoiser is stored as {other}, which the catalog names no format for"));
            return (None, false);
        }
    };
    (Some(catalog_format(ds, id, bpw, false, notes)), false)
}

/// The `llama-quantize` scheme a mix of ggml types comes from (city96's `lcpp.patch` rules for
/// image models), or the dominant type's own name.
fn gguf_scheme(q: &BTreeMap<&str, u64>) -> String {
    let get = |n: &str| q.get(n).copied().unwrap_or(0);
    let Some((dominant, _)) = q.iter().max_by_key(|(_, v)| **v) else {
        return String::new();
    };
    match *dominant {
        "Q4_K" if get("Q6_K") > 0 => "Q4_K_M",
        "Q4_K" => "Q4_K_S",
        "Q5_K" if get("Q6_K") > 0 => "Q5_K_M",
        "Q5_K" => "Q5_K_S",
        "Q3_K" if get("Q4_K") == 0 && get("Q5_K") == 0 => "Q3_K_S",
        "Q3_K" if get("Q5_K") > get("Q4_K") => "Q3_K_L",
        "Q3_K" => "Q3_K_M",
        // Q4_0 files carry Q4_1 FFN-down tensors, Q5_0 files Q5_1: the scheme is the dominant type.
        other => other,
    }
    .to_string()
}

/// `id` when the catalog has it, else the catalog format nearest by bits per weight (GGUF types
/// and schemes only for a GGUF file), noted.
fn catalog_format(ds: &Dataset, id: &str, bpw: f64, gguf: bool, notes: &mut Vec<String>) -> String {
    if ds.quant.iter().any(|q| q.id == id) {
        return id.to_string();
    }
    let nearest = ds
        .quant
        .iter()
        .filter(|q| !gguf || matches!(q.family, QuantFamily::GgufType | QuantFamily::GgufScheme))
        .min_by(|a, b| (a.bits - bpw).abs().total_cmp(&(b.bits - bpw).abs()));
    match nearest {
        Some(q) => {
            notes.push(format!("the catalog has no format `{id}`: {} ({} bits per weight) is the nearest to this file's {bpw:.2}", q.id, q.bits));
            q.id.clone()
        }
        None => id.to_string(),
    }
}

#[cfg(all(test, feature = "toml"))]
mod tests {
    use super::*;
    use crate::{Diffusion, Quant};

    fn dataset() -> Dataset {
        #[derive(serde::Deserialize)]
        struct D {
            diffusion: Vec<Diffusion>,
        }
        #[derive(serde::Deserialize)]
        struct Q {
            quant: Vec<Quant>,
        }
        let d: D = toml::from_str(include_str!("../../../data/catalog/diffusion.toml")).unwrap();
        let q: Q = toml::from_str(include_str!("../../../data/catalog/quant.toml")).unwrap();
        Dataset { diffusion: d.diffusion, quant: q.quant, ..Default::default() }
    }

    /// Owned tensors, lent out as entries.
    #[derive(Default)]
    struct T(Vec<(String, Vec<u64>, String)>);

    impl T {
        fn add(&mut self, name: impl Into<String>, shape: &[u64], dtype: &str) -> &mut Self {
            self.0.push((name.into(), shape.to_vec(), dtype.into()));
            self
        }
        fn linear(&mut self, name: &str, n_in: u64, n_out: u64, dtype: &str) -> &mut Self {
            self.add(format!("{name}.weight"), &[n_out, n_in], dtype);
            self.add(format!("{name}.bias"), &[n_out], "F32")
        }
        fn entries(&self) -> Vec<TensorEntry<'_>> {
            self.0
                .iter()
                .map(|(n, s, d)| {
                    let e: u64 = s.iter().product();
                    let bytes = match d.as_str() {
                        "F32" => e * 4,
                        "F16" | "BF16" => e * 2,
                        "F8_E4M3" => e,
                        g => GgmlType::all().find(|t| t.name() == g).map_or(e, |t| e / t.block_size() * t.type_size()),
                    };
                    TensorEntry { name: n, shape: s, bytes, dtype: d }
                })
                .collect()
        }
    }

    /// FLUX.1 in BFL's layout (flux/model.py), `w` the dtype of the block weights.
    fn flux_bfl(double: u32, single: u32, guidance: bool, w: &str) -> T {
        let (h, mlp) = (3072, 12288);
        let mut t = T::default();
        t.linear("img_in", 64, h, "F32");
        t.linear("time_in.in_layer", 256, h, "F32").linear("time_in.out_layer", h, h, "F32");
        t.linear("vector_in.in_layer", 768, h, "F32").linear("vector_in.out_layer", h, h, "F32");
        if guidance {
            t.linear("guidance_in.in_layer", 256, h, "F32").linear("guidance_in.out_layer", h, h, "F32");
        }
        t.linear("txt_in", 4096, h, "F32");
        for i in 0..double {
            for s in ["img", "txt"] {
                let p = format!("double_blocks.{i}.{s}");
                t.linear(&format!("{p}_mod.lin"), h, 6 * h, w);
                t.linear(&format!("{p}_attn.qkv"), h, 3 * h, w);
                t.add(format!("{p}_attn.norm.query_norm.scale"), &[128], "F32");
                t.add(format!("{p}_attn.norm.key_norm.scale"), &[128], "F32");
                t.linear(&format!("{p}_attn.proj"), h, h, w);
                t.linear(&format!("{p}_mlp.0"), h, mlp, w).linear(&format!("{p}_mlp.2"), mlp, h, w);
            }
        }
        for i in 0..single {
            let p = format!("single_blocks.{i}");
            t.linear(&format!("{p}.linear1"), h, 3 * h + mlp, w).linear(&format!("{p}.linear2"), h + mlp, h, w);
            t.add(format!("{p}.norm.query_norm.scale"), &[128], "F32");
            t.add(format!("{p}.norm.key_norm.scale"), &[128], "F32");
            t.linear(&format!("{p}.modulation.lin"), h, 3 * h, w);
        }
        t.linear("final_layer.linear", h, 64, "F32").linear("final_layer.adaLN_modulation.1", h, 2 * h, "F32");
        t
    }

    /// FLUX.1 in diffusers' layout (`FluxTransformer2DModel`).
    fn flux_diffusers(guidance: bool) -> T {
        let (h, mlp) = (3072, 12288);
        let mut t = T::default();
        t.linear("x_embedder", 64, h, "BF16").linear("context_embedder", 4096, h, "BF16");
        t.linear("time_text_embed.timestep_embedder.linear_1", 256, h, "BF16");
        t.linear("time_text_embed.timestep_embedder.linear_2", h, h, "BF16");
        t.linear("time_text_embed.text_embedder.linear_1", 768, h, "BF16");
        t.linear("time_text_embed.text_embedder.linear_2", h, h, "BF16");
        if guidance {
            t.linear("time_text_embed.guidance_embedder.linear_1", 256, h, "BF16");
            t.linear("time_text_embed.guidance_embedder.linear_2", h, h, "BF16");
        }
        for i in 0..19 {
            let p = format!("transformer_blocks.{i}");
            t.linear(&format!("{p}.norm1.linear"), h, 6 * h, "BF16").linear(&format!("{p}.norm1_context.linear"), h, 6 * h, "BF16");
            for x in ["to_q", "to_k", "to_v", "add_q_proj", "add_k_proj", "add_v_proj", "to_out.0", "to_add_out"] {
                t.linear(&format!("{p}.attn.{x}"), h, h, "BF16");
            }
            for x in ["norm_q", "norm_k", "norm_added_q", "norm_added_k"] {
                t.add(format!("{p}.attn.{x}.weight"), &[128], "BF16");
            }
            for f in ["ff", "ff_context"] {
                t.linear(&format!("{p}.{f}.net.0.proj"), h, mlp, "BF16").linear(&format!("{p}.{f}.net.2"), mlp, h, "BF16");
            }
        }
        for i in 0..38 {
            let p = format!("single_transformer_blocks.{i}");
            t.linear(&format!("{p}.norm.linear"), h, 3 * h, "BF16");
            for x in ["to_q", "to_k", "to_v"] {
                t.linear(&format!("{p}.attn.{x}"), h, h, "BF16");
            }
            t.add(format!("{p}.attn.norm_q.weight"), &[128], "BF16").add(format!("{p}.attn.norm_k.weight"), &[128], "BF16");
            t.linear(&format!("{p}.proj_mlp"), h, mlp, "BF16").linear(&format!("{p}.proj_out"), h + mlp, h, "BF16");
        }
        t.linear("norm_out.linear", h, 2 * h, "BF16").linear("proj_out", h, 64, "BF16");
        t
    }

    fn ok(t: &T) -> Recognized {
        recognize(&dataset(), &t.entries()).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(t: &T) -> String {
        match recognize(&dataset(), &t.entries()) {
            Err(e) => e,
            Ok(r) => panic!("recognised as {r:?}"),
        }
    }

    #[test]
    fn flux_dev_and_schnell_by_guidance() {
        let dev = ok(&flux_bfl(19, 38, true, "BF16"));
        assert_eq!((dev.model.as_str(), dev.layout.as_str(), dev.format.as_deref()), ("flux.1-dev", "bfl", Some("bf16")));
        assert_eq!(dev.components, vec![("denoiser".to_string(), dev.components[0].1, 11_901_408_320)]);
        assert!(dev.notes.is_empty(), "{:?}", dev.notes);
        let schnell = ok(&flux_bfl(19, 38, false, "BF16"));
        assert_eq!(schnell.model, "flux.1-schnell");
        assert_eq!(schnell.components[0].2, 11_901_408_320 - 10_229_760);
    }

    #[test]
    fn schnell_falls_back_on_dev_when_the_catalog_lacks_it() {
        let mut ds = dataset();
        ds.diffusion.retain(|d| d.id != "flux.1-schnell");
        let t = flux_bfl(19, 38, false, "BF16");
        let r = recognize(&ds, &t.entries()).unwrap();
        assert_eq!(r.model, "flux.1-dev");
        assert!(r.notes.iter().any(|n| n.contains("`flux.1-schnell`, which the catalog does not have")), "{:?}", r.notes);
        ds.diffusion.retain(|d| d.id != "flux.1-dev");
        assert!(recognize(&ds, &t.entries()).unwrap_err().contains("catalog does not have"));
    }

    #[test]
    fn flux_with_18_double_blocks_is_not_flux1() {
        let e = err(&flux_bfl(18, 38, true, "BF16"));
        assert!(e.contains("18 double-stream") && e.contains("FLUX.1 has 19 and 38"), "{e}");
    }

    #[test]
    fn flux_diffusers_layout_and_single_file_prefix() {
        let r = ok(&flux_diffusers(true));
        assert_eq!((r.model.as_str(), r.layout.as_str()), ("flux.1-dev", "diffusers"));
        assert_eq!(r.components[0].2, 11_901_408_320);
        assert_eq!(ok(&flux_diffusers(false)).model, "flux.1-schnell");
        // A ComfyUI "checkpoint": the transformer under model.diffusion_model., CLIP-L, T5, VAE.
        let mut t = flux_bfl(19, 38, true, "F8_E4M3");
        for e in &mut t.0 {
            e.0 = format!("model.diffusion_model.{}", e.0);
        }
        t.add("text_encoders.clip_l.transformer.text_model.embeddings.token_embedding.weight", &[49408, 768], "F16");
        t.add("text_encoders.t5xxl.transformer.shared.weight", &[32128, 4096], "F16");
        t.add("vae.decoder.conv_in.weight", &[512, 16, 3, 3], "F16");
        let r = ok(&t);
        assert_eq!((r.model.as_str(), r.format.as_deref()), ("flux.1-dev", Some("fp8")));
        let roles: Vec<&str> = r.components.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(roles, ["denoiser", "text-encoder", "text-encoder-2", "vae"]);
        // Those stand-ins are far from the catalog's encoders and VAE: noted, not refused.
        assert!(r.notes.iter().any(|n| n.starts_with("vae:")), "{:?}", r.notes);
    }

    #[test]
    fn flux2_and_chroma_are_named() {
        let mut t = flux_bfl(19, 38, true, "BF16");
        t.add("double_stream_modulation_img.lin.weight", &[18432, 3072], "BF16");
        assert!(err(&t).contains("FLUX.2"));
        let mut t = flux_bfl(19, 38, false, "BF16");
        t.add("distilled_guidance_layer.in_proj.bias", &[5120], "BF16");
        assert!(err(&t).contains("Chroma"));
    }

    #[test]
    fn gguf_type_mixes_map_to_catalog_schemes() {
        let r = ok(&flux_bfl(19, 38, true, "Q4_K"));
        assert_eq!((r.format.as_deref(), r.layout.as_str()), (Some("Q4_K_S"), "comfyui-gguf"));
        assert!(r.notes.iter().any(|n| n.contains("bits per weight")), "{:?}", r.notes);
        let mut t = flux_bfl(19, 38, true, "Q4_K");
        for e in t.0.iter_mut().filter(|e| e.0.ends_with("_mlp.2.weight")) {
            e.2 = "Q6_K".into();
        }
        assert_eq!(ok(&t).format.as_deref(), Some("Q4_K_M"));
        assert_eq!(ok(&flux_bfl(19, 38, true, "Q5_K")).format.as_deref(), Some("Q5_K_S"));
        assert_eq!(ok(&flux_bfl(19, 38, true, "Q8_0")).format.as_deref(), Some("Q8_0"));
        assert_eq!(ok(&flux_bfl(19, 38, true, "Q3_K")).format.as_deref(), Some("Q3_K_S"));
        // A type the catalog has no entry for: the nearest by bits per weight, noted.
        let r = ok(&flux_bfl(19, 38, true, "Q8_K"));
        assert_eq!(r.format.as_deref(), Some("Q8_0"));
        assert!(r.notes.iter().any(|n| n.contains("no format `Q8_K`")), "{:?}", r.notes);
    }

    #[test]
    fn llm_tables_are_refused_clearly() {
        let mut t = T::default();
        t.add("token_embd.weight", &[2048, 32000], "Q4_K");
        for i in 0..2 {
            t.add(format!("blk.{i}.attn_q.weight"), &[2048, 2048], "Q4_K");
        }
        let e = err(&t);
        assert!(e.contains("language model") && e.contains("`token_embd.weight`") && e.contains("Layouts tried"), "{e}");
        let mut t = T::default();
        t.add("model.layers.0.self_attn.q_proj.weight", &[64, 64], "BF16");
        assert!(err(&t).contains("transformers language model"));
        let mut t = T::default();
        t.add("encoder.conv_in.weight", &[128, 3, 3, 3], "F32").add("decoder.conv_out.weight", &[3, 128, 3, 3], "F32");
        assert!(err(&t).contains("VAE on its own"));
        let mut t = T::default();
        t.add("something.weight", &[4, 4], "F32");
        let e = err(&t);
        assert!(e.contains("`something.weight`") && e.contains("FLUX.1") && e.contains("Wan"), "{e}");
        assert_eq!(recognize(&dataset(), &[]).unwrap_err(), "the file has no tensors");
    }

    /// The keys the UNet rules read, with their real shapes; the rest is left out (so the
    /// parameter check notes a difference).
    fn unet_ldm(sdxl: bool) -> T {
        let ctx = if sdxl { 2048 } else { 768 };
        let p = "model.diffusion_model.";
        let mut t = T::default();
        t.add(format!("{p}input_blocks.0.0.weight"), &[320, 4, 3, 3], "F16").add(format!("{p}input_blocks.0.0.bias"), &[320], "F16");
        // SDXL has no attention at the first level: its first cross-attention is input block 4.
        let (b, w) = if sdxl { (4, 640) } else { (1, 320) };
        t.add(format!("{p}input_blocks.{b}.1.transformer_blocks.0.attn2.to_k.weight"), &[w, ctx], "F16");
        t.add(format!("{p}input_blocks.{b}.1.transformer_blocks.0.attn2.to_out.0.bias"), &[w], "F16");
        t.add(format!("{p}middle_block.0.in_layers.0.weight"), &[1280], "F16");
        t.add(format!("{p}out.2.weight"), &[4, 320, 3, 3], "F16");
        if sdxl {
            t.add(format!("{p}label_emb.0.0.weight"), &[1280, 2816], "F16");
            t.add("conditioner.embedders.0.transformer.text_model.embeddings.token_embedding.weight", &[49408, 768], "F16");
            t.add("conditioner.embedders.1.model.token_embedding.weight", &[49408, 1280], "F16");
        } else {
            t.add("cond_stage_model.transformer.text_model.embeddings.token_embedding.weight", &[49408, 768], "F16");
        }
        t.add("first_stage_model.decoder.conv_in.weight", &[512, 4, 3, 3], "F16");
        t.add("alphas_cumprod", &[1000], "F32");
        t
    }

    #[test]
    fn ldm_single_files() {
        let r = ok(&unet_ldm(true));
        assert_eq!((r.model.as_str(), r.layout.as_str(), r.format.as_deref()), ("sdxl", "ldm single file", Some("fp16")));
        let roles: Vec<&str> = r.components.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(roles, ["denoiser", "text-encoder", "text-encoder-2", "vae", "other"]);
        assert!(r.notes.iter().any(|n| n.starts_with("denoiser:") && n.contains("pruned")), "{:?}", r.notes);
        let r = ok(&unet_ldm(false));
        assert_eq!(r.model, "sd-1.5");
        assert_eq!(r.components.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(), ["denoiser", "text-encoder", "vae", "other"]);
        // SD 2.x: cross-attention to 1024.
        let mut t = unet_ldm(false);
        t.0[2].1 = vec![320, 1024];
        assert!(err(&t).contains("2.x"));
    }

    #[test]
    fn diffusers_unets() {
        let mut t = T::default();
        t.add("conv_in.weight", &[320, 4, 3, 3], "F16").add("conv_in.bias", &[320], "F16");
        t.add("down_blocks.0.resnets.0.conv1.weight", &[320, 320, 3, 3], "F16");
        t.add("down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_k.weight", &[640, 2048], "F16");
        t.add("down_blocks.1.attentions.0.transformer_blocks.0.attn2.to_out.0.bias", &[640], "F16");
        t.add("mid_block.resnets.0.conv1.weight", &[1280, 1280, 3, 3], "F16");
        t.add("add_embedding.linear_1.weight", &[1280, 2816], "F16");
        let r = ok(&t);
        assert_eq!((r.model.as_str(), r.layout.as_str()), ("sdxl", "diffusers"));
        t.0.pop();
        assert!(err(&t).contains("320 base channels and cross-attention width 2048"));
    }

    #[test]
    fn sd35_by_depth_width_and_mmdit_x() {
        let mmdit = |depth: u32, hidden: u64, x: bool| {
            let mut t = T::default();
            t.add("x_embedder.proj.weight", &[hidden, 16, 2, 2], "F16").add("x_embedder.proj.bias", &[hidden], "F16");
            for i in 0..depth {
                t.add(format!("joint_blocks.{i}.context_block.attn.qkv.weight"), &[3 * hidden, hidden], "F16");
                if x && i < 13 {
                    t.add(format!("joint_blocks.{i}.x_block.attn2.qkv.weight"), &[3 * hidden, hidden], "F16");
                }
            }
            t
        };
        let r = ok(&mmdit(38, 2432, false));
        assert_eq!((r.model.as_str(), r.layout.as_str()), ("sd-3.5-large", "mmdit"));
        assert_eq!(ok(&mmdit(24, 1536, true)).model, "sd-3.5-medium");
        assert!(err(&mmdit(24, 1536, false)).contains("Stable Diffusion 3 Medium"));
        // diffusers: transformer_blocks with add_q_proj, pos_embed.proj.
        let mut t = T::default();
        t.add("pos_embed.proj.weight", &[2432, 16, 2, 2], "BF16").add("pos_embed.proj.bias", &[2432], "BF16");
        for i in 0..38 {
            t.add(format!("transformer_blocks.{i}.attn.add_q_proj.weight"), &[2432, 2432], "BF16");
        }
        let r = ok(&t);
        assert_eq!((r.model.as_str(), r.layout.as_str()), ("sd-3.5-large", "diffusers"));
    }

    fn wan(dim: u64, layers: u32, in_dim: u64) -> T {
        let mut t = T::default();
        t.add("patch_embedding.weight", &[dim, in_dim, 1, 2, 2], "F32").add("patch_embedding.bias", &[dim], "F32");
        for i in 0..layers {
            t.add(format!("blocks.{i}.self_attn.q.weight"), &[dim, dim], "Q8_0");
            t.add(format!("blocks.{i}.modulation"), &[1, 6, dim], "F32");
        }
        t.add("head.modulation", &[1, 2, dim], "F32");
        t
    }

    #[test]
    fn wan_sizes() {
        let r = ok(&wan(1536, 30, 16));
        assert_eq!((r.model.as_str(), r.format.as_deref()), ("wan2.1-t2v-1.3b", Some("Q8_0")));
        let r = ok(&wan(5120, 40, 16));
        assert_eq!(r.model, "wan2.1-t2v-14b");
        assert!(r.notes.iter().any(|n| n.contains("wan2.2-t2v-a14b")));
        assert_eq!(ok(&wan(3072, 30, 48)).model, "wan2.2-ti2v-5b");
        assert!(err(&wan(5120, 40, 36)).contains("image-to-video"));
        assert!(err(&wan(1536, 29, 16)).contains("29 blocks of width 1536"));
    }

    #[test]
    fn hunyuanvideo_is_told_from_flux() {
        let mut t = T::default();
        t.add("img_in.proj.weight", &[3072, 16, 1, 2, 2], "BF16").add("img_in.proj.bias", &[3072], "BF16");
        t.add("txt_in.individual_token_refiner.blocks.0.norm1.weight", &[3072], "BF16");
        for i in 0..20 {
            t.add(format!("double_blocks.{i}.img_attn_qkv.weight"), &[9216, 3072], "BF16");
            t.add(format!("double_blocks.{i}.img_attn.norm.key_norm.scale"), &[128], "BF16");
        }
        for i in 0..40 {
            t.add(format!("single_blocks.{i}.linear1.weight"), &[21504, 3072], "BF16");
        }
        let r = ok(&t);
        assert_eq!((r.model.as_str(), r.layout.as_str()), ("hunyuanvideo", "hunyuanvideo"));
    }
}
