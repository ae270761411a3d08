//! Every allocator rule of the reference (`pytorch-caching-allocator.md`), each as the measured
//! [VER] scenario where there is one.

use headroom_alloc::config::{self, MIB};
use headroom_alloc::device::Device;
use headroom_alloc::native::{Native, OomKind};
use headroom_alloc::oom;

const H200: u64 = 150_109_880_320;

fn alloc_with(conf: &str, fraction: Option<f64>) -> Native {
    Native::new(&config::parse(conf).unwrap(), Device::new(H200, H200), fraction)
}

fn reserved(a: &Native) -> u64 {
    a.stats.reserved_bytes.all.current as u64
}

fn allocated(a: &Native) -> u64 {
    a.stats.allocated_bytes.all.current as u64
}

/// A fraction whose `fraction * H200` is `bytes` (or a few bytes below).
fn fraction_for(bytes: u64) -> f64 {
    bytes as f64 / H200 as f64
}

#[test]
fn round_size_tables() {
    let d = alloc_with("", None);
    let r4 = alloc_with("roundup_power2_divisions:4", None);
    let rl = alloc_with("roundup_power2_divisions:[256:1,512:2,>:4]", None);
    for (req, def, four, list) in [
        (1u64, 512u64, 512u64, 512u64),
        (511, 512, 512, 512),
        (512, 512, 512, 512),
        (513, 1024, 1024, 1024),
        (1000, 1024, 1024, 1024),
        (1200, 1536, 1536, 1536),
        (1_153_434, 1_153_536, 1_310_720, 1_153_536),
        (1_677_721, 1_677_824, 1_835_008, 1_677_824),
        (300 * MIB + 1, 300 * MIB + 512, 320 * MIB, 300 * MIB + 512),
        (600 * MIB + 1, 600 * MIB + 512, 640 * MIB, 768 * MIB),
        (1100 * MIB + 1, 1100 * MIB + 512, 1280 * MIB, 1280 * MIB),
        (3072 * MIB + 1, 3072 * MIB + 512, 3584 * MIB, 3584 * MIB),
    ] {
        assert_eq!(d.round_size(req), def, "default {req}");
        assert_eq!(r4.round_size(req), four, ":4 {req}");
        assert_eq!(rl.round_size(req), list, "list {req}");
    }
    assert_eq!(d.round_size(4097), 4608);
    // a power of two is never rounded up
    assert_eq!(r4.round_size(64 * MIB), 64 * MIB);
}

#[test]
fn segment_sizes_and_the_large_pool_split_rule() {
    // request -> block (allocated_bytes) and segment (reserved), each in a fresh allocator
    for (req, block, segment) in [
        (1u64, 512u64, 2 * MIB),
        (MIB, MIB, 2 * MIB),
        (MIB + 1, 1_049_088, 20 * MIB),
        (2 * MIB, 2 * MIB, 20 * MIB),
        (5 * MIB, 5 * MIB, 20 * MIB),
        (10 * MIB - 1, 10 * MIB, 10 * MIB),
        (10 * MIB + 1, 10 * MIB + 512, 12 * MIB),
        // remainder exactly 1 MiB is not split: the whole 12 MiB is handed out
        (11 * MIB + 1, 12 * MIB, 12 * MIB),
        (20 * MIB, 20 * MIB, 20 * MIB),
        (20 * MIB + 1, 20 * MIB + 512, 22 * MIB),
        (100 * MIB + 123, 100 * MIB + 512, 102 * MIB),
    ] {
        let mut a = alloc_with("", None);
        a.malloc(req, 0).unwrap();
        assert_eq!((allocated(&a), reserved(&a)), (block, segment), "request {req}");
        a.check_invariants().unwrap();
    }
    // 11 MiB - 512 in a 12 MiB segment: remainder 1 MiB + 512 > 1 MiB, split
    let mut a = alloc_with("", None);
    a.malloc(11 * MIB - 512, 0).unwrap();
    assert_eq!(allocated(&a), 11 * MIB - 512);
    // large_segment_size_mb sets the 1-10 MiB segment size
    for (conf, seg) in [("large_segment_size_mb:64", 64 * MIB), ("large_segment_size_mb:11", 11 * MIB)] {
        let mut a = alloc_with(conf, None);
        a.malloc(1536 * 1024, 0).unwrap();
        assert_eq!(reserved(&a), seg);
    }
}

#[test]
fn split_carve_low_end_and_merge_on_free() {
    let mut a = alloc_with("", None);
    let x = a.malloc(1536 * 1024, 0).unwrap();
    let y = a.malloc(5 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 20 * MIB, "1.5 + 5 MiB share one 20 MiB segment");
    assert_eq!(a.block_info(y).0, a.block_info(x).0 + 1536 * 1024, "carved from the low end");
    // 13 MiB takes the 13.5 MiB remainder whole (remainder 0.5 MiB <= 1 MiB)
    let z = a.malloc(13 * MIB, 0).unwrap();
    assert_eq!(a.block_info(z).1, 13 * MIB + 512 * 1024);
    assert_eq!(reserved(&a), 20 * MIB);
    assert_eq!(a.stats.inactive_split.all.current, 0);
    a.free(y);
    assert_eq!(a.stats.inactive_split_bytes.all.current as u64, 5 * MIB);
    a.free(x);
    // x and y merged: one free 6.5 MiB block
    assert_eq!(a.stats.inactive_split.all.current, 1);
    assert_eq!(a.stats.inactive_split_bytes.all.current as u64, 6 * MIB + 512 * 1024);
    a.free(z);
    assert_eq!(a.stats.inactive_split.all.current, 0);
    a.check_invariants().unwrap();
    // empty_cache frees the whole segment now
    a.empty_cache();
    assert_eq!(reserved(&a), 0);
    assert_eq!(a.stats.num_sync_all_streams, 1);
}

#[test]
fn small_pool_splits_down_to_512_bytes() {
    let mut a = alloc_with("", None);
    let h = a.malloc(MIB, 0).unwrap();
    let _keep = a.malloc(MIB - 512, 0).unwrap(); // the free 1 MiB half: leaves a 512 B block
    let last = a.malloc(512, 0).unwrap();
    assert_eq!(reserved(&a), 2 * MIB, "the 512-byte remainder was split off and reused");
    assert_eq!(a.block_info(last).0, a.block_info(h).0 + 2 * MIB - 512);
}

#[test]
fn streams_never_share_free_blocks() {
    let mut a = alloc_with("", None);
    let h = a.malloc(MIB, 1).unwrap();
    a.free(h);
    a.malloc(MIB, 2).unwrap();
    assert_eq!(reserved(&a), 4 * MIB, "a second 2 MiB segment for the other stream");
}

#[test]
fn oversize_blocks_max_split_64() {
    let mut a = alloc_with("max_split_size_mb:64", None);
    let b = a.malloc(100 * MIB, 0).unwrap();
    a.free(b);
    // a request below max_split never takes a block >= max_split
    let x = a.malloc(30 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 130 * MIB);
    a.free(x);
    // 90 MiB reuses the 100 MiB block (100 < 90 + 20), unsplit
    let y = a.malloc(90 * MIB, 0).unwrap();
    assert_eq!((reserved(&a), a.block_info(y).1), (130 * MIB, 100 * MIB));
    a.free(y);
    // 70 MiB does not (100 >= 70 + 20)
    a.malloc(70 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 200 * MIB);
    assert_eq!(a.stats.oversize_segments.current, 2);
    // with max_non_split_rounding_mb:100 it does
    let mut a = alloc_with("max_split_size_mb:64,max_non_split_rounding_mb:100", None);
    let b = a.malloc(100 * MIB, 0).unwrap();
    a.free(b);
    a.malloc(70 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 100 * MIB);
}

#[test]
fn max_split_20_makes_freed_20_mib_segments_unusable() {
    let mut a = alloc_with("max_split_size_mb:20", None);
    let h = a.malloc(1536 * 1024, 0).unwrap();
    a.free(h);
    a.malloc(1536 * 1024, 0).unwrap();
    assert_eq!(reserved(&a), 40 * MIB);
    assert_eq!(a.stats.oversize_segments.current, 2);
}

#[test]
fn release_available_frees_an_oversize_block_without_a_retry() {
    // max_split 64; cached 100, 70, 30 MiB; the fraction allows 210 MiB
    let mut a = alloc_with("max_split_size_mb:64", Some(fraction_for(210 * MIB + 4096)));
    let b100 = a.malloc(100 * MIB, 0).unwrap();
    let b70 = a.malloc(70 * MIB, 0).unwrap();
    let b30 = a.malloc(30 * MIB, 0).unwrap();
    for b in [b100, b70, b30] {
        a.free(b);
    }
    assert_eq!(reserved(&a), 200 * MIB);
    let before = a.stats.num_device_free;
    a.malloc(80 * MIB, 0).unwrap();
    // the 100 MiB block went back to the driver, 80 MiB came new; no retry counted
    assert_eq!(reserved(&a), 180 * MIB);
    assert_eq!(a.stats.num_device_free, before + 1);
    assert_eq!(a.stats.num_alloc_retries, 0);
}

#[test]
fn release_everything_and_retry() {
    let mut a = alloc_with("", Some(fraction_for(300 * MIB + 4096)));
    let b = a.malloc(200 * MIB, 0).unwrap();
    a.free(b);
    a.malloc(250 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 250 * MIB);
    assert_eq!((a.stats.num_alloc_retries, a.stats.num_sync_all_streams), (1, 1));
    // and the OOM counts one more retry
    let e = a.malloc(100 * MIB, 0).unwrap_err();
    assert!(matches!(e, OomKind::Native { alloc_size, .. } if alloc_size == 100 * MIB));
    assert_eq!((a.stats.num_alloc_retries, a.stats.num_ooms), (2, 1));
}

#[test]
fn garbage_collection_needs_a_fraction() {
    fn scenario(fraction: Option<f64>) -> Native {
        let mut a = alloc_with("garbage_collection_threshold:0.5", fraction);
        let b100 = a.malloc(100 * MIB, 0).unwrap();
        let b60 = a.malloc(60 * MIB, 0).unwrap();
        let b40 = a.malloc(40 * MIB, 0).unwrap();
        for b in [b100, b60, b40] {
            a.free(b);
        }
        for _ in 0..5 {
            let h = a.malloc(40 * MIB, 0).unwrap();
            a.free(h);
        }
        a.malloc(150 * MIB, 0).unwrap();
        a
    }
    // fraction 380 MiB: threshold 190 MiB; the idle 60 and 100 MiB go, the busy 40 stays
    let a = scenario(Some(fraction_for(380 * MIB + 4096)));
    assert_eq!(reserved(&a), 190 * MIB);
    assert_eq!(a.stats.num_device_free, 2);
    assert_eq!(a.stats.num_alloc_retries, 0);
    // no fraction: GC is dead code, a fourth segment
    let a = scenario(None);
    assert_eq!(reserved(&a), 350 * MIB);
    assert_eq!(a.stats.num_device_free, 0);
}

#[test]
fn a_fraction_of_one_sets_no_limit() {
    let a = alloc_with("", Some(1.0));
    assert_eq!(a.allowed_memory_maximum(), None);
    let a = alloc_with("per_process_memory_fraction:0.5", None);
    assert_eq!(a.allowed_memory_maximum(), Some((0.5 * H200 as f64) as u64));
    // set_per_process_memory_fraction after start-up replaces the config key
    let a = alloc_with("per_process_memory_fraction:0.5", Some(1.0));
    assert_eq!(a.allowed_memory_maximum(), None);
}

#[test]
fn expandable_segments_map_in_20_mib_pages() {
    let mut a = alloc_with("expandable_segments:True", None);
    let x = a.malloc(1536 * 1024, 0).unwrap();
    assert_eq!(reserved(&a), 20 * MIB);
    let y = a.malloc(5 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 20 * MIB);
    let z = a.malloc(30 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 40 * MIB);
    let s = a.malloc(1000, 0).unwrap();
    assert_eq!(reserved(&a), 42 * MIB, "small pool: 2 MiB pages");
    a.free(y);
    let w = a.malloc(6 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 62 * MIB, "the 5 MiB hole is too small: 20 MiB more at the tail");
    let v = a.malloc(200 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 262 * MIB);
    assert_eq!(a.stats.segment.all.current, 0, "expandable segments are not counted as segments");
    for h in [x, z, s, w, v] {
        a.free(h);
    }
    a.check_invariants().unwrap();
    let frees = a.stats.num_device_free;
    a.empty_cache();
    assert_eq!(reserved(&a), 0);
    assert_eq!(a.stats.num_device_free, frees + 2, "one unmap per segment: 260 MiB and 2 MiB");
}

#[test]
fn expandable_best_fit_prefers_holes_over_the_growth_frontier() {
    // free 30 MiB at the start, live 2 + 10 + 2, free 16 MiB tail: 12 MiB goes to offset 0
    let mut a = alloc_with("expandable_segments:True", None);
    let hole = a.malloc(30 * MIB, 0).unwrap();
    let _l1 = a.malloc(2 * MIB, 0).unwrap();
    let _l2 = a.malloc(10 * MIB, 0).unwrap();
    let _l3 = a.malloc(2 * MIB, 0).unwrap();
    let base = a.block_info(hole).0;
    a.free(hole);
    assert_eq!(reserved(&a), 60 * MIB);
    let x = a.malloc(12 * MIB, 0).unwrap();
    assert_eq!(a.block_info(x).0, base);
}

#[test]
fn expandable_oom_unmaps_holes_then_maps_at_the_tail() {
    // fraction 300 MiB; a freed 100 MiB region at the start, 100 MiB live after it; 150 MiB asked
    let mut a = alloc_with("expandable_segments:True", Some(fraction_for(300 * MIB + 4096)));
    let hole = a.malloc(100 * MIB, 0).unwrap();
    let _live = a.malloc(100 * MIB, 0).unwrap();
    a.free(hole);
    a.malloc(150 * MIB, 0).unwrap();
    assert_eq!((a.stats.num_alloc_retries, a.stats.num_sync_all_streams), (1, 1));
    assert_eq!(reserved(&a), 100 * MIB + 160 * MIB, "8 pages mapped at the tail, the hole unmapped");
    a.check_invariants().unwrap();
}

#[test]
fn expandable_max_split_grows_instead_of_reusing() {
    for (conf, want) in [("expandable_segments:True,max_split_size_mb:64", 140 * MIB), ("expandable_segments:True", 120 * MIB)] {
        let mut a = alloc_with(conf, None);
        let big = a.malloc(100 * MIB, 0).unwrap();
        let _fence = a.malloc(2 * MIB + 1, 0).unwrap();
        a.free(big);
        a.malloc(30 * MIB, 0).unwrap();
        assert_eq!(reserved(&a), want, "{conf}");
    }
}

#[test]
fn pending_frees_are_not_reusable_until_completed() {
    let mut a = alloc_with("", None);
    let t = a.malloc(4 * MIB, 0).unwrap();
    a.free_requested(t);
    assert_eq!(allocated(&a), 0);
    assert_eq!(a.stats.active_bytes.all.current as u64, 4 * MIB);
    let u = a.malloc(16 * MIB, 0).unwrap();
    assert_ne!(a.block_info(u).0, a.block_info(t).0, "the pending block is still in use");
    a.free_completed(t);
    let v = a.malloc(4 * MIB, 0).unwrap();
    assert_eq!(a.block_info(v).0, a.block_info(t).0);
    a.check_invariants().unwrap();
}

#[test]
fn the_oom_message() {
    // a 1.5 MiB request reports its 20 MiB segment
    let mut a = alloc_with("", Some(fraction_for(10 * MIB)));
    let e = a.malloc(1536 * 1024, 0).map(|_| ()).unwrap_err();
    let m = oom::native_message(&e, 0, None);
    assert!(m.starts_with("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 139.80 GiB is free. 10.00 MiB allowed; Of the allocated memory 0 bytes is allocated by PyTorch"), "{m}");
    let mut a = alloc_with("", Some(0.01));
    let _x = a.malloc(1000 * MIB, 0).unwrap();
    let e = a.malloc(2 << 30, 0).map(|_| ()).unwrap_err();
    let m = oom::native_message(&e, 0, None);
    assert!(m.contains("Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.80 GiB of which 138.82 GiB is free. 1.40 GiB allowed; Of the allocated memory 1000.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved"), "{m}");
    let mut a = alloc_with("", None);
    let e = a.malloc(1 << 60, 0).unwrap_err();
    assert_eq!(oom::native_message(&e, 0, None), "CUDA out of memory. Tried to allocate more than 1EB memory.");
    assert_eq!(a.stats.num_ooms, 0, "the 1 EB guard is not an allocator OOM");
}

#[test]
fn device_free_memory_is_the_second_limit() {
    let mut a = Native::new(&config::parse("").unwrap(), Device::new(H200, 100 * MIB), None);
    let x = a.malloc(60 * MIB, 0).unwrap();
    a.free(x);
    // 60 MiB cached + 70 MiB new > 100 MiB: release everything, then it fits
    a.malloc(70 * MIB, 0).unwrap();
    assert_eq!(reserved(&a), 70 * MIB);
    assert_eq!(a.stats.num_alloc_retries, 1);
    let e = a.malloc(40 * MIB, 0).unwrap_err();
    match e {
        OomKind::Native { device_free, allowed, .. } => {
            assert_eq!(device_free, 30 * MIB);
            assert_eq!(allowed, None);
        }
        _ => panic!(),
    }
}

#[test]
fn zero_bytes_never_reach_the_allocator() {
    let mut a = alloc_with("", None);
    let h = a.malloc(0, 0).unwrap();
    a.free(h);
    assert_eq!((reserved(&a), a.stats.allocation.all.allocated), (0, 0));
}

/// pytorch/pytorch#193400's reproducer: per cycle A = 91 MiB and B = 45.5 MiB, then a 2 MiB
/// block that stays alive, then A and B freed, after a 64 MiB block that stays alive. With both
/// options the merged 136.5 MiB hole is refused to every later request (each is under 128 MiB
/// and the hole is not), and the live 2 MiB block fences it off from the segment's tail, so
/// every cycle maps about 138 MiB more; either option alone reuses the hole.
#[test]
fn expandable_with_max_split_grows_every_cycle_in_pr_193400s_pattern() {
    let run = |conf: &str| {
        let mut a = alloc_with(conf, None);
        let _canary = a.malloc(64 * MIB, 0).unwrap();
        let mut at = Vec::new();
        for cycle in 0..=100 {
            let x = a.malloc(91 * MIB, 0).unwrap();
            let y = a.malloc(91 * MIB / 2, 0).unwrap();
            a.malloc(2 * MIB, 0).unwrap();
            a.free(x);
            a.free(y);
            if cycle % 20 == 0 {
                at.push((allocated(&a) / MIB, reserved(&a) / MIB));
            }
        }
        a.check_invariants().unwrap();
        at
    };
    // The PR's table, cycles 0, 20, ... 100: allocated and reserved MiB, to the MiB.
    assert_eq!(run("max_split_size_mb:128,expandable_segments:True"), [(66, 220), (106, 2980), (146, 5760), (186, 8520), (226, 11300), (266, 14060)]);
    // Either option alone (and the default): under 500 MiB, as the PR says.
    assert_eq!(run("expandable_segments:True"), [(66, 220), (106, 260), (146, 300), (186, 340), (226, 380), (266, 420)]);
    for conf in ["max_split_size_mb:128", ""] {
        assert_eq!(run(conf), [(66, 222), (106, 262), (146, 302), (186, 342), (226, 382), (266, 422)], "{conf}");
    }

    // On a 16 GiB card (16,304 MiB, 300 MiB held elsewhere) the growth stops at the card: the
    // allocator unmaps the free pages and retries once, and the run goes on.
    let total = 16_304 * MIB;
    let mut a = Native::new(&config::parse("max_split_size_mb:128,expandable_segments:True").unwrap(), Device::new(total, total - 300 * MIB), None);
    let _canary = a.malloc(64 * MIB, 0).unwrap();
    for _ in 0..=130 {
        let x = a.malloc(91 * MIB, 0).unwrap();
        let y = a.malloc(91 * MIB / 2, 0).unwrap();
        a.malloc(2 * MIB, 0).unwrap();
        a.free(x);
        a.free(y);
    }
    assert_eq!((a.stats.num_alloc_retries, a.stats.num_ooms), (1, 0));
    assert!(a.stats.reserved_bytes.all.peak as u64 > 15 * 1024 * MIB);
    assert!(reserved(&a) < 3300 * MIB, "{}", reserved(&a) / MIB);
    a.check_invariants().unwrap();
}
