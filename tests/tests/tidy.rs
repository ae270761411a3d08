//! Rules of the source tree that no compiler checks.

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
    let prefixes: Vec<String> = headroom_i18n::CALCULATOR_OMITS.iter().map(|s| format!("k::{}_", s.to_uppercase())).collect();
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(repo_root().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        for (i, line) in text.lines().enumerate() {
            for p in &prefixes {
                if line.contains(p.as_str()) {
                    found.push(format!("{f}:{}: {}", i + 1, line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "strings the calculator's table leaves out:\n{}", found.join("\n"));
    // And the table really leaves them out, and keeps the rest.
    let table: Vec<String> = serde_json::from_str(&headroom_i18n::table_json_omitting(headroom_core::Lang::Pt, &headroom_i18n::CALCULATOR_OMITS)).unwrap();
    let full: Vec<String> = serde_json::from_str(&headroom_i18n::table_json(headroom_core::Lang::Pt)).unwrap();
    assert_eq!(table.len(), full.len());
    for (key, (kept, all)) in headroom_i18n::all_keys().zip(table.iter().skip(1).zip(full.iter().skip(1))) {
        let section = key.name().split('.').next().unwrap();
        if headroom_i18n::CALCULATOR_OMITS.contains(&section) {
            assert_eq!(kept, "", "{}", key.name());
        } else {
            assert_eq!(kept, all, "{}", key.name());
        }
    }
}
