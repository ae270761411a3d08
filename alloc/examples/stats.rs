//! `cargo run -p headroom-alloc --example stats -- TRACE CONF FRACTION|- [DEVICE_FREE]`: the
//! replay's outcome as JSON (all counters), on an H200-sized device.
use headroom_alloc::{Options, config, replay, trace};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let t = trace::parse(&std::fs::read(&a[1]).unwrap()).unwrap();
    let mut o = Options::new(config::parse(&a[2]).unwrap(), 150_109_880_320);
    if a[3] != "-" {
        o.memory_fraction = Some(a[3].parse().unwrap());
    }
    o.device_free = a.get(4).map(|v| v.parse().unwrap());
    println!("{}", serde_json::to_string_pretty(&replay(&t, &o)).unwrap());
}
