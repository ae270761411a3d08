//! One replay looked at closely (the allocator lab's chosen cell): memory over time, sampled to a
//! fixed number of points, and the segments as they stood when the most was reserved.

use serde::Serialize;

use crate::config::Backend;
use crate::device::{DRIVER_RESERVE, Device};
use crate::native::SegmentView;
use crate::trace::{POS_INITIAL, Trace};
use crate::{Options, Outcome, run_async, run_native};

/// Memory in one stretch of the replay: the largest allocated and reserved bytes seen from
/// event `from` (an index into `Trace::events`) up to the next point's `from`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Point {
    pub from: u64,
    pub allocated: u64,
    pub reserved: u64,
}

/// A replay in detail.
#[derive(Clone, Debug, Serialize)]
pub struct Detail {
    /// Events replayed (`Trace::events` index + 1 of the last one).
    pub events: u64,
    /// Events per point (the last point may hold fewer).
    pub stride: u64,
    pub points: Vec<Point>,
    /// When the most was reserved: the replay's event index, and the source event (`None` when
    /// it was in the state recorded before the snapshot's history starts).
    pub peak_index: u64,
    pub peak_at: Option<u64>,
    /// Segments at that moment, by address (native backend; the cudaMallocAsync backend's pool
    /// has none to show).
    pub segments: Vec<SegmentView>,
    /// What the allocator could hold at most: the fraction cap, else what the device had free
    /// less what the driver keeps back.
    pub limit: u64,
    pub outcome: Outcome,
}

/// Replays `trace` under `opts` twice: once sampling memory into about `points` points, once up
/// to the peak of reserved bytes to take the segments there.
pub fn detail(trace: &Trace, opts: &Options, points: usize) -> Detail {
    let n = trace.events.len().max(1);
    let stride = n.div_ceil(points.max(1)).max(1);
    let mut samples: Vec<Point> = Vec::with_capacity(n / stride + 1);
    let mut peak = (0u64, 0usize);
    let mut sample = |i: usize, allocated: u64, reserved: u64| {
        if reserved > peak.0 {
            peak = (reserved, i);
        }
        let from = (i / stride * stride) as u64;
        match samples.last_mut() {
            Some(p) if p.from == from => {
                p.allocated = p.allocated.max(allocated);
                p.reserved = p.reserved.max(reserved);
            }
            _ => samples.push(Point { from, allocated, reserved }),
        }
    };
    let free = opts.device_free.unwrap_or(opts.device_total);
    let device = || Device::new(opts.device_total, free);
    let (outcome, segments, peak_index) = match opts.conf.backend {
        Backend::Native => {
            let (outcome, _) = run_native(trace, opts, device(), |i, a| {
                sample(i, a.stats.allocated_bytes.all.current as u64, a.stats.reserved_bytes.all.current as u64);
                true
            });
            let at = peak.1;
            let (_, a) = run_native(trace, opts, device(), |i, _| i < at);
            (outcome, a.segments(), at)
        }
        Backend::CudaMallocAsync => {
            let (outcome, _) = run_async(trace, opts, device(), |i, p| {
                sample(i, p.used, p.reserved());
                true
            });
            (outcome, Vec::new(), peak.1)
        }
    };
    let limit = outcome.allowed_memory_maximum.unwrap_or(free.saturating_sub(DRIVER_RESERVE));
    let pos = trace.events.get(peak_index).map_or(POS_INITIAL, |e| e.pos);
    Detail {
        events: outcome.events_replayed,
        stride: stride as u64,
        points: samples,
        peak_index: peak_index as u64,
        peak_at: (pos != POS_INITIAL).then_some(pos as u64),
        segments,
        limit,
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{config, replay, trace};

    const MIB: u64 = 1 << 20;

    fn t(json: &str) -> Trace {
        trace::parse(json.as_bytes()).unwrap()
    }

    #[test]
    fn the_samples_keep_every_peak_and_the_segments_are_those_at_the_peak() {
        // 30 MiB and 40 MiB live together (the most allocated), then the first is freed and a
        // small one needs a small-pool segment (the most reserved: three segments).
        let tr = t(r#"{"events": [["a",1,31457280],["a",2,41943040],["f",1,0],["a",3,1000],["f",3,0]]}"#);
        let opts = Options::new(config::parse("").unwrap(), 8 << 30);
        let d = detail(&tr, &opts, 2);
        assert_eq!(d.stride, 3);
        assert_eq!(d.points.len(), 2);
        let whole = replay(&tr, &opts);
        assert_eq!(d.points.iter().map(|p| p.reserved).max(), Some(whole.peak_reserved));
        assert_eq!(d.points.iter().map(|p| p.allocated).max(), Some(whole.peak_allocated));
        assert_eq!(d.points[0].allocated, 70 * MIB);
        assert_eq!(d.peak_index, 3);
        assert_eq!(d.peak_at, Some(3));
        let mut live: Vec<u64> = d.segments.iter().flat_map(|s| s.3.iter().filter(|b| b.2 == 1).map(|b| b.1)).collect();
        live.sort();
        assert_eq!(live, vec![1024, 40 * MIB]);
        assert_eq!(d.segments.len(), 3);
        assert_eq!(d.segments.iter().map(|s| s.1).sum::<u64>(), whole.peak_reserved);
        assert_eq!(d.limit, (8 << 30) - DRIVER_RESERVE);
    }

    #[test]
    fn a_replay_that_runs_out_stops_its_timeline_there() {
        let tr = t(r#"{"events": [["a",1,104857600],["a",2,104857600],["a",3,104857600]]}"#);
        let mut opts = Options::new(config::parse("").unwrap(), 1 << 30);
        opts.device_free = Some(250 * MIB);
        let d = detail(&tr, &opts, 100);
        assert!(d.outcome.oom);
        assert_eq!(d.outcome.oom_at, Some(2));
        assert_eq!(d.events, 3);
        assert_eq!(d.points.len(), 2, "{:?}", d.points);
        assert_eq!(d.points.last().unwrap().allocated, 200 * MIB);
    }

    #[test]
    fn the_async_backend_samples_its_pool() {
        let tr = t(r#"{"events": [["a",1,104857600],["f",1,0],["a",2,1048576]]}"#);
        let opts = Options::new(config::parse("backend:cudaMallocAsync").unwrap(), 8 << 30);
        let d = detail(&tr, &opts, 10);
        assert_eq!(d.points.len(), 3);
        assert_eq!(d.points[0].allocated, 100 * MIB);
        assert_eq!(d.points[1].allocated, 0);
        assert!(d.segments.is_empty());
        assert_eq!(d.points.iter().map(|p| p.reserved).max(), Some(replay(&tr, &opts).peak_reserved));
    }
}
