//! The guides as `dataset build` renders them: every guide in every language, every claim
//! reference resolves and shows exactly the claim's value, headings and links are valid, and the
//! calculator links are workloads the engine accepts.

use std::collections::BTreeMap;
use std::process::Command;

use headroom_core::guides::Guide;
use headroom_core::{Lang, SourceKind, Value};
use headroom_e2e::data::loaded;
use headroom_e2e::{TempDir, bin};

/// Builds the data into a fresh directory with the real CLI and reads the guides back.
fn built() -> &'static BTreeMap<Lang, Vec<Guide>> {
    static BUILT: std::sync::OnceLock<BTreeMap<Lang, Vec<Guide>>> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| {
        let dir = TempDir::new("guides-build");
        let out = Command::new(bin("dataset", "dataset")).args(["build", "--out"]).arg(dir.path()).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Lang::ALL
            .into_iter()
            .map(|l| {
                let text = std::fs::read_to_string(dir.path().join(format!("data/guides-{}.json", l.code()))).unwrap();
                (l, serde_json::from_str(&text).unwrap())
            })
            .collect()
    })
}

/// `(attribute value, inner text)` of every `<a class="cref" … data-claim="ID"><span class="cval…">V</span>`.
fn value_refs(html: &str) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for part in html.split("<a class=\"cref\"").skip(1) {
        let id = part.split("data-claim=\"").nth(1).and_then(|s| s.split('"').next()).unwrap().to_string();
        let span = part.split("<span class=\"").nth(1).unwrap();
        let said = span.starts_with("cval said");
        let text = span.split_once('>').unwrap().1.split("</span>").next().unwrap();
        out.push((id, text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">"), said));
    }
    out
}

fn hrefs(html: &str) -> Vec<String> {
    html.split("href=\"").skip(1).map(|s| s.split('"').next().unwrap().replace("&amp;", "&")).collect()
}

#[test]
fn at_least_eight_guides_exist_in_every_language_with_the_same_slugs() {
    let b = built();
    let en: Vec<&str> = b[&Lang::En].iter().map(|g| g.slug.as_str()).collect();
    assert!(en.len() >= 8, "{en:?}");
    for l in Lang::ALL {
        let slugs: Vec<&str> = b[&l].iter().map(|g| g.slug.as_str()).collect();
        assert_eq!(slugs, en, "{}", l.code());
        for g in &b[&l] {
            assert!(g.words > 300, "{} {} has {} words", l.code(), g.slug, g.words);
            assert!(!g.title.is_empty() && !g.summary.is_empty());
        }
    }
}

#[test]
fn every_rendered_value_is_the_claims_value_in_the_readers_notation() {
    let ds = &loaded().dataset;
    let mut checked = 0;
    for (lang, guides) in built() {
        for g in guides {
            for (id, shown, _) in value_refs(&g.html) {
                let c = ds.claim(&id).unwrap_or_else(|| panic!("{} {}: unknown claim {id}", lang.code(), g.slug));
                let mut allowed = Vec::new();
                if let Some(v) = &c.value {
                    allowed.push(headroom_core::format::value(v, *lang));
                }
                for s in c.sources.iter().filter(|s| s.kind == SourceKind::Derivation) {
                    let v = Value { number: s.expect, min: None, max: None, unit: s.unit.clone().unwrap_or_default(), approx: false };
                    allowed.push(headroom_core::format::value(&v, *lang));
                }
                assert!(allowed.contains(&shown), "{} {}: `{id}` shown as {shown:?}, the dataset says {allowed:?}", lang.code(), g.slug);
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "only {checked} values");
}

#[test]
fn contradicted_values_only_appear_struck_through() {
    let ds = &loaded().dataset;
    for (lang, guides) in built() {
        for g in guides {
            for (id, shown, said) in value_refs(&g.html) {
                let c = ds.claim(&id).unwrap();
                let is_claimed_value = c.value.as_ref().is_some_and(|v| headroom_core::format::value(v, *lang) == shown);
                if c.verdict == headroom_core::Verdict::Contradicted && is_claimed_value {
                    assert!(said, "{} {}: contradicted `{id}` shown as a fact", lang.code(), g.slug);
                }
            }
        }
    }
}

#[test]
fn links_go_to_existing_claims_guides_headings_and_valid_workloads() {
    let ds = &loaded().dataset;
    let b = built();
    for (lang, guides) in b {
        let code = lang.code();
        for g in guides {
            let mut ids: Vec<&str> = g.headings.iter().map(|h| h.id.as_str()).collect();
            let n = ids.len();
            ids.sort();
            ids.dedup();
            assert_eq!(ids.len(), n, "{code} {}: duplicate heading ids", g.slug);
            assert!(g.headings.iter().all(|h| h.level >= 2), "{code} {}: only the title is an h1", g.slug);
            for href in hrefs(&g.html) {
                if let Some(rest) = href.strip_prefix(&format!("/{code}/claims/")) {
                    let id = rest.trim_end_matches('/');
                    assert!(ds.claim(id).is_some(), "{code} {}: {href}", g.slug);
                } else if let Some(rest) = href.strip_prefix(&format!("/{code}/guides/")) {
                    let (slug, anchor) = rest.split_once('/').unwrap();
                    let target = guides.iter().find(|x| x.slug == slug).unwrap_or_else(|| panic!("{code} {}: {href}", g.slug));
                    if let Some(a) = anchor.strip_prefix('#') {
                        assert!(target.headings.iter().any(|h| h.id == a), "{code} {}: {href} has no such heading", g.slug);
                    }
                } else if let Some(q) = href.strip_prefix(&format!("/{code}/calculator/")) {
                    let mut state = headroom_core::fit::query::parse_query(ds, q);
                    // The card fields are the calculator's, not the workload's (dataset check
                    // fits the link on its cards).
                    for key in headroom_core::fit::query::CARD_KEYS {
                        state.remove(key);
                    }
                    let w = headroom_core::fit::workload::Workload::from_value(&serde_json::Value::Object(state)).unwrap();
                    headroom_core::fit::fit(ds, &w).unwrap_or_else(|e| panic!("{code} {}: {href}: {e}", g.slug));
                } else if let Some(a) = href.strip_prefix('#') {
                    assert!(g.headings.iter().any(|h| h.id == a), "{code} {}: #{a}", g.slug);
                } else {
                    assert!(href.starts_with("https://") || href.starts_with("http://"), "{code} {}: unexpected link {href}", g.slug);
                }
            }
            for r in &g.related {
                assert!(guides.iter().any(|x| &x.slug == r), "{code} {}: related {r}", g.slug);
            }
        }
    }
}

#[test]
fn a_guide_with_a_wrong_reference_fails_the_build_with_the_file_named() {
    let dir = TempDir::new("guides-bad");
    let i18n = dir.path().join("i18n");
    for l in Lang::ALL {
        std::fs::create_dir_all(i18n.join(l.code()).join("guides")).unwrap();
    }
    std::fs::write(i18n.join("guides.toml"), "order = [\"a\"]\n").unwrap();
    for l in Lang::ALL {
        let body = if l == Lang::It { "Ne servono 12 GB: {{no-such-claim}}.\n" } else { "Fine.\n" };
        std::fs::write(i18n.join(l.code()).join("guides/a.md"), format!("+++\ntitle = \"A\"\nsummary = \"S\"\n+++\n{body}")).unwrap();
    }
    let out = Command::new(bin("dataset", "dataset")).args(["check", "--i18n"]).arg(&i18n).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("it/guides/a.md: `{{no-such-claim}}`: no claim `no-such-claim`"), "{err}");
    assert!(err.contains("it/guides/a.md: states the quantity `12 GB`"), "{err}");
    // A language without the guide is named too.
    std::fs::remove_file(i18n.join("zh/guides/a.md")).unwrap();
    std::fs::write(i18n.join("it/guides/a.md"), "+++\ntitle = \"A\"\nsummary = \"S\"\n+++\nBene.\n").unwrap();
    let out = Command::new(bin("dataset", "dataset")).args(["check", "--i18n"]).arg(&i18n).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("zh/guides/a.md: missing (it exists in en)"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_glossary_has_the_same_terms_in_every_language() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../i18n");
    let read = |l: Lang| -> toml::Table {
        let text = std::fs::read_to_string(root.join(l.code()).join("glossary.toml")).unwrap();
        text.parse::<toml::Table>().unwrap()["terms"].as_table().unwrap().clone()
    };
    let en = read(Lang::En);
    assert!(en.len() >= 40, "{} terms", en.len());
    for l in Lang::ALL {
        let t = read(l);
        let (a, b): (Vec<_>, Vec<_>) = (en.keys().collect(), t.keys().collect());
        assert_eq!(a, b, "{}: glossary keys differ from English", l.code());
        for (k, v) in &t {
            assert!(v["term"].as_str().is_some_and(|s| !s.trim().is_empty()), "{} {k}", l.code());
        }
    }
}
