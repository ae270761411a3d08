//! The allocator check: one trace replayed by the same allocator code on the modelled device and
//! on a real one (the probe's `--alloc-check`, `probe/src/alloc_check.rs`), then the two logs of
//! driver calls compared call by call.
//!
//! The model is exact on a device when the allocator made the same calls on both (same call,
//! same bytes, same outcome: placed or refused), ran out of memory at the same event and reserved
//! the same peak. Where the driver *placed* what it was asked for is compared separately,
//! because the allocator only compares addresses (best-fit ties between blocks of one size):
//! a placement the model got wrong changes the outcome only when such a tie comes up, and then
//! the calls diverge too. Addresses are relative to a base, because a real process's heap does not
//! start where the model's does: `cudaMalloc` addresses relative to the first address
//! `cudaMalloc` returned, `cuMemAddressReserve` ranges relative to the first reservation.

use serde::Serialize;

use crate::device::{DriverOp, OpKind};

/// How the two logs of driver calls compare.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Placements {
    /// Calls in the model's log and in the device's.
    pub model_calls: u64,
    pub device_calls: u64,
    /// Calls that differ in what was called, how many bytes or the outcome, position by
    /// position (a log longer than the other counts its extra calls as differing).
    pub divergent: u64,
    /// The first call that differs.
    pub first_divergence: Option<Divergence>,
    /// Addresses the driver chose (`cudaMalloc`, `cuMemAddressReserve`) in calls that are alike,
    /// and how many of them are not where the model put them.
    pub placements: u64,
    pub moved: u64,
    pub first_moved: Option<Divergence>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Divergence {
    /// Position in the logs (0-based).
    pub call: u64,
    /// Source position of the trace event that made the call (the device's, where it made one).
    pub event: u64,
    /// What the model did and what the device did, e.g. `cudaMalloc(20971520) at +0x2000000`,
    /// `cudaMalloc(2097152) refused`, or `nothing` past the end of a log.
    pub model: String,
    pub device: String,
}

impl Placements {
    pub fn exact(&self) -> bool {
        self.divergent == 0 && self.model_calls == self.device_calls
    }
}

/// Each call's address relative to its base (see the module's text); `None` for a refusal.
fn relative(ops: &[DriverOp]) -> Vec<Option<i128>> {
    let mut heap = None;
    let mut reserved = None;
    ops.iter()
        .map(|o| {
            let a = o.addr? as i128;
            let base = match o.kind {
                OpKind::Malloc | OpKind::Free => heap.get_or_insert(a),
                _ => reserved.get_or_insert(a),
            };
            Some(a - *base)
        })
        .collect()
}

fn describe(op: Option<(&DriverOp, Option<i128>)>) -> String {
    let Some((o, rel)) = op else {
        return "nothing".to_string();
    };
    let where_ = match rel {
        None => "refused".to_string(),
        Some(r) if r < 0 => format!("at -{:#x}", -r),
        Some(r) => format!("at +{r:#x}"),
    };
    format!("{}({}) {where_}", o.kind.call(), o.bytes)
}

/// Compares the model's log with the device's; `*_at[i]` is the trace event of call `i`.
pub fn compare(model: &[DriverOp], model_at: &[u64], device: &[DriverOp], device_at: &[u64]) -> Placements {
    let (rm, rd) = (relative(model), relative(device));
    let mut p = Placements { model_calls: model.len() as u64, device_calls: device.len() as u64, ..Placements::default() };
    for i in 0..model.len().max(device.len()) {
        let m = model.get(i).map(|o| (o, rm[i]));
        let d = device.get(i).map(|o| (o, rd[i]));
        let at = || Divergence { call: i as u64, event: device_at.get(i).or(model_at.get(i)).copied().unwrap_or(0), model: describe(m), device: describe(d) };
        let (alike, moved) = match (m, d) {
            (Some((a, ra)), Some((b, rb))) => {
                let alike = a.kind == b.kind && a.bytes == b.bytes && ra.is_some() == rb.is_some();
                let placed = matches!(a.kind, OpKind::Malloc | OpKind::Reserve) && ra.is_some();
                if alike && placed {
                    p.placements += 1;
                }
                (alike, alike && placed && ra != rb)
            }
            _ => (false, false),
        };
        if moved {
            p.moved += 1;
            if p.first_moved.is_none() {
                p.first_moved = Some(at());
            }
        }
        if !alike {
            p.divergent += 1;
            if p.first_divergence.is_none() {
                p.first_divergence = Some(at());
            }
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{Device, Driver, Recorder};
    use crate::{Options, config, replay_on, trace};

    const MIB: u64 = 1 << 20;

    fn op(kind: OpKind, addr: Option<u64>, bytes: u64) -> DriverOp {
        DriverOp { kind, addr, bytes }
    }

    #[test]
    fn addresses_count_from_each_logs_own_base() {
        let m = [op(OpKind::Malloc, Some(1000 * MIB), 20 * MIB), op(OpKind::Malloc, Some(980 * MIB), 2 * MIB)];
        let d = [op(OpKind::Malloc, Some(7000 * MIB), 20 * MIB), op(OpKind::Malloc, Some(6980 * MIB), 2 * MIB)];
        let p = compare(&m, &[0, 3], &d, &[0, 3]);
        assert!(p.exact(), "{p:?}");
        // the second placement one chunk lower on the device
        assert_eq!((p.placements, p.moved), (2, 0));
        let d2 = [d[0], op(OpKind::Malloc, Some(6948 * MIB), 2 * MIB)];
        let p = compare(&m, &[0, 3], &d2, &[0, 3]);
        // the same calls with the same outcomes: exact, with one placement elsewhere
        assert!(p.exact(), "{p:?}");
        assert_eq!((p.placements, p.moved, p.divergent), (2, 1, 0));
        let f = p.first_moved.unwrap();
        assert_eq!((f.call, f.event), (1, 3));
        assert_eq!(f.model, "cudaMalloc(2097152) at -0x1400000");
        assert_eq!(f.device, "cudaMalloc(2097152) at -0x3400000");
    }

    #[test]
    fn a_refusal_and_a_missing_call_are_divergences() {
        let m = [op(OpKind::Malloc, Some(1 << 40), 20 * MIB), op(OpKind::Malloc, None, 40 * MIB)];
        let d =
            [op(OpKind::Malloc, Some(1 << 41), 20 * MIB), op(OpKind::Malloc, Some((1 << 41) - 64 * MIB), 40 * MIB), op(OpKind::Free, Some(1 << 41), 20 * MIB)];
        let p = compare(&m, &[0, 1], &d, &[0, 1, 1]);
        assert_eq!(p.divergent, 2);
        assert_eq!((p.placements, p.moved), (1, 0));
        assert!(!p.exact());
        let f = p.first_divergence.unwrap();
        assert_eq!(f.model, "cudaMalloc(41943040) refused");
        assert_eq!(f.device, "cudaMalloc(41943040) at -0x4000000");
    }

    /// A device that behaves like the model but starts its heap elsewhere and keeps back one
    /// more page: the check must find the first call where that matters.
    struct Shifted(Device);
    impl Driver for Shifted {
        fn total(&self) -> u64 {
            self.0.total
        }
        fn free_now(&self) -> u64 {
            self.0.free_now()
        }
        fn malloc(&mut self, size: u64) -> Option<u64> {
            let phys = crate::device::round_up(size, crate::device::PAGE);
            if !self.0.can_take(phys + crate::device::PAGE) {
                return None;
            }
            self.0.malloc(size).map(|a| a - (1 << 40))
        }
        fn free(&mut self, addr: u64, size: u64) {
            self.0.free(addr + (1 << 40), size)
        }
        fn reserve(&mut self, size: u64) -> u64 {
            self.0.reserve(size) + (1 << 30)
        }
        fn unreserve(&mut self, _: u64, _: u64) {}
        fn map(&mut self, _: u64, n: u64, page: u64) -> bool {
            self.0.can_take(n * page + crate::device::PAGE) && self.0.create_handles(n, page)
        }
        fn unmap(&mut self, _: u64, n: u64, page: u64) {
            self.0.release_handles(n, page)
        }
    }

    #[test]
    fn the_same_allocator_on_two_drivers() {
        let t = trace::parse(br#"{"events": [["a", 1, 30000000], ["a", 2, 30000000], ["f", 1, 30000000], ["a", 3, 60000000], ["a", 4, 60000000]]}"#).unwrap();
        for conf in ["", "expandable_segments:True"] {
            let mut o = Options::new(config::parse(conf).unwrap(), 8 << 30);
            o.device_free = Some(8 << 30);
            let (mo, m, mat) = replay_on(&t, &o, Device::new(8 << 30, 8 << 30), |_| true);
            let (ro, r, rat) = replay_on(&t, &o, Shifted(Device::new(8 << 30, 8 << 30)), |_| true);
            let p = compare(&m.device.ops, &mat, &r.device.ops, &rat);
            assert!(p.exact(), "{conf}: {p:?}");
            assert_eq!((mo.oom_at, mo.peak_reserved), (ro.oom_at, ro.peak_reserved));
            // every call is attributed to an event of the trace
            assert!(mat.windows(2).all(|w| w[0] <= w[1]) && mat.len() == m.device.ops.len(), "{mat:?}");
            // with just enough free memory for the model, the shifted device refuses a call
            let need = mo.peak_reserved + crate::device::DRIVER_RESERVE;
            o.device_free = Some(need);
            let (mo, m, mat) = replay_on(&t, &o, Device::new(8 << 30, need), |_| true);
            let (ro, r, rat) = replay_on(&t, &o, Shifted(Device::new(8 << 30, need)), |_| true);
            assert_eq!(mo.oom_at, None, "{conf}");
            // refused once, the allocator frees its cache and retries: no OOM, less reserved
            assert_eq!(ro.oom_at, None, "{conf}");
            assert!(ro.peak_reserved < mo.peak_reserved, "{conf}");
            let p = compare(&m.device.ops, &mat, &r.device.ops, &rat);
            assert!(!p.exact());
            let f = p.first_divergence.unwrap();
            assert_eq!(f.event, 4, "{conf}: {f:?}");
            assert!(f.device.ends_with("refused"), "{conf}: {f:?}");
        }
    }

    #[test]
    fn recorder_logs_in_call_order() {
        let mut r = Recorder::new(Device::new(1 << 30, 1 << 30));
        let a = r.malloc(3 * MIB).unwrap();
        let v = r.reserve(64 * MIB);
        assert!(r.map(v, 2, 2 * MIB));
        r.unmap(v, 2, 2 * MIB);
        r.free(a, 3 * MIB);
        let kinds: Vec<_> = r.ops.iter().map(|o| o.kind).collect();
        assert_eq!(kinds, [OpKind::Malloc, OpKind::Reserve, OpKind::Map, OpKind::Unmap, OpKind::Free]);
        assert_eq!(r.ops[2].bytes, 4 * MIB);
        assert_eq!(r.inner.used, 0);
    }
}
