//! The engine's own words: what to set in the chosen engine for a workload (environment
//! variables, command-line flags, Modelfile parameters, Python arguments), written from the tools
//! catalog (`catalog/tools/*.toml`: each flag's `sets`, with the claims that back it).
//!
//! Templates name the field's value as `{value}` (through the flag's `values`), and:
//! - `{context_total}`: the context times the batch (llama-server divides `-c` over its slots);
//! - `{layers_all}`: every layer plus the output layer (llama.cpp's `-ngl` for "all of them");
//! - `{accumulate}`: the gradient-accumulation steps that keep the batch a plan started from;
//! - `{tensor_split}`: each GPU's share of the layer split, as the engine split it;
//! - `{repo}`: the model's Hugging Face repository; `{gguf}`: a GGUF file name for it;
//! - any other workload field by its name.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Dataset;
use crate::catalog::{Sets, Tool};

/// One setting, as the tool spells it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setting {
    /// The workload field it sets.
    pub field: String,
    /// `env`, `args` or `lines` (see [`Sets::at`]).
    pub at: String,
    pub text: String,
    /// The claims behind it.
    pub claims: Vec<String>,
}

/// Everything to set for a workload in one tool: the command that starts it (environment and
/// arguments included) and the lines that go elsewhere (a Modelfile's parameters).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// The tool's id (`ollama`, `llama.cpp`, `vllm`, `transformers`).
    pub tool: String,
    pub command: String,
    pub lines: Vec<String>,
    pub settings: Vec<Setting>,
}

/// The tool a workload runs in and how it is started, if the catalog says how to set it: an LLM
/// in its engine (transformers when none is named), training in transformers' Trainer.
fn tool<'a>(ds: &'a Dataset, workload: &Map<String, Value>) -> Option<(&'a Tool, &'a str)> {
    let kind = workload.get("kind").and_then(Value::as_str)?;
    let engine = match kind {
        "llm-inference" => workload.get("engine").and_then(Value::as_str).unwrap_or("transformers"),
        "training" => "transformers",
        _ => return None,
    };
    let t = ds.tool(engine)?;
    t.run.get(kind).map(|run| (t, run.as_str()))
}

/// A workload value as text (`true`, `16384`, `q8_0`, `[1,1]` → `1,1`).
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(text).collect::<Vec<_>>().join(","),
        Value::Number(n) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => u.to_string(),
            (None, Some(f)) => plain(f),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// A number as a command line takes it: `2`, `0.85` (never `2.0`).
fn plain(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") }
}

/// The names a template can use besides `{value}`; `before`: the workload a plan started from.
fn variable(ds: &Dataset, w: &Map<String, Value>, before: Option<&Map<String, Value>>, shares: &[f64], name: &str) -> Option<String> {
    let num = |f: &str| w.get(f).and_then(Value::as_u64);
    let model = w.get("model").and_then(Value::as_str).and_then(|id| ds.llm(id));
    match name {
        "context_total" => Some((num("context")? * num("batch").unwrap_or(1).max(1)).to_string()),
        "layers_all" => Some((model?.layers + 1).to_string()),
        // A smaller batch that keeps the effective batch it started from.
        "accumulate" => {
            let (from, to) = (before?.get("batch").and_then(Value::as_u64)?, num("batch")?.max(1));
            (from > to).then(|| from.div_ceil(to).to_string())
        }
        "tensor_split" => (shares.len() > 1).then(|| shares.iter().map(|s| plain(*s)).collect::<Vec<_>>().join(",")),
        "repo" => Some(match model {
            Some(m) => m.repo.clone().or_else(|| m.source.url.as_deref().and_then(hf_repo)).unwrap_or_else(|| m.id.clone()),
            // The reader's own model: its name (the calculator names a Hub model by its id), as
            // from_pretrained and vllm serve take it; a model described by hand has none to give.
            None => own_model_repo(w.get("model")?),
        }),
        "gguf" => {
            let name = model.map(|m| m.name.replace(' ', "-")).unwrap_or_else(|| "model".into());
            Some(format!("{name}-{}.gguf", w.get("weights").map(text).unwrap_or_default()))
        }
        _ => w.get(name).filter(|v| !v.is_null()).map(text),
    }
}

/// What the commands name the reader's own model by: a Hub id (`hf:org/name` or `org/name`), or
/// a model object's `name`; "model" for one described by hand with no name.
fn own_model_repo(model: &Value) -> String {
    let name = match model {
        Value::Object(o) => o.get("name").and_then(Value::as_str).unwrap_or(""),
        Value::String(s) => s.as_str(),
        _ => "",
    };
    let name = name.trim();
    let name = name.strip_prefix(crate::hf::HUB_PREFIX).unwrap_or(name);
    if name.is_empty() { "model".into() } else { name.to_string() }
}

/// `https://huggingface.co/org/name/blob/main/config.json` → `org/name`.
pub fn hf_repo(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://huggingface.co/")?;
    let mut parts = rest.split('/');
    let (org, name) = (parts.next()?, parts.next()?);
    (!org.is_empty() && !name.is_empty()).then(|| format!("{org}/{name}"))
}

/// Fills `{name}` placeholders; `None` when one has no value.
fn fill(template: &str, value: Option<&str>, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}')? + start;
        let name = &rest[start + 1..end];
        out.push_str(&if name == "value" { value?.to_string() } else { var(name)? });
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// What one flag writes for the workload, if anything.
fn write(s: &Sets, w: &Map<String, Value>, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    match w.get(&s.field).filter(|v| !v.is_null()) {
        None if s.fallback.is_empty() => None,
        None => fill(&s.fallback, None, var),
        Some(v) => {
            let raw = text(v);
            if (!s.when.is_empty() && !s.when.contains(&raw)) || s.skip.contains(&raw) {
                return None;
            }
            let shown = s.values.get(&raw).cloned().unwrap_or(raw);
            fill(&s.write, Some(&shown), var)
        }
    }
}

/// Each GPU's share of llama.cpp's layer split: `tensor_split` as given, else each card's budget
/// (free memory, llama.cpp's default), in GiB to one decimal.
fn shares(w: &Map<String, Value>, budgets: &[u64]) -> Vec<f64> {
    let gpus = w.get("gpus").and_then(Value::as_u64).unwrap_or(1) as usize;
    if gpus < 2 {
        return Vec::new();
    }
    if let Some(ts) = w.get("tensor_split").and_then(Value::as_array) {
        let ts: Vec<f64> = ts.iter().filter_map(Value::as_f64).collect();
        if ts.len() == gpus && ts.iter().any(|x| *x > 0.0) {
            return ts;
        }
    }
    if budgets.len() == gpus {
        return budgets.iter().map(|b| (*b as f64 / (1u64 << 30) as f64 * 10.0).round() / 10.0).collect();
    }
    vec![1.0; gpus]
}

/// The settings for `fields` of a workload (every field the tool can set when `fields` is
/// empty), in the catalog's order; `budgets`: each card's budget, for the layer split.
pub fn settings(ds: &Dataset, workload: &Value, fields: &[&str], budgets: &[u64]) -> Vec<Setting> {
    settings_from(ds, None, workload, fields, budgets)
}

/// [`settings`] for a workload a plan or a lever reached from `before` (a smaller training batch
/// then keeps the effective batch by accumulating gradients).
pub fn settings_from(ds: &Dataset, before: Option<&Value>, workload: &Value, fields: &[&str], budgets: &[u64]) -> Vec<Setting> {
    let before = before.and_then(Value::as_object);
    let Some(w) = workload.as_object() else { return Vec::new() };
    let Some((t, _)) = tool(ds, w) else { return Vec::new() };
    let kind = w.get("kind").and_then(Value::as_str).unwrap_or_default();
    let shares = shares(w, budgets);
    let var = |name: &str| variable(ds, w, before, &shares, name);
    t.flags
        .iter()
        .flat_map(|f| &f.sets)
        .filter(|s| s.kinds.is_empty() || s.kinds.iter().any(|k| k == kind))
        .filter(|s| fields.is_empty() || fields.contains(&s.field.as_str()))
        .filter_map(|s| write(s, w, &var).map(|text| Setting { field: s.field.clone(), at: s.at.clone(), text, claims: s.claims.clone() }))
        .collect()
}

/// How to run the workload in its tool: the command with every setting, and the other lines.
pub fn setup(ds: &Dataset, workload: &Value, budgets: &[u64]) -> Option<Setup> {
    setup_from(ds, None, workload, budgets)
}

/// [`setup`] for a workload a plan reached from `before`.
pub fn setup_from(ds: &Dataset, before: Option<&Value>, workload: &Value, budgets: &[u64]) -> Option<Setup> {
    let w = workload.as_object()?;
    let (t, run) = tool(ds, w)?;
    let all = settings_from(ds, before, workload, &[], budgets);
    let joined = |at: &str, sep: &str| all.iter().filter(|s| s.at == at).map(|s| s.text.as_str()).collect::<Vec<_>>().join(sep);
    let sep = if t.join.is_empty() { " " } else { t.join.as_str() };
    let args = joined("args", sep);
    // No arguments: no separator before them either.
    let run = if args.is_empty() { run.replace(&format!("{sep}{{args}}"), "") } else { run.to_string() };
    let shares = shares(w, budgets);
    let var = |name: &str| match name {
        "env" => Some(joined("env", " ")),
        "args" => Some(args.clone()),
        _ => variable(ds, w, before.and_then(Value::as_object), &shares, name),
    };
    // Empty parts leave no doubled spaces behind.
    let command = fill(&run, None, &var)?.split_whitespace().collect::<Vec<_>>().join(" ");
    Some(Setup { tool: t.id.clone(), command, lines: all.iter().filter(|s| s.at == "lines").map(|s| s.text.clone()).collect(), settings: all })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_or_give_up() {
        let var = |n: &str| (n == "x").then(|| "7".to_string());
        assert_eq!(fill("-c {value} -np {x}", Some("16"), &var).as_deref(), Some("-c 16 -np 7"));
        assert_eq!(fill("-c {y}", None, &var), None);
        assert_eq!(fill("{value}", None, &var), None);
        assert_eq!(hf_repo("https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json").as_deref(), Some("meta-llama/Llama-3.1-8B"));
        assert_eq!(hf_repo("https://example.com/x"), None);
    }
}
