//! The probe's report document (versioned; the ingest API validates against it).

use std::fmt;

/// Exit codes (documented in probe/README.md).
pub const EXIT_IO: u8 = 1;
pub const EXIT_NO_DRIVER: u8 = 3;
pub const EXIT_NO_GPU: u8 = 4;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_BAD_DEVICE: u8 = 5;
pub const EXIT_TOO_LITTLE_MEMORY: u8 = 6;
pub const EXIT_MIG: u8 = 7;
pub const EXIT_BUSY: u8 = 8;
pub const EXIT_DRIVER_ERROR: u8 = 10;
pub const EXIT_REJECTED: u8 = 11;
pub const EXIT_NETWORK: u8 = 12;
pub const EXIT_INTERRUPTED: u8 = 130;

/// The report document and its parts are headroom-core's (`headroom_core::report`): the probe
/// writes exactly the types the ingest service reads.
pub use headroom_core::report::{AllocCase, AllocCheck, Bandwidth, Device as ReportDevice, Memory, Pools, Report, SCHEMA_VERSION, Vmm};

/// Why the probe could not measure; each has its own exit code (probe/README.md).
#[derive(Debug)]
pub enum ProbeError {
    NoDriver,
    NoGpu,
    BadDevice {
        index: u32,
        count: u32,
    },
    TooLittleMemory {
        index: u32,
        free: u64,
        need: u64,
    },
    Mig {
        index: u32,
        name: String,
    },
    Busy {
        index: u32,
        detail: String,
    },
    Driver {
        call: &'static str,
        error: String,
    },
    /// Ctrl-C: what the probe held has been freed.
    Interrupted,
}

impl ProbeError {
    /// A device's error during step `call`: Ctrl-C stays an interruption, a driver failure names
    /// the step.
    pub fn device(call: &'static str) -> impl Fn(crate::measure::DeviceError) -> ProbeError {
        move |e| match e {
            crate::measure::DeviceError::Interrupted => ProbeError::Interrupted,
            crate::measure::DeviceError::Driver(error) => ProbeError::Driver { call, error },
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            ProbeError::NoDriver => EXIT_NO_DRIVER,
            ProbeError::NoGpu => EXIT_NO_GPU,
            ProbeError::BadDevice { .. } => EXIT_BAD_DEVICE,
            ProbeError::TooLittleMemory { .. } => EXIT_TOO_LITTLE_MEMORY,
            ProbeError::Mig { .. } => EXIT_MIG,
            ProbeError::Busy { .. } => EXIT_BUSY,
            ProbeError::Driver { .. } => EXIT_DRIVER_ERROR,
            ProbeError::Interrupted => EXIT_INTERRUPTED,
        }
    }
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::NoDriver => {
                write!(f, "no NVIDIA driver found: the CUDA driver library (libcuda) could not be loaded, so there is no GPU to measure on this machine")
            }
            ProbeError::NoGpu => write!(f, "the NVIDIA driver is installed but reports no CUDA-capable GPU"),
            ProbeError::BadDevice { index, count } => write!(
                f,
                "there is no GPU #{index}: this machine has {count} (use --device 0{})",
                if *count > 1 { format!("..{}", count - 1) } else { String::new() }
            ),
            ProbeError::TooLittleMemory { index, free, need } => write!(
                f,
                "GPU #{index} has only {} MiB free and the probe needs at least {} MiB: close the programs using it (nvidia-smi lists them) and run again",
                free >> 20,
                need >> 20
            ),
            ProbeError::Mig { index, name } => write!(
                f,
                "GPU #{index} is a MIG slice ({name}): its memory is a fixed partition of the card, so the figures would not describe the card; run on a whole GPU"
            ),
            ProbeError::Busy { index, detail } => write!(
                f,
                "GPU #{index} is busy: the driver refused a new context ({detail}); it is in exclusive or prohibited compute mode and in use, so try again when it is free"
            ),
            ProbeError::Driver { call, error } => write!(f, "the CUDA driver failed in {call}: {error}"),
            ProbeError::Interrupted => write!(f, "interrupted; every allocation it made has been freed"),
        }
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

/// The readable report: one aligned row per measurement.
pub fn table(report: &Report) -> String {
    {
        let d = &report.device;
        let m = &report.memory;
        let b = &report.bandwidth;
        let f = &report.fragmentation;
        let mut rows = vec![
            ("GPU".to_string(), format!("#{} {}", d.index, d.name)),
            ("Compute capability".into(), d.compute_capability.clone()),
            ("Driver supports CUDA".into(), d.driver_cuda_version.clone()),
            ("PCI bus".into(), d.pci_bus_id.clone()),
            ("Total memory".into(), gib(m.total_bytes)),
            (
                "Free (with this context)".into(),
                format!("{}  (context and other processes: {})", gib(m.free_bytes_with_context), gib(m.total_bytes - m.free_bytes_with_context)),
            ),
            ("One more CUDA context costs".into(), format!("{} MiB", m.context_bytes >> 20)),
            ("Usable by one process".into(), gib(m.usable_bytes)),
            ("Largest single allocation".into(), gib(m.largest_allocation_bytes)),
        ];
        for l in &report.latency {
            rows.push((
                format!("cuMemAlloc / cuMemFree {} MiB", l.bytes >> 20),
                format!("{:.1} µs / {:.1} µs (median of {})", l.alloc_us, l.free_us, l.samples),
            ));
        }
        for p in &report.pools.alloc_async {
            rows.push((
                format!("cuMemAllocAsync {} MiB", p.bytes >> 20),
                format!("{:.1} µs new, {:.1} µs from the pool, free {:.1} µs", p.first_us, p.reuse_us, p.free_us),
            ));
        }
        rows.push((
            "VMM granularity".into(),
            format!("{} KiB (recommended {} KiB)", report.vmm.granularity_bytes >> 10, report.vmm.recommended_granularity_bytes >> 10),
        ));
        for v in &report.vmm.map {
            rows.push((
                format!("cuMemCreate+Map {} MiB", v.bytes >> 20),
                format!(
                    "{:.1} µs (create {:.1}, reserve {:.1}, map {:.1}, access {:.1}); undo {:.1} µs",
                    v.create_us + v.reserve_us + v.map_us + v.access_us,
                    v.create_us,
                    v.reserve_us,
                    v.map_us,
                    v.access_us,
                    v.unmap_us + v.release_us
                ),
            ));
        }
        rows.extend([
            ("Host→device, pinned".to_string(), format!("{:.1} GB/s", b.h2d_pinned_gbs)),
            ("Device→host, pinned".into(), format!("{:.1} GB/s", b.d2h_pinned_gbs)),
            ("Host→device, pageable".into(), format!("{:.1} GB/s", b.h2d_pageable_gbs)),
            ("Device→host, pageable".into(), format!("{:.1} GB/s", b.d2h_pageable_gbs)),
            ("Device→device copy".into(), format!("{:.1} GB/s", b.d2d_gbs)),
            (
                "Fragmentation".into(),
                format!(
                    "{} blocks of {} MiB, every other freed: {} free, largest piece {}",
                    f.blocks,
                    f.block_bytes >> 20,
                    gib(f.free_bytes),
                    gib(f.largest_bytes)
                ),
            ),
            ("Memory left behind".into(), gib(m.free_bytes_with_context.saturating_sub(m.free_bytes_after))),
        ]);
        if let Some(c) = &report.allocator_check {
            let label = if c.quick { "Allocator check (quick)" } else { "Allocator check" };
            rows.push((label.into(), format!("{}: {}", c.verdict, c.note)));
            if !c.cases.is_empty() {
                let oom = c.cases.iter().filter(|x| x.model.oom_at == x.device.oom_at).count();
                let kept: Vec<u64> = c.cases.iter().map(|x| x.kept_back_bytes).collect();
                let (lo, hi) = (kept.iter().min().copied().unwrap_or(0), kept.iter().max().copied().unwrap_or(0));
                rows.push((
                    "  cases".into(),
                    format!(
                        "{} cases from {} free: out of memory at the predicted event in {oom}; the driver kept back {}-{} MiB (model {} MiB); {:.1} s",
                        c.cases.len(),
                        gib(c.free_target_bytes),
                        lo >> 20,
                        hi >> 20,
                        c.cases[0].model_kept_back_bytes >> 20,
                        c.seconds
                    ),
                ));
            }
        }
        rows.push(("Run time".into(), format!("{:.1} s", report.run_seconds)));
        let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        rows.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
    }
}
