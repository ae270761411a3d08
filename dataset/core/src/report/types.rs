//! The typed report: what the schema describes.

use super::*;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: u64,
    pub probe_version: String,
    pub run_seconds: f64,
    pub device: Device,
    pub memory: Memory,
    pub latency: Vec<Latency>,
    pub pools: Pools,
    pub vmm: Vmm,
    pub bandwidth: Bandwidth,
    pub fragmentation: Fragmentation,
    /// Schema 2: headroom-alloc's allocator driven against the real driver.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator_check: Option<AllocCheck>,
}

/// The allocator check (schema 2): standard traces replayed by headroom-alloc's model of
/// PyTorch's caching allocator twice, on the modelled device and on the real driver (the same
/// allocator code issuing the same calls), each case starting with `free_target_bytes` free.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocCheck {
    /// What was checked, e.g. `PyTorch 2.11 CUDACachingAllocator (headroom-alloc 0.1.0)`.
    pub model: String,
    pub quick: bool,
    pub free_target_bytes: u64,
    pub seconds: f64,
    /// `exact`, `diverged` or `skipped` ([`ALLOC_CHECK_VERDICTS`]).
    pub verdict: String,
    /// One line: where it diverged first, or why it was skipped.
    pub note: String,
    pub cases: Vec<AllocCase>,
}

/// One trace under one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocCase {
    pub trace: String,
    /// The trace was one the model was fitted to (`false`: a hold-out trace).
    pub fitted: bool,
    pub config: String,
    /// The `PYTORCH_CUDA_ALLOC_CONF` string.
    pub conf: String,
    pub events: u64,
    /// Free memory (cuMemGetInfo) when the replay started, after the ballast.
    pub free_at_start_bytes: u64,
    pub model: AllocRun,
    pub device: AllocRun,
    /// Driver calls that differ between the two runs (what was called, bytes, placed or refused).
    pub divergent_calls: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<CallDivergence>,
    /// Addresses the driver chose in calls that are alike, and how many are not where the
    /// model put them (relative to the first of their kind).
    pub placements: u64,
    pub moved_placements: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_moved: Option<CallDivergence>,
    /// Free memory the driver would not hand out in one cuMemAlloc once the replay ended (free
    /// minus the largest allocation, to 2 MiB), and what the model keeps back.
    pub kept_back_bytes: u64,
    pub model_kept_back_bytes: u64,
    /// Same calls, same out-of-memory event, same peak of reserved bytes.
    pub exact: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocRun {
    /// The trace event that ran out of memory; absent: none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_at: Option<u64>,
    pub peak_reserved_bytes: u64,
    pub calls: u64,
    pub seconds: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallDivergence {
    pub call: u64,
    pub event: u64,
    pub model: String,
    pub device: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Device {
    /// Private: random per install; distinct values are independent submitters.
    pub install_id: String,
    /// Private: salted hash of the GPU UUID.
    pub uuid_hash: String,
    pub index: u64,
    pub name: String,
    pub compute_capability: String,
    pub driver_cuda_version: String,
    pub pci_bus_id: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub total_bytes: u64,
    pub free_bytes_with_context: u64,
    pub context_bytes: u64,
    pub largest_allocation_bytes: u64,
    pub usable_bytes: u64,
    pub free_bytes_after: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub bytes: u64,
    pub alloc_us: f64,
    pub free_us: f64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pools {
    pub release_threshold_bytes: u64,
    pub alloc_async: Vec<AllocAsync>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AllocAsync {
    pub bytes: u64,
    pub first_us: f64,
    pub reuse_us: f64,
    pub free_us: f64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Vmm {
    pub granularity_bytes: u64,
    pub recommended_granularity_bytes: u64,
    pub map: Vec<VmmMap>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmmMap {
    pub bytes: u64,
    pub create_us: f64,
    pub reserve_us: f64,
    pub map_us: f64,
    pub access_us: f64,
    pub unmap_us: f64,
    pub release_us: f64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub bytes: u64,
    pub h2d_pinned_gbs: f64,
    pub d2h_pinned_gbs: f64,
    pub h2d_pageable_gbs: f64,
    pub d2h_pageable_gbs: f64,
    pub d2d_gbs: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fragmentation {
    pub block_bytes: u64,
    pub blocks: u64,
    pub free_bytes: u64,
    pub largest_bytes: u64,
}
