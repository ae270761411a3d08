//! `cargo bench -p headroom-alloc`: replay throughput (events per second on one core).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use headroom_alloc::{Options, config, replay, trace};

/// A deterministic churn trace of `n` events: mixed sizes (small pool, 20 MiB segments,
/// large), about a thousand live blocks, a free for each allocation.
fn churn(n: usize) -> trace::Trace {
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let mut events = String::with_capacity(n * 24);
    events.push_str("{\"events\":[");
    let mut live: Vec<u64> = Vec::new();
    let mut next = 0u64;
    for i in 0..n {
        if i > 0 {
            events.push(',');
        }
        let r = rnd();
        if live.len() < 1000 && (live.is_empty() || r % 2 == 0) {
            let class = rnd() % 100;
            let size = match class {
                0..=59 => 1 + rnd() % (1 << 20),
                60..=89 => (1 << 20) + rnd() % (9 << 20),
                _ => (10 << 20) + rnd() % (100 << 20),
            };
            events.push_str(&format!("[\"a\",{next},{size}]"));
            live.push(next);
            next += 1;
        } else {
            let k = (rnd() % live.len() as u64) as usize;
            let id = live.swap_remove(k);
            events.push_str(&format!("[\"f\",{id},0]"));
        }
    }
    events.push_str("]}");
    trace::parse(events.as_bytes()).expect("bench trace")
}

fn bench(c: &mut Criterion) {
    let t = churn(1_000_000);
    let mut g = c.benchmark_group("replay");
    g.throughput(Throughput::Elements(t.events.len() as u64));
    g.sample_size(10);
    for (name, conf) in [
        ("default", ""),
        ("expandable_segments", "expandable_segments:True"),
        ("max_split_size_mb_128", "max_split_size_mb:128"),
        ("cuda_malloc_async", "backend:cudaMallocAsync"),
    ] {
        let opts = Options::new(config::parse(conf).unwrap(), 80 << 30);
        g.bench_function(name, |b| b.iter(|| replay(&t, &opts)));
    }
    g.finish();

    // The fidelity traces (three synthetic stress traces and a real training run captured with
    // `_record_memory_history`, read from its snapshot pickle) on an H200-sized device.
    // (`cargo bench` runs in the package folder; a copied bench binary can run there too)
    let dir = std::path::PathBuf::from("fidelity/traces");
    let dir = if dir.is_dir() { dir } else { std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity/traces") };
    let mut g = c.benchmark_group("traces");
    g.sample_size(20);
    for name in ["churn.json", "grow.json", "resolution.json", "model.pkl"] {
        let t = trace::parse(&std::fs::read(dir.join(name)).expect("fidelity trace")).expect("fidelity trace parses");
        let opts = Options::new(config::parse("").unwrap(), 150_109_880_320);
        g.throughput(Throughput::Elements(t.events.len() as u64));
        g.bench_function(name, |b| b.iter(|| replay(&t, &opts)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
