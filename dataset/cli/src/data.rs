//! Reading the data directory (the only file I/O around the pure core's loader).

use std::path::{Path, PathBuf};

use headroom_core::load::{Loaded, load};

pub fn default_data_dir() -> PathBuf {
    std::env::var_os("HEADROOM_DATA").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../data"))
}

/// The seed articles' texts: dataset/sources/seeds/ (HEADROOM_SEEDS overrides it).
pub fn default_seeds_dir() -> PathBuf {
    std::env::var_os("HEADROOM_SEEDS").map(PathBuf::from).unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../sources/seeds"))
}

use headroom_core::files::read_tree;

/// The seed articles are evidence: each file listed in seeds.toml must be in `dir` with the
/// SHA-256 recorded there, and every claim's quote of a seed must be that seed's own words.
fn check_seeds(d: &headroom_core::Dataset, dir: &Path) -> Result<(), String> {
    use sha2::{Digest, Sha256};
    let mut problems = Vec::new();
    let mut texts = Vec::new();
    for s in &d.seeds {
        let path = dir.join(&s.file);
        match std::fs::read(&path) {
            Err(e) => problems.push(format!("  {}: {e} (seed `{}` in seeds.toml)", path.display(), s.file)),
            Ok(bytes) => {
                let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
                if digest != s.sha256 {
                    problems.push(format!("  {}: sha256 is {digest}, seeds.toml records {} (the seed text changed)", path.display(), s.sha256));
                }
                match String::from_utf8(bytes) {
                    Ok(text) => texts.push((s.file.clone(), text)),
                    Err(_) => problems.push(format!("  {}: not UTF-8 text", path.display())),
                }
            }
        }
    }
    if problems.is_empty() {
        problems.extend(headroom_core::check::seed_quotes(d, &texts).into_iter().map(|(who, why)| format!("  claim or seed `{who}`: {why}")));
    }
    if problems.is_empty() { Ok(()) } else { Err(format!("{} problem(s) with the seed articles:\n{}", problems.len(), problems.join("\n"))) }
}

/// Loads and checks the data; problems are printed one per line with the file path.
pub fn load_checked(dir: &Path) -> Result<Loaded, String> {
    let files = read_tree(dir)?;
    load(&files).map_err(|problems| {
        let lines: Vec<String> = problems.iter().map(|p| format!("  {}/{p}", dir.display())).collect();
        format!("{} problem(s) in the data:\n{}", problems.len(), lines.join("\n"))
    })
}

pub fn check(dir: &Path, i18n: &Path, seeds: &Path) -> Result<(), String> {
    let loaded = load_checked(dir)?;
    let d = &loaded.dataset;
    check_seeds(d, seeds)?;
    // The allocator lab's settings must be ones PyTorch 2.11 accepts.
    let refused: Vec<String> = d
        .alloc_recipes
        .iter()
        .filter_map(|r| {
            headroom_alloc::config::parse(&r.conf).err().map(|e| format!("  catalog/alloc-recipes.toml: recipe `{}`: PyTorch refuses `{}`: {e}", r.id, r.conf))
        })
        .collect();
    if !refused.is_empty() {
        return Err(format!("{} problem(s) in the data:\n{}", refused.len(), refused.join("\n")));
    }
    let guides = crate::guides::render_all(d, i18n)?;
    println!(
        "dataset check: OK: {} claims, {} GPUs, {} LLMs, {} diffusion models, {} quantization formats, {} tools, {} allocator settings, {} seeds, {} measurement aggregates",
        d.claims.len(),
        d.gpus.len(),
        d.llms.len(),
        d.diffusion.len(),
        d.quant.len(),
        d.tools.len(),
        d.alloc_recipes.len(),
        d.seeds.len(),
        d.measurements.len()
    );
    let n: usize = guides.iter().map(|(_, g)| g.len()).sum();
    let refs: usize = guides.iter().flat_map(|(_, g)| g.iter().map(|x| x.claims.len())).sum();
    println!("dataset check: OK: {n} guides in {} languages, {refs} claim references resolved", guides.len());
    for (claim, why) in headroom_core::check::review_flags(d) {
        println!("dataset check: review claim {claim}: {why}");
    }
    Ok(())
}

pub fn build(dir: &Path, i18n: &Path, out: &Path) -> Result<(), String> {
    let loaded = load_checked(dir)?;
    let guides = crate::guides::render_all(&loaded.dataset, i18n)?;
    let data_dir = out.join("data");
    std::fs::create_dir_all(&data_dir).map_err(|e| format!("{}: {e}", data_dir.display()))?;
    let path = data_dir.join("dataset.json");
    std::fs::write(&path, loaded.dataset.to_json()).map_err(|e| format!("{}: {e}", path.display()))?;
    // Per language: the compact data every page loads (the calculator a part of it), the claims'
    // details (claim pages), the rendered guides (guide pages) and the UI strings (the browser app
    // carries none).
    let write = |name: String, text: String| {
        let p = data_dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
    };
    for lang in headroom_core::Lang::ALL {
        let full = loaded.dataset.for_lang(lang);
        let mut compact = full.compact();
        compact.guides = guides.iter().find(|(l, _)| *l == lang).map(|(_, g)| g.iter().map(|x| x.summary()).collect()).unwrap_or_default();
        write(format!("calc-{}.json", lang.code()), compact.for_calculator().to_json())?;
        write(format!("{}.json", lang.code()), compact.to_json())?;
        write(format!("details-{}.json", lang.code()), serde_json::to_string(&full.details()).expect("details serialize"))?;
        write(format!("ui-{}.json", lang.code()), headroom_i18n::table_json(lang))?;
        write(format!("ui-calc-{}.json", lang.code()), headroom_i18n::table_json_omitting(lang, headroom_i18n::calculator_omits))?;
    }
    for (lang, g) in &guides {
        write(format!("guides-{}.json", lang.code()), serde_json::to_string(g).expect("guides serialize"))?;
    }
    println!(
        "dataset build: {} claims -> {} (all languages); per language in {}: <lang>.json (compact), calc-<lang>.json, details-<lang>.json, guides-<lang>.json, ui-<lang>.json, ui-calc-<lang>.json",
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
            println!("{:<width$}  {:<12}  {:<13}  {}", c.id, c.verdict.as_str(), c.topic.map_or("", |x| x.as_str()), c.statement.en);
        }
        let mut counts = std::collections::BTreeMap::new();
        for c in &loaded.dataset.claims {
            *counts.entry(c.verdict.as_str()).or_insert(0) += 1;
        }
        let summary: Vec<String> = counts.iter().map(|(k, v)| format!("{v} {k}")).collect();
        println!("{} claims: {}", loaded.dataset.claims.len(), summary.join(", "));
    }
    Ok(())
}

pub fn default_llamacpp_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../measurements/llamacpp")
}

pub fn default_measurements_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../measurements/reference")
}

/// `dataset fit`: one JSON document per input workload (an array when the input is an array).
pub fn fit(dir: &Path, input: &Path, gpu: Option<&str>, other_gib: &str, ram_gib: Option<f64>) -> Result<(), String> {
    let text = if input.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| format!("stdin: {e}"))?;
        s
    } else {
        std::fs::read_to_string(input).map_err(|e| format!("{}: {e}", input.display()))?
    };
    let is_array = text.trim_start().starts_with('[');
    let workloads = headroom_core::fit::parse_input(&text)?;
    let loaded = load_checked(dir)?;
    let cards = match gpu {
        Some(g) => cards(&loaded.dataset, g, other_gib, ram_gib)?,
        None => Vec::new(),
    };
    let mut out = Vec::new();
    for (i, w) in workloads.iter().enumerate() {
        let f = if cards.is_empty() { headroom_core::fit::fit(&loaded.dataset, w) } else { headroom_core::fit::fit_on_cards(&loaded.dataset, w, &cards) }
            .map_err(|e| if is_array { format!("workload [{i}]: {e}") } else { e })?;
        out.push(serde_json::to_value(f).expect("fit serializes"));
    }
    let doc = if is_array { serde_json::Value::Array(out) } else { out.remove(0) };
    println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
    Ok(())
}

/// The cards of `--gpu` (comma-separated), each less its `--other-gib` (one value per card, or
/// one for the first card), the first with the system RAM.
fn cards(ds: &headroom_core::Dataset, gpu: &str, other_gib: &str, ram_gib: Option<f64>) -> Result<Vec<headroom_core::fit::Card>, String> {
    let specs: Vec<&str> = gpu.split(',').map(str::trim).collect();
    let others = other_gib
        .split(',')
        .map(|x| x.trim().parse::<f64>().map_err(|_| format!("--other-gib: `{x}` is not a number of GiB")))
        .collect::<Result<Vec<f64>, String>>()?;
    if others.len() != 1 && others.len() != specs.len() {
        return Err(format!("--other-gib: {} values for {} cards; give one per card or one for the first", others.len(), specs.len()));
    }
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let other = others.get(i).copied().unwrap_or(0.0);
        let card = headroom_core::fit::Card::parse(ds, spec, other).map_err(|e| format!("--gpu: {e}"))?;
        out.push(if i == 0 { card.with_ram(ram_gib).map_err(|e| format!("--ram-gib: {e}"))? } else { card });
    }
    Ok(out)
}

/// Reads a model file's header: a prefix first, then as many bytes as the parser asks for (only
/// the header; JSON files are read whole, up to 64 MiB).
pub fn read_model_file(path: &Path) -> Result<headroom_core::modelfile::ModelFile, String> {
    use headroom_core::modelfile::{ParseError, parse};
    use std::io::{Read, Seek, SeekFrom};
    const MAX_HEADER: u64 = 1 << 30;
    let shown = path.display();
    let mut f = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    let len = f.metadata().map_err(|e| format!("{shown}: {e}"))?.len();
    let mut buf = Vec::new();
    let mut want: u64 = 1 << 16;
    loop {
        let target = want.min(len);
        if (buf.len() as u64) < target {
            f.seek(SeekFrom::Start(buf.len() as u64)).map_err(|e| format!("{shown}: {e}"))?;
            let mut more = vec![0u8; (target - buf.len() as u64) as usize];
            f.read_exact(&mut more).map_err(|e| format!("{shown}: {e}"))?;
            buf.extend_from_slice(&more);
        }
        let sniffed = headroom_core::modelfile::sniff(&buf);
        let is_json = matches!(sniffed, headroom_core::modelfile::Kind::Config | headroom_core::modelfile::Kind::SafetensorsIndex);
        if is_json && (buf.len() as u64) < len {
            if len > 64 << 20 {
                return Err(format!("{shown}: a JSON file of {len} bytes is too large for a config or an index"));
            }
            want = len;
            continue;
        }
        match parse(&buf) {
            Err(ParseError::NeedBytes(n)) if n > buf.len() as u64 && (buf.len() as u64) < len => {
                if n > MAX_HEADER {
                    return Err(format!("{shown}: the header claims {n} bytes, more than the 1 GiB this tool reads"));
                }
                want = n.max(want * 2);
            }
            other => return other.map_err(|e| format!("{shown}: {}", e.at_file_len(len))),
        }
    }
}

/// `dataset model PATH`: what the engine takes from a model file.
pub fn model(dir: &Path, path: &Path, config: Option<&Path>, json: bool) -> Result<(), String> {
    use headroom_core::modelfile::{
        ModelFile,
        describe::{describe, with_diffusion},
    };
    let file = read_model_file(path)?;
    let config_path = match (&file, config) {
        (_, Some(c)) => Some(c.to_path_buf()),
        (ModelFile::Safetensors(_) | ModelFile::SafetensorsIndex(_), None) => {
            let beside = path.parent().unwrap_or(Path::new(".")).join("config.json");
            beside.exists().then_some(beside)
        }
        _ => None,
    };
    let config_value = match &config_path {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
            Some(serde_json::from_str::<serde_json::Value>(&text).map_err(|e| format!("{}: not JSON: {e}", p.display()))?)
        }
        None => None,
    };
    let loaded = load_checked(dir)?;
    let d = describe(&loaded.dataset, &with_diffusion(&loaded.dataset, &file), config_value.as_ref());
    if json {
        println!("{}", serde_json::to_string_pretty(&d).expect("json"));
        return Ok(());
    }
    let gib = |b: u64| {
        if b >= 1 << 30 { format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64) } else { format!("{:.2} MiB", b as f64 / (1u64 << 20) as f64) }
    };
    println!("{}: {} ({} tensors)", path.display(), d.format, d.tensors);
    if let Some(b) = d.weight_bytes {
        println!("weights: {} ({b} bytes){}", gib(b), d.weights_format.as_ref().map(|f| format!(", format {f}")).unwrap_or_default());
    }
    for t in &d.by_type {
        println!("  {:<8} {:>6} tensors  {}", t.name, t.tensors, gib(t.bytes));
    }
    if let Some(a) = &d.architecture {
        println!(
            "architecture: {} ({}{}), {} parameters{}",
            a.name,
            a.origin.source,
            a.origin.model_type.as_ref().map(|t| format!(", model_type {t}")).unwrap_or_default(),
            a.params,
            a.active_params.map(|x| format!(", {x} active per token")).unwrap_or_default()
        );
        println!(
            "  {} layers, hidden {}, {} heads ({} KV) × {}, vocab {}, context {}{}{}",
            a.layers,
            a.hidden,
            a.heads,
            a.kv_heads,
            a.head_dim,
            a.vocab,
            a.max_context,
            a.experts.map(|e| format!(", {e} experts ({} per token)", a.experts_per_token.unwrap_or(0))).unwrap_or_default(),
            a.sliding_window.map(|w| format!(", sliding window {w} on {} layers", a.sliding_layers.unwrap_or(a.layers))).unwrap_or_default()
        );
        if let Some(c) = &a.origin.counted {
            println!("  counted: {c}");
        }
    }
    if let Some(r) = &d.diffusion {
        println!("diffusion checkpoint: {} ({} layout){}", r.model, r.layout, r.format.as_ref().map(|f| format!(", denoiser in {f}")).unwrap_or_default());
        for (role, bytes, values) in &r.components {
            println!("  {role:<14} {}  {values} values", gib(*bytes));
        }
        for n in &r.notes {
            println!("note: {n}");
        }
    }
    for n in &d.notes {
        println!("note: {n}");
    }
    if let Some(w) = &d.diffusion_workload {
        println!("for dataset fit: {}", serde_json::to_string(w).expect("json"));
    }
    if let Some(m) = &d.model {
        println!("for dataset fit: \"model\": {}", serde_json::to_string(m).expect("json"));
    }
    Ok(())
}

/// `dataset accuracy`: the table, and failure when a case is outside 5 % / 0.5 GiB.
/// The JSON-lines files of a folder, in name order, as (path, text).
fn jsonl_files(dir: &Path, prefix: &str) -> Result<Vec<(PathBuf, String)>, String> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(prefix)))
        .collect();
    entries.sort();
    entries.into_iter().map(|p| std::fs::read_to_string(&p).map(|t| (p.clone(), t)).map_err(|e| format!("{}: {e}", p.display()))).collect()
}

pub fn accuracy(dir: &Path, measurements: &Path, llamacpp: &Path, json: bool) -> Result<(), String> {
    use headroom_core::fit::accuracy::{accuracy, llama_accuracy, parse_llama_references, parse_references};
    let loaded = load_checked(dir)?;
    let mut refs = Vec::new();
    for (p, text) in jsonl_files(measurements, "")? {
        refs.extend(parse_references(&text).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    let rows = accuracy(&loaded.dataset, &refs)?;
    let mut lrefs = Vec::new();
    for (p, text) in jsonl_files(llamacpp, "h200-")? {
        lrefs.extend(parse_llama_references(&text).map_err(|e| format!("{}: {e}", p.display()))?);
    }
    let lrows = llama_accuracy(&loaded.dataset, &lrefs)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"pytorch": rows, "llamacpp": lrows})).expect("json"));
    } else {
        const G: f64 = 1024.0 * 1024.0 * 1024.0;
        println!("{:<52} {:>10} {:>10} {:>8} {:>9}   {:>10} {:>10}", "case", "measured", "predicted", "error", "GiB", "device", "predicted");
        for r in &rows {
            println!(
                "{:<52} {:>10.3} {:>10.3} {:>+7.1}% {:>+9.3}   {:>10.3} {:>10.3}{}",
                r.id,
                r.measured_allocated as f64 / G,
                r.predicted_allocated as f64 / G,
                r.error * 100.0,
                r.error_bytes as f64 / G,
                r.measured_device as f64 / G,
                r.predicted_device as f64 / G,
                if r.within_tolerance { "" } else { "  OUT OF TOLERANCE" }
            );
        }
        for kind in ["llm-inference", "training", "diffusion"] {
            if let Some(w) = rows.iter().filter(|r| r.kind == kind).max_by(|a, b| a.error.abs().partial_cmp(&b.error.abs()).unwrap()) {
                let n = rows.iter().filter(|r| r.kind == kind).count();
                println!("{kind}: {n} cases, worst {} {:+.1}% ({:+.3} GiB)", w.id, w.error * 100.0, w.error_bytes as f64 / G);
            }
        }
        const M: f64 = 1024.0 * 1024.0;
        println!();
        println!(
            "{:<62} {:>9} {:>9} {:>8} {:>8}   {:>9} {:>8}   {:>8} {:>8}",
            "llama.cpp case (MiB)", "measured", "predicted", "error", "MiB", "llama.cpp", "error", "RAM", "engine"
        );
        for r in &lrows {
            let est = r
                .llamacpp_estimate
                .map(|e| format!("{:>9.0} {:>+7.1}%", e as f64 / M, (e as f64 / r.measured as f64 - 1.0) * 100.0))
                .unwrap_or_else(|| format!("{:>9} {:>8}", "-", "-"));
            let host = r.host_measured.map(|h| format!("{:>8.0}", h as f64 / M)).unwrap_or_else(|| format!("{:>8}", "-"));
            println!(
                "{:<62} {:>9.0} {:>9.0} {:>+7.1}% {:>+8.0}   {}   {} {:>8.0}{}{}",
                r.id,
                r.measured as f64 / M,
                r.predicted as f64 / M,
                r.error * 100.0,
                r.error_bytes as f64 / M,
                est,
                host,
                r.host_predicted as f64 / M,
                if r.within_tolerance { "" } else { "  OUT OF TOLERANCE" },
                if r.host_within_tolerance { "" } else { "  RAM OUT OF TOLERANCE" }
            );
        }
        let split: Vec<_> = lrows.iter().flat_map(|r| r.devices.iter().map(move |d| (r, d))).collect();
        if !split.is_empty() {
            println!();
            println!("{:<62} {:>9} {:>9} {:>8}", "llama.cpp buffers per GPU (MiB)", "llama.cpp", "engine", "MiB");
            for (r, d) in &split {
                println!(
                    "{:<62} {:>9.0} {:>9.0} {:>+8.0}{}",
                    format!("{} GPU {}", r.id, d.gpu),
                    d.measured as f64 / M,
                    d.predicted as f64 / M,
                    (d.predicted as f64 - d.measured as f64) / M,
                    if d.within_tolerance { "" } else { "  OUT OF TOLERANCE" }
                );
            }
            if let Some((r, d)) = split.iter().max_by_key(|(_, d)| (d.predicted as i64 - d.measured as i64).unsigned_abs()) {
                println!(
                    "llama.cpp per GPU: {} GPUs in {} runs, worst {} GPU {} {:+.0} MiB",
                    split.len(),
                    lrows.iter().filter(|r| !r.devices.is_empty()).count(),
                    r.id,
                    d.gpu,
                    (d.predicted as f64 - d.measured as f64) / M
                );
            }
        }
        if let Some(w) = lrows.iter().max_by(|a, b| a.error.abs().partial_cmp(&b.error.abs()).unwrap()) {
            println!("llama.cpp: {} cases, worst {} {:+.1}% ({:+.0} MiB)", lrows.len(), w.id, w.error * 100.0, w.error_bytes as f64 / M);
        }
        if let Some(w) = lrows.iter().filter_map(|r| Some((r, r.host_measured?))).max_by_key(|(r, m)| (r.host_predicted as i64 - *m as i64).unsigned_abs()) {
            println!(
                "llama.cpp host buffers (system RAM): {} cases against llama.cpp's own figure, worst {} {:+.0} MiB",
                lrows.iter().filter(|r| r.host_measured.is_some()).count(),
                w.0.id,
                (w.0.host_predicted as f64 - w.1 as f64) / M
            );
        }
    }
    let bad: Vec<&str> = rows
        .iter()
        .filter(|r| !r.within_tolerance)
        .map(|r| r.id.as_str())
        .chain(lrows.iter().filter(|r| !r.host_within_tolerance).map(|r| r.id.as_str()))
        .chain(lrows.iter().filter(|r| r.devices.iter().any(|d| !d.within_tolerance)).map(|r| r.id.as_str()))
        .collect();
    if bad.is_empty() { Ok(()) } else { Err(format!("{} case(s) outside 5 % / 0.5 GiB: {}", bad.len(), bad.join(", "))) }
}
