//! The probe's report document (versioned; the ingest API validates against it).

use serde::Serialize;

use std::fmt;

use crate::measure::{Fragmentation, Latency, PoolLatency, VmmLatency};

pub const SCHEMA_VERSION: u32 = 1;

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

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub probe_version: &'static str,
    pub run_seconds: f64,
    pub device: Device_,
    pub memory: Memory,
    pub latency: Vec<Latency>,
    pub pools: Pools,
    pub vmm: Vmm,
    pub bandwidth: Bandwidth,
    pub fragmentation: Fragmentation,
}

#[derive(Debug, Serialize)]
pub struct Device_ {
    /// Random per install (see identity.rs); never the host or user name.
    pub install_id: String,
    /// SHA-256 of the GPU UUID salted with the install id; never the raw UUID.
    pub uuid_hash: String,
    pub index: u32,
    pub name: String,
    pub compute_capability: String,
    /// CUDA version the driver supports, e.g. "12.8".
    pub driver_cuda_version: String,
    pub pci_bus_id: String,
}

#[derive(Debug, Serialize)]
pub struct Memory {
    /// cuDeviceTotalMem.
    pub total_bytes: u64,
    /// cuMemGetInfo free, with this process's context alive.
    pub free_bytes_with_context: u64,
    /// How much free memory one more context costs (created, measured, destroyed).
    pub context_bytes: u64,
    /// The largest single cuMemAlloc that succeeds (bisection to 64 MiB).
    pub largest_allocation_bytes: u64,
    /// Everything this process could allocate at once (chunks down to 2 MiB), then freed.
    pub usable_bytes: u64,
    /// Free memory after all measurements: equal to `free_bytes_with_context` when nothing leaked.
    pub free_bytes_after: u64,
}

#[derive(Debug, Serialize)]
pub struct Pools {
    pub release_threshold_bytes: u64,
    pub alloc_async: Vec<PoolLatency>,
}

#[derive(Debug, Serialize)]
pub struct Vmm {
    pub granularity_bytes: u64,
    pub recommended_granularity_bytes: u64,
    pub map: Vec<VmmLatency>,
}

#[derive(Debug, Serialize)]
pub struct Bandwidth {
    pub bytes: u64,
    pub h2d_pinned_gbs: f64,
    pub d2h_pinned_gbs: f64,
    pub h2d_pageable_gbs: f64,
    pub d2h_pageable_gbs: f64,
    pub d2d_gbs: f64,
}

/// Why the probe could not measure; each has its own exit code (probe/README.md).
#[derive(Debug)]
pub enum ProbeError {
    NoDriver,
    NoGpu,
    BadDevice { index: u32, count: u32 },
    TooLittleMemory { index: u32, free: u64, need: u64 },
    Mig { index: u32, name: String },
    Busy { index: u32, detail: String },
    Driver { call: &'static str, error: String },
}

impl ProbeError {
    pub fn is_interrupt(&self) -> bool {
        matches!(self, ProbeError::Driver { error, .. } if error == crate::measure::INTERRUPTED_MSG)
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            _ if self.is_interrupt() => EXIT_INTERRUPTED,
            ProbeError::NoDriver => EXIT_NO_DRIVER,
            ProbeError::NoGpu => EXIT_NO_GPU,
            ProbeError::BadDevice { .. } => EXIT_BAD_DEVICE,
            ProbeError::TooLittleMemory { .. } => EXIT_TOO_LITTLE_MEMORY,
            ProbeError::Mig { .. } => EXIT_MIG,
            ProbeError::Busy { .. } => EXIT_BUSY,
            ProbeError::Driver { .. } => EXIT_DRIVER_ERROR,
        }
    }
}

impl fmt::Display for ProbeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeError::NoDriver => write!(
                f,
                "no NVIDIA driver found: the CUDA driver library (libcuda) could not be loaded, so there is no GPU to measure on this machine"
            ),
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
        }
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

impl Report {
    pub fn to_table(&self) -> String {
        let d = &self.device;
        let m = &self.memory;
        let b = &self.bandwidth;
        let f = &self.fragmentation;
        let mut rows = vec![
            ("GPU".to_string(), format!("#{} {}", d.index, d.name)),
            ("Compute capability".into(), d.compute_capability.clone()),
            ("Driver supports CUDA".into(), d.driver_cuda_version.clone()),
            ("PCI bus".into(), d.pci_bus_id.clone()),
            ("Total memory".into(), gib(m.total_bytes)),
            ("Free (with this context)".into(), format!("{}  (context and other processes: {})", gib(m.free_bytes_with_context), gib(m.total_bytes - m.free_bytes_with_context))),
            ("One more CUDA context costs".into(), format!("{} MiB", m.context_bytes >> 20)),
            ("Usable by one process".into(), gib(m.usable_bytes)),
            ("Largest single allocation".into(), gib(m.largest_allocation_bytes)),
        ];
        for l in &self.latency {
            rows.push((format!("cuMemAlloc / cuMemFree {} MiB", l.bytes >> 20), format!("{:.1} µs / {:.1} µs (median of {})", l.alloc_us, l.free_us, l.samples)));
        }
        for p in &self.pools.alloc_async {
            rows.push((
                format!("cuMemAllocAsync {} MiB", p.bytes >> 20),
                format!("{:.1} µs new, {:.1} µs from the pool, free {:.1} µs", p.first_us, p.reuse_us, p.free_us),
            ));
        }
        rows.push(("VMM granularity".into(), format!("{} KiB (recommended {} KiB)", self.vmm.granularity_bytes >> 10, self.vmm.recommended_granularity_bytes >> 10)));
        for v in &self.vmm.map {
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
            ("Run time".into(), format!("{:.1} s", self.run_seconds)),
        ]);
        let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        rows.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
    }
}
