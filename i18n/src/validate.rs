// Shared by build.rs (through #[path]) and the crate's tests: pure checks on the UI string tables.
// Each table is (language code, [(key, text)]) with keys in file order.

use std::collections::BTreeSet;

/// `{name}` placeholders in a string, in order of appearance, deduplicated.
pub fn placeholders(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        match after.find('}') {
            Some(end) if after[..end].chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && end > 0 => {
                out.insert(after[..end].to_string());
                rest = &after[end + 1..];
            }
            _ => rest = after,
        }
    }
    out
}

/// Compares every language's table with the reference (first) one. Returns one message per
/// problem: missing keys, extra keys, empty strings, placeholder mismatches, bad key names.
pub fn validate(tables: &[(String, Vec<(String, String)>)]) -> Vec<String> {
    let mut problems = Vec::new();
    let Some((ref_lang, reference)) = tables.first() else {
        return vec!["no languages".to_string()];
    };
    for (key, _) in reference {
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'.') {
            problems.push(format!("{ref_lang}: key `{key}` must be lowercase letters, digits, '_' and '.'"));
        }
    }
    for (lang, table) in tables {
        let keys: BTreeSet<&str> = table.iter().map(|(k, _)| k.as_str()).collect();
        for (key, ref_text) in reference {
            match table.iter().find(|(k, _)| k == key) {
                None => problems.push(format!("{lang}: missing key `{key}`")),
                Some((_, text)) => {
                    if text.trim().is_empty() {
                        problems.push(format!("{lang}: key `{key}` is empty"));
                    }
                    if placeholders(text) != placeholders(ref_text) {
                        problems.push(format!("{lang}: key `{key}` has placeholders {:?}, {ref_lang} has {:?}", placeholders(text), placeholders(ref_text)));
                    }
                }
            }
        }
        for key in keys {
            if !reference.iter().any(|(k, _)| k == key) {
                problems.push(format!("{lang}: key `{key}` is not in {ref_lang}"));
            }
        }
    }
    problems
}
