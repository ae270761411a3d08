//! `cargo run -p headroom-alloc --example oom_at -- TRACE CONF FRACTION`: where the replay runs
//! out of memory under `set_per_process_memory_fraction(FRACTION)` on an H200, and the peak
//! reserved bytes (a quick check when sizing fidelity traces).
use headroom_alloc::{Options, config, replay, trace};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let t = trace::parse(&std::fs::read(&a[1]).unwrap()).unwrap();
    let mut o = Options::new(config::parse(&a[2]).unwrap(), 150_109_880_320);
    o.memory_fraction = Some(a[3].parse().unwrap());
    let r = replay(&t, &o);
    print!("{}/{:.2}G", r.oom_at.map_or("-".into(), |v| v.to_string()), r.peak_reserved as f64 / (1u64 << 30) as f64);
}
