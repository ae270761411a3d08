//! Generates one test per derived claim (a claim with a `derivation` source) so that each
//! recomputation is its own named test: `derived_<claim id>`.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let claims_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataset/data/claims");
    println!("cargo:rerun-if-changed={}", claims_dir.display());
    let mut ids = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&claims_dir) {
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            println!("cargo:rerun-if-changed={}", path.display());
            let Ok(text) = std::fs::read_to_string(&path) else { continue };
            // A file that does not parse is reported by `dataset check` and the data tests.
            let Ok(table) = toml::from_str::<toml::Table>(&text) else { continue };
            for claim in table.get("claim").and_then(|c| c.as_array()).into_iter().flatten() {
                let derived = claim
                    .get("sources")
                    .and_then(|s| s.as_array())
                    .is_some_and(|s| s.iter().any(|s| s.get("kind").and_then(|k| k.as_str()) == Some("derivation")));
                if let (true, Some(id)) = (derived, claim.get("id").and_then(|i| i.as_str())) {
                    ids.push(id.to_string());
                }
            }
        }
    }
    let mut code = String::new();
    for id in &ids {
        let name: String = id.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        writeln!(code, "#[test]\nfn derived_{name}() {{\n    headroom_e2e::data::assert_derivation({id:?});\n}}\n").unwrap();
    }
    writeln!(code, "pub const DERIVED_CLAIMS: usize = {};", ids.len()).unwrap();
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("derived_tests.rs");
    std::fs::write(out, code).unwrap();
}
