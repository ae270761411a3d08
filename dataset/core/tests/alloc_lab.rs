//! What the allocator lab reads from the dataset: the settings it tries and the memory a
//! process holds before its first tensor.

use std::path::Path;

use headroom_core::{Aggregate, Dataset};

fn dataset() -> Dataset {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data");
    let files = headroom_core::files::read_tree(&dir).expect("the data directory");
    headroom_core::load::load(&files).expect("the data loads").dataset
}

#[test]
fn the_lab_tries_the_default_first_and_every_recipe_cites_claims() {
    let ds = dataset();
    let r = &ds.alloc_recipes;
    assert!(r.len() >= 12, "{} recipes", r.len());
    assert_eq!(r[0].conf, "", "the default comes first (cheapest change: none)");
    assert!(r.iter().any(|x| x.conf == "backend:cudaMallocAsync"));
    // every seed recipe the seeds spell out is there, with the claim that judges it
    for (conf, claim) in [
        ("garbage_collection_threshold:0.9,max_split_size_mb:512", "recipe-gc09-split512-fixes-most-oom"),
        ("expandable_segments:True,max_split_size_mb:64,garbage_collection_threshold:0.8", "recipe-8gb-es-split64-gc08"),
        ("max_split_size_mb:256,garbage_collection_threshold:0.9", "recipe-4gb-split256-gc09"),
        ("max_split_size_mb:128,garbage_collection_threshold:0.85", "recipe-6gb-split128-gc085"),
    ] {
        let x = r.iter().find(|x| x.conf == conf).unwrap_or_else(|| panic!("no recipe {conf}"));
        assert!(x.claims.iter().any(|c| c == claim), "{conf}: {:?}", x.claims);
    }
    // the lab reads the compact data; the calculator's leaves them out
    assert_eq!(ds.compact().alloc_recipes.len(), r.len());
    assert!(ds.for_calculator().alloc_recipes.is_empty());
}

#[test]
fn a_process_holds_the_measured_context_unless_the_gpu_was_measured() {
    let mut ds = dataset();
    let g = ds.gpus.iter().find(|g| g.id == "rtx-3060-12gb").cloned().expect("rtx-3060-12gb in the catalog");
    let claim = ds.claim("fit-cuda-context-measured").unwrap().value.clone().unwrap();
    let (bytes, from) = headroom_core::fit::process_context(&ds, Some(&g)).unwrap();
    assert_eq!(from, "fit-cuda-context-measured");
    assert_eq!(claim.unit, "MiB");
    assert_eq!(bytes, (claim.number.unwrap() * 1048576.0) as u64);
    assert_eq!(headroom_core::fit::process_context(&ds, None).unwrap().0, bytes);
    // with probe reports aggregated for the GPU: what they could not allocate
    let total = headroom_core::fit::gpu_bytes(&g);
    ds.measurements.push(Aggregate {
        gpu: g.id.clone(),
        measurement: "usable_bytes".into(),
        unit: "B".into(),
        count: 4,
        submitters: 3,
        spread_days: 9.0,
        median: (total - (600 << 20)) as f64,
        min: 0.0,
        max: 0.0,
        probe_versions: vec!["0.1.0".into()],
    });
    assert_eq!(headroom_core::fit::process_context(&ds, Some(&g)).unwrap(), (600 << 20, "rtx-3060-12gb/usable_bytes".to_string()));
}
