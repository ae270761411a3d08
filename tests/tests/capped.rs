//! "Fits" must hold on the card: the engine's total against real runs with the process capped
//! (dataset/measurements/capped/, written on an H200 by harness/capped.py).
//!
//! - Calibration and held-out runs, each with the smallest total it ran in (bisection): the
//!   engine's total must be at least that, and the allocator headroom may add at most 10 % above it.
//!   h200-torch2.11-capped.jsonl is the calibration set; its last 4 records are the search runs
//!   (caps-short.json) of the verification cases that ran out at the engine's earlier total, which
//!   set the training bases and the SDXL base. h200-torch2.11-capped-held-out.jsonl is held out.
//! - Verification runs at exactly the engine's total (no search): each record must be for the
//!   engine as it is (same total); a case that finished must have run out at 90 % of it (so the
//!   total is within about 11 % of what it needs); the cases that ran out are the ones listed below,
//!   no more and no fewer.

use headroom_core::fit::{Workload, fit};
use headroom_e2e::data::loaded;
use headroom_e2e::repo_root;
use serde_json::Value;

/// Verification cases that ran out of memory at the engine's total. Empty since 2026-12-02: the 4
/// that did (batch-1 training steps, the SDXL UNet at 768²) were searched (caps-short.json), the
/// headroom got bases for training and a larger SDXL base, and every verification run whose total
/// changed was run again at the new total (caps-verify.json) and finished.
const KNOWN_SHORT: [&str; 0] = [];

fn records(name: &str) -> Vec<Value> {
    let path = repo_root().join("dataset/measurements/capped").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// The engine's total and its allocator headroom for a record's workload.
fn engine(r: &Value) -> (u64, u64) {
    let f = fit(&loaded().dataset, &Workload::from_value(&r["workload"]).unwrap()).unwrap();
    let h = f.breakdown.iter().find(|t| t.term == "allocator-headroom").map(|t| t.bytes).unwrap_or(0);
    (f.peak_bytes, h)
}

#[test]
fn the_total_covers_the_smallest_total_every_capped_run_needed() {
    let mut n = 0;
    for file in ["h200-torch2.11-capped.jsonl", "h200-torch2.11-capped-held-out.jsonl"] {
        for r in records(file) {
            let id = r["id"].as_str().unwrap();
            let needed = r["min_total"].as_u64().unwrap_or_else(|| panic!("{id}: no smallest total"));
            let (total, headroom) = engine(&r);
            assert!(total >= needed, "{id}: the engine says {total} B fits, the run needed {needed} B");
            // What the headroom adds beyond what was needed (the rest is the engine's own error).
            let added = total.saturating_sub(needed.max(total - headroom));
            assert!(added as f64 <= 0.10 * needed as f64, "{id}: the headroom adds {added} B over the {needed} B needed");
            n += 1;
        }
    }
    assert!(n >= 36, "{n} capped runs");
}

#[test]
fn at_the_engines_total_the_verification_runs_finish_except_the_known_short_ones() {
    let mut short = Vec::new();
    let rs = records("h200-torch2.11-capped-verify.jsonl");
    for r in &rs {
        let id = r["id"].as_str().unwrap().to_string();
        let (total, _) = engine(r);
        assert_eq!(r["predicted"].as_u64(), Some(total), "{id}: recorded for another engine total; re-run harness/capped.py on the device");
        assert_eq!(r["ok_at_90_percent"], Value::Bool(false), "{id}: still runs at 90 % of the total (more than 10 % margin)");
        if r["ok_at_predicted"] != Value::Bool(true) {
            short.push(id);
        }
    }
    short.sort();
    let mut known: Vec<String> = KNOWN_SHORT.iter().map(|s| s.to_string()).collect();
    known.sort();
    assert_eq!(short, known, "cases that ran out at the engine's total");
    assert!(rs.len() - short.len() >= 10);
}
