//! `cargo run --release -p headroom-alloc --example speed -- TRACE [CONF]`: events per second of
//! `replay` on one core (best of 5), for a quick check outside criterion.
use headroom_alloc::{Options, config, replay, trace};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let t = trace::parse(&std::fs::read(&a[1]).unwrap()).unwrap();
    let o = Options::new(config::parse(a.get(2).map_or("", |s| s.as_str())).unwrap(), 150_109_880_320);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        std::hint::black_box(replay(&t, &o));
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!("{} events in {:.1} ms: {:.1} M events/s", t.events.len(), best * 1e3, t.events.len() as f64 / best / 1e6);
}
