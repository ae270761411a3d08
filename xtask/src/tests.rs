//! Running the tests: `cargo test --no-run` builds every test binary, then several binaries run
//! at once (the longest first, by their times last run), each still one process with its own
//! threads, so the once-per-process caching of the suites holds; each binary's output is shown
//! whole when it ends. An integration test file (`tests/*.rs`) that ran 0 tests (compiled out
//! behind a feature, say) fails the run, and the totals are summed at the end.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use crate::Result;

/// What one `cargo test` run did, read from its output.
#[derive(Debug, Default, PartialEq)]
pub struct Tally {
    pub suites: usize,
    pub passed: usize,
    pub failed: usize,
    pub ignored: usize,
    /// Integration test files that ran no test at all.
    pub empty: Vec<String>,
}

/// Reads cargo's "Running tests/x.rs (…)" lines and the harness's "running N tests" and
/// "test result: …" lines.
pub fn tally(lines: impl IntoIterator<Item = String>) -> Tally {
    let mut t = Tally::default();
    let mut current: Option<String> = None;
    let count = |line: &str, what: &str| -> usize {
        line.split(';').find_map(|part| part.trim().strip_suffix(what).and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())).unwrap_or(0)
    };
    for line in lines {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Running ") {
            current = rest.starts_with("tests/").then(|| rest.split(" (").next().unwrap_or(rest).to_string());
        } else if trimmed.starts_with("Doc-tests ") {
            current = None;
        } else if let Some(n) = trimmed.strip_prefix("running ").and_then(|r| r.split(' ').next()).and_then(|n| n.parse::<usize>().ok()) {
            t.suites += 1;
            if n == 0 {
                if let Some(file) = current.take() {
                    t.empty.push(file);
                }
            }
            current = None;
        } else if trimmed.starts_with("test result: ") {
            t.passed += count(trimmed, "passed");
            t.failed += count(trimmed, "failed");
            t.ignored += count(trimmed, "ignored");
        }
    }
    t
}

/// One test binary to run: how cargo would name it, the executable, the package's folder (the
/// binary's working directory, as under cargo test).
#[derive(Debug, Clone, PartialEq)]
pub struct Binary {
    pub label: String,
    pub exe: PathBuf,
    pub dir: PathBuf,
}

/// The string value of `"key":"…"` in one line of cargo's JSON messages.
fn json_str(line: &str, key: &str) -> Option<String> {
    let start = line.find(&format!("\"{key}\":\""))? + key.len() + 4;
    let mut out = String::new();
    let mut chars = line[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    None
}

/// The test binaries in cargo's `--message-format=json` output: artifacts built in test mode
/// that have an executable.
pub fn binaries(messages: &str) -> Vec<Binary> {
    let mut out = Vec::new();
    // Built in test mode: the `profile` object (it holds no nested object) says `"test":true`.
    let test_profile = |l: &str| l.split_once("\"profile\":{").and_then(|(_, rest)| rest.split_once('}')).is_some_and(|(p, _)| p.contains("\"test\":true"));
    for line in messages.lines().filter(|l| l.contains("\"reason\":\"compiler-artifact\"") && test_profile(l)) {
        let (Some(exe), Some(manifest), Some(src)) = (json_str(line, "executable"), json_str(line, "manifest_path"), json_str(line, "src_path")) else {
            continue;
        };
        let dir = Path::new(&manifest).parent().unwrap_or(Path::new(".")).to_path_buf();
        let rel = Path::new(&src).strip_prefix(&dir).map(|p| p.display().to_string()).unwrap_or(src.clone());
        let integration = line.contains("\"kind\":[\"test\"]");
        let label = if integration { rel } else { format!("unittests {rel}") };
        let label = format!("{label} ({})", Path::new(&exe).file_name().unwrap_or_default().to_string_lossy());
        out.push(Binary { label, exe: PathBuf::from(exe), dir });
    }
    out
}

fn times_file() -> PathBuf {
    crate::target_dir().join("xtask-test-times.tsv")
}

/// Every test binary that one `cargo test --no-run` built (`messages`: its JSON output), run
/// `workers` at a time with the environment `env` gives; then the doc tests (`doc`).
pub fn run_all(messages: &str, env: impl Fn(&mut Command) -> &mut Command + Sync, doc: Command, workers: usize) -> Result {
    let mut bins = binaries(messages);
    if bins.len() < 10 {
        return Err(format!("cargo reported only {} test binaries", bins.len()));
    }
    // The longest first (unknown ones count as long), so that the last to end is a short one.
    let last: Vec<(String, f64)> = std::fs::read_to_string(times_file())
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t').and_then(|(n, s)| Some((n.to_string(), s.parse().ok()?))))
        .collect();
    let key = |b: &Binary| b.label.split(" (").next().unwrap_or("").to_string() + &b.dir.display().to_string();
    let took = |b: &Binary| last.iter().find(|(n, _)| *n == key(b)).map(|(_, s)| *s).unwrap_or(f64::MAX);
    bins.sort_by(|a, b| took(b).total_cmp(&took(a)));
    eprintln!("[xtask] running {} test binaries, {workers} at a time", bins.len());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let shown: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let results: Mutex<Vec<(String, bool, f64)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some(b) = bins.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                    let started = Instant::now();
                    let (ok, text) = run_one(b, &env);
                    let secs = started.elapsed().as_secs_f64();
                    let mut shown = shown.lock().unwrap_or_else(|e| e.into_inner());
                    let block = format!("     Running {}\n{text}[xtask]   {}: {}\n", b.label, b.label, crate::steps::human(secs));
                    eprint!("{block}");
                    shown.extend(block.lines().map(String::from));
                    results.lock().unwrap_or_else(|e| e.into_inner()).push((key(b), ok, secs));
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    let mut times: Vec<(String, f64)> = last.into_iter().filter(|(n, _)| !results.iter().any(|r| &r.0 == n)).collect();
    times.extend(results.iter().map(|(n, _, s)| (n.clone(), *s)));
    let _ = std::fs::write(times_file(), times.iter().map(|(n, s)| format!("{n}\t{s:.1}\n")).collect::<String>());
    let mut lines = shown.into_inner().unwrap_or_else(|e| e.into_inner());
    // The doc tests, through cargo (it compiles them).
    let doc_result = run_collecting(doc, &mut lines);
    let t = tally(lines);
    eprintln!("[xtask] tests: {} suites, {} passed, {} failed, {} ignored", t.suites, t.passed, t.failed, t.ignored);
    if !t.empty.is_empty() {
        return Err(format!("integration test files that ran no test (compiled out?): {}", t.empty.join(", ")));
    }
    let failed: Vec<&str> = results.iter().filter(|r| !r.1).map(|r| r.0.as_str()).collect();
    if !failed.is_empty() {
        return Err(format!("{} test binaries failed: {}", failed.len(), failed.join(", ")));
    }
    doc_result
}

/// Runs one binary with its output (stdout and stderr, in order) collected.
fn run_one(b: &Binary, env: &impl Fn(&mut Command) -> &mut Command) -> (bool, String) {
    let mut cmd = Command::new(&b.exe);
    cmd.current_dir(&b.dir);
    env(&mut cmd);
    let (mut reader, writer) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return (false, format!("pipe: {e}\n")),
    };
    let Ok(writer2) = writer.try_clone() else { return (false, "pipe\n".into()) };
    let child = cmd.stdout(writer).stderr(writer2).spawn();
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return (false, format!("cannot start {}: {e}\n", b.exe.display())),
    };
    let mut text = Vec::new();
    let _ = reader.read_to_end(&mut text);
    let ok = child.wait().map(|s| s.success()).unwrap_or(false);
    (ok, String::from_utf8_lossy(&text).into_owned())
}

/// Runs a command with its output passed through and kept in `lines`.
fn run_collecting(mut cmd: Command, lines: &mut Vec<String>) -> Result {
    let shown = format!("{cmd:?}");
    eprintln!("[xtask] $ {shown}");
    let (reader, writer) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let writer2 = writer.try_clone().map_err(|e| format!("pipe: {e}"))?;
    let mut child = cmd.stdout(writer).stderr(writer2).spawn().map_err(|e| format!("cannot start {shown}: {e}"))?;
    // Drop this process's copies of the write end, or the reader would never see the end.
    drop(cmd);
    for line in BufReader::new(reader).lines() {
        let line = line.unwrap_or_default();
        eprintln!("{line}");
        lines.push(line);
    }
    let status = child.wait().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() { Ok(()) } else { Err(format!("{shown} exited with {status}")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_binaries_are_read_from_cargos_messages() {
        let messages = r#"{"reason":"compiler-artifact","package_id":"path+file:///r/tests#headroom-e2e@0.1.0","manifest_path":"/r/tests/Cargo.toml","target":{"kind":["test"],"crate_types":["bin"],"name":"abuse","src_path":"/r/tests/tests/abuse.rs","edition":"2024","doc":false,"doctest":false,"test":true},"profile":{"opt_level":"0","debuginfo":1,"debug_assertions":true,"overflow_checks":true,"test":true},"features":[],"filenames":["/r/target/debug/deps/abuse-1a"],"executable":"/r/target/debug/deps/abuse-1a","fresh":true}
{"reason":"compiler-artifact","package_id":"x","manifest_path":"/r/dataset/core/Cargo.toml","target":{"kind":["lib"],"crate_types":["lib"],"name":"headroom_core","src_path":"/r/dataset/core/src/lib.rs","test":true},"profile":{"test":true},"executable":"/r/target/debug/deps/headroom_core-2b","fresh":true}
{"reason":"compiler-artifact","package_id":"y","manifest_path":"/r/dataset/core/Cargo.toml","target":{"kind":["lib"],"name":"headroom_core","src_path":"/r/dataset/core/src/lib.rs","test":true},"profile":{"test":false},"executable":null,"fresh":true}
{"reason":"compiler-artifact","package_id":"z","manifest_path":"/r/dataset/cli/Cargo.toml","target":{"kind":["bin"],"name":"dataset","src_path":"/r/dataset/cli/src/main.rs","test":true},"profile":{"opt_level":"0","test":false},"executable":"/r/target/debug/dataset","fresh":true}
{"reason":"build-finished","success":true}"#;
        let b = binaries(messages);
        assert_eq!(b.len(), 2, "{b:?}");
        assert_eq!(b[0], Binary { label: "tests/abuse.rs (abuse-1a)".into(), exe: "/r/target/debug/deps/abuse-1a".into(), dir: "/r/tests".into() });
        assert_eq!(b[1].label, "unittests src/lib.rs (headroom_core-2b)");
        assert_eq!(b[1].dir, PathBuf::from("/r/dataset/core"));
        // The labels read back as cargo's own lines do.
        let t = tally(["     Running tests/abuse.rs (abuse-1a)".to_string(), "running 0 tests".to_string()]);
        assert_eq!(t.empty, vec!["tests/abuse.rs".to_string()]);
    }

    #[test]
    fn an_integration_file_with_no_test_is_named_and_totals_add_up() {
        let out = "\
     Running unittests src/lib.rs (target/debug/deps/headroom_core-0a1b)

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/form.rs (target/debug/deps/form-1c2d)

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

     Running tests/cli.rs (target/debug/deps/cli-3e4f)

running 7 tests
test a ... ok
test result: FAILED. 5 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 2.10s

   Doc-tests headroom_core

running 0 tests
";
        let t = tally(out.lines().map(String::from));
        assert_eq!(t, Tally { suites: 4, passed: 5, failed: 1, ignored: 1, empty: vec!["tests/form.rs".into()] });
    }
}
