//! The cudaMallocAsync pool against the driver's own behaviour on the H200
//! (`alloc/fidelity/pool_probe.py`: the four fidelity traces replayed with cuMemAllocAsync /
//! cuMemFreeAsync in a bare process, every allocation's address and every change of
//! `ReservedMemCurrent` recorded, `alloc/fidelity/measured/pool/`).

use std::collections::HashMap;
use std::io::Read;

use headroom_alloc::async_backend::{AsyncPool, Backing};
use headroom_alloc::device::Device;

const H200: u64 = 150_109_880_320;
/// The four traces the pool model was fitted to, then three hold-out traces (other seeds).
const TRACES: [&str; 7] = ["churn", "grow", "resolution", "model", "churn-holdout", "grow-holdout", "resolution-holdout"];

struct Recording {
    /// The trace's events as (op, id, size).
    events: Vec<(String, u64, u64)>,
    /// Event index -> offset of the allocation it made.
    offsets: HashMap<usize, u64>,
    /// (event index, reserved bytes from then on).
    reserved: Vec<(usize, u64)>,
}

fn recording(name: &str) -> Recording {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity");
    let gz = std::fs::read(dir.join(format!("measured/pool/pool-{name}.json.gz"))).unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_string(&mut text).unwrap();
    let rec: serde_json::Value = serde_json::from_str(&text).unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.join(format!("traces/{name}.json"))).unwrap()).unwrap();
    let n = rec["events"].as_u64().unwrap() as usize;
    let events =
        trace["events"].as_array().unwrap()[..n].iter().map(|e| (e[0].as_str().unwrap().to_string(), e[1].as_u64().unwrap(), e[2].as_u64().unwrap())).collect();
    let offsets = rec["allocs"].as_array().unwrap().iter().map(|a| (a[0].as_u64().unwrap() as usize, a[2].as_u64().expect("no failed allocation"))).collect();
    let reserved = rec["reserved"].as_array().unwrap().iter().map(|r| (r[0].as_u64().unwrap() as usize, r[1].as_u64().unwrap())).collect();
    Recording { events, offsets, reserved }
}

fn rounded(size: u64) -> u64 {
    size.div_ceil(headroom_alloc::async_backend::ALIGN) * headroom_alloc::async_backend::ALIGN
}

/// With the addresses the driver chose, the pool's physical memory follows the chunk rule
/// exactly: reserved = the most 32 MiB address chunks ever touched at once, after every event.
#[test]
fn with_the_drivers_addresses_reserved_memory_is_exact_after_every_event() {
    let mut checked = 0;
    for name in TRACES {
        let r = recording(name);
        let mut b = Backing::default();
        let mut live: HashMap<u64, (u64, u64)> = HashMap::new();
        let mut next = 0;
        let mut truth = 0;
        for (i, (op, id, size)) in r.events.iter().enumerate() {
            if op == "a" && *size > 0 {
                let off = r.offsets[&i];
                let len = rounded(*size);
                b.growth(off, len);
                b.map(off, len);
                live.insert(*id, (off, len));
            } else if op == "f"
                && let Some((off, len)) = live.remove(id)
            {
                b.unmap(off, len);
            }
            while next < r.reserved.len() && r.reserved[next].0 <= i {
                truth = r.reserved[next].1;
                next += 1;
            }
            assert_eq!(b.held_bytes(), truth, "{name}: reserved after event {i}");
            checked += 1;
        }
    }
    assert_eq!(checked, 216_850);
}

/// The whole model (placement included) on the same traces, no limit: the peak reserved bytes
/// against the bare process's. Measured: -2.4 % to +1.4 % on the four fitted traces, -1.1 %,
/// -3.2 % and -9.2 % on the hold-out ones (on resolution-holdout every start-of-range placement
/// rule tried gives the same -9.2 %: the driver's placements there touch more chunks).
#[test]
fn the_pool_model_peak_reserved_is_close_to_the_drivers() {
    for name in TRACES {
        let r = recording(name);
        let truth = r.reserved.iter().map(|x| x.1).max().unwrap();
        let mut p = AsyncPool::new(Device::new(H200, H200), None);
        let mut live = HashMap::new();
        for (op, id, size) in &r.events {
            if op == "a" && *size > 0 {
                live.insert(*id, (p.malloc(*size).unwrap(), *size));
            } else if op == "f"
                && let Some((off, size)) = live.remove(id)
            {
                p.free(off, size);
            }
        }
        let err = (p.peak_reserved as f64 - truth as f64) / truth as f64;
        println!("{name}: peak reserved {} MiB, driver {} MiB ({:+.1} %)", p.peak_reserved >> 20, truth >> 20, err * 100.0);
        assert!(err.abs() <= 0.10, "{name}: peak reserved {} vs the driver's {truth}", p.peak_reserved);
    }
}
