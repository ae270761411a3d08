//! The allocator lab's simulator, as the Web Worker calls it (`site/lab-worker.js`): the file
//! comes in chunks (`push`), is parsed once (`parse`), then each cell of the matrix is one
//! `cell` call and the chosen cell one `detail` call. Every answer is JSON text: the page parses
//! it with serde_json (byte counts stay exact), and errors come back as `{"error": "…"}` with
//! the parser's or PyTorch's own message. Nothing here touches the network: the file never
//! leaves the browser.

use headroom_alloc::config::Backend;
use headroom_alloc::recover::Rules;
use headroom_alloc::trace::{self, Format, Trace};
use headroom_alloc::{Options, config, detail, replay};
use serde_json::{Value, json};
use wasm_bindgen::prelude::*;

/// One trace in the worker.
#[wasm_bindgen]
pub struct Lab {
    bytes: Vec<u8>,
    trace: Option<Trace>,
    /// Set when the file does not fit in the browser's memory: `parse` says so.
    too_large: Option<String>,
}

impl Default for Lab {
    fn default() -> Self {
        Lab::new(0.0)
    }
}

#[wasm_bindgen]
impl Lab {
    /// `len`: the file's size, reserved up front (a snapshot of hundreds of MB is not copied
    /// each time the buffer grows).
    #[wasm_bindgen(constructor)]
    pub fn new(len: f64) -> Lab {
        let mut lab = Lab { bytes: Vec::new(), trace: None, too_large: None };
        lab.reserve(len.max(0.0) as u64);
        lab
    }

    /// The next chunk of the file (ignored once the file is known not to fit).
    pub fn push(&mut self, chunk: &[u8]) {
        if self.too_large.is_none() {
            self.reserve(self.bytes.len() as u64 + chunk.len() as u64);
        }
        if self.too_large.is_none() {
            self.bytes.extend_from_slice(chunk);
        }
    }

    /// Parses what was pushed. `recoverable`: one `--recoverable` value per line (a size or a
    /// frame-name pattern), besides cuDNN's sites recognised by their frames.
    pub fn parse(&mut self, recoverable: &str) -> String {
        self.parse_value(recoverable).to_string()
    }

    /// One replay: `conf` as PYTORCH_CUDA_ALLOC_CONF, on a device of `total` bytes of which
    /// `taken` are held before the trace starts; `fraction` above 0: as
    /// `torch.cuda.set_per_process_memory_fraction(fraction)` (0: never called).
    pub fn cell(&self, conf: &str, total: f64, taken: f64, fraction: f64) -> String {
        self.cell_value(conf, total as u64, taken as u64, fraction).to_string()
    }

    /// One replay in detail: memory over time in about `points` points, the segments at the peak
    /// and, if it runs out, the failing allocation's stack frames (snapshots recorded with
    /// stacks).
    pub fn detail(&self, conf: &str, total: f64, taken: f64, fraction: f64, points: u32) -> String {
        self.detail_value(conf, total as u64, taken as u64, fraction, points as usize).to_string()
    }
}

impl Lab {
    /// Room for `len` bytes, or the reason there is none (a wasm module has at most 4 GiB, and
    /// the browser may give it less): a clear error instead of an aborted worker.
    fn reserve(&mut self, len: u64) {
        let more = usize::try_from(len).ok().and_then(|l| l.checked_sub(self.bytes.len()));
        let ok = more.is_some_and(|m| self.bytes.try_reserve_exact(m).is_ok());
        if !ok {
            self.bytes = Vec::new();
            self.too_large = Some(format!("the file ({} MB) does not fit in the memory this browser gives the lab", len / 1_000_000));
        }
    }
}

/// `""` when PyTorch 2.11 accepts `conf`, else its error message.
#[wasm_bindgen]
pub fn check_conf(conf: &str) -> String {
    config::parse(conf).err().map(|e| e.to_string()).unwrap_or_default()
}

/// The claims that caution against `conf` as PyTorch 2.11 reads it, space-separated (empty:
/// none): combining `max_split_size_mb` with `expandable_segments:True`
/// (`config::max_split_with_expandable`). The page shows each with its claim link.
#[wasm_bindgen]
pub fn conf_cautions(conf: &str) -> String {
    let mut ids = Vec::new();
    if config::max_split_with_expandable(conf) {
        ids.push(config::MAX_SPLIT_WITH_EXPANDABLE_CLAIM);
    }
    ids.join(" ")
}

impl Lab {
    pub fn parse_value(&mut self, recoverable: &str) -> Value {
        if let Some(e) = &self.too_large {
            return json!({"error": e});
        }
        let mut rules = Rules::default();
        for line in recoverable.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Err(e) = rules.add(line) {
                return json!({"error": e});
            }
        }
        match trace::parse_with(&self.bytes, &rules) {
            Ok(t) => {
                let recoverable = t.recoverable.iter().filter(|&&r| r != 0).count();
                let summary = json!({
                    "format": t.format,
                    "events": t.events.len(),
                    "source_events": t.source_events,
                    "initial": t.initial,
                    "device_total": t.device_total,
                    "recorded_conf": t.recorded_conf,
                    "recoverable": recoverable,
                    "bytes": self.bytes.len(),
                });
                // JSON traces are small and have no frames: their bytes are not needed again.
                if t.format == Format::Json {
                    self.bytes = Vec::new();
                }
                self.trace = Some(t);
                summary
            }
            Err(e) => json!({"error": e.to_string()}),
        }
    }

    fn options(conf: &str, total: u64, taken: u64, fraction: f64) -> Result<Options, Value> {
        let c = config::parse(conf).map_err(|e| json!({"error": e.to_string()}))?;
        if taken >= total {
            return Err(json!({"error": "other processes hold the whole card"}));
        }
        if !(0.0..=1.0).contains(&fraction) {
            return Err(json!({"error": "the memory fraction must be between 0 and 1"}));
        }
        let mut o = Options::new(c, total);
        o.device_free = Some(total - taken);
        o.memory_fraction = (fraction > 0.0).then_some(fraction);
        Ok(o)
    }

    pub fn cell_value(&self, conf: &str, total: u64, taken: u64, fraction: f64) -> Value {
        let Some(t) = &self.trace else { return json!({"error": "no trace"}) };
        match Self::options(conf, total, taken, fraction) {
            Ok(o) => outcome_json(&replay(t, &o)),
            Err(e) => e,
        }
    }

    pub fn detail_value(&self, conf: &str, total: u64, taken: u64, fraction: f64, points: usize) -> Value {
        let Some(t) = &self.trace else { return json!({"error": "no trace"}) };
        let o = match Self::options(conf, total, taken, fraction) {
            Ok(o) => o,
            Err(e) => return e,
        };
        let d = detail::detail(t, &o, points.clamp(2, 4000));
        let frames = match (d.outcome.oom_at, t.format) {
            (Some(at), Format::Snapshot) => match trace::frames_at(&self.bytes, None, at) {
                Ok(f) => json!(f),
                Err(e) => json!({"error": e.to_string()}),
            },
            _ => json!([]),
        };
        json!({
            "events": d.events,
            "stride": d.stride,
            "points": d.points.iter().map(|p| [p.from, p.allocated, p.reserved]).collect::<Vec<_>>(),
            "peak_index": d.peak_index,
            "peak_at": d.peak_at,
            "segments": d.segments.iter().map(|s| json!({
                "address": s.0, "size": s.1, "expandable": s.2,
                "blocks": s.3.iter().map(|b| [b.0 - s.0, b.1, b.2 as u64]).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "limit": d.limit,
            "outcome": outcome_json(&d.outcome),
            "frames": frames,
            "async": d.outcome.backend == Backend::CudaMallocAsync,
        })
    }
}

/// A replay's outcome as the page shows it (the allocator's counters left out).
pub fn outcome_json(o: &headroom_alloc::Outcome) -> Value {
    json!({
        "oom": o.oom,
        "oom_at": o.oom_at,
        "oom_in_initial_state": o.oom_in_initial_state,
        "oom_size": o.oom_size,
        "oom_message": o.oom_message,
        "peak_allocated": o.peak_allocated,
        "peak_reserved": o.peak_reserved,
        "events_replayed": o.events_replayed,
        "fallbacks": o.fallbacks,
        "warnings": o.warnings,
        "num_alloc_retries": o.num_alloc_retries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab(name: &str) -> Lab {
        let bytes = std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../alloc/fidelity/traces").join(name)).unwrap();
        let mut lab = Lab::new(bytes.len() as f64);
        for chunk in bytes.chunks(1 << 16) {
            lab.push(chunk);
        }
        lab
    }

    #[test]
    fn a_snapshot_pushed_in_chunks_replays_as_the_cli_does() {
        let mut l = lab("image.pkl");
        let s = l.parse_value("");
        assert_eq!(s["format"], "snapshot", "{s}");
        assert!(s["recoverable"].as_u64().unwrap() > 0, "cuDNN's workspaces are recognised: {s}");
        let four = 4u64 << 30;
        let c = l.cell_value("", four, 512 << 20, 0.0);
        assert_eq!(c["oom"], true);
        assert_eq!(c["oom_at"], 15860, "as `probe replay --sweep` says for a 4 GB card");
        let d = l.detail_value("", four, 512 << 20, 0.0, 300);
        assert_eq!(d["outcome"]["oom_at"], 15860);
        assert!(d["points"].as_array().unwrap().len() <= 300);
        assert!(!d["segments"].as_array().unwrap().is_empty());
        let frames = d["frames"].as_array().unwrap();
        assert!(frames.iter().any(|f| f["filename"].as_str().unwrap().ends_with(".py")), "{frames:?}");
        let e = l.cell_value("expandable_segments:true", four, 0, 0.0);
        assert!(e["error"].as_str().unwrap().contains("'True' or 'False'"), "{e}");
        assert_eq!(check_conf("max_split_size_mb:10").contains(">= 20"), true);
        assert_eq!(check_conf("expandable_segments:True"), "");
        assert_eq!(conf_cautions("expandable_segments:True,max_split_size_mb:128"), config::MAX_SPLIT_WITH_EXPANDABLE_CLAIM);
        assert_eq!(conf_cautions("expandable_segments:True"), "");
        assert_eq!(conf_cautions("max_split_size_mb:128"), "");
    }

    #[test]
    fn a_memory_fraction_turns_garbage_collection_on_as_in_the_cli() {
        // `probe replay transformer.pkl --device-total 8589934592 --conf C [--memory-fraction
        // 0.85]`: 8520728576 bytes reserved at the peak without the fraction (garbage collection
        // off), 6371147776 with it.
        let mut l = lab("transformer.pkl");
        assert_eq!(l.parse_value("")["format"], "snapshot");
        let (conf, eight) = ("max_split_size_mb:128,garbage_collection_threshold:0.85", 8u64 << 30);
        assert_eq!(l.cell_value(conf, eight, 0, 0.0)["peak_reserved"], 8520728576u64);
        assert_eq!(l.cell_value(conf, eight, 0, 0.85)["peak_reserved"], 6371147776u64);
        assert!(l.cell_value(conf, eight, 0, 1.5)["error"].as_str().unwrap().contains("between 0 and 1"));
    }

    #[test]
    fn bad_input_says_why() {
        let mut l = Lab::new(10.0);
        l.push(b"\x80\x04not a pickle");
        assert!(l.parse_value("")["error"].is_string());
        let mut l = lab("churn.json");
        assert!(l.parse_value("some_frame\n12GiB")["error"].as_str().unwrap().contains("no stack frames"));
        let s = l.parse_value("\n12GiB\n");
        assert_eq!(s["format"], "json", "{s}");
        assert!(l.parse_value("0.5.5GiB")["error"].as_str().unwrap().contains("--recoverable"));
        assert!(Lab::new(0.0).cell_value("", 1 << 30, 0, 0.0)["error"] == "no trace");
        // A file larger than the address space: a clear error, not an abort.
        let mut huge = Lab::new(1e30);
        huge.push(b"\x80\x04");
        assert!(huge.parse_value("")["error"].as_str().unwrap().contains("does not fit in the memory"));
    }
}
