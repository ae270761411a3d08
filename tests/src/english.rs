//! English left on a page in another language: the literal pieces of the English UI strings and
//! of the engine's messages that the language's own table does not share, and wording of Rust or
//! serde that must never reach a reader in any language.

use headroom_core::Lang;
use headroom_i18n::{all_keys, t};

/// Wording of the code underneath (serde, wasm-bindgen) that no page may show.
pub const CODE_WORDING: [&str; 8] =
    ["invalid type", "missing field", "expected u64", "unknown variant", "JsValue", "floating point `", "wasm-function", "panicked at"];

/// Literal pieces of a template between its `{placeholders}` that read as English prose: two
/// words or more, ten characters or more.
fn pieces(template: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in template.split(['{', '}']).enumerate() {
        // Odd parts are placeholder names.
        if i % 2 == 1 {
            continue;
        }
        let p = part.trim_matches(|c: char| !c.is_alphanumeric());
        // Words of prose, not code (`config.json`, `model_type`, `-ngl`).
        let prose = p.split_whitespace().filter(|w| w.len() >= 2 && w.chars().all(|c| c.is_alphabetic() || c == '\'' || c == ',')).count();
        if p.len() >= 10 && prose >= 2 {
            out.push(p.to_string());
        }
    }
    out
}

/// The English pieces that must not appear on a page in `lang`.
pub fn fragments(lang: Lang) -> Vec<String> {
    let own: Vec<&str> = all_keys().map(|k| t(lang, k)).collect();
    let mut english: Vec<String> = all_keys().filter(|k| t(Lang::En, *k) != t(lang, *k)).flat_map(|k| pieces(t(Lang::En, k))).collect();
    english.extend(headroom_core::messages::MESSAGES.iter().flat_map(|(_, m)| pieces(m)));
    english.sort();
    english.dedup();
    english.retain(|p| !own.iter().any(|o| o.contains(p.as_str())));
    english
}

/// The English pieces and code wording found in `text`, a page's text in `lang`.
pub fn left_in(lang: Lang, text: &str) -> Vec<String> {
    let mut found: Vec<String> = CODE_WORDING.iter().filter(|w| text.contains(*w)).map(|w| w.to_string()).collect();
    if lang != Lang::En {
        found.extend(fragments(lang).into_iter().filter(|f| text.contains(f.as_str())));
    }
    found
}
