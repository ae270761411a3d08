//! Print the simulator's driver operations for a trace as JSON lines, in the form
//! `replay_torch.py --segments` records them from the real allocator:
//! `[action, address, bytes, allocations so far]`.
//!
//! `cargo run -p headroom-alloc --example segment_log -- TRACE CONF DEVICE_TOTAL [DEVICE_FREE [FRACTION]]`

use headroom_alloc::{config, device::Device, native::Native, trace};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!("usage: segment_log TRACE CONF DEVICE_TOTAL [DEVICE_FREE [FRACTION]]");
        std::process::exit(2);
    }
    let t = trace::parse(&std::fs::read(&a[1]).unwrap()).unwrap();
    let conf = config::parse(&a[2]).unwrap();
    let total: u64 = a[3].parse().unwrap();
    let free: u64 = a.get(4).map_or(total, |v| v.parse().unwrap());
    let fraction: Option<f64> = a.get(5).map(|v| v.parse().unwrap());
    let mut n = Native::new(&conf, Device::new(total, free), fraction);
    n.segment_log = Some(Vec::new());
    let mut h = vec![headroom_alloc::native::NIL; t.num_ids as usize];
    for e in &t.events {
        if n.step(e, &mut h).is_err() {
            break;
        }
    }
    for (k, addr, size, n_alloc) in n.segment_log.take().unwrap() {
        println!("[\"{}\",{addr},{size},{n_alloc}]", headroom_alloc::native::SEGMENT_EVENTS[k as usize]);
    }
}
