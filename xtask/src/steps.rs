//! Progress: every step of a task says what it does before it starts and how long it took when
//! it ends. A step that took more than 20 s the last time it ran here (target/xtask-steps.tsv)
//! says so before it starts, as does a step that has never run (with what a first run costs).
//! At the end, `summary` lists the steps with their times.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

use crate::Result;

static DONE: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

fn record_file() -> PathBuf {
    crate::target_dir().join("xtask-steps.tsv")
}

fn recorded() -> Vec<(String, f64)> {
    std::fs::read_to_string(record_file())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t').and_then(|(n, s)| Some((n.to_string(), s.parse().ok()?))))
        .collect()
}

fn remember(name: &str, secs: f64) {
    // Steps may end at the same time on two threads (the tests build beside the site's assembly):
    // one read-modify-write of the file at a time, or one could drop the other's line.
    static FILE: Mutex<()> = Mutex::new(());
    let _one = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let mut all: Vec<(String, f64)> = recorded().into_iter().filter(|(n, _)| n != name).collect();
    all.push((name.to_string(), secs));
    let text: String = all.iter().map(|(n, s)| format!("{n}\t{s:.1}\n")).collect();
    let _ = std::fs::create_dir_all(crate::target_dir());
    let _ = std::fs::write(record_file(), text);
}

/// "1m 05s", "12.3 s".
pub fn human(secs: f64) -> String {
    if secs >= 60.0 { format!("{}m {:02}s", secs as u64 / 60, secs as u64 % 60) } else { format!("{secs:.1} s") }
}

/// Runs one step: `name` says what it does; `first_run` what it costs when it has never run on
/// this machine (empty when that is a few seconds).
pub fn step<T>(name: &str, first_run: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match recorded().into_iter().find(|(n, _)| n == name) {
        Some((_, s)) if s > 20.0 => eprintln!("[xtask] ▶ {name} (took {} last time)", human(s)),
        None if !first_run.is_empty() => eprintln!("[xtask] ▶ {name} (first run here: {first_run})"),
        _ => eprintln!("[xtask] ▶ {name}"),
    }
    let started = Instant::now();
    let out = f();
    let secs = started.elapsed().as_secs_f64();
    match &out {
        Ok(_) => {
            eprintln!("[xtask] ✓ {name}: {}", human(secs));
            remember(name, secs);
            DONE.lock().unwrap_or_else(|e| e.into_inner()).push((name.to_string(), secs));
        }
        Err(_) => eprintln!("[xtask] ✗ {name}: failed after {}", human(secs)),
    }
    out
}

/// The steps this task ran, with their times.
pub fn summary() -> String {
    let done = DONE.lock().unwrap_or_else(|e| e.into_inner());
    done.iter().map(|(n, s)| format!("\n[xtask]   {:>8}  {n}", human(*s))).collect()
}
