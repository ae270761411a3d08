//! What the fit engine takes from a user's model file: the architecture (from a GGUF's metadata
//! or a `config.json`) and the exact bytes of its weights (from the tensor table), as the `model`
//! object of a `dataset fit` workload. The CLI (`dataset model PATH`) and the site show the same
//! description.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{gguf_to_hf_config, ModelFile};
use crate::fit::Architecture;
use crate::Dataset;

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

fn model_object(config: &Value, name: Option<&str>, file: Option<(&str, u64)>) -> Value {
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

/// Describes a parsed file. `config` is the `config.json` that goes with a safetensors file or
/// index (the CLI finds it beside the file; the site asks for it).
pub fn describe(ds: &Dataset, file: &ModelFile, config: Option<&Value>) -> Description {
    let mut notes = Vec::new();
    match file {
        ModelFile::Gguf(g) => {
            let bytes = g.total_tensor_bytes();
            let name = g.get_str("general.name").map(str::to_string);
            let by_type: Vec<TypeBytes> =
                g.by_type().iter().map(|t| TypeBytes { name: t.ggml_type.name().to_string(), tensors: t.tensors, bytes: t.bytes }).collect();
            let config = match gguf_to_hf_config(g) {
                Ok(c) => Some(c),
                Err(e) => {
                    notes.push(e);
                    None
                }
            };
            let arch = config.as_ref().and_then(|c| architecture(c, name.as_deref(), &mut notes));
            let declared = g.get_u64("general.file_type").and_then(gguf_file_type).filter(|f| ds.quant(f).is_some());
            let format = declared.map(str::to_string).or_else(|| {
                let params = arch.as_ref().map(|a| a.params).filter(|&p| p > 0)?;
                let bits = bytes as f64 * 8.0 / params as f64;
                notes.push(format!("the file declares no scheme the catalog knows; {bits:.2} bits per weight on average"));
                nearest_gguf(ds, bits)
            });
            let model = match (&config, &format) {
                (Some(c), Some(f)) => Some(model_object(c, name.as_deref(), Some((f, bytes)))),
                (Some(c), None) => Some(model_object(c, name.as_deref(), None)),
                _ => None,
            };
            Description {
                format: "gguf".into(),
                tensors: g.tensors.len() as u64,
                weight_bytes: Some(bytes),
                weights_format: format,
                by_type,
                architecture: arch,
                model,
                notes,
            }
        }
        ModelFile::Safetensors(s) => {
            let bytes = s.total_tensor_bytes();
            let by = s.by_dtype();
            let by_type: Vec<TypeBytes> = by.iter().map(|t| TypeBytes { name: t.dtype.name().to_string(), tensors: t.tensors, bytes: t.bytes }).collect();
            let main = by.iter().max_by_key(|t| t.bytes).map(|t| t.dtype.name());
            let format = main.and_then(safetensors_format).map(str::to_string);
            if format.is_none() {
                notes.push(format!("the weights are mostly {}, a type the engine has no format for", main.unwrap_or("of no type")));
            }
            finish_hf("safetensors", s.tensors.len() as u64, bytes, format, by_type, ds, config, notes)
        }
        ModelFile::SafetensorsIndex(i) => {
            let n = i.weight_map.len() as u64;
            let shards = i.shards().len();
            notes.push(format!("{n} tensors in {shards} shard files"));
            let format = config
                .and_then(|c| c.get("torch_dtype").or_else(|| c.get("dtype")))
                .and_then(Value::as_str)
                .and_then(|d| match d {
                    "bfloat16" => Some("bf16"),
                    "float16" => Some("fp16"),
                    "float32" => Some("fp32"),
                    _ => None,
                })
                .map(str::to_string);
            match i.total_size {
                Some(bytes) => finish_hf("safetensors-index", n, bytes, format, Vec::new(), ds, config, notes),
                None => {
                    notes.push("the index has no metadata.total_size".into());
                    let mut d = finish_hf("safetensors-index", n, 0, None, Vec::new(), ds, config, notes);
                    d.weight_bytes = None;
                    d
                }
            }
        }
        ModelFile::Config(c) => {
            let name = c.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
            let arch = architecture(c, name.as_deref(), &mut notes);
            Description {
                format: "config.json".into(),
                tensors: 0,
                weight_bytes: None,
                weights_format: None,
                by_type: Vec::new(),
                model: arch.as_ref().map(|_| model_object(c, name.as_deref(), None)),
                architecture: arch,
                notes,
            }
        }
    }
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

#[allow(clippy::too_many_arguments)]
fn finish_hf(
    format: &str,
    tensors: u64,
    bytes: u64,
    weights_format: Option<String>,
    by_type: Vec<TypeBytes>,
    ds: &Dataset,
    config: Option<&Value>,
    mut notes: Vec<String>,
) -> Description {
    let _ = ds;
    let (arch, model) = match config {
        Some(c) => {
            let name = c.get("_name_or_path").and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string);
            let arch = architecture(c, name.as_deref(), &mut notes);
            let file = weights_format.as_deref().filter(|_| bytes > 0).map(|f| (f, bytes));
            (arch.clone(), arch.map(|_| model_object(c, name.as_deref(), file)))
        }
        None => {
            notes.push("the architecture is in the model's config.json, which this file does not contain: give it too".into());
            (None, None)
        }
    };
    Description {
        format: format.into(),
        tensors,
        weight_bytes: Some(bytes),
        weights_format,
        by_type,
        architecture: arch,
        model,
        notes,
    }
}
