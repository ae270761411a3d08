//! Reading traces: the JSON form with its errors, and real PyTorch 2.11 snapshot pickles.

use headroom_alloc::trace::{self, OP_ALLOC, OP_FREE_COMPLETED, OP_FREE_REQUESTED, POS_INITIAL};
use headroom_alloc::{Options, config, replay};

/// Real snapshots from PyTorch 2.11 on an H200, written by tests/data/h200/record.py.
fn h200(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/h200").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e} (tests/data/h200/record.py writes it)", path.display()))
}

fn fidelity(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fidelity/traces").join(name)
}

#[test]
fn too_many_streams_is_an_error_not_a_memory_blow_up() {
    let events: Vec<String> = (0..=trace::MAX_STREAMS).map(|i| format!("[\"a\", {i}, 512, {i}]")).collect();
    let json = format!("{{\"events\": [{}]}}", events.join(","));
    let e = trace::parse(json.as_bytes()).unwrap_err();
    assert!(e.message.contains("more than 256 distinct CUDA streams"), "{e}");
    // at the limit it replays
    let json = format!("{{\"events\": [{}]}}", events[..trace::MAX_STREAMS].join(","));
    let t = trace::parse(json.as_bytes()).unwrap();
    let out = headroom_alloc::replay(&t, &headroom_alloc::Options::new(headroom_alloc::config::parse("").unwrap(), 8 << 30));
    assert_eq!(out.peak_allocated, 256 * 512);
    assert_eq!(out.peak_reserved, 256 * (2 << 20), "one small segment per stream");
}

#[test]
fn json_events_and_errors() {
    let t = trace::parse(br#"{"name": "x", "events": [["a", 7, 100], ["a", "k", 5, 3], ["f", 7, 100], ["e"], ["a", 7, 9]], "device_total": 1024}"#).unwrap();
    assert_eq!(t.events.len(), 5);
    assert_eq!(t.num_ids, 2, "an id is reused after its free");
    assert_eq!(t.device_total, Some(1024));
    assert_eq!(t.events[1].stream, 3);
    for (text, want) in [
        (r#"{"events": [["f", 1, 5]]}"#, "event 0: free of id 1, which is not allocated"),
        (r#"{"events": [["a", 1, 5], ["a", 1, 5]]}"#, "event 1: id 1 is allocated again before it was freed"),
        (r#"{"events": [["x", 1, 5]]}"#, "event 0: unknown op \"x\""),
        (r#"{"events": [["a", 1]]}"#, "event 0: allocation of id 1 has no size"),
        (r#"{"evts": []}"#, "not a trace: missing field `events`"),
        (r#"{"events": [["a", 1, 5],"#, "not valid JSON: EOF while parsing"),
        (r#"{"events": [["a", -1, 5]]}"#, "id must be a non-negative integer or a string"),
    ] {
        let e = trace::parse(text.as_bytes()).unwrap_err().to_string();
        assert!(e.contains(want), "{text}: {e}");
    }
}

#[test]
fn pickle_errors_name_the_byte() {
    let e = trace::parse(&[0x80, 0x04, 0x95]).unwrap_err().to_string();
    assert!(e.contains("truncated at byte"), "{e}");
    // a class instance (GLOBAL opcode 'c') is refused
    let e = trace::parse(b"\x80\x02cbuiltins\nobject\n.").unwrap_err().to_string();
    assert!(e.contains("unsupported opcode 0x63 at byte 2"), "{e}");
}

#[test]
fn reference_snapshots_from_the_h200() {
    // snapshot_default.pkl: recorded from the start; one alloc freed, one alive, one pending
    let t = trace::parse(&h200("snapshot_default.pkl")).unwrap();
    assert_eq!(t.format, trace::Format::Snapshot);
    assert_eq!(t.initial, 0);
    assert_eq!(t.events[0].op, OP_ALLOC);
    assert_eq!(t.events[0].size, 1_048_576);
    assert!(t.events.iter().any(|e| e.op == OP_FREE_REQUESTED));
    // the pending free of the 4 MiB block (free_requested, no free_completed yet)
    let four = t.events.iter().find(|e| e.op == OP_ALLOC && e.size == 4 << 20).unwrap().id;
    assert!(t.events.iter().any(|e| e.op == OP_FREE_REQUESTED && e.id == four));
    let out = replay(&t, &Options::new(config::parse("").unwrap(), 150_109_880_320));
    assert!(!out.oom);
    for f in ["live_default.pkl", "snapshot_es.pkl", "live_es.pkl"] {
        let t = trace::parse(&h200(f)).unwrap();
        let out = replay(&t, &Options::new(config::parse("expandable_segments:True").unwrap(), 150_109_880_320));
        assert!(!out.oom, "{f}");
    }
}

#[test]
fn blocks_alive_before_recording_are_allocated_first() {
    // tests/data/partial.pkl: a 3 MiB block alive throughout (only in `segments`) and a 5 MiB
    // block freed in the trace without an alloc; protocol 4 and protocol 2 pickles
    for f in ["partial.pkl", "partial_p2.pkl"] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(f);
        let t = trace::parse(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(t.initial, 2, "{f}");
        let init: Vec<(u8, u64, u32)> = t.events[..2].iter().map(|e| (e.op, e.size, e.pos)).collect();
        // address order: the 3 MiB block (lower address) first
        assert_eq!(init, vec![(OP_ALLOC, 3 << 20, POS_INITIAL), (OP_ALLOC, 5 << 20, POS_INITIAL)]);
        assert_eq!(t.recorded_conf.as_deref(), Some("max_split_size_mb:128"));
        let ops: Vec<(u8, u32)> = t.events[2..].iter().map(|e| (e.op, e.pos)).collect();
        assert_eq!(ops, vec![(OP_FREE_REQUESTED, 0), (OP_FREE_COMPLETED, 1), (OP_ALLOC, 2), (OP_FREE_REQUESTED, 3), (OP_FREE_COMPLETED, 4)]);
        let out = replay(&t, &Options::new(config::parse("").unwrap(), 1 << 30));
        assert_eq!(out.peak_reserved, 20 << 20);
        assert_eq!(out.peak_allocated, 8 << 20);
    }
}

#[test]
fn the_captured_model_pickle_is_the_json_trace() {
    // capture_model.py wrote both from one run; the Rust reader must see the same replay
    let pkl = trace::parse(&std::fs::read(fidelity("model.pkl")).unwrap()).unwrap();
    let json = trace::parse(&std::fs::read(fidelity("model.json")).unwrap()).unwrap();
    assert_eq!(pkl.device_total, Some(150_109_880_320));
    assert_eq!(pkl.initial, 0, "recording started before the first allocation");
    let a = pkl.to_simple_events();
    let b = json.to_simple_events();
    assert_eq!(a.len(), b.len());
    // same operations and sizes, event by event (ids are numbered the same way)
    assert!(a.iter().zip(&b).all(|(x, y)| x == y));
    // and the two replays agree
    for conf in ["", "expandable_segments:True"] {
        let mut o = Options::new(config::parse(conf).unwrap(), 150_109_880_320);
        o.memory_fraction = Some(4.0 * (1u64 << 30) as f64 / 150_109_880_320.0);
        let (x, y) = (replay(&pkl, &o), replay(&json, &o));
        assert_eq!((x.peak_reserved, x.peak_allocated, x.oom), (y.peak_reserved, y.peak_allocated, y.oom), "{conf}");
        assert!(x.oom);
        // the snapshot's failing event is the same allocation, counted in trace entries
        let failing = pkl.events.iter().find(|e| e.op == OP_ALLOC && Some(e.pos as u64) == x.oom_at).unwrap();
        assert_eq!(failing.op, OP_ALLOC);
    }
    assert!(pkl.events.iter().any(|e| e.op == OP_FREE_COMPLETED));
}

/// 10,000 mutated copies of a real snapshot (bytes flipped, removed, inserted and length fields
/// made huge, at random places; the seed is fixed): every one is read or refused with a message,
/// none panics, and what is built stays proportional to the input.
#[test]
fn ten_thousand_mutated_pickles_are_refused_or_read_without_panicking() {
    let original = std::fs::read(fidelity("model.pkl")).unwrap();
    let mut rng: u64 = 0x5EED_0F_D00D;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut read, mut refused) = (0, 0);
    let started = std::time::Instant::now();
    for case in 0..10_000u32 {
        // Cut the file short at a random place half the time: it keeps each case cheap and
        // tests truncation everywhere; the other half mutates the whole file.
        let mut data = if case % 2 == 0 { original[..(next() as usize % original.len()).max(1)].to_vec() } else { original.clone() };
        for _ in 0..1 + next() % 4 {
            let at = next() as usize % data.len();
            match next() % 5 {
                0 => data[at] ^= 1 << (next() % 8),
                1 => data[at] = next() as u8,
                2 => {
                    data.remove(at);
                    if data.is_empty() {
                        data.push(0x80);
                    }
                }
                3 => data.insert(at, next() as u8),
                // A length field made huge: 0xff bytes after an opcode.
                _ => {
                    for b in data.iter_mut().skip(at + 1).take(8) {
                        *b = 0xff;
                    }
                }
            }
        }
        let result = std::panic::catch_unwind(|| headroom_alloc::trace::parse(&data));
        match result {
            Ok(Ok(t)) => {
                read += 1;
                assert!(t.events.len() <= data.len(), "case {case}: {} events from {} bytes", t.events.len(), data.len());
            }
            Ok(Err(e)) => {
                refused += 1;
                assert!(!e.message.is_empty(), "case {case}: an empty message");
            }
            Err(_) => panic!("case {case}: parsing panicked (seed-determined; re-run to reproduce)"),
        }
    }
    eprintln!("10,000 mutated pickles: {read} read, {refused} refused, {:.1} s", started.elapsed().as_secs_f64());
    assert!(refused > 1000 && read > 0, "{read} read, {refused} refused");
}

/// A length field claiming 2^64 - 1 bytes (BINUNICODE8, BINBYTES8) is "truncated", not an
/// arithmetic overflow.
#[test]
fn huge_length_fields_are_refused() {
    for op in [0x8du8, 0x8e, 0x96] {
        let mut data = vec![0x80, 0x04, op];
        data.extend([0xff; 8]);
        let e = headroom_alloc::trace::parse(&data).unwrap_err();
        assert!(e.message.contains("truncated"), "{:#04x}: {}", op, e.message);
    }
}
