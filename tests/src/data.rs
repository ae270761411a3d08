//! The real data files, loaded through the core exactly as `dataset check` does.

use std::sync::OnceLock;

use headroom_core::load::{Loaded, load};

/// Every file under dataset/data (relative paths with '/').
pub fn data_files() -> Vec<(String, String)> {
    headroom_core::files::read_tree(&crate::repo_root().join("dataset/data")).unwrap()
}

/// The data loaded once per test binary: the dataset, or every problem `load` found.
fn load_once() -> &'static Result<Loaded, Vec<headroom_core::Problem>> {
    static LOADED: OnceLock<Result<Loaded, Vec<headroom_core::Problem>>> = OnceLock::new();
    LOADED.get_or_init(|| load(&data_files()))
}

/// The loaded, checked dataset (panics with every problem listed when the data is broken).
pub fn loaded() -> &'static Loaded {
    match load_once() {
        Ok(l) => l,
        Err(problems) => {
            panic!("the data does not pass the checks:\n{}", problems.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))
        }
    }
}

/// Recomputes a derived claim from the catalogs; fails with the claim's numbers on a mismatch.
pub fn assert_derivation(id: &str) {
    // Load without the global checks so that one broken claim does not hide which one it is.
    let ds = match load_once() {
        Ok(l) => &l.dataset,
        Err(problems) => {
            let mine: Vec<String> = problems.iter().filter(|p| p.id.as_deref() == Some(id)).map(|p| p.to_string()).collect();
            assert!(mine.is_empty(), "{}", mine.join("\n"));
            panic!("the data has other problems (see `dataset check`); derived claim {id} could not be recomputed");
        }
    };
    let claim = ds.claim(id).unwrap_or_else(|| panic!("no claim {id}"));
    let derivations: Vec<_> = claim.sources.iter().filter(|s| s.kind == headroom_core::SourceKind::Derivation).collect();
    assert!(!derivations.is_empty(), "{id} has no derivation source");
    for s in derivations {
        let compute = s.compute.as_deref().expect("compute");
        let got = headroom_core::derive::evaluate(compute, ds).unwrap_or_else(|e| panic!("{id}: {compute}: {e}"));
        let expect = s.expect.expect("expect");
        let tol = s.tolerance.unwrap_or(headroom_core::check::DERIVATION_TOLERANCE);
        assert!(headroom_core::derive::close(got, expect, tol), "{id}: {compute} = {got} {}, expected {expect} (±{tol})", s.unit.as_deref().unwrap_or(""));
        assert_eq!(headroom_core::check::derivation_problem(claim, s, ds), None, "{id}");
    }
}
