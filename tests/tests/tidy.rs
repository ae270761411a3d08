//! Rules of the source tree that no compiler checks: the architecture's guardrails (the pure
//! crates stay pure, only the probe reaches the CUDA driver, only the store speaks SQL, every
//! crate but the probe forbids unsafe code; ARCHITECTURE.md's "Invariants" names each test) and
//! the calculator's string table.

use std::path::{Path, PathBuf};

use headroom_e2e::repo_root;

/// The calculator's bundle loads `ui-calc-<lang>.json`, where the sections in
/// `headroom_i18n::CALCULATOR_OMITS` are empty: none of the files that only it and the shell
/// compile may use a key of those sections, or the calculator would show an empty string.
#[test]
fn the_calculator_uses_no_string_its_table_leaves_out() {
    let files = [
        "site/src/bin/calc.rs",
        "site/src/app.rs",
        "site/src/ui.rs",
        "site/src/fmt.rs",
        "site/src/routes.rs",
        "site/src/own_model.rs",
        "site/src/pages/calc.rs",
    ];
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(repo_root().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        for (i, line) in text.lines().enumerate() {
            for key in headroom_i18n::all_keys().map(|k| k.name()).filter(|k| headroom_i18n::calculator_omits(k)) {
                let constant = format!("k::{}", key.replace('.', "_").to_uppercase());
                // A whole constant, not the start of a longer one.
                let whole =
                    line.match_indices(&constant).any(|(at, _)| !line[at + constant.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
                if whole {
                    found.push(format!("{f}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "strings the calculator's table leaves out:\n{}", found.join("\n"));
    // And the table really leaves them out, and keeps the rest.
    let table: Vec<String> = serde_json::from_str(&headroom_i18n::table_json_omitting(headroom_core::Lang::Pt, headroom_i18n::calculator_omits)).unwrap();
    let full: Vec<String> = serde_json::from_str(&headroom_i18n::table_json(headroom_core::Lang::Pt)).unwrap();
    assert_eq!(table.len(), full.len());
    let mut omitted = 0;
    for (key, (kept, all)) in headroom_i18n::all_keys().zip(table.iter().skip(1).zip(full.iter().skip(1))) {
        if headroom_i18n::calculator_omits(key.name()) {
            assert_eq!(kept, "", "{}", key.name());
            omitted += 1;
        } else {
            assert_eq!(kept, all, "{}", key.name());
        }
    }
    assert!(omitted > 100, "{omitted}");
    assert!(!headroom_i18n::calculator_omits("claim.correction") && headroom_i18n::calculator_omits("claim.cite"));
}

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                out.push((p, text));
            }
        }
    }
    out.sort();
    out
}

/// The code of a file outside its tests: without its `#[cfg(test)] mod tests { … }` (blanked
/// line for line, so line numbers hold), and nothing for a file that is itself a test module
/// (`tests.rs`). The module ends where its braces balance.
fn non_test_code(path: &Path, text: &str) -> String {
    if path.file_name().is_some_and(|n| n == "tests.rs") {
        return String::new();
    }
    let Some(start) = text.find("#[cfg(test)]\nmod tests {") else {
        return text.to_string();
    };
    let open = start + text[start..].find('{').unwrap();
    let mut depth = 0usize;
    let mut end = text.len();
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = open + i + 1;
                    break;
                }
            }
            _ => {}
        }
    }
    let blank: String = text[start..end].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
    format!("{}{blank}{}", &text[..start], &text[end..])
}

/// Modules a crate compiles only with a feature (`#[cfg(feature = "…")]` before `mod x;` in its
/// lib.rs): the shells' doors into the file system.
fn feature_gated(lib: &str) -> Vec<String> {
    let lines: Vec<&str> = lib.lines().collect();
    lines
        .windows(2)
        .filter(|w| w[0].trim_start().starts_with("#[cfg(feature"))
        .filter_map(|w| w[1].trim().trim_start_matches("pub ").strip_prefix("mod ").map(|m| m.trim_end_matches(';').to_string()))
        .collect()
}

#[test]
fn the_pure_crates_use_no_file_system_network_clock_or_process() {
    const IO: [&str; 10] =
        ["std::fs", "std::net", "std::env", "std::process", "SystemTime", "Instant::now", "File::open", "TcpStream", "stdin()", "std::thread::sleep"];
    let mut found = Vec::new();
    for krate in ["dataset/core/src", "alloc/src"] {
        let dir = repo_root().join(krate);
        let gated = feature_gated(&std::fs::read_to_string(dir.join("lib.rs")).unwrap());
        for (path, text) in sources(&dir) {
            let module = path.file_stem().unwrap().to_string_lossy().to_string();
            if gated.contains(&module) {
                continue;
            }
            let code = non_test_code(&path, &text);
            for (n, line) in code.lines().enumerate() {
                let line = line.split("//").next().unwrap();
                for io in IO.iter().filter(|io| line.contains(*io)) {
                    found.push(format!("{}:{}: {io}", path.strip_prefix(repo_root()).unwrap().display(), n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "I/O in a pure crate (move it behind a feature-gated module or into a shell):\n{}", found.join("\n"));
    // The check sees the gated module it skips (a lib.rs whose layout changed would skip nothing).
    let core_lib = std::fs::read_to_string(repo_root().join("dataset/core/src/lib.rs")).unwrap();
    assert!(feature_gated(&core_lib).contains(&"files".to_string()), "{:?}", feature_gated(&core_lib));
}

/// Workspace members and their manifests.
fn members() -> Vec<(String, toml::Table)> {
    let ws: toml::Table = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap().parse().unwrap();
    ws["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let m = m.as_str().unwrap().to_string();
            let t: toml::Table = std::fs::read_to_string(repo_root().join(&m).join("Cargo.toml")).unwrap().parse().unwrap();
            (m, t)
        })
        .collect()
}

/// Every dependency name a manifest lists (normal, dev, build, and per target).
fn dependencies(t: &toml::Table) -> Vec<String> {
    let mut tables: Vec<&toml::Table> =
        ["dependencies", "dev-dependencies", "build-dependencies"].iter().filter_map(|k| t.get(*k).and_then(|v| v.as_table())).collect();
    if let Some(targets) = t.get("target").and_then(|v| v.as_table()) {
        for cfg in targets.values().filter_map(|v| v.as_table()) {
            tables.extend(["dependencies", "dev-dependencies", "build-dependencies"].iter().filter_map(|k| cfg.get(*k).and_then(|v| v.as_table())));
        }
    }
    tables.iter().flat_map(|t| t.keys().cloned()).collect()
}

#[test]
fn only_the_probe_depends_on_cudarc_and_nothing_depends_on_the_probe() {
    let members = members();
    assert!(members.len() >= 9, "{}", members.len());
    let mut found = Vec::new();
    for (path, manifest) in &members {
        let deps = dependencies(manifest);
        if path != "probe" && deps.iter().any(|d| d == "cudarc") {
            found.push(format!("{path} depends on cudarc"));
        }
        if deps.iter().any(|d| d == "probe") {
            found.push(format!("{path} depends on the probe (and through it on cudarc)"));
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
    assert!(dependencies(&members.iter().find(|(p, _)| p == "probe").unwrap().1).contains(&"cudarc".to_string()));
}

#[test]
fn only_the_store_speaks_sql() {
    // The shipped crates; the test harness (tests/) and xtask start and inspect databases for
    // the tests.
    const SQL: [&str; 8] = ["rusqlite", "postgres::", "SELECT ", "INSERT INTO", "UPDATE ", "DELETE FROM", "CREATE TABLE", "PRAGMA "];
    let mut found = Vec::new();
    for krate in ["alloc/src", "dataset/core/src", "dataset/cli/src", "i18n/src", "probe/src", "site/src", "site/modelfile/src", "site/alloclab/src"] {
        for (path, text) in sources(&repo_root().join(krate)) {
            let rel = path.strip_prefix(repo_root()).unwrap().to_string_lossy().to_string();
            if rel == "dataset/cli/src/store.rs" || rel.starts_with("dataset/cli/src/store/") {
                continue;
            }
            for (n, line) in non_test_code(&path, &text).lines().enumerate() {
                let code = line.split("//").next().unwrap();
                for sql in SQL.iter().filter(|s| code.contains(*s)) {
                    found.push(format!("{rel}:{}: {sql}", n + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "SQL outside dataset/cli/src/store (go through the Store trait):\n{}", found.join("\n"));
    let store = std::fs::read_to_string(repo_root().join("dataset/cli/src/store.rs")).unwrap();
    assert!(store.contains("rusqlite"), "the check looks for the store where it is");
}

#[test]
fn every_crate_but_the_probe_forbids_unsafe_code() {
    let ws: toml::Table = std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap().parse().unwrap();
    assert_eq!(ws["workspace"]["lints"]["rust"]["unsafe_code"].as_str(), Some("forbid"));
    for (path, manifest) in members() {
        let inherits = manifest.get("lints").and_then(|l| l.get("workspace")).and_then(|w| w.as_bool()) == Some(true);
        assert_eq!(inherits, path != "probe", "{path}: `[lints] workspace = true` (forbids unsafe code) in every crate but the probe");
    }
}

/// What a line of a test, a build script or a task script must not name: a folder beside the
/// repository (`../shared` held the seed articles once; a clone has nothing beside it) or an
/// absolute path into one machine's file system. Tools the project installs from the system's
/// packages (`/usr/...`) and the kernel's files (`/dev`, `/proc`) are allowed.
fn outside_the_repository(line: &str) -> Option<&'static str> {
    const BESIDE: [&str; 2] = ["../shared", "..\\shared"];
    const ROOTS: [&str; 12] = ["/work", "/root", "/home", "/tmp", "/mnt", "/opt", "/srv", "/var", "/Users", "/media", "/nonexistent", "C:\\"];
    if let Some(b) = BESIDE.iter().find(|b| line.contains(*b)) {
        return Some(b);
    }
    // An absolute path starts a string or a shell word: after a quote, a space, `=` or `(`.
    ROOTS.iter().copied().find(|r| {
        line.match_indices(r).any(|(at, _)| {
            let before = line[..at].chars().next_back();
            let after = line[at + r.len()..].chars().next();
            matches!(before, None | Some('"' | '\'' | ' ' | '=' | '(' | '`')) && matches!(after, None | Some('/' | '"' | '\'' | ' ' | '\\'))
        })
    })
}

/// The tests, build scripts, the task runner and the project's scripts, each with its text.
fn tests_and_scripts() -> Vec<(PathBuf, String)> {
    let root = repo_root();
    let mut files = Vec::new();
    for dir in ["tests/tests", "tests/src", "tests/examples", "alloc/tests", "dataset/core/tests", "dataset/cli/tests", "probe/tests", "xtask/src"] {
        if root.join(dir).is_dir() {
            files.extend(sources(&root.join(dir)));
        }
    }
    for (path, _) in members() {
        let build = root.join(&path).join("build.rs");
        if build.is_file() {
            files.push((build.clone(), std::fs::read_to_string(&build).unwrap()));
        }
    }
    let mut scripts: Vec<PathBuf> = std::fs::read_dir(root.join("scripts")).unwrap().map(|e| e.unwrap().path()).collect();
    scripts.push(root.join(".ci/run"));
    for p in scripts {
        files.push((p.clone(), std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))));
    }
    files
}

/// A clone must pass with nothing beside it: no test, build script or task script reads outside
/// the repository (the seed articles are in dataset/sources/seeds/, the reference snapshots in
/// alloc/tests/data/h200/).
#[test]
fn no_test_or_script_reads_outside_the_repository() {
    let files = tests_and_scripts();
    assert!(files.len() > 40, "{} files", files.len());
    let mut found = Vec::new();
    for (path, text) in &files {
        let rel = path.strip_prefix(repo_root()).unwrap().display().to_string();
        for (n, line) in text.lines().enumerate() {
            // Comments may say where things used to be; this file names the patterns it looks for.
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with('#') {
                continue;
            }
            if rel == "tests/tests/tidy.rs" && (line.contains("const BESIDE") || line.contains("const ROOTS") || line.contains("assert_eq!(outside")) {
                continue;
            }
            if let Some(what) = outside_the_repository(line) {
                found.push(format!("{rel}:{}: {what}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "paths outside the repository in tests and scripts (put the file in the repository, or use a temporary directory):\n{}",
        found.join("\n")
    );
    // The rule sees what it must, and lets the system's own tools and the repository's paths be.
    assert_eq!(outside_the_repository(r#"let seeds = repo_root().join("../shared/seeds");"#), Some("../shared"));
    assert_eq!(outside_the_repository(r#"const REF: &str = "/work/shared/reference";"#), Some("/work"));
    assert_eq!(outside_the_repository(r#"probe(&["replay", "/nonexistent/trace.json"])"#), Some("/nonexistent"));
    assert_eq!(outside_the_repository("cp out.json /tmp/x.json"), Some("/tmp"));
    assert_eq!(outside_the_repository(r#"Command::new("/usr/bin/chromium")"#), None);
    assert_eq!(outside_the_repository(r#"b.goto("/en/calculator/?model=x");"#), None);
    assert_eq!(outside_the_repository(r#"root.join("site/dist/var/x")"#), None);
}
