use super::*;
use crate::{Segment, SourceKind};
use serde_json::json;

/// The real report `probe --json` wrote on an H200 (dataset/measurements/probe/).
pub(crate) fn example() -> Value {
    serde_json::from_str(include_str!("../../../measurements/probe/h200-example.json")).expect("h200-example.json is JSON")
}

fn gpu(id: &str, name: &str, memory_gb: f64, cc: &str, bw: Option<f64>, interface: &str) -> Gpu {
    Gpu {
        id: id.into(),
        name: name.into(),
        vendor: crate::Vendor::Nvidia,
        segment: Segment::Datacenter,
        architecture: "x".into(),
        compute_capability: cc.into(),
        llvm_target: None,
        rocm_linux: None,
        memory_gb,
        memory_type: "x".into(),
        bus_width_bits: 384,
        bandwidth_gbs: bw,
        interface: interface.into(),
        source: crate::fixtures::source(SourceKind::VendorSpec),
        extra_sources: vec![],
    }
}

fn catalog() -> Vec<Gpu> {
    vec![
        gpu("h200", "NVIDIA H200 SXM 141 GB", 141.0, "9.0", Some(4800.0), "SXM5"),
        gpu("h100-pcie", "NVIDIA H100 PCIe 80 GB", 80.0, "9.0", Some(2000.0), "PCIe 5.0 x16"),
        gpu("h100-sxm", "NVIDIA H100 SXM5 80 GB", 80.0, "9.0", Some(3350.0), "SXM5"),
        gpu("a100-40gb", "NVIDIA A100 SXM4 40 GB", 40.0, "8.0", Some(1555.0), "SXM4"),
        gpu("a100-80gb", "NVIDIA A100 SXM4 80 GB", 80.0, "8.0", Some(2039.0), "SXM4"),
        gpu("rtx-3080-10gb", "NVIDIA GeForce RTX 3080 10 GB", 10.0, "8.6", Some(760.0), "PCIe 4.0 x16"),
        gpu("rtx-3080-12gb", "NVIDIA GeForce RTX 3080 12 GB", 12.0, "8.6", Some(912.0), "PCIe 4.0 x16"),
        gpu("rtx-3060-ti", "NVIDIA GeForce RTX 3060 Ti (GDDR6)", 8.0, "8.6", Some(448.0), "PCIe 4.0 x16"),
        gpu("rtx-3060-12gb", "NVIDIA GeForce RTX 3060 12 GB", 12.0, "8.6", Some(360.0), "PCIe 4.0 x16"),
        gpu("rtx-3060-laptop", "NVIDIA GeForce RTX 3060 Laptop GPU", 6.0, "8.6", None, "PCIe 4.0"),
        gpu("rtx-4090", "NVIDIA GeForce RTX 4090", 24.0, "8.9", Some(1008.0), "PCIe 4.0 x16"),
        gpu("t4", "NVIDIA T4", 16.0, "7.5", Some(320.0), "PCIe 3.0 x16"),
        gpu("v100-32gb", "NVIDIA Tesla V100 SXM2 32 GB", 32.0, "7.0", Some(900.0), "SXM2"),
        gpu("b200", "NVIDIA B200 (HGX)", 180.0, "10.0", Some(8000.0), "SXM6"),
        gpu("rtx-pro-6000-blackwell", "NVIDIA RTX PRO 6000 Blackwell (Workstation / Max-Q)", 96.0, "12.0", None, "PCIe 5.0 x16"),
    ]
}

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

#[test]
fn a_complete_report_passes_and_matches_its_gpu() {
    let v = example();
    assert_eq!(validate_report(&v), Vec::<String>::new());
    let c = check_submission(&body(&v), &catalog()).expect("accepted");
    assert_eq!(c.gpu.as_deref(), Some("h200"));
    assert_eq!(c.report.memory.total_bytes, 150109880320);
}

#[test]
fn names_are_normalised_before_matching_and_look_alikes_are_refused() {
    let cat = catalog();
    let id = |name: &str| match_gpu(name, (139.8 * GIB) as u64, &cat).map(|g| g.id.as_str());
    // Fullwidth forms (NFKC), a zero-width space, a soft hyphen, a no-break space: the H200.
    for name in ["ＮＶＩＤＩＡ Ｈ２００", "NVIDIA H\u{200B}200", "NVIDIA\u{00A0}H2\u{00AD}00", "\u{FEFF}NVIDIA  H200 "] {
        assert_eq!(id(name), Some("h200"), "{name:?}");
        assert_eq!(normalize_name(name), "NVIDIA H200");
    }
    // Such a report passes, matched, and the reviewer is shown what was really sent.
    let mut v = example();
    v["device"]["name"] = json!("NVIDIA H\u{200B}200");
    let c = check_value(&v, &cat).expect("accepted");
    assert_eq!(c.gpu.as_deref(), Some("h200"));
    let notes = review_notes(&c.report);
    assert!(notes.iter().any(|n| n.contains("matched as \"NVIDIA H200\"") && n.contains("\\u{200B}")), "{notes:?}");
    // Cyrillic capital A (U+0410) and Greek capital Eta (U+0397) look like A and H: refused.
    for name in ["NVIDI\u{0410} H200", "NVIDIA \u{0397}200"] {
        v["device"]["name"] = json!(name);
        let r = check_value(&v, &cat).unwrap_err();
        assert_eq!(r.code(), "implausible_value");
        assert!(r.message().contains("outside ASCII"), "{}", r.message());
    }
    assert!(check_value(&example(), &cat).is_ok_and(|c| review_notes(&c.report).is_empty()));
}

#[test]
fn impossible_latencies_capacities_and_versions_are_refused() {
    let cat = catalog();
    let refused = |edit: &dyn Fn(&mut Value), needle: &str| {
        let mut v = example();
        edit(&mut v);
        let r = check_value(&v, &cat).expect_err(needle);
        assert!(r.problems().iter().any(|p| p.contains(needle)), "{needle}: {:?}", r.problems());
    };
    refused(&|v| v["latency"][0]["alloc_us"] = json!(0.0), "faster than any driver call");
    refused(&|v| v["pools"]["alloc_async"][0]["reuse_us"] = json!(0.001), "faster than any driver call");
    // An "H200" with 40 GiB is not an H200.
    refused(
        &|v| {
            v["memory"]["total_bytes"] = json!(40u64 << 30);
            for f in ["free_bytes_with_context", "free_bytes_after", "usable_bytes", "largest_allocation_bytes"] {
                v["memory"][f] = json!(30u64 << 30);
            }
        },
        "less than 85 %",
    );
    refused(&|v| v["probe_version"] = json!("99.0.0"), "newer than any probe released");
    // Flagged, not refused: a driver newer than this build knows, usable far below total.
    let mut v = example();
    v["device"]["driver_cuda_version"] = json!("14.0");
    v["memory"]["usable_bytes"] = json!(20u64 << 30);
    v["memory"]["largest_allocation_bytes"] = json!(20u64 << 30);
    let c = check_value(&v, &cat).expect("accepted for review");
    let notes = review_notes(&c.report);
    assert!(notes.iter().any(|n| n.contains("newer than any this build knows")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("% of the total")), "{notes:?}");
}

#[test]
fn device_names_match_catalog_entries() {
    let cat = catalog();
    let id = |name: &str, gib: f64| match_gpu(name, (gib * GIB) as u64, &cat).map(|g| g.id.as_str());
    assert_eq!(id("NVIDIA H200", 139.8), Some("h200"));
    assert_eq!(id("NVIDIA H200 NVL", 139.8), None, "the PCIe NVL card is another product");
    assert_eq!(id("NVIDIA H100 80GB HBM3", 79.6), Some("h100-sxm"));
    assert_eq!(id("NVIDIA H100 PCIe", 79.6), Some("h100-pcie"));
    assert_eq!(id("NVIDIA A100-SXM4-80GB", 80.0), Some("a100-80gb"));
    assert_eq!(id("NVIDIA A100-SXM4-40GB", 39.6), Some("a100-40gb"));
    assert_eq!(id("NVIDIA A100-PCIE-40GB", 39.6), None);
    assert_eq!(id("NVIDIA GeForce RTX 3080", 9.77), Some("rtx-3080-10gb"));
    assert_eq!(id("NVIDIA GeForce RTX 3080", 11.76), Some("rtx-3080-12gb"));
    assert_eq!(id("NVIDIA GeForce RTX 3060", 11.76), Some("rtx-3060-12gb"));
    assert_eq!(id("NVIDIA GeForce RTX 3060 Ti", 7.8), Some("rtx-3060-ti"));
    assert_eq!(id("NVIDIA GeForce RTX 3060 Laptop GPU", 5.8), Some("rtx-3060-laptop"));
    assert_eq!(id("NVIDIA GeForce RTX 4090", 23.99), Some("rtx-4090"));
    assert_eq!(id("Tesla T4", 14.75), Some("t4"));
    assert_eq!(id("Tesla V100-SXM2-32GB", 31.75), Some("v100-32gb"));
    assert_eq!(id("NVIDIA B200", 179.1), Some("b200"));
    assert_eq!(id("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", 95.0), Some("rtx-pro-6000-blackwell"));
    assert_eq!(id("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", 95.0), Some("rtx-pro-6000-blackwell"));
    assert_eq!(id("NVIDIA GeForce RTX 4090 <script>alert(1)</script>", 23.99), None);
    assert_eq!(id("Simulated GPU", 8.0), None);
    assert_eq!(id("", 8.0), None);
}

#[test]
fn host_links_from_catalog_interfaces() {
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 0.1);
    assert!(close(host_link_gbs("PCIe 4.0 x16"), 31.5));
    assert!(close(host_link_gbs("PCIe 4.0 x8"), 15.75));
    assert!(close(host_link_gbs("PCIe 5.0"), 63.0));
    assert!(close(host_link_gbs("PCIe 3.0 x16"), 15.75));
    assert!(close(host_link_gbs("SXM5"), 63.0));
    assert!(close(host_link_gbs("SXM2"), 15.75));
    assert_eq!(host_link_gbs("NVLink-C2C"), None);
}

fn implausible(v: &Value) -> Vec<String> {
    match check_submission(&body(v), &catalog()) {
        Err(Rejection::Implausible(p)) => p,
        other => panic!("expected implausible, got {other:?}"),
    }
}

#[test]
fn implausible_values_name_their_field() {
    let mut v = example();
    v["memory"]["total_bytes"] = serde_json::json!(200u64 << 30);
    let p = implausible(&v);
    assert!(p.iter().any(|e| e.starts_with("$.memory.total_bytes: 200.00 GiB is above the 141 GB")), "{p:?}");

    let mut v = example();
    v["bandwidth"]["h2d_pinned_gbs"] = serde_json::json!(80.0);
    let p = implausible(&v);
    assert!(p.iter().any(|e| e.starts_with("$.bandwidth.h2d_pinned_gbs: 80.0 GB/s is above the NVIDIA H200 SXM 141 GB host link")), "{p:?}");

    let mut v = example();
    v["bandwidth"]["d2d_gbs"] = serde_json::json!(9000.0);
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.bandwidth.d2d_gbs: 9000.0 GB/s is above the NVIDIA H200 SXM 141 GB's memory bandwidth")));

    let mut v = example();
    v["latency"][1]["alloc_us"] = serde_json::json!(3.6e9);
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.latency[1].alloc_us: 3600000000 µs is not a plausible latency")));

    let mut v = example();
    v["memory"]["free_bytes_with_context"] = serde_json::json!(151_000_000_000u64);
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.memory.free_bytes_with_context: ")));

    let mut v = example();
    v["memory"]["usable_bytes"] = serde_json::json!(149_600_000_000u64);
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.memory.usable_bytes: ") && e.contains("free_bytes_with_context")));

    let mut v = example();
    v["device"]["compute_capability"] = serde_json::json!("8.6");
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.device.compute_capability: ")));

    let mut v = example();
    v["device"]["name"] = serde_json::json!("NVIDIA H200\u{1b}[2J");
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.device.name: control")));

    let mut v = example();
    v["device"]["name"] = serde_json::json!("Unknown GPU");
    v["memory"]["total_bytes"] = serde_json::json!(3u64 << 40);
    assert!(implausible(&v).iter().any(|e| e.starts_with("$.memory.total_bytes: ") && e.contains("more than any GPU")));
}

#[test]
fn negative_latencies_and_wrong_types_are_schema_errors() {
    let mut v = example();
    v["latency"][0]["alloc_us"] = serde_json::json!(-1.0);
    v["memory"]["total_bytes"] = serde_json::json!("a lot");
    v["device"]["hostname"] = serde_json::json!("my-laptop");
    let Err(Rejection::Schema(p)) = check_submission(&body(&v), &catalog()) else { panic!() };
    assert!(p.contains(&"$.latency[0].alloc_us: -1 is below 0".to_string()), "{p:?}");
    assert!(p.contains(&"$.memory.total_bytes: expected integer".to_string()), "{p:?}");
    assert!(p.contains(&"$.device.hostname: not allowed".to_string()), "{p:?}");
}

#[test]
fn unknown_gpus_are_accepted_without_a_catalog_id() {
    let mut v = example();
    v["device"]["name"] = serde_json::json!("NVIDIA Future GPU <b>X</b>");
    let c = check_submission(&body(&v), &catalog()).expect("accepted for review");
    assert_eq!(c.gpu, None);
}

/// A report written by a probe before the allocator check (schema 1, a real H200 run).
fn example_v1() -> Value {
    serde_json::from_str(include_str!("../../../measurements/probe/h200-example-v1.json")).expect("JSON")
}

#[test]
fn schema_1_reports_still_validate_and_schema_2_needs_the_allocator_check() {
    let v1 = example_v1();
    assert_eq!(v1["schema_version"], 1);
    let c = check_submission(&body(&v1), &catalog()).expect("a schema 1 report is accepted");
    assert_eq!(c.report.allocator_check, None);
    let v2 = example();
    assert_eq!(v2["schema_version"], 2);
    let c = check_submission(&body(&v2), &catalog()).expect("the schema 2 example is accepted");
    let check = c.report.allocator_check.expect("schema 2 carries the check");
    assert!(!check.cases.is_empty());
    // schema 1 with the check, schema 2 without it
    let mut x = v1.clone();
    x["allocator_check"] = v2["allocator_check"].clone();
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert_eq!(e.fields(), vec!["$.allocator_check".to_string()]);
    let mut x = v2.clone();
    x.as_object_mut().unwrap().remove("allocator_check");
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert_eq!(e.code(), "implausible_value");
    assert_eq!(e.fields(), vec!["$.allocator_check".to_string()]);
}

#[test]
fn an_allocator_check_must_agree_with_its_own_cases() {
    let v2 = example();
    // a verdict the cases contradict, an unknown verdict
    let mut x = v2.clone();
    x["allocator_check"]["verdict"] = serde_json::json!("skipped");
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert!(format!("{e:?}").contains("but its cases say"), "{e:?}");
    x["allocator_check"]["verdict"] = serde_json::json!("perfect");
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert!(format!("{e:?}").contains("is not one of exact, diverged, skipped"), "{e:?}");
    // a case that claims exact with a different out-of-memory event
    let mut x = v2.clone();
    x["allocator_check"]["cases"][0]["device"]["oom_at"] = serde_json::json!(1);
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert!(e.fields().contains(&"$.allocator_check.cases[0].exact".to_string()), "{e:?}");
    // more free memory than the card has; a field the schema does not know
    let mut x = v2.clone();
    x["allocator_check"]["cases"][0]["free_at_start_bytes"] = serde_json::json!(1u64 << 50);
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert!(e.fields().contains(&"$.allocator_check.cases[0].free_at_start_bytes".to_string()), "{e:?}");
    let mut x = v2.clone();
    x["allocator_check"]["cases"][0]["hostname"] = serde_json::json!("me");
    let e = check_submission(&body(&x), &catalog()).unwrap_err();
    assert_eq!(e.code(), "invalid_report");
}

#[test]
fn schema_version_and_json_errors_have_their_own_codes() {
    let mut v = example();
    v["schema_version"] = serde_json::json!(3);
    let e = check_submission(&body(&v), &catalog()).unwrap_err();
    assert_eq!(e.code(), "unsupported_schema_version");
    assert!(format!("{e:?}").contains("this server accepts 1, 2"), "{e:?}");
    assert_eq!(e.fields(), vec!["$.schema_version".to_string()]);
    let e = check_submission(b"{\"schema_version\": 1,", &catalog()).unwrap_err();
    assert_eq!(e.code(), "invalid_json");
    let e = check_submission(b"[1,2]", &catalog()).unwrap_err();
    assert_eq!(e.code(), "invalid_report");
}

#[test]
fn long_or_many_problems_are_bounded() {
    let mut v = example();
    let obj = v.as_object_mut().unwrap();
    for i in 0..1000 {
        obj.insert(format!("{}{i}", "k".repeat(1000)), Value::Null);
    }
    let p = validate_report(&v);
    assert_eq!(p.len(), MAX_PROBLEMS);
    assert!(p.iter().all(|e| e.len() < 100), "{:?}", p[0]);
}

#[test]
fn the_strict_parser_refuses_duplicate_keys_and_gives_numbers_one_form() {
    for dup in [r#"{"a":1,"a":2}"#, r#"{"x":{"b":true,"c":0,"b":false}}"#, r#"[{"k":"v","k":"v"}]"#] {
        let e = parse_strict(dup.as_bytes()).unwrap_err();
        assert!(e.to_string().starts_with("duplicate key"), "{dup}: {e}");
        let r = check_submission(dup.as_bytes(), &[]).unwrap_err();
        assert_eq!(r.code(), "invalid_json");
        assert!(r.message().contains("duplicate key"), "{}", r.message());
    }
    let forms = ["35", "35.0", "3.5e1", "35.000", "350e-1"];
    let texts: Vec<String> = forms.iter().map(|f| canonical_json(&parse_strict(format!("{{\"n\":{f}}}").as_bytes()).unwrap())).collect();
    assert!(texts.iter().all(|t| t == r#"{"n":35}"#), "{texts:?}");
    assert_eq!(canonical_json(&parse_strict(b"{\"n\":-0.0}").unwrap()), r#"{"n":0}"#);
    assert_eq!(canonical_json(&parse_strict(b"{\"n\":-2.0}").unwrap()), r#"{"n":-2}"#);
    assert_eq!(canonical_json(&parse_strict(b"{\"n\":0.5}").unwrap()), r#"{"n":0.5}"#);
    // Beyond 2^53 a float stays a float; huge integers stay integers.
    assert_eq!(canonical_json(&parse_strict(b"{\"n\":1e300}").unwrap()), r#"{"n":1e+300}"#);
    assert_eq!(canonical_json(&parse_strict(b"{\"n\":18446744073709551615}").unwrap()), r#"{"n":18446744073709551615}"#);
    // Trailing bytes after the document are refused like serde_json's own parser does.
    assert!(parse_strict(b"{} x").is_err());
    assert!(parse_strict(b"{\"a\":1}\n").is_ok());
}

#[test]
fn canonical_json_ignores_key_order_and_whitespace() {
    let a = r#"{"b": 1, "a": {"y": [1, 2.5, "x"], "x": null}}"#;
    let b = "{\n  \"a\":{\"x\":null,\"y\":[1,2.5,\"x\"]},\"b\":1}";
    let ca = canonical_json(&serde_json::from_str(a).unwrap());
    assert_eq!(ca, canonical_json(&serde_json::from_str(b).unwrap()));
    assert_eq!(ca, r#"{"a":{"x":null,"y":[1,2.5,"x"]},"b":1}"#);
    // The canonical text parses back to the same document.
    let v = example();
    assert_eq!(serde_json::from_str::<Value>(&canonical_json(&v)).unwrap(), v);
}

#[test]
fn the_public_document_has_no_private_fields() {
    let p = public_document(&example());
    assert!(p["device"].get("install_id").is_none() && p["device"].get("uuid_hash").is_none());
    assert_eq!(p["device"]["name"], "NVIDIA H200");
    let text = p.to_string();
    assert!(!text.contains("ae39b77ff706462bb4444d672a7cc7e0") && !text.contains("41d619d979cb82eee6e90c73f8148556"));
}

fn report(install: &str, usable: u64, version: &str) -> Report {
    let mut v = example();
    v["device"]["install_id"] = serde_json::json!(install);
    // Each install's own run: its device copy differs a little (identical measurements would be
    // one run replayed).
    v["bandwidth"]["d2d_gbs"] = serde_json::json!(2000.0 + install.bytes().map(u32::from).sum::<u32>() as f64 / 100.0);
    v["memory"]["usable_bytes"] = serde_json::json!(usable);
    v["probe_version"] = serde_json::json!(version);
    serde_json::from_value(v).unwrap()
}

#[test]
fn aggregates_count_submitters_and_take_the_median_of_submitters() {
    let a = "a".repeat(32);
    let b = "b".repeat(32);
    let c = "c".repeat(32);
    let at = |prefix: &str, day: u32| Origin { prefix: Some(prefix.to_string()), block: None, received_at: format!("2026-11-{day:02}T10:00:00.000Z") };
    let reports = vec![
        ("h200".to_string(), report(&a, 100, "0.1.0"), at("p1", 1)),
        // One submitter sending many high values moves the median by one vote only.
        ("h200".to_string(), report(&b, 1000, "0.1.0"), at("p2", 3)),
        ("h200".to_string(), report(&b, 1000, "0.1.0"), at("p2", 4)),
        ("h200".to_string(), report(&b, 1000, "0.2.0"), at("p2", 5)),
        ("h200".to_string(), report(&c, 110, "0.1.0"), at("p3", 11)),
        ("rtx-4090".to_string(), report(&a, 5, "0.1.0"), at("p1", 1)),
    ];
    let aggs = aggregate(&reports);
    let u = aggs.iter().find(|x| x.gpu == "h200" && x.measurement == "usable_bytes").unwrap();
    assert_eq!((u.count, u.submitters), (5, 3));
    assert_eq!((u.median, u.min, u.max), (110.0, 100.0, 1000.0));
    // From the first report of the first submitter (day 1) to that of the last (day 11).
    assert_eq!(u.spread_days, 10.0);
    assert_eq!(u.probe_versions, vec!["0.1.0".to_string(), "0.2.0".to_string()]);
    assert_eq!(u.unit, "B");
    let lat = aggs.iter().find(|x| x.gpu == "h200" && x.measurement == "alloc_2mib_us").unwrap();
    assert_eq!(lat.median, example()["latency"][0]["alloc_us"].as_f64().unwrap());
    assert!(aggs.iter().any(|x| x.gpu == "rtx-4090" && x.submitters == 1 && x.spread_days == 0.0));
    assert_eq!(aggs.iter().filter(|x| x.gpu == "h200").count(), MEASUREMENTS.len());
}

#[test]
fn the_calculator_reads_the_card_and_other_processes_from_a_report() {
    let gpus = vec![gpu("h200", "NVIDIA H200", 141.0, "9.0", Some(4800.0), "PCIe 5.0 x16")];
    let text = include_str!("../../../measurements/probe/h200-example.json");
    let c = card_of_report(text, &gpus).unwrap();
    let v = example();
    let m = &v["memory"];
    let other = m["total_bytes"].as_u64().unwrap() - m["free_bytes_with_context"].as_u64().unwrap() - m["context_bytes"].as_u64().unwrap();
    assert_eq!(c, ReportCard { name: "NVIDIA H200".into(), gpu: Some("h200".into()), total_bytes: m["total_bytes"].as_u64().unwrap(), other_bytes: other });
    // schema 1, and the array `--all` writes
    let v1 = card_of_report(include_str!("../../../measurements/probe/h200-example-v1.json"), &gpus).unwrap();
    assert_eq!(v1.gpu.as_deref(), Some("h200"));
    let both = format!("[{text}, {text}]");
    assert_eq!(card_of_report(&both, &gpus).unwrap(), c);
    // an unknown card keeps its size
    let mut x = example();
    x["device"]["name"] = serde_json::json!("NVIDIA Future GPU");
    let u = card_of_report(&x.to_string(), &gpus).unwrap();
    assert_eq!((u.gpu, u.total_bytes), (None, c.total_bytes));
    // what is refused, and why
    assert_eq!(card_of_report("{", &gpus).unwrap_err(), ReportCardError::NotJson);
    assert_eq!(card_of_report("[]", &gpus).unwrap_err(), ReportCardError::NotReport);
    assert_eq!(card_of_report(r#"{"schema_version": 2}"#, &gpus).unwrap_err(), ReportCardError::NotReport);
    let mut x = example();
    x["schema_version"] = serde_json::json!(9);
    assert_eq!(card_of_report(&x.to_string(), &gpus).unwrap_err(), ReportCardError::UnknownSchema(9));
    assert!(ReportCardError::UnknownSchema(9).to_string().contains("schema 9"));
    let mut x = example();
    x["memory"]["free_bytes_with_context"] = serde_json::json!(u64::MAX);
    assert_eq!(card_of_report(&x.to_string(), &gpus).unwrap_err(), ReportCardError::Implausible);
}

#[test]
fn allocator_checks_are_aggregated_per_driver_branch() {
    let at = |prefix: &str, day: u32| Origin { prefix: Some(prefix.to_string()), block: None, received_at: format!("2026-11-{day:02}T10:00:00.000Z") };
    let id = |c: char| c.to_string().repeat(32);
    let with_driver = |r: Report, d: &str| Report { device: Device { driver_cuda_version: d.to_string(), ..r.device.clone() }, ..r };
    let mut diverged = with_driver(report(&id('c'), 100, "0.1.0"), "12.8");
    let check = diverged.allocator_check.as_mut().unwrap();
    let n = check.cases.len();
    check.cases[0].exact = false;
    let old: Report = serde_json::from_value(example_v1()).unwrap();
    let reports = vec![
        ("h200".to_string(), with_driver(report(&id('a'), 100, "0.1.0"), "13.0"), at("p1", 1)),
        ("h200".to_string(), with_driver(report(&id('b'), 100, "0.1.0"), "13.0"), at("p2", 2)),
        ("h200".to_string(), diverged, at("p3", 3)),
        // a schema 1 report has no allocator check: it counts for the other figures only
        ("h200".to_string(), with_driver(old, "13.1"), at("p4", 4)),
    ];
    let aggs = aggregate(&reports);
    let find = |m: &str| aggs.iter().find(|x| x.measurement == m).cloned();
    let exact_of = |r: &Report| 100.0 * r.allocator_check.as_ref().unwrap().cases.iter().filter(|c| c.exact).count() as f64 / n as f64;
    let on13 = find("alloc_model_exact_pct@cuda13.0").unwrap();
    assert_eq!((on13.count, on13.submitters, on13.unit.as_str()), (2, 2, "%"));
    assert_eq!(on13.median, exact_of(&reports[0].1));
    let on128 = find("alloc_model_exact_pct@cuda12.8").unwrap();
    assert_eq!(on128.median, exact_of(&reports[2].1));
    assert!(on128.median < on13.median || on13.median < 100.0 / n as f64);
    assert!(find("alloc_model_exact_pct@cuda13.1").is_none(), "no check in a schema 1 report");
    assert!(find("driver_kept_back_bytes@cuda13.0").is_some_and(|a| a.unit == "B" && a.median > 0.0));
    assert_eq!(find("usable_bytes").unwrap().count, 4);
    // the kinds resolve, including the per-driver names; malformed branches do not
    assert_eq!(measurement_kind("alloc_model_exact_pct@cuda13.0").map(|k| k.id), Some("alloc_model_exact_pct"));
    assert!(measurement_kind("alloc_model_exact_pct").is_none());
    assert!(measurement_kind("usable_bytes@cuda13.0").is_none());
    assert!(measurement_kind("alloc_model_exact_pct@cuda13").is_none());
    assert!(measurement_kind("alloc_model_exact_pct@cudax.y").is_none());
}

#[test]
fn three_install_ids_from_one_network_are_one_submitter_and_cannot_move_the_median() {
    let at = |prefix: &str, t: &str| Origin { prefix: Some(prefix.to_string()), block: None, received_at: format!("2026-11-{t}Z") };
    let id = |c: char| c.to_string().repeat(32);
    // Three real submitters on three networks, days apart: median 120.
    let mut reports = vec![
        ("h200".to_string(), report(&id('a'), 100, "0.1.0"), at("net-a", "01T08:00:00.000")),
        ("h200".to_string(), report(&id('b'), 120, "0.1.0"), at("net-b", "05T08:00:00.000")),
        ("h200".to_string(), report(&id('c'), 120, "0.1.0"), at("net-c", "09T08:00:00.000")),
    ];
    let before = aggregate(&reports);
    let usable = |aggs: &[Aggregate]| aggs.iter().find(|x| x.measurement == "usable_bytes").unwrap().clone();
    assert_eq!((usable(&before).submitters, usable(&before).median), (3, 120.0));
    // One script: three made-up install ids, one network, 40 s apart, an absurd value.
    for (i, t) in ["10T12:00:00.000", "10T12:00:20.000", "10T12:00:40.000"].iter().enumerate() {
        reports.push(("h200".to_string(), report(&id(['x', 'y', 'z'][i]), 9000, "0.1.0"), at("net-x", t)));
    }
    let after = usable(&aggregate(&reports));
    assert_eq!((after.count, after.submitters), (6, 4), "three install ids on one network are one submitter");
    assert_eq!(after.median, 120.0, "the published median does not move");
    // Counted by install id alone they would have outvoted the real reports.
    let no_prefix: Vec<_> = reports.iter().map(|(g, r, o)| (g.clone(), r.clone(), Origin { prefix: None, ..o.clone() })).collect();
    let naive = usable(&aggregate(&no_prefix));
    assert_eq!(naive.submitters, 6);
    assert!(naive.median > 120.0);
    // Chains join too.
    let key = |install, prefix, fingerprint: &str| SubmitterKey { install, prefix, block_day: None, fingerprint: fingerprint.to_string() };
    let groups = submitter_groups(&[
        key("i1", Some("n1"), "f1"),
        key("i2", Some("n1"), "f2"),
        key("i3", Some("n3"), "f2"),
        key("i4", Some("n4"), "f4"),
        key("i5", None, "f5"),
    ]);
    assert_eq!(groups[0], groups[1], "one network");
    assert_eq!(groups[1], groups[2], "one run replayed");
    assert_ne!(groups[3], groups[0]);
    assert_ne!(groups[4], groups[3]);
}

/// Issue 40 point 3: three honest reports from three /24s, then three fakes sharing one install
/// id posted from those same /24s. Joined by the install id, all six were one submitter and the
/// fakes moved the median from 139.28 to 119.63 GiB. The roaming install id is left out instead.
#[test]
fn an_install_id_on_several_networks_is_left_out_never_used_to_join_honest_submitters() {
    let at = |prefix: &str, day: u32| Origin { prefix: Some(prefix.to_string()), block: None, received_at: format!("2026-11-{day:02}T10:00:00.000Z") };
    let id = |c: char| c.to_string().repeat(32);
    let honest = [('a', 139_280, "net-a", 1), ('b', 139_300, "net-b", 4), ('c', 139_250, "net-c", 8)];
    let mut reports: Vec<(String, Report, Origin)> = honest.iter().map(|(c, u, n, d)| ("h200".to_string(), report(&id(*c), *u, "0.1.0"), at(n, *d))).collect();
    let usable = |rs: &[(String, Report, Origin)]| aggregate(rs).into_iter().find(|x| x.measurement == "usable_bytes").unwrap();
    let before = usable(&reports);
    assert_eq!((before.submitters, before.median), (3, 139_280.0));
    for (i, net) in ["net-a", "net-b", "net-c"].iter().enumerate() {
        let mut fake = report(&id('f'), 100_000, "0.1.0");
        fake.run_seconds += i as f64;
        fake.bandwidth.d2d_gbs += i as f64;
        reports.push(("h200".to_string(), fake, at(net, 9)));
    }
    let keys: Vec<SubmitterKey> = reports.iter().map(|(_, r, o)| SubmitterKey::of(r, o)).collect();
    assert_eq!(roaming_installs(&keys).into_iter().collect::<Vec<_>>(), vec![id('f').as_str()]);
    let after = usable(&reports);
    assert_eq!((after.count, after.submitters, after.median), (3, 3, 139_280.0), "the fakes are left out; the honest three stay three");
}

/// Issue 40 point 2: a public report re-posted under new install ids from new networks is one
/// run, and reports from one coarser block on one day are one submitter.
#[test]
fn replays_and_one_block_a_day_count_once() {
    let id = |n: u32| format!("{n:032x}");
    let public = report(&id(1), 139_000, "0.1.0");
    let mut reports = vec![(
        "h200".to_string(),
        public.clone(),
        Origin { prefix: Some("p0".into()), block: Some("b0".into()), received_at: "2026-11-01T10:00:00.000Z".into() },
    )];
    for n in 2..40u32 {
        let mut replay = public.clone();
        replay.device.install_id = id(n);
        reports.push((
            "h200".to_string(),
            replay,
            Origin { prefix: Some(format!("p{n}")), block: Some(format!("b{n}")), received_at: format!("2026-11-{:02}T10:00:00.000Z", n % 28 + 1) },
        ));
    }
    let a = aggregate(&reports).into_iter().find(|x| x.measurement == "usable_bytes").unwrap();
    assert_eq!((a.count, a.submitters), (39, 1), "38 replays of one public report");
    // 3,000 /24s of one /16 within a day, each its own run: one submitter.
    let burst: Vec<(String, Report, Origin)> = (0..3000u32)
        .map(|n| {
            let mut r = report(&id(10_000 + n), 100_000 + u64::from(n), "0.1.0");
            r.bandwidth.d2d_gbs = 2000.0 + f64::from(n) / 10.0;
            (
                "h200".to_string(),
                r,
                Origin {
                    prefix: Some(format!("p{n}")),
                    block: Some("b-one".into()),
                    received_at: format!("2026-11-20T{:02}:{:02}:00.000Z", n / 600, n / 10 % 60),
                },
            )
        })
        .collect();
    let a = aggregate(&burst).into_iter().find(|x| x.measurement == "usable_bytes").unwrap();
    assert_eq!((a.count, a.submitters), (3000, 1));
    // The same block on another day is another submitter.
    let mut two_days = burst[..2].to_vec();
    two_days[1].2.received_at = "2026-11-21T10:00:00.000Z".into();
    assert_eq!(aggregate(&two_days).into_iter().find(|x| x.measurement == "usable_bytes").unwrap().submitters, 2);
}

#[test]
fn rfc3339_times_read_back_as_unix_seconds() {
    assert_eq!(unix_seconds("1970-01-01T00:00:00Z"), Some(0.0));
    assert_eq!(unix_seconds("2026-11-30T09:14:41.123Z"), Some(1_796_030_081.123));
    assert_eq!(unix_seconds("2000-03-01T00:00:00.000Z"), Some(951_868_800.0));
    for bad in ["", "2026-11-30", "2026-13-01T00:00:00Z", "2026-11-30T09:14:41+01:00", "2026-11-30T25:00:00Z"] {
        assert_eq!(unix_seconds(bad), None, "{bad}");
    }
}

#[test]
fn ten_thousand_malformed_documents_are_all_refused_without_panicking() {
    use super::malformed::{Rng, leaves, malformed};
    let good = example();
    let paths = leaves(&good);
    let cat = catalog();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..10_000 {
        let bytes = malformed(&mut rng, &good, &paths);
        match check_submission(&bytes, &cat) {
            Ok(_) => panic!("document {i} was accepted: {}", String::from_utf8_lossy(&bytes[..bytes.len().min(300)])),
            Err(e) => assert!(!e.message().is_empty()),
        }
    }
}

/// Values no real run of the probe can produce, each on the real H200 report. Every one must be
/// refused (issue 40 point 6: 36 of 55 such variants were accepted, 27 without a review note).
fn absurd_variants() -> Vec<(&'static str, Box<dyn Fn(&mut Value)>)> {
    let scale_memory = |gib: u64| {
        move |v: &mut Value| {
            v["memory"]["total_bytes"] = json!(gib << 30);
            for f in ["free_bytes_with_context", "free_bytes_after", "usable_bytes", "largest_allocation_bytes"] {
                v["memory"][f] = json!((gib - 1) << 30);
            }
            // The fragmentation experiment's figures within the smaller card.
            v["fragmentation"]["blocks"] = json!(gib * 4 / 5);
            v["fragmentation"]["free_bytes"] = json!((gib / 2) << 30);
            v["fragmentation"]["largest_bytes"] = json!((gib / 2) << 30);
        }
    };
    vec![
        ("a probe version past u64", Box::new(|v: &mut Value| v["probe_version"] = json!("99999999999999999999999.0.0"))),
        ("a probe version with a huge patch", Box::new(|v: &mut Value| v["probe_version"] = json!("0.1.99999999999999999999999"))),
        ("71 GiB on an H200", Box::new(scale_memory(71))),
        ("100 GiB on an H200", Box::new(scale_memory(100))),
        ("a context as large as the card", Box::new(|v: &mut Value| v["memory"]["context_bytes"] = v["memory"]["total_bytes"].clone())),
        ("a context of half the card", Box::new(|v: &mut Value| v["memory"]["context_bytes"] = json!(70u64 << 30))),
        ("a largest allocation of 0", Box::new(|v: &mut Value| v["memory"]["largest_allocation_bytes"] = json!(0))),
        ("a largest allocation of 1 MiB", Box::new(|v: &mut Value| v["memory"]["largest_allocation_bytes"] = json!(1u64 << 20))),
        ("pinned upload at 1e-9 GB/s", Box::new(|v: &mut Value| v["bandwidth"]["h2d_pinned_gbs"] = json!(1e-9))),
        ("pinned download at 0.001 GB/s", Box::new(|v: &mut Value| v["bandwidth"]["d2h_pinned_gbs"] = json!(0.001))),
        ("pageable upload at 0.001 GB/s", Box::new(|v: &mut Value| v["bandwidth"]["h2d_pageable_gbs"] = json!(0.001))),
        ("pageable download at 1e-6 GB/s", Box::new(|v: &mut Value| v["bandwidth"]["d2h_pageable_gbs"] = json!(1e-6))),
        ("device copies at 0.5 GB/s", Box::new(|v: &mut Value| v["bandwidth"]["d2d_gbs"] = json!(0.5))),
        ("device copies at 50 GB/s on an H200", Box::new(|v: &mut Value| v["bandwidth"]["d2d_gbs"] = json!(50.0))),
        ("an 8 GiB allocation faster than a 2 MiB one", Box::new(|v: &mut Value| v["latency"][6]["alloc_us"] = json!(1.0))),
        ("a 2 GiB allocation faster than a 2 MiB one", Box::new(|v: &mut Value| v["latency"][5]["alloc_us"] = json!(2.0))),
        ("driver CUDA 1.0 on an H200", Box::new(|v: &mut Value| v["device"]["driver_cuda_version"] = json!("1.0"))),
        ("driver CUDA 0.0", Box::new(|v: &mut Value| v["device"]["driver_cuda_version"] = json!("0.0"))),
        ("driver CUDA 11.0 on an H200 (Hopper needs 11.8)", Box::new(|v: &mut Value| v["device"]["driver_cuda_version"] = json!("11.0"))),
        ("driver CUDA 11.1, before the pool API the probe calls", Box::new(|v: &mut Value| v["device"]["driver_cuda_version"] = json!("11.1"))),
        (
            "a VMM granularity of 1 byte",
            Box::new(|v: &mut Value| {
                v["vmm"]["granularity_bytes"] = json!(1);
                v["vmm"]["recommended_granularity_bytes"] = json!(1);
            }),
        ),
        (
            "a VMM granularity that is no power of two",
            Box::new(|v: &mut Value| {
                v["vmm"]["granularity_bytes"] = json!(3_000_000);
                v["vmm"]["recommended_granularity_bytes"] = json!(3_000_000);
            }),
        ),
        ("bandwidth timed on 1 byte", Box::new(|v: &mut Value| v["bandwidth"]["bytes"] = json!(1))),
    ]
}

#[test]
fn absurd_values_are_refused_not_queued() {
    let cat = catalog();
    let accepted: Vec<String> = absurd_variants()
        .into_iter()
        .filter_map(|(what, edit)| {
            let mut v = example();
            edit(&mut v);
            match check_value(&v, &cat) {
                Ok(c) => Some(format!("{what} (review notes: {:?})", review_notes(&c.report))),
                Err(r) => {
                    eprintln!("{what}: {:?}", r.problems());
                    None
                }
            }
        })
        .collect();
    assert!(accepted.is_empty(), "{} of {} absurd variants accepted:\n{}", accepted.len(), absurd_variants().len(), accepted.join("\n"));
}

#[test]
fn one_driver_version_is_one_branch_however_it_is_written() {
    assert_eq!(cuda_branch("13.00"), "13.0");
    assert_eq!(cuda_branch("13.0"), "13.0");
    assert_eq!(cuda_branch("012.08"), "12.8");
    assert_eq!(cuda_branch("12.10"), "12.10");
}

/// Issue 40 point 2: 3,000 posts from 3,000 /24s, one machine: the reviewer must see them as one
/// cluster (near-identical values, one agent, minutes apart, across prefixes), replays as one run,
/// and a roaming install id, each under an id `--reject-cluster` takes.
#[test]
fn one_machine_across_many_networks_is_shown_as_one_cluster() {
    let id = |n: u32| format!("{n:032x}");
    let mut reports = Vec::new();
    for n in 0..30u32 {
        let mut r = report(&id(n), 149_554_200_576 + u64::from(n) * 1000, "0.1.0");
        r.bandwidth.d2d_gbs = 2095.0 + f64::from(n) * 0.01;
        reports.push(r);
    }
    // Two honest users with the same card, hours apart, another agent: not part of it.
    let honest: Vec<Report> = (0..2u32).map(|n| report(&id(100 + n), 149_554_000_000, "0.1.0")).collect();
    let replayed = {
        let mut r = reports[0].clone();
        r.device.install_id = id(999);
        r
    };
    let names: Vec<String> = (0..34).map(|n| format!("sub-{n:02}")).collect();
    let prefixes: Vec<String> = (0..34).map(|n| format!("net-{n}")).collect();
    let times: Vec<String> = (0..34).map(|n| format!("2026-12-05T10:{:02}:{:02}.000Z", n / 6, n % 6 * 10)).collect();
    let mut items: Vec<Reviewed> = (0..30)
        .map(|n| Reviewed { id: &names[n], report: Some(&reports[n]), prefix: Some(&prefixes[n]), agent: Some("agent-script"), received_at: &times[n] })
        .collect();
    items.push(Reviewed {
        id: &names[30],
        report: Some(&honest[0]),
        prefix: Some(&prefixes[30]),
        agent: Some("agent-probe"),
        received_at: "2026-12-05T08:00:00.000Z",
    });
    items.push(Reviewed {
        id: &names[31],
        report: Some(&honest[1]),
        prefix: Some(&prefixes[31]),
        agent: Some("agent-probe"),
        received_at: "2026-12-05T13:00:00.000Z",
    });
    items.push(Reviewed {
        id: &names[32],
        report: Some(&replayed),
        prefix: Some(&prefixes[32]),
        agent: Some("agent-other"),
        received_at: "2026-12-06T10:00:00.000Z",
    });
    // The honest user's install id seen again from another network.
    let mut moved = honest[0].clone();
    moved.memory.usable_bytes += 7;
    items.push(Reviewed {
        id: &names[33],
        report: Some(&moved),
        prefix: Some(&prefixes[33]),
        agent: Some("agent-probe"),
        received_at: "2026-12-07T08:00:00.000Z",
    });
    let found = clusters(&items);
    let kinds = |k: &str| found.iter().filter(|c| c.kind == k).collect::<Vec<_>>();
    let look = kinds("look-alike");
    assert_eq!(look.len(), 1, "{found:#?}");
    assert_eq!(look[0].members.len(), 30);
    assert!(look[0].why.contains("30 reports") && look[0].why.contains("30 networks"), "{}", look[0].why);
    let replay = kinds("replay");
    assert_eq!(replay.len(), 1);
    assert_eq!(replay[0].members, vec!["sub-00".to_string(), "sub-32".to_string()]);
    let roaming = kinds("roaming-install");
    assert_eq!(roaming.len(), 1);
    assert_eq!(roaming[0].members, vec!["sub-30".to_string(), "sub-33".to_string()]);
    assert!(kinds("network").is_empty(), "one report per prefix");
    // Ids are stable and distinct.
    assert_eq!(clusters(&items), found);
    let ids: BTreeSet<&str> = found.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), found.len());
    assert!(found.iter().all(|c| c.id.len() == 8 && c.id.bytes().all(|b| b.is_ascii_hexdigit())));
}
