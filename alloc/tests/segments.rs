//! The driver operations the simulator performs against those PyTorch recorded on the H200
//! (`replay_torch.py --segments`): the same sequence of segment_alloc / segment_free /
//! segment_map / segment_unmap with the same sizes, at the same allocation, for every recorded
//! run but one (see alloc/README.md, "Addresses").

use headroom_alloc::device::Device;
use headroom_alloc::native::{NIL, Native};
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

#[test]
fn segment_operations_match_the_recordings() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity");
    let mut runs = 0;
    let mut diverged = Vec::new();
    for f in [
        "h200-2.11-segments.jsonl",
        "h200-2.11-segments-gc-roundup.jsonl",
    ] {
        let text = std::fs::read_to_string(dir.join("measured/segments").join(f)).unwrap();
        for line in text.lines() {
            let r: serde_json::Value = serde_json::from_str(line).unwrap();
            let name = r["trace"].as_str().unwrap();
            let t = trace::parse(
                &std::fs::read(dir.join("traces").join(format!("{name}.json"))).unwrap(),
            )
            .unwrap();
            let conf = config::parse(conf_of(r["config"].as_str().unwrap())).unwrap();
            let fraction = r["cap_bytes"].as_u64().unwrap() as f64 / H200 as f64;
            let mut a = Native::new(&conf, Device::new(H200, H200), Some(fraction));
            a.segment_log = Some(Vec::new());
            let mut h = vec![NIL; t.num_ids as usize];
            for e in &t.events {
                match e.op {
                    trace::OP_ALLOC => match a.malloc(e.size, e.stream) {
                        Ok(b) => h[e.id as usize] = b,
                        Err(_) => break,
                    },
                    trace::OP_FREE => a.free(h[e.id as usize]),
                    _ => {}
                }
            }
            let names = [
                "segment_alloc",
                "segment_free",
                "segment_map",
                "segment_unmap",
            ];
            let ours: Vec<(String, u64, u64)> = a
                .segment_log
                .take()
                .unwrap()
                .into_iter()
                .map(|(k, _, size, n)| (names[k as usize].to_string(), size, n))
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
    }
    for d in &diverged {
        println!("{d}");
    }
    assert_eq!(runs, 14);
    // known: the driver's address choices after many cudaFree calls (GC) are not modelled
    // exactly, and one roundup run drifts after 53 of 58 operations
    assert!(diverged.len() <= 2, "{diverged:#?}");
    assert!(
        diverged.iter().all(|d| d.starts_with("churn")),
        "{diverged:#?}"
    );
}
