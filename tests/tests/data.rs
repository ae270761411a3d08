//! The real dataset: it passes every check, and every derived claim recomputes (one test each).

use headroom_core::{Lang, SourceKind, Verdict};
use headroom_e2e::data::loaded;

include!(concat!(env!("OUT_DIR"), "/derived_tests.rs"));

#[test]
fn the_data_passes_every_check() {
    let ds = &loaded().dataset;
    assert!(!ds.claims.is_empty());
}

#[test]
fn one_generated_test_per_derived_claim() {
    let ds = &loaded().dataset;
    let derived = ds.claims.iter().filter(|c| c.sources.iter().any(|s| s.kind == SourceKind::Derivation)).count();
    assert_eq!(derived, DERIVED_CLAIMS, "tests/build.rs saw a different number of derived claims");
}

#[test]
fn every_claim_reads_in_every_language_and_corrections_where_needed() {
    for c in &loaded().dataset.claims {
        for l in Lang::ALL {
            assert!(!c.statement.get(l).trim().is_empty(), "{} {}", c.id, l.code());
        }
        let needs = matches!(c.verdict, Verdict::Qualified | Verdict::Contradicted);
        assert_eq!(c.correction.is_some(), needs, "{}: correction presence vs verdict {:?}", c.id, c.verdict);
    }
}

#[test]
fn translations_are_not_copies_of_the_english() {
    for c in &loaded().dataset.claims {
        for l in [Lang::Pt, Lang::Es, Lang::Zh, Lang::It] {
            assert_ne!(c.statement.get(l), c.statement.en, "{}: {} statement is the English text", c.id, l.code());
            assert_ne!(c.note.get(l), c.note.en, "{}: {} note is the English text", c.id, l.code());
        }
    }
}

/// Every seed quote (the words a claim judges, where claims share a sentence) is verbatim in its
/// seed article (white space aside), so the split of a sentence into parts can be read back. The
/// articles are in the repository (dataset/sources/seeds/); `dataset check` also holds each to
/// its recorded sha256.
#[test]
fn every_seed_quote_is_verbatim_in_its_seed() {
    let ds = &loaded().dataset;
    let dir = headroom_e2e::repo_root().join("dataset/sources/seeds");
    let texts: Vec<(String, String)> = ds
        .seeds
        .iter()
        .map(|s| (s.file.clone(), std::fs::read_to_string(dir.join(&s.file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(&s.file).display()))))
        .collect();
    assert_eq!(headroom_core::check::seed_quotes(ds, &texts), Vec::<(String, String)>::new());
    let quotes = ds.claims.iter().flat_map(|c| &c.origins).filter(|o| o.seed.is_some() && o.quote.is_some()).count();
    assert!(quotes >= 80, "only {quotes} quotes");
    // The check is not vacuous: a quote that is not in its seed, or a seed without its text, is named.
    let mut wrong = ds.clone();
    let c = wrong.claims.iter_mut().find(|c| c.origins.iter().any(|o| o.seed.is_some() && o.quote.is_some())).unwrap();
    let id = c.id.clone();
    c.origins.iter_mut().find(|o| o.quote.is_some()).unwrap().quote = Some("words no seed article contains".into());
    let problems = headroom_core::check::seed_quotes(&wrong, &texts);
    assert!(problems.iter().any(|(who, why)| who == &id && why.contains("words no seed article contains")), "{problems:?}");
    let problems = headroom_core::check::seed_quotes(ds, &texts[1..]);
    assert!(problems.iter().any(|(who, why)| who == &texts[0].0 && why.contains("missing")), "{problems:?}");
}
