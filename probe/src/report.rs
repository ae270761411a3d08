//! The probe's report document (versioned; the ingest API validates against it).

use serde::Serialize;

pub const SCHEMA_VERSION: u32 = 1;

/// Exit codes (documented in probe/README.md).
pub const EXIT_IO: u8 = 1;
pub const EXIT_NO_DRIVER: u8 = 3;
pub const EXIT_NO_GPU: u8 = 4;
pub const EXIT_BAD_DEVICE: u8 = 5;
pub const EXIT_DRIVER_ERROR: u8 = 10;

#[derive(Debug, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub probe_version: &'static str,
    pub device: Device,
    pub memory: Memory,
}

#[derive(Debug, Serialize)]
pub struct Device {
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
}

fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

impl Report {
    pub fn to_table(&self) -> String {
        let d = &self.device;
        let m = &self.memory;
        let rows = [
            ("GPU", format!("#{} {}", d.index, d.name)),
            ("Compute capability", d.compute_capability.clone()),
            ("Driver supports CUDA", d.driver_cuda_version.clone()),
            ("PCI bus", d.pci_bus_id.clone()),
            ("Total memory", gib(m.total_bytes)),
            ("Free (with this context)", gib(m.free_bytes_with_context)),
        ];
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        rows.iter().map(|(k, v)| format!("{k:<width$}  {v}\n")).collect()
    }
}
