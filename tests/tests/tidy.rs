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
    let mut found = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(repo_root().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        for (i, line) in text.lines().enumerate() {
            for key in headroom_i18n::all_keys().map(|k| k.name()).filter(|k| headroom_i18n::calculator_omits(k)) {
                let constant = format!("k::{}", key.replace('.', "_").to_uppercase());
                // A whole constant, not the start of a longer one.
                let whole = line.match_indices(&constant).any(|(at, _)| !line[at + constant.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_'));
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
