//! Compiles i18n/<lang>/ui.toml into static tables. English is the reference: every language must
//! have exactly its keys, non-empty, with the same `{placeholders}`; otherwise the build fails.

use std::fmt::Write as _;
use std::path::Path;

#[path = "src/validate.rs"]
mod validate;

// Same order as headroom_core::Lang::ALL.
const LANGS: [&str; 5] = ["en", "pt", "es", "zh", "it"];

fn flatten(prefix: &str, table: &toml::Table, out: &mut Vec<(String, String)>, file: &str) {
    for (k, v) in table {
        let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
        match v {
            toml::Value::String(s) => out.push((key, s.clone())),
            toml::Value::Table(t) => flatten(&key, t, out, file),
            other => panic!("{file}: key `{key}` must be a string, found {}", other.type_str()),
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut tables = Vec::new();
    for lang in LANGS {
        let path = root.join(lang).join("ui.toml");
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let table: toml::Table = toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut flat = Vec::new();
        flatten("", &table, &mut flat, &path.display().to_string());
        tables.push((lang.to_string(), flat));
    }
    let problems = validate::validate(&tables);
    if !problems.is_empty() {
        panic!("UI strings are incomplete:\n  {}", problems.join("\n  "));
    }

    let reference = &tables[0].1;
    let mut code = String::new();
    writeln!(code, "/// Every UI string key; `k::HOME_TITLE` is `home.title` in the TOML files.").unwrap();
    writeln!(code, "pub mod k {{\n    use super::Key;").unwrap();
    for (i, (key, text)) in reference.iter().enumerate() {
        let name = key.replace('.', "_").to_uppercase();
        writeln!(code, "    /// {}", text.replace('\n', " ")).unwrap();
        writeln!(code, "    pub const {name}: Key = Key({i});").unwrap();
    }
    writeln!(code, "}}").unwrap();
    // The key list's fingerprint (FNV-1a 64): a table loaded at run time must carry the same one.
    let mut h: u64 = 0xcbf29ce484222325;
    for (key, _) in reference {
        for b in key.bytes().chain([b'\n']) {
            h = (h ^ b as u64).wrapping_mul(0x100000001b3);
        }
    }
    writeln!(code, "/// The fingerprint of the key list (the first element of a table loaded at run time).").unwrap();
    writeln!(code, "pub const KEYS_HASH: &str = \"{h:016x}\";").unwrap();
    writeln!(code, "/// How many keys there are.").unwrap();
    writeln!(code, "pub const KEY_COUNT: usize = {};", reference.len()).unwrap();
    if std::env::var_os("CARGO_FEATURE_RUNTIME").is_some() {
        // The browser build: the strings come from `data/ui-<lang>.json` (see `load`).
        let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("strings.rs");
        std::fs::write(out, code).unwrap();
        return;
    }
    writeln!(code, "pub const KEYS: [&str; {}] = {:?};", reference.len(), reference.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()).unwrap();
    writeln!(code, "static STRINGS: [[&str; {}]; 5] = [", reference.len()).unwrap();
    for (_, table) in &tables {
        let ordered: Vec<&str> = reference.iter().map(|(k, _)| table.iter().find(|(k2, _)| k2 == k).map(|(_, v)| v.as_str()).unwrap()).collect();
        writeln!(code, "    {ordered:?},").unwrap();
    }
    writeln!(code, "];").unwrap();
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("strings.rs");
    std::fs::write(out, code).unwrap();
}
