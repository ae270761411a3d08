//! The driver operations the simulator performs against those PyTorch recorded on the H200
//! (`replay_torch.py --segments`): the same sequence of segment_alloc / segment_free /
//! segment_map / segment_unmap with the same sizes, at the same allocation, for every recorded
//! run but one (see alloc/README.md, "Addresses").

use headroom_alloc::device::Device;
use headroom_alloc::native::{NIL, Native, SEGMENT_EVENTS};
use headroom_alloc::{config, trace};

const H200: u64 = 150_109_880_320;

fn conf_of(name: &str) -> &'static str {
    match name {
        "default" => "",
        "expandable" => "expandable_segments:True",
        "gc_0.6_max_split_256" => "garbage_collection_threshold:0.6,max_split_size_mb:256",
        "roundup_4" => "roundup_power2_divisions:4",
        other => panic!("unknown config {other}"),
    }
}

/// Every recorded run (`replay_torch.py --segments` on the H200), in file order.
fn recordings() -> Vec<serde_json::Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity/measured/segments");
    let mut runs = Vec::new();
    for f in [
        "h200-2.11-segments.jsonl",
        "h200-2.11-segments-gc-roundup.jsonl",
    ] {
        let text = std::fs::read_to_string(dir.join(f)).unwrap();
        runs.extend(text.lines().map(|l| serde_json::from_str(l).unwrap()));
    }
    runs
}

#[test]
fn segment_operations_match_the_recordings() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity");
    let mut runs = 0;
    let mut diverged = Vec::new();
    for r in recordings() {
        let name = r["trace"].as_str().unwrap();
        let t =
            trace::parse(&std::fs::read(dir.join("traces").join(format!("{name}.json"))).unwrap())
                .unwrap();
        let conf = config::parse(conf_of(r["config"].as_str().unwrap())).unwrap();
        let fraction = r["cap_bytes"].as_u64().unwrap() as f64 / H200 as f64;
        let mut a = Native::new(&conf, Device::new(H200, H200), Some(fraction));
        a.segment_log = Some(Vec::new());
        let mut h = vec![NIL; t.num_ids as usize];
        for e in &t.events {
            if a.step(e, &mut h).is_err() {
                break;
            }
        }
        let ours: Vec<(String, u64, u64)> = a
            .segment_log
            .take()
            .unwrap()
            .into_iter()
            .map(|(k, _, size, n)| (SEGMENT_EVENTS[k as usize].to_string(), size, n))
            .collect();
        let real: Vec<(String, u64, u64)> = r["segment_events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e[0].as_str().unwrap().to_string(),
                    e[2].as_u64().unwrap(),
                    e[3].as_u64().unwrap(),
                )
            })
            .collect();
        runs += 1;
        if ours != real {
            let at = ours
                .iter()
                .zip(&real)
                .position(|(x, y)| x != y)
                .unwrap_or(ours.len().min(real.len()));
            diverged.push(format!(
                "{name} {} {}G: first difference at driver operation {at} of {}",
                r["config"],
                r["cap_bytes"].as_u64().unwrap() >> 30,
                real.len()
            ));
        }
    }
    for d in &diverged {
        println!("{d}");
    }
    assert_eq!(runs, 14);
    assert!(diverged.is_empty(), "{diverged:#?}");
}

/// Where the driver puts segments: the recordings' addresses (relative to each run's first
/// segment) replayed through the device model, and the probes of `fidelity/va_probe.py` (the
/// recorded sequence replayed with cuMemAlloc/cuMemFree in a bare process, then one more
/// allocation of a given size).
#[test]
fn segment_addresses_match_the_driver() {
    const M: u64 = 1 << 20;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity/measured");
    let mut runs = Vec::new();
    for r in recordings() {
        let key = format!(
            "[\"{}\", \"{}\", {}]",
            r["trace"].as_str().unwrap(),
            r["config"].as_str().unwrap(),
            r["cap_bytes"].as_u64().unwrap() >> 30
        );
        let ops: Vec<(bool, u64, u64)> = r["segment_events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| matches!(e[0].as_str(), Some("segment_alloc" | "segment_free")))
            .map(|e| {
                (
                    e[0] == "segment_alloc",
                    e[1].as_u64().unwrap(),
                    e[2].as_u64().unwrap(),
                )
            })
            .collect();
        runs.push((key, ops));
    }
    // Replays `ops[..prefix]`, the model choosing every address; returns the model's device,
    // how many allocations landed where the driver put them (relative to the first segment)
    // before the first that did not, how many there were, and the first segment's address.
    let replay = |ops: &[(bool, u64, u64)], prefix: usize| {
        let mut d = Device::new(1 << 40, 1 << 40);
        let mut map = std::collections::HashMap::new();
        let (mut agree, mut n, mut diverged) = (0, 0, false);
        let mut bases = None;
        for &(alloc, addr, size) in &ops[..prefix] {
            if alloc {
                let ours = d.malloc(size).unwrap();
                let (rb, ob) = *bases.get_or_insert((addr, ours));
                n += 1;
                diverged |= addr.wrapping_sub(rb) != ours.wrapping_sub(ob);
                agree += usize::from(!diverged);
                map.insert(addr, (ours, size));
            } else {
                let (ours, size) = map.remove(&addr).unwrap();
                d.free(ours, size);
            }
        }
        (d, agree, n, bases.map_or(0, |b| b.1))
    };
    // Three runs part from the recording: at a choice a bare process made like the model and
    // PyTorch's process did not (va_probe: churn default after 36 allocations, churn GC 8 GiB
    // after 66), and a first segment that found a gap of the context the model does not have.
    let part = [
        ("[\"churn\", \"default\", 8]", 36),
        ("[\"churn\", \"gc_0.6_max_split_256\", 8]", 66),
        ("[\"churn\", \"gc_0.6_max_split_256\", 2]", 12),
    ];
    for (key, ops) in runs.iter().filter(|(_, o)| !o.is_empty()) {
        let (_, agree, n, _) = replay(ops, ops.len());
        println!("{key}: the first {agree} of {n} segments where the driver put them");
        match part.iter().find(|p| p.0 == key) {
            Some(&(_, at)) => {
                assert_eq!(agree, ops[..at].iter().filter(|o| o.0).count(), "{key}")
            }
            None => assert_eq!(agree, n, "{key}"),
        }
    }

    let probes = std::fs::read_to_string(dir.join("va_probe-h200.txt")).unwrap();
    let mut checked = 0;
    for line in probes.lines().filter(|l| !l.starts_with('#')) {
        let (key, rest) = line.split_at(line.find("] ").unwrap() + 1);
        let (prefix, json) = rest.trim().split_once(' ').unwrap();
        let r: serde_json::Value = serde_json::from_str(json).unwrap();
        let (Some(probe), Some(at)) = (r["probe"].as_u64(), r["at"].as_i64()) else {
            continue;
        };
        let ops = &runs.iter().find(|(k, _)| k == key).unwrap().1;
        let prefix: usize = prefix.parse().unwrap();
        let (mut d, hit, n, ob) = replay(ops, prefix);
        assert_eq!(hit, n, "{key} prefix {prefix}: the prefix itself differs");
        let ours = d.malloc(probe * M).unwrap();
        assert_eq!(
            (ours as i64 - ob as i64) >> 20,
            at,
            "{key} after {prefix} operations, {probe} MiB"
        );
        checked += 1;
    }
    assert_eq!(checked, 26);
}
