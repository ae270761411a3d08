//! Headroom's UI strings, compiled from `i18n/<lang>/ui.toml`.
//!
//! `t(lang, k::SOME_KEY)` returns the string; an unknown key is a compile error and a key missing
//! from any language fails the build (see build.rs). Numbers never live here: they come from claims.
//!
//! Native builds (prerenderer, CLI, tests) have every language compiled in. The browser build
//! (feature `runtime`) has none: it loads the page's language from `data/ui-<lang>.json`
//! (`dataset build` writes it with `table_json`) before it renders, so the app carries only the
//! language it shows.

use headroom_core::Lang;

#[allow(dead_code)]
mod validate;

/// An index into the string tables; only the generated `k::*` constants exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key(usize);

include!(concat!(env!("OUT_DIR"), "/strings.rs"));

fn row(lang: Lang) -> usize {
    match lang {
        Lang::En => 0,
        Lang::Pt => 1,
        Lang::Es => 2,
        Lang::Zh => 3,
        Lang::It => 4,
    }
}

/// The string for `key` in `lang` (in the browser build, empty until `load` has the language).
#[cfg(not(feature = "runtime"))]
pub fn t(lang: Lang, key: Key) -> &'static str {
    STRINGS[row(lang)][key.0]
}

/// Whether `t` has the strings of `lang` (always, natively).
#[cfg(not(feature = "runtime"))]
pub fn is_loaded(_lang: Lang) -> bool {
    true
}

/// One language's table as `data/ui-<lang>.json` holds it: the key list's fingerprint, then the
/// strings in key order.
#[cfg(not(feature = "runtime"))]
pub fn table_json(lang: Lang) -> String {
    table_json_omitting(lang, |_| false)
}

/// Sections of the strings the calculator's bundle never shows (the other pages' own), and the
/// keys of those sections it does show (`claim.correction` beside a claim it cites): its table,
/// `data/ui-calc-<lang>.json`, leaves the rest of those sections empty, so a first visit does not
/// download them. `tests/tidy.rs` checks that the calculator's sources use no key left empty.
pub const CALCULATOR_OMITS: [&str; 10] = ["about", "claim", "claims", "gpus", "guides", "home", "lab", "meta", "offline", "probe"];
pub const CALCULATOR_KEEPS: [&str; 5] = ["claim.condition", "claim.correction", "claim.title_contradicted", "claim.title_qualified", "claim.title_unverified"];

/// Whether the calculator's table leaves this key (`section.name`) empty.
pub fn calculator_omits(key: &str) -> bool {
    let section = key.split('.').next().unwrap_or("");
    CALCULATOR_OMITS.contains(&section) && !CALCULATOR_KEEPS.contains(&key)
}

/// [`table_json`] with the strings of the keys `omit` names left empty (same key list, so the
/// table loads the same way).
#[cfg(not(feature = "runtime"))]
pub fn table_json_omitting(lang: Lang, omit: impl Fn(&str) -> bool) -> String {
    let mut v: Vec<&str> = vec![KEYS_HASH];
    v.extend(STRINGS[row(lang)].iter().zip(KEYS).map(|(s, key)| if omit(key) { "" } else { *s }));
    serde_json::to_string(&v).expect("strings serialize")
}

#[cfg(feature = "runtime")]
mod runtime {
    use super::*;
    use std::sync::OnceLock;

    static TABLES: [OnceLock<Vec<&'static str>>; 5] = [const { OnceLock::new() }; 5];

    pub fn t(lang: Lang, key: Key) -> &'static str {
        TABLES[row(lang)].get().map(|v| v[key.0]).unwrap_or("")
    }

    pub fn is_loaded(lang: Lang) -> bool {
        TABLES[row(lang)].get().is_some()
    }

    /// Takes a language's table (`table_json`'s text); refuses one written for another key list.
    pub fn load(lang: Lang, json: &str) -> Result<(), String> {
        let v: Vec<String> = serde_json::from_str(json).map_err(|e| format!("ui-{}.json: {e}", lang.code()))?;
        if v.first().map(String::as_str) != Some(KEYS_HASH) || v.len() != KEY_COUNT + 1 {
            return Err(format!("ui-{}.json was written for another version of the site", lang.code()));
        }
        // Kept for the life of the page (at most five tables).
        let strings = v.into_iter().skip(1).map(|s| &*Box::leak(s.into_boxed_str())).collect();
        let _ = TABLES[row(lang)].set(strings);
        Ok(())
    }
}
#[cfg(feature = "runtime")]
pub use runtime::{is_loaded, load, t};

/// The string with `{name}` placeholders replaced.
pub fn fmt(lang: Lang, key: Key, args: &[(&str, &str)]) -> String {
    let mut s = t(lang, key).to_string();
    for (name, value) in args {
        s = s.replace(&format!("{{{name}}}"), value);
    }
    s
}

/// Every key of the tables (for tests that look for one language's strings on another's pages).
#[cfg(not(feature = "runtime"))]
pub fn all_keys() -> impl Iterator<Item = Key> {
    (0..KEYS.len()).map(Key)
}

#[cfg(not(feature = "runtime"))]
impl Key {
    /// The dotted name of the key, e.g. `home.title`.
    pub fn name(self) -> &'static str {
        KEYS[self.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use validate::{placeholders, validate};

    fn table(lang: &str, entries: &[(&str, &str)]) -> (String, Vec<(String, String)>) {
        (lang.to_string(), entries.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
    }

    #[test]
    fn every_language_has_every_key_non_empty() {
        for lang in Lang::ALL {
            for (i, key) in KEYS.iter().enumerate() {
                assert!(!STRINGS[row(lang)][i].trim().is_empty(), "{} {key}", lang.code());
            }
        }
    }

    /// Keys whose text has nothing to translate in some languages: preset labels made of model,
    /// engine and format names, an arrow before a number, a verdict and a quotation.
    const NEUTRAL: [&str; 12] = [
        "lever.result",
        // "GPU {n}: {peak}": a device number and a size.
        "calc.gpu_row",
        // A feature's name that every language keeps in English.
        "calc.flash_attention",
        "claim.cite_other",
        "preset.flux_fp8",
        "preset.llama8b_ollama",
        "preset.llama8b_qlora",
        "preset.qwen32b_vllm",
        "preset.qwen8b_transformers",
        "preset.sdxl_fp16",
        // Platform names: Apple's own term, and a vendor with its software stack.
        "probe.wanted_apple",
        "probe.wanted_amd",
    ];

    #[test]
    fn translations_differ_from_english_for_prose_keys() {
        // A copy of the English text in another language is an untranslated string.
        assert!(NEUTRAL.iter().all(|k| KEYS.contains(k)), "a neutral key that no longer exists");
        for lang in [Lang::Pt, Lang::Es, Lang::Zh, Lang::It] {
            let same: Vec<&str> = KEYS
                .iter()
                .enumerate()
                .filter(|(i, k)| !k.starts_with("brand.") && !NEUTRAL.contains(k) && STRINGS[row(lang)][*i] == STRINGS[0][*i])
                .map(|(_, k)| *k)
                .collect();
            assert!(same.is_empty(), "{}: untranslated keys {same:?}", lang.code());
        }
    }

    #[test]
    fn a_missing_key_is_reported_with_language_and_key() {
        let problems = validate(&[table("en", &[("home.title", "Title"), ("home.lead", "Lead {n}")]), table("pt", &[("home.title", "Título")])]);
        assert_eq!(problems, vec!["pt: missing key `home.lead`".to_string()]);
    }

    #[test]
    fn extra_keys_empty_strings_and_placeholder_mismatches_are_reported() {
        let problems = validate(&[table("en", &[("a", "x {n}"), ("b", "y")]), table("zh", &[("a", "x {m}"), ("b", " "), ("c", "z")])]);
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].contains("placeholders"));
        assert!(problems[1].contains("`b` is empty"));
        assert!(problems[2].contains("`c` is not in en"));
    }

    #[test]
    fn placeholders_are_found() {
        assert_eq!(placeholders("{a} and {b_2} but not { x } or {}").into_iter().collect::<Vec<_>>(), ["a", "b_2"]);
    }

    #[test]
    fn a_table_for_the_browser_carries_the_key_fingerprint_then_every_string() {
        let v: Vec<String> = serde_json::from_str(&table_json(Lang::Zh)).unwrap();
        assert_eq!(v[0], KEYS_HASH);
        assert_eq!(v.len(), KEYS.len() + 1);
        assert_eq!(v[1 + k::HOME_TITLE.0], t(Lang::Zh, k::HOME_TITLE));
    }

    #[test]
    fn fmt_replaces_placeholders() {
        let s = fmt(Lang::En, k::BRAND_VERSION, &[("version", "9.9.9")]);
        assert!(s.contains("9.9.9"), "{s}");
    }
}
