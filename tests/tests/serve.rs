//! `dataset serve`: a real server on 127.0.0.1 with a real SQLite file.

use std::process::Command;

use headroom_e2e::{Server, TempDir, bin, get, site_dir};
use serde_json::Value;

#[test]
fn serves_health_the_site_and_the_data() {
    let tmp = TempDir::new("serve");
    let db = tmp.path().join("sub/dir/headroom.sqlite3");
    let server = Server::start(&site_dir(), &db);
    assert!(db.is_file(), "the SQLite file is created at --db");

    let (status, ctype, body) = get(&format!("{}/api/v1/health", server.url));
    assert_eq!(status, 200);
    assert!(ctype.starts_with("application/json"), "{ctype}");
    let health: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["database"], "ok");
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));

    for route in ["/", "/en/", "/zh/", "/pt"] {
        let (status, ctype, body) = get(&format!("{}{route}", server.url));
        assert_eq!(status, 200, "{route}");
        assert!(ctype.starts_with("text/html"), "{route}: {ctype}");
        // A page loads the app's bundle; the shell at `/` a loader that picks one by address.
        let loads = body.contains("<script type=\"module\">import init from \"/app-") || body.contains("m.default({ module_or_path: b[1] })");
        assert!(loads, "{route} serves the app shell");
    }

    let (status, _, body) = get(&format!("{}/data/dataset.json", server.url));
    assert_eq!(status, 200);
    let ds = headroom_core::Dataset::from_json(&body).expect("built data parses with the core");
    assert!(!ds.claims.is_empty());
    // The per-language files carry the same claims with only that language's texts.
    let (status, _, body) = get(&format!("{}/data/zh.json", server.url));
    assert_eq!(status, 200);
    let zh = headroom_core::Dataset::from_json(&body).unwrap();
    assert_eq!(zh.claims.len(), ds.claims.len());
    assert_eq!(zh.claims[0].statement.zh, ds.claims[0].statement.zh);
    assert!(zh.claims[0].statement.en.is_empty());
    // They leave each claim's details out (note, origins, history, sources but for a derivation's
    // expression); details-<lang>.json has them, by claim id, with the quoted passages.
    assert!(zh.claims.iter().all(|c| c.history.is_empty() && c.note.zh.is_empty() && c.origins.is_empty()));
    assert!(zh.claims.iter().flat_map(|c| &c.sources).all(|s| s.compute.is_some() && s.passage.is_empty() && s.title.is_empty()));
    let (status, _, body) = get(&format!("{}/data/details-zh.json", server.url));
    assert_eq!(status, 200);
    let details: std::collections::BTreeMap<String, headroom_core::ClaimDetail> = serde_json::from_str(&body).unwrap();
    let first = &ds.claims[0];
    assert_eq!(details[&first.id].sources, first.sources);
    assert_eq!(details[&first.id].note.zh, first.note.zh);
    assert!(details[&first.id].note.en.is_empty());

    let (status, _, _) = get(&format!("{}/no-such-file.js", server.url));
    assert_eq!(status, 404);
    let (status, ctype, body) = get(&format!("{}/api/v1/no-such-endpoint", server.url));
    assert_eq!(status, 404);
    assert!(ctype.starts_with("application/json"));
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"], "not_found");
}

#[test]
fn serve_without_a_built_site_says_how_to_build_it() {
    let tmp = TempDir::new("serve-nosite");
    let out = Command::new(bin("dataset", "dataset"))
        .args(["serve", "--addr", "127.0.0.1:0", "--db"])
        .arg(tmp.path().join("db.sqlite3"))
        .arg("--site")
        .arg(tmp.path().join("missing"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cargo xtask dist"), "{err}");
    assert_eq!(err.lines().count(), 1, "one clear line: {err}");
}
