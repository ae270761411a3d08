//! Reading the data directory (the only file I/O around the pure core's loader).

use std::path::{Path, PathBuf};

use headroom_core::load::{load, Loaded};

pub fn default_data_dir() -> PathBuf {
    std::env::var_os("HEADROOM_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../data"))
}

/// Every file under `dir`, as (path relative to `dir` with '/' separators, contents).
fn read_tree(dir: &Path) -> Result<Vec<(String, String)>, String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> Result<(), String> {
        let entries = std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with('.') || name == "README.md" {
                continue;
            }
            if path.is_dir() {
                walk(root, &path, out)?;
            } else {
                let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
                let rel = path.strip_prefix(root).unwrap().components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/");
                out.push((rel, text));
            }
        }
        Ok(())
    }
    if !dir.is_dir() {
        return Err(format!("data directory {} does not exist (pass --data DIR)", dir.display()));
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out)?;
    Ok(out)
}

/// Loads and checks the data; problems are printed one per line with the file path.
pub fn load_checked(dir: &Path) -> Result<Loaded, String> {
    let files = read_tree(dir)?;
    load(&files).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| format!("  {}/{p}", dir.display())).collect();
        format!("{} problem(s) in the data:\n{}", problems.len(), lines.join("\n"))
    })
}

pub fn check(dir: &Path) -> Result<(), String> {
    let loaded = load_checked(dir)?;
    let d = &loaded.dataset;
    println!(
        "dataset check: OK: {} claims, {} GPUs, {} LLMs, {} diffusion models, {} quantization formats, {} tools, {} seeds",
        d.claims.len(),
        d.gpus.len(),
        d.llms.len(),
        d.diffusion.len(),
        d.quant.len(),
        d.tools.len(),
        d.seeds.len()
    );
    Ok(())
}

pub fn build(dir: &Path, out: &Path) -> Result<(), String> {
    let loaded = load_checked(dir)?;
    let data_dir = out.join("data");
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let path = data_dir.join("dataset.json");
    std::fs::write(&path, loaded.dataset.to_json()).map_err(|e| format!("{}: {e}", path.display()))?;
    // One compact file per language: what the app loads.
    for lang in headroom_core::Lang::ALL {
        let p = data_dir.join(format!("{}.json", lang.code()));
        std::fs::write(&p, loaded.dataset.for_lang(lang).to_json()).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    println!(
        "dataset build: {} claims -> {} (all languages) and {}/{{pt,es,zh,it,en}}.json",
        loaded.dataset.claims.len(),
        path.display(),
        data_dir.display()
    );
    Ok(())
}

/// `dataset claims`: every claim, as a table or (with `json`) the JSON array whose elements carry
/// `id`, `topic`, `verdict`, `statement`, `correction` (or null), `value`, `conditions`, `origins`
/// (`seed` or `url`, `locator`), `sources`, `note` and `history`.
pub fn claims(dir: &Path, json: bool) -> Result<(), String> {
    let loaded = load_checked(dir)?;
    if json {
        let claims: Vec<serde_json::Value> = loaded
            .dataset
            .claims
            .iter()
            .map(|c| {
                let mut v = serde_json::to_value(c).expect("claims serialize");
                let obj = v.as_object_mut().expect("a claim is an object");
                for key in ["correction", "value"] {
                    obj.entry(key).or_insert(serde_json::Value::Null);
                }
                for key in ["origins", "conditions"] {
                    obj.entry(key).or_insert_with(|| if key == "origins" { serde_json::json!([]) } else { serde_json::json!({}) });
                }
                v
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&claims).expect("json"));
    } else {
        let width = loaded.dataset.claims.iter().map(|c| c.id.len()).max().unwrap_or(2);
        for c in &loaded.dataset.claims {
            println!("{:<width$}  {:<12}  {:<13}  {}", c.id, c.verdict.code(), c.topic, c.statement.en);
        }
        let mut counts = std::collections::BTreeMap::new();
        for c in &loaded.dataset.claims {
            *counts.entry(c.verdict.code()).or_insert(0) += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        println!("{} claims: {}", loaded.dataset.claims.len(), summary.join(", "));
    }
    Ok(())
}
