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

/// Issue 40, point 13: a measurement says where it was made. A setting's effect depends on the
/// platform (expandable segments do nothing on Windows builds), so every claim that rests on a
/// measurement, or reports one, names its platform in `conditions.platform`.
#[test]
fn every_measurement_claim_states_its_platform() {
    let missing: Vec<&str> = loaded()
        .dataset
        .claims
        .iter()
        .filter(|c| c.id.contains("measure") || c.sources.iter().any(|s| s.kind == SourceKind::Measurement))
        .filter(|c| c.conditions.get("platform").map_or(true, |p| p.trim().is_empty()))
        .map(|c| c.id.as_str())
        .collect();
    assert!(missing.is_empty(), "measurement claims without conditions.platform: {missing:?}");
}

/// Issue 40, point 13: no two live claims judge the same thing. Two claims from the same seed with
/// the same value on the same models and GPUs, or two derivations of the same value from the same
/// catalog reads, are one claim (merge them with `replaces`).
#[test]
fn no_two_claims_are_duplicates() {
    use std::collections::{BTreeMap, BTreeSet};
    let ds = &loaded().dataset;
    let calls = regex_lite_calls;
    let mut seen: BTreeMap<String, &str> = BTreeMap::new();
    let mut dups = Vec::new();
    for c in &ds.claims {
        let mut keys = Vec::new();
        if let Some(v) = &c.value {
            let seeds: BTreeSet<&str> = c.origins.iter().filter_map(|o| o.seed.as_deref()).collect();
            if !seeds.is_empty() {
                let (mut m, mut g) = (c.models.clone(), c.gpus.clone());
                m.sort();
                g.sort();
                keys.push(format!("seed {seeds:?} {:?} {:?} {:?} {} {m:?} {g:?}", v.number, v.min, v.max, v.unit));
            }
        }
        // A claim with one derivation is that derivation (several make a table of cases, not a duplicate).
        let derivations: Vec<_> = c.sources.iter().filter(|s| s.kind == SourceKind::Derivation).collect();
        // Only a verified claim's derivation is its own value (a contradicted one derives the correction).
        if let ([s], Verdict::Verified) = (&derivations[..], c.verdict) {
            if let (Some(compute), Some(expect)) = (&s.compute, s.expect) {
                let reads = calls(compute);
                if !reads.is_empty() {
                    keys.push(format!("derived {expect} {:?} {reads:?}", s.unit));
                }
            }
        }
        keys.push(format!("statement {}", c.statement.en.trim().to_lowercase()));
        for k in keys {
            if let Some(other) = seen.insert(k.clone(), &c.id) {
                if other != c.id {
                    dups.push(format!("{other} / {} ({k})", c.id));
                }
            }
        }
    }
    assert!(dups.is_empty(), "duplicate claims: {dups:#?}");
}

/// The catalog reads of a derivation (`params(m, role)`, `cfg(m, field)`, …), spaces removed, as a set.
fn regex_lite_calls(compute: &str) -> std::collections::BTreeSet<String> {
    let s: String = compute.chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = std::collections::BTreeSet::new();
    let b = s.as_bytes();
    for (i, ch) in s.char_indices() {
        if ch == '(' && i > 0 && (b[i - 1] as char).is_ascii_alphanumeric() {
            let start = s[..i].rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or(0, |p| p + 1);
            if let Some(end) = s[i..].find(')') {
                out.insert(s[start..i + end + 1].to_string());
            }
        }
    }
    out
}

/// Issue 40, point 11: PYTORCH_ALLOC_CONF is read by the CUDA allocator only from PyTorch 2.10
/// (2.9.1 ignores it, pytorch#183387). Every claim and tool flag that names it says which releases
/// read which name (a version number in its note, correction, conditions or effect).
#[test]
fn claims_naming_pytorch_alloc_conf_say_which_versions_read_it() {
    let ds = &loaded().dataset;
    let has_version = |t: &str| t.split(|c: char| !(c.is_ascii_digit() || c == '.')).any(|w| w.starts_with("2.") && w.len() > 2);
    let mut vague = Vec::new();
    for c in &ds.claims {
        let text = format!("{} {} {}", c.statement.en, c.note.en, c.correction.as_ref().map_or("", |t| t.en.as_str()));
        if !text.contains("PYTORCH_ALLOC_CONF") {
            continue;
        }
        let context =
            format!("{} {} {}", c.note.en, c.correction.as_ref().map_or("", |t| t.en.as_str()), c.conditions.values().cloned().collect::<Vec<_>>().join(" "));
        if !has_version(&context) {
            vague.push(c.id.clone());
        }
    }
    for t in &ds.tools {
        for f in t.flags.iter().filter(|f| f.name == "PYTORCH_ALLOC_CONF") {
            if !has_version(&f.effect.en) {
                vague.push(format!("{} flag {}", t.id, f.name));
            }
        }
    }
    assert!(vague.is_empty(), "name PYTORCH_ALLOC_CONF without the releases that read it: {vague:?}");
    let c = ds.claims.iter().find(|c| c.id == "pytorch-alloc-conf-versions").expect("the claim on which releases read which name");
    assert_eq!(c.verdict, Verdict::Verified);
}

/// Issue 40, point 13: a claim is no weaker than the dataset's own evidence. The diffusers SD3 page
/// (a primary source the dataset already cited) gives T5-XXL's 4.7B parameters, so the derivation
/// of FLUX.1's T5-XXL weights reads only primary inputs and verifies the figure.
#[test]
fn flux_t5xxl_weights_are_verified_by_derivation_from_primary_inputs() {
    let ds = &loaded().dataset;
    let c = ds.claims.iter().find(|c| c.id == "flux-t5xxl-16bit-9.5gb-fp8-5gb").unwrap();
    assert_eq!(c.verdict, Verdict::Verified);
    assert!(c.sources.iter().any(|s| s.kind == SourceKind::Derivation));
    assert_eq!(headroom_core::check::community_inputs(c, ds), Vec::<String>::new());
}

/// Issue 40, point 13: an MLPerf/MLCommons system description is not a primary source for a GPU's
/// memory size (NVIDIA's own file lists the 24 GB A10 at 16 GB); no such file backs `memory_gb`.
#[test]
fn no_catalog_gpu_memory_rests_on_an_mlperf_system_file() {
    let mut wrong = Vec::new();
    for g in &loaded().dataset.gpus {
        for (i, s) in std::iter::once(&g.source).chain(&g.extra_sources).enumerate() {
            let system_file = s.url.as_deref().is_some_and(|u| u.to_lowercase().contains("mlcommons")) || s.title.contains("MLPerf");
            // The main source backs every field unless it lists `backs`; an extra source only what it lists.
            let backs_memory = if s.backs.is_empty() { i == 0 } else { s.backs.iter().any(|b| b == "memory_gb") };
            if system_file && backs_memory {
                wrong.push(format!("{}: {}", g.id, s.title));
            }
        }
    }
    assert!(wrong.is_empty(), "GPU memory backed by an MLPerf system file: {wrong:#?}");
}

/// Issue 40, point 12: combining `max_split_size_mb` with `expandable_segments:True` has its own
/// claim, judged on the allocator's source at a pinned commit and on pytorch/pytorch#193400 (open,
/// so qualified: the growth needs a pattern and stops at the card), with the PR's figures quoted;
/// every allocator-lab setting that combines the two cites it.
#[test]
fn max_split_with_expandable_segments_has_its_claim_and_sources() {
    let ds = &loaded().dataset;
    let id = "expandable-with-max-split-reserved-keeps-growing";
    let c = ds.claims.iter().find(|c| c.id == id).expect("the claim on max_split_size_mb with expandable_segments");
    assert_eq!(c.verdict, Verdict::Qualified);
    let v = c.value.as_ref().expect("the PR's reserved figure");
    assert_eq!((v.number, v.unit.as_str()), (Some(14060.0), "MiB"));
    assert!(c.conditions.get("platform").is_some_and(|p| p.contains("Linux")), "{:?}", c.conditions);
    let pr = c.sources.iter().find(|s| s.url.as_deref() == Some("https://github.com/pytorch/pytorch/pull/193400")).expect("the PR as a source");
    assert_eq!(pr.kind, SourceKind::Community);
    assert!(pr.passage.contains("14,060") && pr.passage.contains("266"), "{}", pr.passage);
    assert!(pr.title.contains("open"), "the PR's status: {}", pr.title);
    let code = c.sources.iter().find(|s| s.kind == SourceKind::SourceCode).expect("the allocator's source");
    assert!(code.url.as_deref().is_some_and(|u| u.contains("/blob/001074d25084fdb87a799823e395a50f5ec044d3/")), "{:?}", code.url);
    assert!(code.passage.contains("Do not return an oversized block") && code.passage.contains("expandable_segments()"));
    for l in Lang::ALL {
        assert!(c.correction.as_ref().unwrap().get(l).contains("500 MiB"), "{}", l.code());
    }
    for r in ds.alloc_recipes.iter().filter(|r| r.conf.contains("max_split_size_mb") && r.conf.contains("expandable_segments:True")) {
        assert!(r.claims.iter().any(|x| x == id), "recipe {} does not cite {id}", r.id);
    }
}

/// Issue 40, point 13 (version-specific behaviour): transformers v5.9.0 ignores a concrete `dtype`
/// for composite checkpoints loaded through AutoModelForCausalLM (huggingface/transformers#46459,
/// fixed by #46514), so the claim that v5 loads in the requested dtype is qualified, its conditions
/// name the versions and the bug, and both tracker threads are cited.
#[test]
fn transformers_dtype_claim_names_the_release_that_ignores_it() {
    let ds = &loaded().dataset;
    let c = ds.claims.iter().find(|c| c.id == "transformers-dtype-argument").expect("the dtype claim");
    assert_eq!(c.verdict, Verdict::Qualified);
    let software = c.conditions.get("software").expect("conditions.software");
    for needle in ["v5.9.0", "#46459", "#46514", "v5.17.0"] {
        assert!(software.contains(needle), "conditions.software lacks {needle}: {software}");
    }
    for url in ["https://github.com/huggingface/transformers/issues/46459", "https://github.com/huggingface/transformers/pull/46514"] {
        let s = c.sources.iter().find(|s| s.url.as_deref() == Some(url)).unwrap_or_else(|| panic!("{url} as a source"));
        assert_eq!(s.kind, SourceKind::Community);
    }
    for l in Lang::ALL {
        assert!(c.correction.as_ref().expect("a correction").get(l).contains("v5.9.0"), "{}", l.code());
    }
    let last = c.history.last().unwrap();
    assert_eq!((last.date.as_str(), last.from, last.to), ("2026-12-05", Some(Verdict::Verified), Verdict::Qualified));
}

/// Issue 40, point 13: vLLM's opt-in V1 engine silently ignored `--kv-cache-dtype fp8` before
/// vllm-project/vllm#14221; the fp8-halves-the-cache claim says which versions honour the flag and
/// cites the PR.
#[test]
fn vllm_fp8_kv_cache_claim_names_the_versions_that_honour_it() {
    let ds = &loaded().dataset;
    let c = ds.claims.iter().find(|c| c.id == "vllm-kv-cache-dtype-fp8-halves-cache").expect("the fp8 KV claim");
    let software = c.conditions.get("software").expect("conditions.software");
    assert!(software.contains("#14221") && software.contains("VLLM_USE_V1"), "{software}");
    let pr = c.sources.iter().find(|s| s.url.as_deref() == Some("https://github.com/vllm-project/vllm/pull/14221")).expect("the PR as a source");
    assert!(pr.passage.contains("ignoring the parameter"), "{}", pr.passage);
}
