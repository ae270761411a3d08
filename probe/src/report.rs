//! The probe's report document (versioned; the ingest API validates against it).

use serde::Serialize;

use crate::measure::{Fragmentation, Latency};

pub const SCHEMA_VERSION: u32 = 1;

/// Exit codes (documented in probe/README.md).
pub const EXIT_IO: u8 = 1;
pub const EXIT_NO_DRIVER: u8 = 3;
pub const EXIT_NO_GPU: u8 = 4;
pub const EXIT_BAD_DEVICE: u8 = 5;
pub const EXIT_DRIVER_ERROR: u8 = 10;
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub probe_version: &'static str,
    pub device: Device_,
    pub memory: Memory,
    pub latency: Vec<Latency>,
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
    /// The largest single cuMemAlloc that succeeds (bisection to 64 MiB).
    pub largest_allocation_bytes: u64,
    /// Everything this process could allocate at once (chunks down to 2 MiB), then freed.
    pub usable_bytes: u64,
    /// Free memory after all measurements: equal to `free_bytes_with_context` when nothing leaked.
    pub free_bytes_after: u64,
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
            ("Usable by one process".into(), gib(m.usable_bytes)),
            ("Largest single allocation".into(), gib(m.largest_allocation_bytes)),
        ];
        for l in &self.latency {
            rows.push((format!("cuMemAlloc / cuMemFree {} MiB", l.bytes >> 20), format!("{:.1} µs / {:.1} µs (median of {})", l.alloc_us, l.free_us, l.samples)));
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
        let width = rows.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0);
        rows.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
    }
}
