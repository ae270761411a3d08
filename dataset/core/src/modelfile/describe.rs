//! What the fit engine takes from a user's model file: the architecture (from a GGUF's metadata
//! or a `config.json`) and the exact bytes of its weights (from the tensor table), as the `model`
//! object of a `dataset fit` workload. The CLI (`dataset model PATH`) and the site show the same
//! description.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ModelFile, gguf_to_hf_config};
use crate::Dataset;
use crate::fit::Architecture;

/// One tensor type (GGUF) or dtype (safetensors) of a file: how many tensors and their bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TypeBytes {
    pub name: String,
    pub tensors: u64,
    pub bytes: u64,
}

/// A model file as the engine sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Description {
    /// `gguf`, `safetensors`, `safetensors-index` or `config.json`.
    pub format: String,
    /// Tensors in the file (for an index: in the whole checkpoint).
    pub tensors: u64,
    /// Exact bytes of every tensor (for an index: `metadata.total_size`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_bytes: Option<u64>,
    /// The catalog format that names the file's weights (`Q4_K_M`, `bf16`, …) for `weights`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_format: Option<String>,
    pub by_type: Vec<TypeBytes>,
    /// The architecture the engine will use (absent when the file alone cannot say, e.g. a
    /// `.safetensors` without its `config.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<Architecture>,
    /// The `model` object for a `dataset fit` workload (with `file` when the bytes are known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Value>,
    /// A diffusion checkpoint: what it was recognised as, and the fields of a `diffusion`
    /// workload (`model`, `precision`, `file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffusion: Option<super::diffusion::Recognized>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffusion_workload: Option<Value>,
    pub notes: Vec<String>,
}

/// llama.cpp's `general.file_type` (`enum llama_ftype` in include/llama.h) → the scheme's name.
pub fn gguf_file_type(id: u64) -> Option<&'static str> {
    Some(match id {
        0 => "fp32",
        1 => "fp16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "bf16",
        _ => return None,
    })
}

/// The catalog format closest to `bits` per weight among GGUF types and schemes (for files whose
/// scheme the catalog lacks; only activation precision and labels depend on it, the weight bytes
/// are the file's own).
fn nearest_gguf(ds: &Dataset, bits: f64) -> Option<String> {
    use crate::QuantFamily::{GgufScheme, GgufType};
    ds.quant
        .iter()
        .filter(|q| matches!(q.family, GgufType | GgufScheme) && q.id.chars().next().is_some_and(|c| c.is_ascii_uppercase()))
        .min_by(|a, b| (a.bits - bits).abs().total_cmp(&(b.bits - bits).abs()))
        .map(|q| q.id.clone())
}

/// The `model` object of a workload: the config cut to the keys the engine reads, a label, and the
/// file's exact bytes in its format when known.
pub fn model_object(config: &Value, name: Option<&str>, file: Option<(&str, u64)>) -> Value {
    let mut m = json!({"hf_config": config});
    if let Some(n) = name {
        m["name"] = json!(n);
    }
    if let Some((format, bytes)) = file {
        m["file"] = json!({"format": format, "bytes": bytes});
    }
    m
}

fn architecture(config: &Value, name: Option<&str>, notes: &mut Vec<String>) -> Option<Architecture> {
    match crate::hf::llm_from_config(config, name) {
        Ok((m, origin)) => Some(crate::fit::summary(&m, origin)),
        Err(e) => {
            notes.push(e);
            None
        }
    }
}

/// What a file says by itself, without the catalog: the part of reading a file that can run
/// apart from the engine (the site loads the parsers only when a file is dropped).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FileFacts {
    /// `gguf`, `safetensors`, `safetensors-index` or `config.json`.
    pub format: String,
    pub tensors: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_bytes: Option<u64>,
    /// The format the file declares (a GGUF's `general.file_type`, a safetensors file's main
    /// dtype, an index's `torch_dtype` from its config), as `weights` names formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub declared_format: Option<String>,
    pub by_type: Vec<TypeBytes>,
    /// The architecture as config.json fields (a GGUF's metadata mapped back, or the file itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hf_config: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The architecture is in a config.json that must come with this file.
    pub needs_config: bool,
    /// A diffusion checkpoint recognised by its tensors ([`with_diffusion`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffusion: Option<super::diffusion::Recognized>,
    pub notes: Vec<String>,
}

/// [`facts`], and for a GGUF or safetensors file that is not a language model, what diffusion
/// checkpoint it is (this needs the catalog: model ids, parameter counts, format names).
pub fn with_diffusion(ds: &Dataset, file: &ModelFile) -> FileFacts {
    let mut f = facts(file);
    let tensors = matches!(file, ModelFile::Gguf(_) | ModelFile::Safetensors(_));
    if tensors && f.hf_config.is_none() {
        match super::diffusion::recognize_file(ds, file) {
            Ok(r) => {
                f.needs_config = false;
                // The LLM mapping's complaint about an unknown architecture is beside the point.
                f.notes.clear();
                f.diffusion = Some(r);
            }
            Err(e) => f.notes.push(e),
        }
    }
    f
}

/// Reads the facts of a parsed file.
pub fn facts(file: &ModelFile) -> FileFacts {
    let mut notes = Vec::new();
    match file {
        ModelFile::Gguf(g) => {
            let config = match gguf_to_hf_config(g) {
                Ok(c) => Some(c),
                Err(e) => {
                    notes.push(e);
                    None
                }
            };
            FileFacts {
                format: "gguf".into(),
                tensors: g.tensors.len() as u64,
                weight_bytes: Some(g.total_tensor_bytes()),
                declared_format: g.get_u64("general.file_type").and_then(gguf_file_type).map(str::to_string),
                by_type: g.by_type().iter().map(|t| TypeBytes { name: t.ggml_type.name().to_string(), tensors: t.tensors, bytes: t.bytes }).collect(),
                hf_config: config,
                name: g.get_str("general.name").map(str::to_string),
                needs_config: false,
                diffusion: None,
                notes,
            }
        }
        ModelFile::Safetensors(s) => {
            let by = s.by_dtype();
            let main = by.iter().max_by_key(|t| t.bytes).map(|t| t.dtype.name());
            let declared = main.and_then(safetensors_format).map(str::to_string);
            if declared.is_none() {
                notes.push(format!("the weights are mostly {}, a type the engine has no format for", main.unwrap_or("of no type")));
            }
            FileFacts {
                format: "safetensors".into(),
                tensors: s.tensors.len() as u64,
                weight_bytes: Some(s.total_tensor_bytes()),
                declared_format: declared,
                by_type: by.iter().map(|t| TypeBytes { name: t.dtype.name().to_string(), tensors: t.tensors, bytes: t.bytes }).collect(),
                hf_config: None,
                name: None,
                needs_config: true,
                diffusion: None,
                notes,
            }
        }
        ModelFile::SafetensorsIndex(i) => {
            notes.push(format!("{} tensors in {} shard files", i.weight_map.len(), i.shards().len()));
            if i.total_size.is_none() {
                notes.push("the index has no metadata.total_size".into());
            }
            FileFacts {
                format: "safetensors-index".into(),
                tensors: i.weight_map.len() as u64,
                weight_bytes: i.total_size,
                declared_format: None,
                by_type: Vec::new(),
                hf_config: None,
                name: None,
                needs_config: true,
                diffusion: None,
                notes,
            }
        }
        ModelFile::Config(c) => FileFacts {
            format: "config.json".into(),
            tensors: 0,
            weight_bytes: None,
            declared_format: None,
            by_type: Vec::new(),
            hf_config: Some(c.clone()),
            name: c.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string),
            needs_config: false,
            diffusion: None,
            notes,
        },
    }
}

/// Describes a file from its facts. `config` is the `config.json` that goes with a safetensors
/// file or index (the CLI finds it beside the file; the site asks for it).
pub fn describe(ds: &Dataset, f: &FileFacts, config: Option<&Value>) -> Description {
    let mut notes = f.notes.clone();
    let config = f.hf_config.as_ref().or(config);
    let name = f.name.clone().or_else(|| config.and_then(|c| c.get("_name_or_path")).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string));
    let arch = config.and_then(|c| architecture(c, name.as_deref(), &mut notes));
    if config.is_none() && f.needs_config {
        notes.push("the architecture is in the model's config.json, which this file does not contain: give it too".into());
    }
    // An index names no dtype: the config's torch_dtype does.
    let declared = f.declared_format.clone().or_else(|| {
        if f.format != "safetensors-index" {
            return None;
        }
        torch_dtype_format(config?).map(str::to_string)
    });
    let format = declared.filter(|d| ds.quant(d).is_some()).or_else(|| {
        if f.format != "gguf" {
            return None;
        }
        let params = arch.as_ref().map(|a| a.params).filter(|&p| p > 0)?;
        let bits = f.weight_bytes? as f64 * 8.0 / params as f64;
        notes.push(format!("the file declares no scheme the catalog knows; {bits:.2} bits per weight on average"));
        nearest_gguf(ds, bits)
    });
    let file = match (&format, f.weight_bytes) {
        (Some(fmt), Some(b)) if b > 0 => Some((fmt.as_str(), b)),
        _ => None,
    };
    let model = match (config, &arch) {
        (Some(c), Some(_)) => Some(model_object(&crate::hf::essential(c), name.as_deref(), file)),
        _ => None,
    };
    let diffusion_workload = f.diffusion.as_ref().map(|r| {
        let mut w = json!({"kind": "diffusion", "model": r.model});
        if let Some(fmt) = r.format.as_ref().filter(|x| ds.quant(x).is_some()) {
            w["precision"] = json!(fmt);
            if let Some((_, bytes, _)) = r.components.iter().find(|(role, _, _)| role == "denoiser") {
                w["file"] = json!({"format": fmt, "bytes": bytes});
            }
        }
        w
    });
    Description {
        format: f.format.clone(),
        tensors: f.tensors,
        weight_bytes: f.weight_bytes,
        weights_format: if f.diffusion.is_some() { None } else { format },
        by_type: f.by_type.clone(),
        architecture: arch,
        model,
        diffusion: f.diffusion.clone(),
        diffusion_workload,
        notes,
    }
}

/// The format a checkpoint's `config.json` says its weights are stored in (`torch_dtype`, or
/// `dtype` in newer files), as `weights` names formats.
pub fn torch_dtype_format(config: &Value) -> Option<&'static str> {
    Some(match config.get("torch_dtype").or_else(|| config.get("dtype"))?.as_str()? {
        "bfloat16" => "bf16",
        "float16" => "fp16",
        "float32" => "fp32",
        _ => return None,
    })
}

/// The engine's format for a safetensors dtype (the dtype most of the bytes are in).
fn safetensors_format(dtype: &str) -> Option<&'static str> {
    Some(match dtype {
        "BF16" => "bf16",
        "F16" => "fp16",
        "F32" => "fp32",
        "F8_E4M3" | "F8_E5M2" | "F8_E4M3FNUZ" | "F8_E5M2FNUZ" => "fp8",
        _ => return None,
    })
}
