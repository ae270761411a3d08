//! `headroom-alloc`: a faithful, pure model of PyTorch 2.11's CUDA caching allocator.
//!
//! Give it an allocation trace (a `torch.cuda.memory._dump_snapshot` pickle or the simple JSON
//! form) and a configuration (`PYTORCH_CUDA_ALLOC_CONF`, per-process memory fraction, device
//! total and free memory); it replays the trace through the same rules the real allocator
//! follows and says whether and where it runs out of memory, with the message PyTorch would
//! print, and how much it reserved.
//!
//! No I/O, no threads, no clocks: the crate builds for `wasm32-unknown-unknown`.
//!
//! ```
//! use headroom_alloc::{config, replay, trace, Options};
//! let t = trace::parse(br#"{"events": [["a", 1, 1500000], ["a", 2, 5000000], ["f", 1, 1500000]]}"#).unwrap();
//! let opts = Options::new(config::parse("").unwrap(), 8 << 30);
//! let out = replay(&t, &opts);
//! assert_eq!(out.peak_reserved, 20 << 20); // both fit one 20 MiB segment
//! assert_eq!(out.oom_at, None);
//! ```

pub mod async_backend;
pub mod check;
pub mod config;
pub mod detail;
pub mod device;
pub mod freeset;
pub mod native;
pub mod oom;
pub mod recover;
pub mod stats;
pub mod sweep;
pub mod trace;

use config::{AllocConf, Backend};
use device::{Device, Driver, Recorder};
use serde::Serialize;
use stats::DeviceStats;
use trace::{OP_ALLOC, OP_EMPTY_CACHE, OP_FREE, OP_FREE_COMPLETED, OP_FREE_REQUESTED, POS_INITIAL, Trace};

/// The environment of one replay.
#[derive(Clone, Debug)]
pub struct Options {
    pub conf: AllocConf,
    /// `cudaMemGetInfo` total / `totalGlobalMem` in bytes.
    pub device_total: u64,
    /// Free device memory when the replay starts, as `cudaMemGetInfo` reports it (`None`: the
    /// device total); cudaMalloc gets all but `device::DRIVER_RESERVE` of it.
    pub device_free: Option<u64>,
    /// `torch.cuda.set_per_process_memory_fraction(f)` after start-up (`None`: never called).
    pub memory_fraction: Option<f64>,
    /// For the OOM message: the memory NVML reports for this process beyond what the allocator
    /// reserved (CUDA context, other libraries). `None`: the message leaves that sentence out,
    /// as PyTorch does where NVML is unavailable.
    pub process_overhead: Option<u64>,
    /// Device index in the OOM message.
    pub device_index: u32,
    /// Go on after an allocation the trace marks recoverable fails, as PyTorch does
    /// (`recover`); false: every failure ends the replay.
    pub recover: bool,
}

impl Options {
    pub fn new(conf: AllocConf, device_total: u64) -> Self {
        Options { conf, device_total, device_free: None, memory_fraction: None, process_overhead: None, device_index: 0, recover: true }
    }
}

/// An allocation that failed where PyTorch catches the error and goes on (`recover`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fallback {
    /// Index of the source event (JSON `events` index, or `device_traces` index).
    pub at: u64,
    /// Bytes requested.
    pub size: u64,
    /// The rule that recognised it: a built-in site's frame, a user pattern, or `size N`.
    pub site: String,
    /// What PyTorch does instead.
    pub what: String,
    /// What PyTorch does next is not in the trace (it recorded a run where the first candidate
    /// fit), and the replay leaves it out. It can take at most this much without failing too:
    /// the limit (the fraction cap, else what the device has free) minus the bytes allocated
    /// at that moment.
    pub unrecorded_at_most: u64,
    /// Bytes reserved right after the failure (the allocator has released its cache).
    pub reserved_after: u64,
}

/// What a replay did.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub backend: Backend,
    /// Index of the source event that failed (JSON `events` index, or `device_traces` index of
    /// a snapshot); `None` if nothing failed, or if an allocation of the initial state failed.
    pub oom_at: Option<u64>,
    /// Whether an allocation failed (the replay stops there).
    pub oom: bool,
    /// The failing allocation belonged to the state before recording started (snapshots).
    pub oom_in_initial_state: bool,
    pub oom_size: Option<u64>,
    pub oom_message: Option<String>,
    pub peak_allocated: u64,
    pub peak_reserved: u64,
    pub num_device_alloc: u64,
    pub num_device_free: u64,
    pub num_alloc_retries: u64,
    pub num_ooms: u64,
    pub num_sync_all_streams: u64,
    /// Events replayed (up to and including the failing one).
    pub events_replayed: u64,
    pub final_allocated: u64,
    pub final_reserved: u64,
    /// `fraction x total` when a fraction below 1 applies (native backend), or the async limit.
    pub allowed_memory_maximum: Option<u64>,
    /// The native allocator's counters (`None` for cudaMallocAsync, which keeps none).
    pub stats: Option<DeviceStats>,
    /// Warnings PyTorch would print for this configuration.
    pub warnings: Vec<String>,
    /// Allocations that failed where PyTorch recovers (the replay went on past each).
    pub fallbacks: Vec<Fallback>,
}

/// Replay `trace` under `opts`.
pub fn replay(trace: &Trace, opts: &Options) -> Outcome {
    let device = Device::new(opts.device_total, opts.device_free.unwrap_or(opts.device_total));
    match opts.conf.backend {
        Backend::Native => replay_native(trace, opts, device),
        Backend::CudaMallocAsync => replay_async(trace, opts, device),
    }
}

fn replay_native(trace: &Trace, opts: &Options, device: Device) -> Outcome {
    run_native(trace, opts, device, |_, _| true).0
}

/// The native replay, calling `watch(index, allocator)` after each event it replayed without
/// failing (`index` into `trace.events`); the replay stops early when `watch` returns false.
/// Returns the outcome so far and the allocator as it was left.
pub(crate) fn run_native<D: Driver>(
    trace: &Trace,
    opts: &Options,
    device: D,
    mut watch: impl FnMut(usize, &native::Native<D>) -> bool,
) -> (Outcome, native::Native<D>) {
    let mut a = native::Native::new(&opts.conf, device, opts.memory_fraction);
    let mut handles = vec![native::NIL; trace.num_ids as usize];
    let mut oom = None;
    let mut fallbacks = Vec::new();
    let mut replayed = 0u64;
    for (i, e) in trace.events.iter().enumerate() {
        replayed += 1;
        if let Err(k) = a.step(e, &mut handles) {
            // PyTorch catches this one and goes on; its handle stays NIL, so its free is a no-op.
            if opts.recover
                && e.op == OP_ALLOC
                && let Some(site) = trace.recoverable_label(e.id)
            {
                let allocated = a.stats.allocated_bytes.all.current as u64;
                let reserved = a.stats.reserved_bytes.all.current as u64;
                let limit = a.allowed_memory_maximum().unwrap_or(reserved + a.device.free_now());
                fallbacks.push(fallback(e, site, limit.saturating_sub(allocated), reserved));
                if !watch(i, &a) {
                    break;
                }
                continue;
            }
            oom = Some((e, k));
            break;
        }
        if !watch(i, &a) {
            break;
        }
    }
    let s = &a.stats;
    let (oom_at, oom_size, oom_message, initial) = match &oom {
        Some((e, k)) => {
            let reserved = s.reserved_bytes.all.current as u64;
            let msg = oom::native_message(k, opts.device_index, opts.process_overhead.map(|o| o + reserved));
            ((e.pos != POS_INITIAL).then_some(e.pos as u64), Some(e.size), Some(msg), e.pos == POS_INITIAL)
        }
        None => (None, None, None, false),
    };
    let out = Outcome {
        backend: Backend::Native,
        oom_at,
        oom: oom.is_some(),
        oom_in_initial_state: initial,
        oom_size,
        oom_message,
        peak_allocated: s.allocated_bytes.all.peak as u64,
        peak_reserved: s.reserved_bytes.all.peak as u64,
        num_device_alloc: s.num_device_alloc,
        num_device_free: s.num_device_free,
        num_alloc_retries: s.num_alloc_retries,
        num_ooms: s.num_ooms,
        num_sync_all_streams: s.num_sync_all_streams,
        events_replayed: replayed,
        final_allocated: s.allocated_bytes.all.current as u64,
        final_reserved: s.reserved_bytes.all.current as u64,
        allowed_memory_maximum: a.allowed_memory_maximum(),
        stats: Some(a.stats.clone()),
        warnings: opts.conf.warnings.clone(),
        fallbacks,
    };
    (out, a)
}

/// The native replay on any [`Driver`] (the model's [`Device`], or the probe's real one), every
/// driver call logged: the outcome, the allocator as it was left (its driver holds what it
/// holds) and, for each logged call, the source position of the trace event that made it.
/// `keep_going` is asked after every event, with the driver; false stops the replay there.
pub fn replay_on<D: Driver>(
    trace: &Trace,
    opts: &Options,
    driver: D,
    mut keep_going: impl FnMut(&D) -> bool,
) -> (Outcome, native::Native<Recorder<D>>, Vec<u64>) {
    let mut at = Vec::new();
    let (out, a) = run_native(trace, opts, Recorder::new(driver), |i, a| {
        at.resize(a.device.ops.len(), trace.events[i].pos as u64);
        keep_going(&a.device.inner)
    });
    // calls made by the event that failed
    let last = out.oom_at.unwrap_or(trace.events.last().map_or(0, |e| e.pos as u64));
    at.resize(a.device.ops.len(), last);
    (out, a, at)
}

fn fallback(e: &trace::Event, site: &str, unrecorded_at_most: u64, reserved_after: u64) -> Fallback {
    Fallback { at: e.pos as u64, size: e.size, site: site.to_string(), what: recover::describe(site), unrecorded_at_most, reserved_after }
}

fn replay_async(trace: &Trace, opts: &Options, device: Device) -> Outcome {
    run_async(trace, opts, device, |_, _| true).0
}

/// The cudaMallocAsync replay, with `watch` as in [`run_native`].
pub(crate) fn run_async(
    trace: &Trace,
    opts: &Options,
    device: Device,
    mut watch: impl FnMut(usize, &async_backend::AsyncPool) -> bool,
) -> (Outcome, async_backend::AsyncPool) {
    let mut p = async_backend::AsyncPool::new(device, opts.memory_fraction);
    let mut offsets = vec![u64::MAX; trace.num_ids as usize];
    let mut sizes = vec![0u64; trace.num_ids as usize];
    let mut oom = None;
    let mut fallbacks = Vec::new();
    let mut replayed = 0u64;
    let mut stopped = false;
    for (i, e) in trace.events.iter().enumerate() {
        // the previous event went through (an out-of-memory error breaks out of the loop)
        if i > 0 && !watch(i - 1, &p) {
            stopped = true;
            break;
        }
        replayed += 1;
        match e.op {
            OP_ALLOC => {
                if e.size >= native::ONE_EXA_BYTES {
                    oom = Some((e, "CUDA out of memory. Tried to allocate more than 1EB memory.".to_string()));
                    break;
                }
                if e.size == 0 {
                    continue;
                }
                match p.malloc(e.size) {
                    Ok(off) => {
                        offsets[e.id as usize] = off;
                        sizes[e.id as usize] = e.size;
                    }
                    Err(_)
                        if opts.recover
                            && let Some(site) = trace.recoverable_label(e.id) =>
                    {
                        let limit = p.limit.min(p.reserved() + p.device.free_now());
                        fallbacks.push(fallback(e, site, limit.saturating_sub(p.used), p.reserved()));
                    }
                    Err(o) => {
                        oom = Some((e, oom::async_message(&o, opts.device_index)));
                        break;
                    }
                }
            }
            // cudaFreeAsync at free(); the driver reuses the range in stream order
            OP_FREE | OP_FREE_REQUESTED => {
                let off = offsets[e.id as usize];
                if off != u64::MAX {
                    p.free(off, sizes[e.id as usize]);
                    offsets[e.id as usize] = u64::MAX;
                }
            }
            OP_FREE_COMPLETED => {}
            OP_EMPTY_CACHE => p.empty_cache(),
            _ => {}
        }
    }
    if oom.is_none() && !stopped && !trace.events.is_empty() {
        watch(trace.events.len() - 1, &p);
    }
    let mut warnings = vec![
        "backend:cudaMallocAsync: where the driver's pool places allocations is approximate, so reserved bytes (usually a little low: see alloc/README.md) and the point where a device-memory limit is reached are estimates; allocated bytes and the fraction limit are exact".to_string(),
    ];
    warnings.extend(opts.conf.warnings.iter().cloned());
    let (oom_at, oom_size, oom_message, initial) = match &oom {
        Some((e, m)) => ((e.pos != POS_INITIAL).then_some(e.pos as u64), Some(e.size), Some(m.clone()), e.pos == POS_INITIAL),
        None => (None, None, None, false),
    };
    let out = Outcome {
        backend: Backend::CudaMallocAsync,
        oom_at,
        oom: oom.is_some(),
        oom_in_initial_state: initial,
        oom_size,
        oom_message,
        peak_allocated: p.peak_used,
        peak_reserved: p.peak_reserved,
        num_device_alloc: 0,
        num_device_free: 0,
        num_alloc_retries: 0,
        num_ooms: 0,
        num_sync_all_streams: 0,
        events_replayed: replayed,
        final_allocated: p.used,
        final_reserved: p.reserved(),
        allowed_memory_maximum: (p.limit != u64::MAX).then_some(p.limit),
        stats: None,
        warnings,
        fallbacks,
    };
    (out, p)
}

/// The configurations `probe replay --compare` puts side by side.
pub const COMPARE_CONFIGS: &[(&str, &str)] = &[
    ("default", ""),
    ("expandable_segments:True", "expandable_segments:True"),
    ("max_split_size_mb:128", "max_split_size_mb:128"),
    ("max_split_size_mb:512", "max_split_size_mb:512"),
    ("garbage_collection_threshold:0.8", "garbage_collection_threshold:0.8"),
    ("roundup_power2_divisions:4", "roundup_power2_divisions:4"),
    ("expandable_segments:True,max_split_size_mb:128", "expandable_segments:True,max_split_size_mb:128"),
    ("backend:cudaMallocAsync", "backend:cudaMallocAsync"),
];
