//! The `dataset` and `probe` binaries as a user runs them.

use std::process::Command;

use headroom_e2e::{TempDir, bin, copy_tree, repo_root};

fn dataset(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin("dataset", "dataset")).args(args).output().unwrap();
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

#[test]
fn check_accepts_the_real_data() {
    let data = repo_root().join("dataset/data");
    let (ok, stdout, stderr) = dataset(&["check", "--data", data.to_str().unwrap()]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("dataset check: OK"), "{stdout}");
}

/// A copy of the real data with one edit applied to claims/allocator.toml.
fn broken_copy(tmp: &TempDir, edit: impl Fn(&str) -> String) -> String {
    let data = tmp.path().join("data");
    copy_tree(&repo_root().join("dataset/data"), &data);
    let file = data.join("claims/allocator.toml");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit applies");
    std::fs::write(&file, edited).unwrap();
    data.to_str().unwrap().to_string()
}

#[test]
fn check_names_the_file_and_line_of_a_missing_translation() {
    let tmp = TempDir::new("check-lang");
    let data = broken_copy(&tmp, |t| {
        let start = t.find("\nzh = ").unwrap();
        let end = t[start + 1..].find('\n').unwrap() + start + 1;
        format!("{}{}", &t[..start], &t[end..])
    });
    let (ok, _, stderr) = dataset(&["check", "--data", &data]);
    assert!(!ok);
    assert!(stderr.contains("claims/allocator.toml: line "), "{stderr}");
    assert!(stderr.contains("missing field `zh`"), "{stderr}");
}

#[test]
fn check_names_the_file_and_claim_that_breaks_a_verdict_rule() {
    let tmp = TempDir::new("check-verdict");
    // Demote the official source of the verified claim to a community post.
    let data = broken_copy(&tmp, |t| {
        let at = t.find("id = \"max-split-size-default-unlimited\"").unwrap();
        let (head, tail) = t.split_at(at);
        format!("{head}{}", tail.replacen("kind = \"official-doc\"", "kind = \"community\"", 1))
    });
    let (ok, _, stderr) = dataset(&["check", "--data", &data]);
    assert!(!ok);
    assert!(stderr.contains("claims/allocator.toml: claim `max-split-size-default-unlimited`: verified needs a primary source"), "{stderr}");
}

#[test]
fn check_on_a_missing_directory_is_one_clear_line() {
    let tmp = TempDir::new("check-missing");
    let missing = tmp.path().join("headroom-data");
    let (ok, _, stderr) = dataset(&["check", "--data", missing.to_str().unwrap()]);
    assert!(!ok);
    assert_eq!(stderr.trim(), format!("dataset: data directory {} does not exist (pass --data DIR)", missing.display()));
}

/// The seed articles are evidence kept in the repository: a changed byte, a missing file, or a
/// quote that is no longer in its seed fails `dataset check`, naming the file.
#[test]
fn check_holds_each_seed_article_to_its_digest_and_its_quotes() {
    let tmp = TempDir::new("check-seeds");
    let seeds = tmp.path().join("seeds");
    copy_tree(&repo_root().join("dataset/sources/seeds"), &seeds);
    let data = repo_root().join("dataset/data");
    let check = || dataset(&["check", "--data", data.to_str().unwrap(), "--seeds", seeds.to_str().unwrap()]);
    let (ok, _, stderr) = check();
    assert!(ok, "{stderr}");
    let file = seeds.join("002_145f3f392590e592.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replacen("显存", "内存", 1)).unwrap();
    let (ok, _, stderr) = check();
    assert!(!ok);
    assert!(stderr.contains("002_145f3f392590e592.txt: sha256 is ") && stderr.contains("(the seed text changed)"), "{stderr}");
    std::fs::remove_file(&file).unwrap();
    let (ok, _, stderr) = check();
    assert!(!ok);
    assert!(stderr.contains("002_145f3f392590e592.txt") && stderr.contains("seed `002_145f3f392590e592.txt` in seeds.toml"), "{stderr}");
}

fn probe(args: &[&str]) -> std::process::Output {
    Command::new(bin("probe", "probe")).args(args).output().unwrap()
}

#[test]
fn probe_help_and_version() {
    let out = probe(&["--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in ["--device", "--json", "--out"] {
        assert!(help.contains(flag), "{help}");
    }
    let out = probe(&["--version"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("probe {}", env!("CARGO_PKG_VERSION")));
}

fn driver_present() -> bool {
    // The same names the CUDA driver is published under on Linux.
    ["libcuda.so.1", "libcuda.so"]
        .iter()
        .any(|name| Command::new("sh").arg("-c").arg(format!("ldconfig -p | grep -q '{name} '")).status().map(|s| s.success()).unwrap_or(false))
}

#[test]
fn probe_without_a_driver_says_so_in_one_line_with_exit_code_3() {
    let out = probe(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if driver_present() {
        // On a GPU machine the same command measures for real.
        assert!(out.status.success(), "{stderr}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("Total memory"));
        return;
    }
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("probe: no NVIDIA driver found"), "{stderr}");
    assert!(!stderr.contains("panicked"));
    assert!(out.stdout.is_empty());
}

#[test]
fn probe_rejects_a_bad_flag_with_usage_exit_code_2() {
    let out = probe(&["--device", "minus-one"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--device"));
}
