//! The allocator check: headroom-alloc's model of PyTorch 2.11's caching allocator driven
//! against the real driver.
//!
//! Each case is one standard trace (the fitted and hold-out traces of `alloc/fidelity`,
//! embedded by build.rs) under one `PYTORCH_CUDA_ALLOC_CONF`, in a fresh process (`probe
//! __alloc-case`), because where the driver places a `cuMemAlloc` depends on everything the
//! process allocated before. The case first takes all but `free_target` bytes of the free memory
//! with a ballast of physical memory that has no address (`cuMemCreate`, never mapped, so it does
//! not move any `cuMemAlloc` address), then replays the trace twice with the same allocator code:
//! on the modelled device, and on [`OnDevice`], which issues each call the allocator makes
//! (`cuMemAlloc`/`cuMemFree`, `cuMemAddressReserve`, `cuMemCreate` + `cuMemMap` +
//! `cuMemSetAccess` for expandable segments) to the real driver at that point. The two logs of
//! calls are compared (`headroom_alloc::check`), and with the allocator still holding what it
//! held at the end, the largest single `cuMemAlloc` says how much free memory the driver keeps
//! back. Everything is freed on every path: the allocator's memory when [`OnDevice`] drops, the
//! parent's ballast when the check ends, and Ctrl-C stops the replay at its next event.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Instant;

use headroom_alloc::check::compare;
use headroom_alloc::device::{DRIVER_RESERVE, Device as ModelDevice, Driver, PAGE, round_up};
use headroom_alloc::{Options, config, replay_on, trace};
use headroom_core::report::{AllocCase, AllocCheck, AllocRun, CallDivergence};

use crate::measure::{Alloc, Device, DeviceError, Held, MIB, largest_allocation};

include!(concat!(env!("OUT_DIR"), "/traces.rs"));

const GIB: u64 = 1 << 30;

/// The configurations: the default, expandable segments (the VMM path) and a split limit (the
/// oversize-block path), each of which the fidelity suite found exact on the H200.
pub const CONFIGS: [(&str, &str); 3] = [("default", ""), ("expandable", "expandable_segments:True"), ("max_split_128", "max_split_size_mb:128")];

/// `--quick`: two fitted traces under the first two configurations.
pub const QUICK_TRACES: [&str; 2] = ["churn", "model"];
pub const QUICK_CONFIGS: usize = 2;

/// The free memory each case starts with: the largest of these that leaves `MARGIN` of the
/// card's free memory for the case's own process (its CUDA context) — the traces were built in
/// phases sized for 2, 4 and 8 GiB, so each of these caps makes them run out part way.
pub const FREE_TARGETS: [u64; 2] = [4 * GIB, 2 * GIB];
pub const MARGIN: u64 = 1024 * MIB;

pub fn model_name() -> String {
    format!("PyTorch 2.11 CUDACachingAllocator (headroom-alloc {})", env!("CARGO_PKG_VERSION"))
}

/// The cases a check runs, as (trace, config name).
pub fn cases(quick: bool) -> Vec<(&'static str, &'static str)> {
    let traces: Vec<&str> = if quick { QUICK_TRACES.to_vec() } else { TRACES.iter().map(|t| t.0).collect() };
    let configs = if quick { &CONFIGS[..QUICK_CONFIGS] } else { &CONFIGS[..] };
    traces.iter().flat_map(|t| configs.iter().map(move |c| (*t, c.0))).collect()
}

/// The free memory to start each case with, given what the card has free now; `None` when
/// the card has too little.
pub fn free_target(free_now: u64) -> Option<u64> {
    FREE_TARGETS.into_iter().find(|&t| t + MARGIN <= free_now)
}

fn load_trace(name: &str) -> Result<(trace::Trace, bool), String> {
    let (_, fitted, gz) = TRACES.iter().find(|t| t.0 == name).ok_or_else(|| format!("no standard trace `{name}`"))?;
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(*gz).read_to_end(&mut json).map_err(|e| format!("trace {name}: {e}"))?;
    let t = trace::parse(&json).map_err(|e| format!("trace {name}: {e}"))?;
    Ok((t, *fitted))
}

/// The allocator's calls issued to a real device. The allocator model asks, the driver
/// answers: addresses, refusals. What it holds is given back when it drops.
pub struct OnDevice<'a, D: Device> {
    pub dev: &'a mut D,
    total: u64,
    free_at_start: u64,
    /// cuMemAlloc'd: address -> allocation.
    live: BTreeMap<u64, Alloc>,
    /// Mapped pages: address -> (handle, bytes).
    mapped: BTreeMap<u64, (u64, u64)>,
    /// Reserved ranges: address -> bytes.
    reserved: BTreeMap<u64, u64>,
    /// Physical bytes held (for `free_now`).
    held: u64,
    /// The first error other than out-of-memory; the replay stops at its next event.
    pub error: Option<DeviceError>,
}

impl<'a, D: Device> OnDevice<'a, D> {
    pub fn new(dev: &'a mut D, total: u64, free_at_start: u64) -> Self {
        OnDevice { dev, total, free_at_start, live: BTreeMap::new(), mapped: BTreeMap::new(), reserved: BTreeMap::new(), held: 0, error: None }
    }

    fn fail(&mut self, e: impl Into<DeviceError>) {
        self.error.get_or_insert(e.into());
    }

    /// Gives back everything, mappings before the ranges that hold them.
    pub fn release(&mut self) -> Result<(), DeviceError> {
        let mut first = None;
        for (va, (h, bytes)) in std::mem::take(&mut self.mapped) {
            if let Err(e) = self.dev.vmm_unmap(va, bytes).and_then(|()| self.dev.vmm_release(h)) {
                first.get_or_insert(e);
            }
        }
        for (va, bytes) in std::mem::take(&mut self.reserved) {
            if let Err(e) = self.dev.vmm_free_range(va, bytes) {
                first.get_or_insert(e);
            }
        }
        for (_, a) in std::mem::take(&mut self.live) {
            if let Err(e) = self.dev.free(a) {
                first.get_or_insert(e);
            }
        }
        self.held = 0;
        first.map_or(Ok(()), Err)
    }
}

impl<D: Device> Drop for OnDevice<'_, D> {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

impl<D: Device> Driver for OnDevice<'_, D> {
    fn total(&self) -> u64 {
        self.total
    }
    /// For the out-of-memory message only: the free memory at the start less what this
    /// allocator holds (nothing else runs in the case's process).
    fn free_now(&self) -> u64 {
        self.free_at_start.saturating_sub(self.held)
    }
    fn malloc(&mut self, size: u64) -> Option<u64> {
        if self.error.is_some() {
            return None;
        }
        match self.dev.alloc(size) {
            Ok(Some(a)) => {
                let p = a.ptr;
                self.held += round_up(size, PAGE);
                self.live.insert(p, a);
                Some(p)
            }
            Ok(None) => None,
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }
    fn free(&mut self, addr: u64, size: u64) {
        match self.live.remove(&addr) {
            Some(a) => {
                self.held -= round_up(size, PAGE);
                if let Err(e) = self.dev.free(a) {
                    self.fail(e);
                }
            }
            None => self.fail(format!("cudaFree of {addr:#x}, which this replay did not allocate")),
        }
    }
    fn reserve(&mut self, size: u64) -> u64 {
        match self.dev.vmm_reserve(size) {
            Ok(va) => {
                self.reserved.insert(va, size);
                va
            }
            Err(e) => {
                self.fail(e);
                0
            }
        }
    }
    fn unreserve(&mut self, addr: u64, size: u64) {
        if self.reserved.remove(&addr).is_some()
            && let Err(e) = self.dev.vmm_free_range(addr, size)
        {
            self.fail(e);
        }
    }
    /// As PyTorch's `ExpandableSegment::map`: create every handle first (one refused: release
    /// those made, report out of memory), then map each and set access on the range.
    fn map(&mut self, addr: u64, n: u64, page: u64) -> bool {
        if self.error.is_some() {
            return false;
        }
        let mut handles = Vec::with_capacity(n as usize);
        for _ in 0..n {
            match self.dev.vmm_create(page) {
                Ok(Some(h)) => handles.push(h),
                other => {
                    for h in handles {
                        let _ = self.dev.vmm_release(h);
                    }
                    if let Err(e) = other {
                        self.fail(e);
                    }
                    return false;
                }
            }
        }
        for (i, h) in handles.into_iter().enumerate() {
            let va = addr + i as u64 * page;
            match self.dev.vmm_map(va, page, h) {
                Ok(()) => {
                    self.mapped.insert(va, (h, page));
                    self.held += page;
                }
                Err(e) => {
                    let _ = self.dev.vmm_release(h);
                    self.fail(e);
                }
            }
        }
        if let Err(e) = self.dev.vmm_access(addr, n * page) {
            self.fail(e);
        }
        self.error.is_none()
    }
    fn unmap(&mut self, addr: u64, n: u64, page: u64) {
        for i in 0..n {
            let va = addr + i * page;
            let Some((h, bytes)) = self.mapped.remove(&va) else {
                self.fail(format!("unmap of {va:#x}, which this replay did not map"));
                continue;
            };
            self.held -= bytes;
            if let Err(e) = self.dev.vmm_unmap(va, bytes).and_then(|()| self.dev.vmm_release(h)) {
                self.fail(e);
            }
        }
    }
}

/// The ballast: the memory a case must not use, held by the parent process (as the fidelity
/// suite's ballast was a process of its own: nothing in the case's process changes where the
/// driver puts its allocations or what it keeps for itself). `cuMemAlloc` in pieces as large as
/// the driver gives, to the 2 MiB page; freed when the `Held` drops.
pub fn take_ballast<D: Device>(dev: &mut D, bytes: u64) -> Result<Held<'_, D>, DeviceError> {
    let mut held = Held::new(dev);
    let mut chunk = bytes / PAGE * PAGE;
    while held.held_bytes() + PAGE <= bytes && chunk >= PAGE {
        let want = chunk.min((bytes - held.held_bytes()) / PAGE * PAGE);
        if !held.alloc(want)? {
            chunk = (chunk / 2).div_ceil(PAGE) * PAGE;
            if chunk == PAGE && !held.alloc(PAGE)? {
                break;
            }
        }
    }
    Ok(held)
}

fn secs(t: Instant) -> f64 {
    (t.elapsed().as_secs_f64() * 1e4).round() / 1e4
}

/// One case on `dev`, with the free memory it has (in a process of its own: see the module's
/// text).
pub fn run_case<D: Device>(dev: &mut D, trace_name: &str, config_name: &str) -> Result<AllocCase, DeviceError> {
    let (t, fitted) = load_trace(trace_name)?;
    let (_, conf_str) = CONFIGS.iter().find(|c| c.0 == config_name).ok_or_else(|| format!("no configuration `{config_name}`"))?;
    let conf = config::parse(conf_str).map_err(|e| format!("{conf_str}: {e}"))?;
    if dev.interrupted() {
        return Err(DeviceError::Interrupted);
    }
    let total = dev.total_bytes()?;
    let free_at_start = dev.free_bytes()?;
    let mut opts = Options::new(conf, total);
    opts.device_free = Some(free_at_start);

    let t0 = Instant::now();
    let (mo, m, mat) = replay_on(&t, &opts, ModelDevice::new(total, free_at_start), |_| true);
    let model_secs = secs(t0);
    // the model's largest cudaMalloc leaves DRIVER_RESERVE, to the page
    let model_free_end = free_at_start.saturating_sub(m.device.inner.used);
    let model_kept_back = model_free_end - model_free_end.saturating_sub(DRIVER_RESERVE) / PAGE * PAGE;

    let t0 = Instant::now();
    let (ro, mut r, rat) = replay_on(&t, &opts, OnDevice::new(dev, total, free_at_start), |d| d.error.is_none() && !d.dev.interrupted());
    let device_secs = secs(t0);
    if let Some(e) = r.device.inner.error.take() {
        return Err(e);
    }
    if r.device.inner.dev.interrupted() {
        return Err(DeviceError::Interrupted);
    }
    // what the driver keeps back, with the allocator's memory still held
    let on = &mut r.device.inner;
    let free_end = on.dev.free_bytes()?;
    let largest = largest_allocation(&mut *on.dev, PAGE)?;
    on.release()?;
    let p = compare(&m.device.ops, &mat, &r.device.ops, &rat);
    let model = AllocRun { oom_at: mo.oom_at, peak_reserved_bytes: mo.peak_reserved, calls: p.model_calls, seconds: model_secs };
    let device = AllocRun { oom_at: ro.oom_at, peak_reserved_bytes: ro.peak_reserved, calls: p.device_calls, seconds: device_secs };
    let exact = p.exact() && model.oom_at == device.oom_at && model.peak_reserved_bytes == device.peak_reserved_bytes;
    Ok(AllocCase {
        trace: trace_name.to_string(),
        fitted,
        config: config_name.to_string(),
        conf: conf_str.to_string(),
        events: t.events.len() as u64,
        free_at_start_bytes: free_at_start,
        model,
        device,
        divergent_calls: p.divergent,
        first_divergence: p.first_divergence.map(divergence),
        placements: p.placements,
        moved_placements: p.moved,
        first_moved: p.first_moved.map(divergence),
        kept_back_bytes: free_end.saturating_sub(largest),
        model_kept_back_bytes: model_kept_back,
        exact,
    })
}

fn divergence(d: headroom_alloc::check::Divergence) -> CallDivergence {
    CallDivergence { call: d.call, event: d.event, model: d.model, device: d.device }
}

/// The check's summary from its cases: the verdict and its one line.
pub fn summarize(model: String, quick: bool, free_target: u64, seconds: f64, cases: Vec<AllocCase>) -> AllocCheck {
    let diverged: Vec<&AllocCase> = cases.iter().filter(|c| !c.exact).collect();
    let placements: u64 = cases.iter().map(|c| c.placements).sum();
    let moved: u64 = cases.iter().map(|c| c.moved_placements).sum();
    let (verdict, note) = match diverged.first() {
        None => (
            "exact",
            format!(
                "the allocator model is exact on this GPU and driver: in {} of {} cases the same driver calls, the same out-of-memory event, the same peak reserved; {} of {placements} placements at the model's address",
                cases.len(),
                cases.len(),
                placements - moved
            ),
        ),
        Some(c) => {
            let what = match &c.first_divergence {
                Some(d) => format!("first at event {} (call {}: model {}, driver {})", d.event, d.call, d.model, d.device),
                None if c.model.oom_at != c.device.oom_at => format!("out of memory at event {} (model: {})", show(c.device.oom_at), show(c.model.oom_at)),
                None => format!("peak reserved {} B (model: {} B)", c.device.peak_reserved_bytes, c.model.peak_reserved_bytes),
            };
            ("diverged", format!("the allocator model diverged in {} of {} cases; {} / {}: {what}", diverged.len(), cases.len(), c.trace, c.config))
        }
    };
    let mut note = note;
    if note.chars().count() > 300 {
        note = note.chars().take(299).collect::<String>() + "…";
    }
    AllocCheck { model, quick, free_target_bytes: free_target, seconds, verdict: verdict.to_string(), note, cases }
}

fn show(e: Option<u64>) -> String {
    e.map_or("none".to_string(), |e| e.to_string())
}

/// A check that could not run, with why.
pub fn skipped(quick: bool, why: String) -> AllocCheck {
    AllocCheck { model: model_name(), quick, free_target_bytes: 0, seconds: 0.0, verdict: "skipped".to_string(), note: why, cases: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimDevice;

    #[test]
    fn every_case_names_a_trace_and_configuration_that_exist() {
        assert_eq!(cases(false).len(), 21);
        assert_eq!(cases(true), vec![("churn", "default"), ("churn", "expandable"), ("model", "default"), ("model", "expandable")]);
        for (t, _) in cases(false) {
            let (tr, _) = load_trace(t).unwrap();
            assert!(tr.events.len() > 1000, "{t}");
        }
        assert_eq!(TRACES.iter().filter(|t| t.1).count(), 4);
    }

    #[test]
    fn the_free_target_leaves_room_for_the_case_process() {
        assert_eq!(free_target(140 * GIB), Some(4 * GIB));
        assert_eq!(free_target(5 * GIB), Some(4 * GIB));
        assert_eq!(free_target(4 * GIB), Some(2 * GIB));
        assert_eq!(free_target(2 * GIB), None);
    }

    /// A simulated card whose other processes leave `free` bytes.
    fn sim(free: u64) -> SimDevice {
        SimDevice::from_spec(&crate::sim::SimSpec { total: 8 * GIB, other_used: 8 * GIB - free, mig: false, busy: false }, 0)
    }

    #[test]
    fn a_case_on_the_simulated_device_gives_everything_back() {
        for config in ["default", "expandable"] {
            let mut d = sim(2 * GIB);
            let c = run_case(&mut d, "model", config).unwrap();
            assert_eq!(d.used_bytes(), 0, "{config}");
            assert_eq!(c.free_at_start_bytes, 2 * GIB, "{config}");
            // the model runs out where the fidelity suite measured PyTorch running out with 2 GiB free
            assert_eq!(c.model.oom_at, Some(1015), "{config}");
            assert!(c.device.calls > 0 && c.model.calls > 0);
            // the simulated device places allocations first-fit from address 0: not the driver's
            // placement, and the check says so
            assert_eq!(c.exact, c.divergent_calls == 0 && c.model.oom_at == c.device.oom_at && c.model.peak_reserved_bytes == c.device.peak_reserved_bytes);
            assert_eq!(c.model_kept_back_bytes, DRIVER_RESERVE);
        }
    }

    #[test]
    fn an_interrupt_stops_the_case_and_frees_everything() {
        let mut d = sim(2 * GIB);
        d.stop = true;
        assert_eq!(run_case(&mut d, "churn", "expandable").unwrap_err(), DeviceError::Interrupted);
        assert_eq!(d.used_bytes(), 0);
    }

    #[test]
    fn the_ballast_leaves_what_was_asked_and_is_given_back() {
        let mut d = SimDevice::new(8 * GIB);
        {
            let b = take_ballast(&mut d, 6 * GIB + 3 * MIB).unwrap();
            assert_eq!(b.held_bytes(), 6 * GIB + 2 * MIB, "to the page below");
        }
        assert_eq!(d.used_bytes(), 0);
        // more than the card has: as much as it gives
        let b = take_ballast(&mut d, 9 * GIB).unwrap();
        assert_eq!(b.held_bytes(), 8 * GIB);
    }

    #[test]
    fn the_summary_names_the_first_divergence() {
        let mut d = sim(2 * GIB);
        let mut a = run_case(&mut d, "model", "default").unwrap();
        // as if the device had placed everything where the model did
        (a.exact, a.divergent_calls, a.first_divergence, a.device) = (true, 0, None, a.model.clone());
        (a.moved_placements, a.first_moved) =
            (1, Some(CallDivergence { call: 2, event: 5, model: "cudaMalloc(2097152) at +0x0".into(), device: "cudaMalloc(2097152) at -0x2000000".into() }));
        let mut b = a.clone();
        b.exact = false;
        b.divergent_calls = 1;
        b.first_divergence =
            Some(CallDivergence { call: 7, event: 400, model: "cudaMalloc(2097152) at +0x0".into(), device: "cudaMalloc(2097152) at -0x2000000".into() });
        let s = summarize(model_name(), false, 2 * GIB, 1.0, vec![a.clone(), b]);
        assert_eq!(s.verdict, "diverged");
        assert!(s.note.contains("diverged in 1 of 2 cases; model / default: first at event 400 (call 7"), "{}", s.note);
        let s = summarize(model_name(), true, 2 * GIB, 1.0, vec![a.clone()]);
        assert_eq!(s.verdict, "exact");
        assert!(s.note.starts_with("the allocator model is exact on this GPU and driver: in 1 of 1 cases the same driver calls"), "{}", s.note);
        assert!(s.note.ends_with(&format!("; {} of {} placements at the model's address", a.placements - 1, a.placements)), "{}", s.note);
    }
}
