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
/// seed article (white space aside), so the split of a sentence into parts can be read back.
#[test]
fn every_seed_quote_is_verbatim_in_its_seed() {
    let seeds = headroom_e2e::repo_root().join("../shared/seeds");
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut checked = 0;
    for c in &loaded().dataset.claims {
        for o in &c.origins {
            let (Some(seed), Some(quote)) = (&o.seed, &o.quote) else { continue };
            let text = std::fs::read_to_string(seeds.join(seed)).unwrap_or_else(|e| panic!("{}: {e}", seeds.join(seed).display()));
            for part in quote.split(" … ") {
                assert!(words(&text).contains(&words(part)), "{}: quote not in {seed}: {part:?}", c.id);
            }
            checked += 1;
        }
    }
    assert!(checked >= 80, "only {checked} quotes");
}
