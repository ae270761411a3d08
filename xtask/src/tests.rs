//! Running `cargo test` so that a test file which silently stopped testing is noticed: cargo's
//! output and the test binaries' output go through one pipe, in order, and are passed through.
//! An integration test file (`tests/*.rs`) that ran 0 tests (its tests compiled out behind a
//! feature, say) fails the run, and the totals are summed at the end.

use std::io::{BufRead, BufReader};
use std::process::Command;

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

/// Runs the command with its output passed through, and fails it if it failed or if an
/// integration test file ran no test.
pub fn run(cmd: &mut Command) -> Result {
    let shown = format!("{cmd:?}");
    eprintln!("[xtask] $ {shown}");
    let (reader, writer) = std::io::pipe().map_err(|e| format!("pipe: {e}"))?;
    let writer2 = writer.try_clone().map_err(|e| format!("pipe: {e}"))?;
    let mut child = cmd.stdout(writer).stderr(writer2).spawn().map_err(|e| format!("cannot start {shown}: {e}"))?;
    // Drop this process's copies of the write end, or the reader would never see the end.
    cmd.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let lines: Vec<String> = {
        let mut seen = Vec::new();
        for line in BufReader::new(reader).lines() {
            let line = line.unwrap_or_default();
            eprintln!("{line}");
            seen.push(line);
        }
        seen
    };
    let status = child.wait().map_err(|e| format!("{shown}: {e}"))?;
    let t = tally(lines);
    eprintln!("[xtask] tests: {} suites, {} passed, {} failed, {} ignored", t.suites, t.passed, t.failed, t.ignored);
    if !t.empty.is_empty() {
        return Err(format!("integration test files that ran no test (compiled out?): {}", t.empty.join(", ")));
    }
    if !status.success() {
        return Err(format!("{shown} exited with {status}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
