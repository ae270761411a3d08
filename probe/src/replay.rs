//! `probe replay TRACE`: replay an allocation trace through the headroom-alloc model of PyTorch
//! 2.11's CUDA caching allocator and say whether and where it runs out of memory.
//!
//! The shell only reads the file and prints; every rule lives in the `headroom-alloc` crate.
//! Exit codes: 0 replayed (also when the trace runs out of memory: that is a result), 2 bad
//! usage or a config string PyTorch would refuse (its error is printed), 1 an unreadable or
//! invalid trace (one line naming the file and the position).

use std::path::PathBuf;

use headroom_alloc::config::{self, Backend};
use headroom_alloc::oom::format_size;
use headroom_alloc::trace::{self, Format, Trace};
use headroom_alloc::{COMPARE_CONFIGS, Options, Outcome, replay};

pub const EXIT_OK: u8 = 0;
pub const EXIT_TRACE: u8 = 1;
pub const EXIT_USAGE: u8 = 2;

/// Replay an allocation trace with PyTorch 2.11's CUDA caching allocator rules.
#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// The trace: a torch.cuda.memory._dump_snapshot pickle, or JSON
    /// {"events": [["a", id, size], ["f", id, size], ...]}.
    pub trace: PathBuf,
    /// PYTORCH_CUDA_ALLOC_CONF, e.g. "expandable_segments:True,max_split_size_mb:128".
    #[arg(long, value_name = "STRING", default_value = "")]
    pub conf: String,
    /// Device memory in bytes (cudaMemGetInfo total). Default: the trace's own, if it has one.
    #[arg(long, value_name = "BYTES")]
    pub device_total: Option<u64>,
    /// Free device memory when the replay starts, in bytes, as cudaMemGetInfo or nvidia-smi
    /// report it (the driver keeps about 2 MiB of it back). Default: the device total.
    #[arg(long, value_name = "BYTES")]
    pub device_free: Option<u64>,
    /// As torch.cuda.set_per_process_memory_fraction(F): the allocator may hold at most
    /// F x device total. Absent: never called (which also keeps garbage collection off).
    #[arg(long, value_name = "F")]
    pub memory_fraction: Option<f64>,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// Replay under common configurations side by side.
    #[arg(long)]
    pub compare: bool,
    /// An allocation PyTorch catches the out-of-memory error of and goes on from, besides the
    /// ones recognised by their frames (cuDNN's workspaces in snapshots recorded with
    /// stacks="all"): a size (536870912, 512MiB) or a frame-name pattern. Repeatable.
    #[arg(long, value_name = "SIZE|PATTERN")]
    pub recoverable: Vec<String>,
    /// Treat every failed allocation as fatal (no fallbacks).
    #[arg(long, conflicts_with = "recoverable")]
    pub no_recover: bool,
    /// Replay under the allocator lab's settings (and --conf, if given) on each card of --cards
    /// or --sizes: a matrix of outcomes, and per card the first configuration that fits.
    #[arg(long, conflicts_with = "compare")]
    pub sweep: bool,
    /// With --sweep: GPUs of the catalog by id (e.g. rtx-3060-12gb,rtx-4090); their nominal
    /// memory is the device total.
    #[arg(long, value_name = "ID,ID", value_delimiter = ',')]
    pub cards: Vec<String>,
    /// With --sweep: device totals (e.g. 8GiB,12GiB,24GiB).
    #[arg(long, value_name = "SIZE,SIZE", value_delimiter = ',')]
    pub sizes: Vec<String>,
    /// With --sweep: memory other processes (and this process's CUDA context) already hold on
    /// each card, e.g. 1.2GiB.
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub other_processes: String,
}

/// The GPU catalog (`dataset/data/catalog/gpus.toml`), embedded at build time.
const GPU_CATALOG: &str = include_str!("../../dataset/data/catalog/gpus.toml");

#[derive(serde::Deserialize)]
struct GpuFile {
    gpu: Vec<headroom_core::catalog::Gpu>,
}

/// The settings a sweep tries (`dataset/data/catalog/alloc-recipes.toml`, the allocator lab's
/// list), embedded at build time.
const RECIPES: &str = include_str!("../../dataset/data/catalog/alloc-recipes.toml");

#[derive(serde::Deserialize)]
struct RecipeFile {
    recipe: Vec<headroom_core::catalog::AllocRecipe>,
}

/// The sweep's configurations, cheapest change first, as the lab names them.
fn recipes() -> Result<Vec<headroom_alloc::sweep::Config>, String> {
    let file: RecipeFile = toml::from_str(RECIPES).map_err(|e| format!("the embedded allocator settings: {e}"))?;
    headroom_alloc::sweep::Config::parse_all(file.recipe.iter().map(|r| (if r.conf.is_empty() { "default" } else { r.conf.as_str() }, r.conf.as_str())))
}

/// The cards of `--cards` and `--sizes`.
fn sweep_cards(args: &ReplayArgs) -> Result<Vec<headroom_alloc::sweep::Card>, String> {
    use headroom_alloc::sweep::{Card, parse_size};
    let taken = parse_size(&args.other_processes).or_else(|e| if args.other_processes.trim() == "0" { Ok(0) } else { Err(e) })?;
    let mut cards = Vec::new();
    if !args.cards.is_empty() {
        let catalog: GpuFile = toml::from_str(GPU_CATALOG).map_err(|e| format!("the embedded GPU catalog: {e}"))?;
        for id in &args.cards {
            let id = id.trim();
            let Some(g) = catalog.gpu.iter().find(|g| g.id == id) else {
                let mut near: Vec<&str> = catalog.gpu.iter().map(|g| g.id.as_str()).filter(|g| g.contains(id.split('-').next().unwrap_or(id))).collect();
                near.truncate(8);
                return Err(format!(
                    "no GPU `{id}` in the catalog{}",
                    if near.is_empty() { String::new() } else { format!(" (did you mean {}?)", near.join(", ")) }
                ));
            };
            cards.push(Card { label: format!("{} ({} GB)", g.name, g.memory_gb), total: headroom_core::fit::gpu_bytes(g), taken });
        }
    }
    for s in &args.sizes {
        let total = parse_size(s)?;
        cards.push(Card { label: s.trim().to_string(), total, taken });
    }
    if cards.is_empty() {
        return Err("--sweep needs --cards ID,ID or --sizes SIZE,SIZE (e.g. --sizes 8GiB,12GiB,24GiB)".into());
    }
    if let Some(c) = cards.iter().find(|c| c.taken >= c.total) {
        return Err(format!("--other-processes ({}) leaves nothing of {}", format_size(taken), c.label));
    }
    Ok(cards)
}

fn run_sweep(args: &ReplayArgs, t: &Trace, shown: &str) -> u8 {
    use headroom_alloc::sweep::{Config, sweep};
    let cards = match sweep_cards(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("probe replay: {e}");
            return EXIT_USAGE;
        }
    };
    let recipes = match recipes() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("probe replay: {e}");
            return EXIT_USAGE;
        }
    };
    let mut configs = Vec::new();
    if !args.conf.is_empty() && !recipes.iter().any(|r| r.conf.source == args.conf) {
        match config::parse(&args.conf) {
            Ok(c) => configs.push(Config { name: format!("{} (--conf)", args.conf), conf: c }),
            Err(e) => {
                eprintln!("probe replay: PYTORCH_CUDA_ALLOC_CONF={:?} is refused by PyTorch 2.11:\n{e}", args.conf);
                return EXIT_USAGE;
            }
        }
    }
    configs.extend(recipes);
    let m = sweep(t, &configs, &cards, |_, _| true).expect("not cancelled");
    if args.json {
        let doc = serde_json::json!({
            "trace": shown,
            "format": t.format,
            "events": t.source_events,
            "cards": cards.iter().map(|c| serde_json::json!({"card": c.label, "device_total": c.total, "other_processes": c.taken})).collect::<Vec<_>>(),
            "configs": configs.iter().zip(&m.outcomes).map(|(c, row)| serde_json::json!({
                "config": c.name,
                "cells": row.iter().map(outcome_json).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "first_that_fits": m.first_that_fits.iter().map(|f| f.map(|i| configs[i].name.clone())).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        return EXIT_OK;
    }
    let kind = match t.format {
        Format::Json => "JSON trace",
        Format::Snapshot => "memory snapshot",
    };
    println!("{shown}: {kind}, {} events; {} configurations x {} cards", t.source_events, configs.len(), cards.len());
    let w = configs.iter().map(|c| c.name.len()).max().unwrap_or(10).max(6);
    let cw = cards.iter().map(|c| c.label.len()).max().unwrap_or(8).max(22);
    let mut s = format!("{:<w$}", "config");
    for c in &cards {
        s.push_str(&format!("  {:>cw$}", c.label));
    }
    s.push('\n');
    for (c, row) in configs.iter().zip(&m.outcomes) {
        s.push_str(&format!("{:<w$}", c.name));
        for (o, card) in row.iter().zip(&cards) {
            let cell = if o.oom {
                match o.oom_at {
                    Some(at) => format!("OOM at event {at}"),
                    None => "OOM (initial state)".to_string(),
                }
            } else {
                let free = card.total.saturating_sub(card.taken).saturating_sub(o.peak_reserved);
                format!("fits, {} spare{}", format_size(free), if o.fallbacks.is_empty() { "" } else { "*" })
            };
            s.push_str(&format!("  {cell:>cw$}"));
        }
        s.push('\n');
    }
    for (card, first) in cards.iter().zip(&m.first_that_fits) {
        match first {
            Some(i) => s.push_str(&format!(
                "{}: {}\n",
                card.label,
                if *i == 0 && configs[0].name == "default" {
                    "fits with the default settings".to_string()
                } else {
                    format!("first configuration that fits: PYTORCH_CUDA_ALLOC_CONF={}", configs[*i].conf.source)
                }
            )),
            None => s.push_str(&format!("{}: runs out of memory under every configuration tried\n", card.label)),
        }
    }
    s.push_str(&format!(
        "note: spare = device total - other processes ({}) - peak reserved; card totals are nominal (the driver reports a little less)\n",
        format_size(cards[0].taken)
    ));
    if m.outcomes.iter().flatten().any(|o| !o.fallbacks.is_empty()) {
        s.push_str("note: * survives only through cuDNN's fallbacks (what it used instead is not in the trace)\n");
    }
    print!("{s}");
    EXIT_OK
}

/// Run `probe replay`; returns the exit code.
pub fn run(args: &ReplayArgs) -> u8 {
    let shown = args.trace.display().to_string();
    let bytes = match std::fs::read(&args.trace) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("probe replay: cannot read {shown}: {e}");
            return EXIT_TRACE;
        }
    };
    let mut rules = if args.no_recover { headroom_alloc::recover::Rules::none() } else { headroom_alloc::recover::Rules::default() };
    for spec in &args.recoverable {
        if let Err(e) = rules.add(spec) {
            eprintln!("probe replay: {e}");
            return EXIT_USAGE;
        }
    }
    let t = match trace::parse_with(&bytes, &rules) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("probe replay: {shown}: {e}");
            return EXIT_TRACE;
        }
    };
    let Some(total) = args.device_total.or(t.device_total) else {
        eprintln!("probe replay: {shown} does not say how much memory the device has; give --device-total BYTES (e.g. --device-total 25769803776 for 24 GiB)");
        return EXIT_USAGE;
    };
    if total == 0 {
        eprintln!("probe replay: --device-total must be more than 0 bytes");
        return EXIT_USAGE;
    }
    if let Some(free) = args.device_free
        && free > total
    {
        eprintln!("probe replay: --device-free ({free}) cannot exceed the device total ({total})");
        return EXIT_USAGE;
    }
    if let Some(f) = args.memory_fraction {
        // torch.cuda.set_per_process_memory_fraction's own check
        if !(0.0..=1.0).contains(&f) {
            eprintln!("probe replay: ValueError: Invalid fraction value: {f}. Allowed range: 0~1");
            return EXIT_USAGE;
        }
    }
    let opts_for = |conf: config::AllocConf| {
        let mut o = Options::new(conf, total);
        o.device_free = args.device_free;
        o.memory_fraction = args.memory_fraction;
        o.recover = !args.no_recover;
        o
    };

    if args.sweep {
        return run_sweep(args, &t, &shown);
    }
    if args.compare {
        let mut rows: Vec<(String, Result<Outcome, String>)> = Vec::new();
        if !args.conf.is_empty() && !COMPARE_CONFIGS.iter().any(|(_, c)| *c == args.conf) {
            rows.push((format!("{} (--conf)", args.conf), config::parse(&args.conf).map(|c| replay(&t, &opts_for(c))).map_err(|e| e.to_string())));
        }
        for (name, conf) in COMPARE_CONFIGS {
            let c = config::parse(conf).expect("built-in configs parse");
            rows.push((name.to_string(), Ok(replay(&t, &opts_for(c)))));
        }
        if args.json {
            let list: Vec<serde_json::Value> = rows
                .iter()
                .map(|(name, r)| match r {
                    Ok(o) => {
                        let mut v = outcome_json(o);
                        v["config"] = name.clone().into();
                        v
                    }
                    Err(e) => serde_json::json!({"config": name, "config_error": e}),
                })
                .collect();
            let doc = serde_json::json!({
                "trace": shown,
                "format": t.format,
                "events": t.source_events,
                "device_total": total,
                "device_free": args.device_free.unwrap_or(total),
                "memory_fraction": args.memory_fraction,
                "configs": list,
            });
            println!("{}", serde_json::to_string_pretty(&doc).expect("json"));
        } else {
            print!("{}", header(&shown, &t, total, args));
            print!("{}", compare_table(&rows, args.memory_fraction.is_some()));
        }
        return EXIT_OK;
    }

    let conf = match config::parse(&args.conf) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("probe replay: PYTORCH_CUDA_ALLOC_CONF={:?} is refused by PyTorch 2.11:\n{e}", args.conf);
            return EXIT_USAGE;
        }
    };
    let out = replay(&t, &opts_for(conf.clone()));
    if args.json {
        let mut v = outcome_json(&out);
        v["trace"] = shown.into();
        v["format"] = serde_json::to_value(t.format).expect("json");
        v["events"] = t.source_events.into();
        v["conf"] = args.conf.clone().into();
        v["device_total"] = total.into();
        v["device_free"] = args.device_free.unwrap_or(total).into();
        v["memory_fraction"] = args.memory_fraction.into();
        println!("{}", serde_json::to_string_pretty(&v).expect("json"));
    } else {
        print!("{}", header(&shown, &t, total, args));
        print!("{}", summary(&out, &conf));
    }
    EXIT_OK
}

/// The outcome as the `--json` object (the brief's keys first, then the details).
pub fn outcome_json(o: &Outcome) -> serde_json::Value {
    serde_json::json!({
        "oom_at": o.oom_at,
        "oom": o.oom,
        "oom_in_initial_state": o.oom_in_initial_state,
        "oom_message": o.oom_message,
        "peak_allocated": o.peak_allocated,
        "peak_reserved": o.peak_reserved,
        "num_device_alloc": o.num_device_alloc,
        "num_device_free": o.num_device_free,
        "num_alloc_retries": o.num_alloc_retries,
        "num_ooms": o.num_ooms,
        "backend": o.backend,
        "events_replayed": o.events_replayed,
        "final_allocated": o.final_allocated,
        "final_reserved": o.final_reserved,
        "allowed_memory_maximum": o.allowed_memory_maximum,
        "warnings": o.warnings,
        "fallbacks": o.fallbacks,
    })
}

fn header(shown: &str, t: &Trace, total: u64, args: &ReplayArgs) -> String {
    let kind = match t.format {
        Format::Json => "JSON trace",
        Format::Snapshot => "memory snapshot",
    };
    let mut s = format!("{shown}: {kind}, {} events", t.source_events);
    if t.initial > 0 {
        s.push_str(&format!(", {} blocks alive before recording started (allocated first)", t.initial));
    }
    s.push('\n');
    if let Some(rc) = &t.recorded_conf
        && !rc.is_empty()
        && rc != &args.conf
    {
        s.push_str(&format!("note: the trace was recorded with PYTORCH_CUDA_ALLOC_CONF={rc:?}; this replay uses {:?}\n", args.conf));
    }

    s.push_str(&format!(
        "device: {} total, {} free; memory fraction: {}\n",
        format_size(total),
        format_size(args.device_free.unwrap_or(total)),
        match args.memory_fraction {
            Some(f) => format!("{f} (set_per_process_memory_fraction)"),
            None => "not set".to_string(),
        }
    ));
    s
}

fn summary(o: &Outcome, conf: &config::AllocConf) -> String {
    let mut s = format!(
        "config: {:?} (backend {})\n",
        conf.source,
        match conf.backend {
            Backend::Native => "native",
            Backend::CudaMallocAsync => "cudaMallocAsync",
        }
    );
    for w in &o.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    if o.oom {
        let at = match o.oom_at {
            Some(i) => format!("event {i}"),
            None => "an allocation of the state before recording started".to_string(),
        };
        s.push_str(&format!("result: OUT OF MEMORY at {at} (a request of {} bytes)\n", o.oom_size.unwrap_or(0)));
        if let Some(m) = &o.oom_message {
            s.push_str(&format!("  torch.OutOfMemoryError: {m}\n"));
        }
    } else {
        s.push_str(&format!("result: fits ({} events replayed)\n", o.events_replayed));
    }
    s.push_str(&fallback_lines(o));
    s.push_str(&format!(
        "peak allocated: {} ({} bytes)\npeak reserved:  {} ({} bytes)\n",
        format_size(o.peak_allocated),
        o.peak_allocated,
        format_size(o.peak_reserved),
        o.peak_reserved
    ));
    if o.backend == Backend::Native {
        s.push_str(&format!(
            "cudaMalloc/map calls: {}, cudaFree/unmap calls: {}, free-everything-and-retry: {}, OOMs: {}\n",
            o.num_device_alloc, o.num_device_free, o.num_alloc_retries, o.num_ooms
        ));
    }
    if conf.garbage_collection_threshold > 0.0 && o.allowed_memory_maximum.is_none() && o.backend == Backend::Native {
        s.push_str("note: garbage_collection_threshold does nothing without a memory fraction below 1 (--memory-fraction)\n");
    }
    s
}

/// One line per fallback, and what the replay could not know about them.
fn fallback_lines(o: &Outcome) -> String {
    let mut s = String::new();
    for f in &o.fallbacks {
        s.push_str(&format!(
            "fallback at event {}: {} ({} requested, {} reserved after the allocator released its cache)\n",
            f.at,
            f.what,
            format_size(f.size),
            format_size(f.reserved_after)
        ));
    }
    if let Some(most) = o.fallbacks.iter().map(|f| f.unrecorded_at_most).max() {
        s.push_str(&format!(
            "note: what PyTorch used instead is not in the trace and was left out; it could have taken up to {} (the limit minus what was allocated then), so peaks may be that much higher\n",
            format_size(most)
        ));
    }
    s
}

fn compare_table(rows: &[(String, Result<Outcome, String>)], fraction_set: bool) -> String {
    let w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(10).max(6);
    let mut s = format!("{:<w$}  {:>14}  {:>14}  {:>12}  {:>7}  {:>9}\n", "config", "peak reserved", "peak allocated", "OOM at", "retries", "fallbacks");
    for (name, r) in rows {
        match r {
            Ok(o) => {
                let oom = if !o.oom { "-".to_string() } else { o.oom_at.map_or("initial".to_string(), |v| format!("event {v}")) };
                let retries = if o.backend == Backend::Native { o.num_alloc_retries.to_string() } else { "n/a".to_string() };
                s.push_str(&format!(
                    "{:<w$}  {:>14}  {:>14}  {:>12}  {:>7}  {:>9}\n",
                    name,
                    format_size(o.peak_reserved),
                    format_size(o.peak_allocated),
                    oom,
                    retries,
                    o.fallbacks.len()
                ));
            }
            Err(e) => s.push_str(&format!("{name:<w$}  refused: {e}\n")),
        }
    }
    if !fraction_set {
        s.push_str("note: garbage_collection_threshold is inert here: it acts only with a memory fraction below 1 (--memory-fraction)\n");
    }
    s.push_str("note: backend:cudaMallocAsync's reserved bytes come from an approximate model of the driver's pool\n");
    if rows.iter().any(|(_, r)| r.as_ref().is_ok_and(|o| !o.fallbacks.is_empty())) {
        s.push_str("note: fallbacks: allocations that failed where PyTorch catches the error and tries something smaller (cuDNN's next engine); what it used instead is not in the trace\n");
    }
    s
}
