//! The config parser against what PyTorch 2.11 did with 60 strings on the H200
//! (`alloc/fidelity/probe_details.py`, results in `alloc/fidelity/measured/`): the same
//! error class and text, or the same settings.

use headroom_alloc::config::{self, Backend, ErrorKind, MIB};

#[test]
fn every_measured_config_string() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fidelity/measured/probe_details-h200-2.11.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cases = doc["config"].as_array().unwrap();
    assert!(cases.len() >= 50);
    let mut checked = 0;
    for c in cases {
        let s = c["conf"].as_str().unwrap();
        let ours = config::parse(s);
        if c["ok"].as_bool() == Some(true) {
            let conf = ours.unwrap_or_else(|e| panic!("{s:?}: PyTorch accepted it, we refuse: {e}"));
            let backend = c["backend"].as_str().unwrap();
            assert_eq!(conf.backend == Backend::CudaMallocAsync, backend == "cudaMallocAsync", "{s:?}");
            if backend == "native" {
                let st = &c["settings"];
                assert_eq!(conf.max_split_size_stat(), c["max_split_size"].as_i64().unwrap(), "{s:?} max_split_size");
                assert_eq!(conf.garbage_collection_threshold, st["garbage_collection_threshold"].as_f64().unwrap(), "{s:?}");
                assert_eq!(conf.expandable_segments, st["expandable_segments"].as_bool().unwrap(), "{s:?}");
                let divs: Vec<u64> = (0..16).map(|i| st["roundup_power2_divisions"][(1u64 << i).to_string()].as_u64().unwrap()).collect();
                assert_eq!(conf.roundup_power2_divisions.to_vec(), divs, "{s:?} roundup");
                assert_eq!(conf.per_process_memory_fraction, c["fraction"].as_f64().unwrap(), "{s:?} fraction");
                // a 1.5 MiB request gets one large_segment_size segment
                assert_eq!(conf.large_segment_size, c["reserved_after_1.5MiB"].as_u64().unwrap(), "{s:?} large segment");
            }
        } else if c["rc"].as_i64() == Some(-6) {
            let e = ours.expect_err(s);
            assert_eq!(e.kind, ErrorKind::Abort, "{s:?}: the process aborted at import");
        } else {
            let e = ours.unwrap_err();
            let kind = match c["error_type"].as_str().unwrap() {
                "ValueError" => ErrorKind::ValueError,
                "RuntimeError" => ErrorKind::RuntimeError,
                other => panic!("{other}"),
            };
            assert_eq!(e.kind, kind, "{s:?}: {e}");
            assert_eq!(e.message, c["error"].as_str().unwrap(), "{s:?}");
        }
        checked += 1;
    }
    assert_eq!(checked, cases.len());
}

#[test]
fn the_reference_error_texts() {
    let cases = [
        ("max_split_size_mb:19", "ValueError: CachingAllocator option max_split_size_mb too small, must be >= 20"),
        ("garbage_collection_threshold:1.0", "ValueError: garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
        ("garbage_collection_threshold:0", "ValueError: garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
        ("roundup_power2_divisions:3", "ValueError: For roundups, the divisions has to be power of 2 "),
        ("roundup_power2_divisions:[300:2]", "ValueError: For roundups, the intervals have to be power of 2 "),
        ("expandable_segments:true", "ValueError: Expected 'True' or 'False' at index 2 in ConfigTokenizer but got 'true'"),
        ("foo:1", "ValueError: Unrecognized key 'foo' in CUDA allocator config."),
        ("large_segment_size_mb:10", "ValueError: CachingAllocator option large_segment_size_mb must be > 10 MB"),
        ("large_segment_size_mb:64,max_split_size_mb:40", "ValueError: CachingAllocator option max_split_size_mb too small, must be >= 64"),
        ("max_split_size_mb:40,large_segment_size_mb:64", "ValueError: CachingAllocator option max_split_size_mb too small, must be >= 64"),
        ("max_non_split_rounding_mb:10", "ValueError: CachingAllocator option max_non_split_rounding_mb too small, must be >= 20"),
        ("per_process_memory_fraction:1.5", "ValueError: per_process_memory_fraction is invalid, set it in [0.0, 1.0]"),
        ("pinned_num_register_threads:3", "ValueError: Number of register threads has to be power of 2, got 3"),
        ("pinned_reserve_segment_size_mb:0", "ValueError: Pinned reserve segment size has to be greater than 0"),
        ("throw_on_cudamalloc_oom:True", "ValueError: Unrecognized key 'throw_on_cudamalloc_oom' in CUDA allocator config."),
        ("expandable_segments_reserve:0.5", "ValueError: Unrecognized key 'expandable_segments_reserve' in CUDA allocator config."),
        ("max_split_size_mb:abc", "RuntimeError: stoull"),
        ("garbage_collection_threshold:abc", "RuntimeError: stod"),
    ];
    for (s, want) in cases {
        assert_eq!(config::parse(s).unwrap_err().to_string(), want, "{s:?}");
    }
}

#[test]
fn accepted_values() {
    let c = config::parse(" expandable_segments : True , max_split_size_mb : 100 ").unwrap();
    assert!(c.expandable_segments);
    assert_eq!(c.max_split_size, 100 * MIB);
    let c = config::parse("max_split_size_mb:100,").unwrap();
    assert_eq!(c.max_split_size, 100 * MIB);
    assert_eq!(config::parse("").unwrap(), config::AllocConf::default());
    // list form: gaps stay 0, '>' fills after the last explicit index, the first fills below
    let c = config::parse("roundup_power2_divisions:[64:8,256:4,1024:4,>:1]").unwrap();
    assert_eq!(c.roundup_power2_divisions, [8, 8, 8, 8, 8, 8, 8, 0, 4, 0, 4, 1, 1, 1, 1, 1]);
    let c = config::parse("roundup_power2_divisions:[256:1,512:2,>:4]").unwrap();
    assert_eq!(c.roundup_power2_divisions, [1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 4, 4, 4, 4, 4, 4]);
    let c = config::parse("roundup_power2_divisions:[1:2,2:4,>:8]").unwrap();
    assert_eq!(c.roundup_power2_divisions, [2, 4, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8]);
    // large_segment_size_mb also sets the max_non_split_rounding default
    let c = config::parse("large_segment_size_mb:64").unwrap();
    assert_eq!((c.large_segment_size, c.max_non_split_rounding_size), (64 * MIB, 64 * MIB));
    let c = config::parse("max_split_size_mb:100,max_non_split_rounding_mb:40,large_segment_size_mb:30").unwrap();
    assert_eq!((c.max_split_size, c.max_non_split_rounding_size, c.large_segment_size), (100 * MIB, 40 * MIB, 30 * MIB));
    // the last occurrence wins
    let c = config::parse("expandable_segments:True,expandable_segments:False").unwrap();
    assert!(!c.expandable_segments);
    // cudaMallocAsync: nothing else is parsed, nothing else is checked
    let c = config::parse("backend:cudaMallocAsync,max_split_size_mb:19,foo:1").unwrap();
    assert_eq!(c.backend, Backend::CudaMallocAsync);
    assert!(c.warnings[0].contains("max_split_size_mb, foo"), "{:?}", c.warnings);
}

#[test]
fn number_parsing_is_cs_stoull_and_stod() {
    assert_eq!(config::stoull("100x").unwrap(), 100);
    assert_eq!(config::stoull("-5").unwrap(), u64::MAX - 4);
    assert!(config::stoull("99999999999999999999").is_err());
    assert!(config::stoull("x1").is_err());
    assert_eq!(config::stod("0.5x").unwrap(), 0.5);
    assert_eq!(config::stod("1e-3").unwrap(), 0.001);
    assert_eq!(config::stod(".25").unwrap(), 0.25);
    assert_eq!(config::stod("0x1p-1").unwrap(), 0.5);
    assert!(config::stod("nan").unwrap().is_nan());
    assert!(config::stod("e5").is_err());
    assert!(config::stod("1e999").is_err());
}
