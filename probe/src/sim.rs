//! A simulated device: a first-fit allocator over a fixed address space with the driver's 2 MiB
//! granularity, a stream-ordered pool that keeps freed blocks, and virtual-memory bookkeeping.
//! It is a test double: the measurements' logic is unit-tested on it, and the shipped binary uses
//! it only when asked with the hidden `--simulate` flag (CLI and end-to-end tests without a GPU).
//! Its device name says it is simulated, so a simulated report can never pass for a real card.

use std::cell::Cell;
use std::collections::BTreeMap;

use crate::measure::{Alloc, Device, DeviceError, Identity, MIB};
use crate::report::Bandwidth;

const GIB: u64 = 1 << 30;

/// One simulated GPU, as `--simulate` describes it.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSpec {
    pub total: u64,
    /// Memory held by other processes when the probe starts.
    pub other_used: u64,
    pub mig: bool,
    /// The device refuses a new context (exclusive compute mode, already taken).
    pub busy: bool,
}

/// `--simulate` value: comma-separated devices, each `gpu` (8 GiB), `gpu=N` (N GiB), `mig`
/// (a MIG slice), `busy` (context refused) or `full` (other processes hold all but 128 MiB);
/// `none` is a driver with no GPU.
pub fn parse_specs(s: &str) -> Result<Vec<SimSpec>, String> {
    if s == "none" {
        return Ok(Vec::new());
    }
    let base = SimSpec { total: 8 * GIB, other_used: 0, mig: false, busy: false };
    s.split(',')
        .map(|item| match item {
            "gpu" => Ok(base.clone()),
            "mig" => Ok(SimSpec { total: 10 * GIB, mig: true, ..base.clone() }),
            "busy" => Ok(SimSpec { busy: true, ..base.clone() }),
            "full" => Ok(SimSpec { other_used: 8 * GIB - 128 * MIB, ..base.clone() }),
            _ => match item.strip_prefix("gpu=").map(str::parse::<u64>) {
                Some(Ok(n)) if (1..=1024).contains(&n) => Ok(SimSpec { total: n * GIB, ..base.clone() }),
                _ => Err(format!("--simulate: unknown device `{item}` (gpu, gpu=N, mig, busy, full, none)")),
            },
        })
        .collect()
}

pub struct SimDevice {
    pub capacity: u64,
    /// Held by other processes from the start (the range at address 0).
    #[cfg_attr(not(test), allow(dead_code))]
    others: u64,
    name: String,
    index: u32,
    /// Sorted, disjoint (start, len) of allocated ranges (including other processes' memory).
    used: Vec<(u64, u64)>,
    /// Blocks the stream-ordered pool keeps after a free: (ptr, len).
    pool: Vec<(u64, u64)>,
    pool_threshold: u64,
    /// Physical VMM allocations: handle → (ptr, len); reserved virtual ranges: va → len;
    /// mappings inside them, as the driver allows (any whole number of handles, anywhere in a
    /// reserved range): va → (len, handle).
    handles: BTreeMap<u64, (u64, u64)>,
    ranges: BTreeMap<u64, u64>,
    maps: BTreeMap<u64, (u64, u64)>,
    next_va: u64,
    clock: Cell<u64>,
    pub alloc_calls: usize,
    pub free_calls: usize,
    /// Stream-ordered requests served from memory the pool kept.
    pub pool_hits: usize,
    /// Simulated Ctrl-C.
    pub stop: bool,
}

impl SimDevice {
    #[cfg(test)]
    pub fn new(capacity: u64) -> SimDevice {
        SimDevice::from_spec(&SimSpec { total: capacity, other_used: 0, mig: false, busy: false }, 0)
    }

    pub fn from_spec(spec: &SimSpec, index: u32) -> SimDevice {
        let name = if spec.mig { "Headroom simulated GPU MIG 1g.10gb" } else { "Headroom simulated GPU" };
        let mut d = SimDevice {
            capacity: spec.total,
            others: spec.other_used,
            name: name.to_string(),
            index,
            used: Vec::new(),
            pool: Vec::new(),
            pool_threshold: 0,
            handles: BTreeMap::new(),
            ranges: BTreeMap::new(),
            maps: BTreeMap::new(),
            next_va: 1 << 47,
            clock: Cell::new(0),
            alloc_calls: 0,
            free_calls: 0,
            pool_hits: 0,
            stop: false,
        };
        if spec.other_used > 0 {
            d.used.push((0, spec.other_used));
        }
        d
    }

    /// Memory this simulated process holds (other processes' share excluded).
    #[cfg(test)]
    pub fn used_bytes(&self) -> u64 {
        self.used.iter().map(|(_, l)| l).sum::<u64>() - self.others
    }

    fn take(&mut self, bytes: u64) -> Option<u64> {
        let len = bytes.div_ceil(2 * MIB) * 2 * MIB;
        let mut start = 0;
        for (i, &(s, l)) in self.used.iter().enumerate() {
            if s - start >= len {
                self.used.insert(i, (start, len));
                return Some(start);
            }
            start = s + l;
        }
        if self.capacity - start >= len {
            self.used.push((start, len));
            return Some(start);
        }
        None
    }

    fn give(&mut self, ptr: u64) -> Result<(), DeviceError> {
        let i = self.used.iter().position(|&(s, _)| s == ptr).ok_or("free of an unknown pointer")?;
        self.used.remove(i);
        Ok(())
    }
}

impl Device for SimDevice {
    fn identity(&mut self) -> Result<Identity, DeviceError> {
        Ok(Identity {
            name: self.name.clone(),
            compute_capability: "8.6".into(),
            driver_cuda_version: "12.8".into(),
            pci_bus_id: format!("0000:{:02x}:00.0", self.index + 1),
            uuid: (0..16).map(|i| i as u8 ^ self.index as u8).collect(),
        })
    }
    fn total_bytes(&mut self) -> Result<u64, DeviceError> {
        Ok(self.capacity)
    }
    fn context_bytes(&mut self) -> Result<u64, DeviceError> {
        Ok(300 * MIB)
    }
    fn bandwidth(&mut self, bytes: u64, _reps: usize) -> Result<Bandwidth, DeviceError> {
        Ok(Bandwidth { bytes, h2d_pinned_gbs: 24.0, d2h_pinned_gbs: 25.0, h2d_pageable_gbs: 11.0, d2h_pageable_gbs: 9.0, d2d_gbs: 300.0 })
    }
    fn free_bytes(&mut self) -> Result<u64, DeviceError> {
        Ok(self.capacity - self.used.iter().map(|(_, l)| l).sum::<u64>())
    }
    fn alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, DeviceError> {
        self.alloc_calls += 1;
        if bytes == 0 {
            return Err("zero-byte allocation".into());
        }
        Ok(self.take(bytes).map(|ptr| Alloc { ptr, bytes }))
    }
    fn free(&mut self, a: Alloc) -> Result<(), DeviceError> {
        self.free_calls += 1;
        self.give(a.ptr)
    }
    fn interrupted(&self) -> bool {
        self.stop
    }
    fn now_ns(&self) -> u64 {
        // Each reading advances 1 µs: deterministic latencies for tests.
        self.clock.set(self.clock.get() + 1000);
        self.clock.get()
    }

    fn pool_prepare(&mut self) -> Result<u64, DeviceError> {
        self.pool_threshold = u64::MAX;
        Ok(self.pool_threshold)
    }
    fn pool_alloc(&mut self, bytes: u64) -> Result<Option<Alloc>, DeviceError> {
        let len = bytes.div_ceil(2 * MIB) * 2 * MIB;
        if let Some(i) = self.pool.iter().position(|&(_, l)| l == len) {
            let (ptr, _) = self.pool.remove(i);
            self.pool_hits += 1;
            return Ok(Some(Alloc { ptr, bytes }));
        }
        self.alloc(bytes)
    }
    fn pool_free(&mut self, a: Alloc) -> Result<(), DeviceError> {
        if self.pool_threshold == 0 {
            return self.free(a);
        }
        self.pool.push((a.ptr, a.bytes.div_ceil(2 * MIB) * 2 * MIB));
        Ok(())
    }
    fn pool_trim(&mut self) -> Result<(), DeviceError> {
        for (ptr, _) in std::mem::take(&mut self.pool) {
            self.give(ptr)?;
        }
        Ok(())
    }
    fn pool_release(&mut self) -> Result<(), DeviceError> {
        self.pool_trim()?;
        self.pool_threshold = 0;
        Ok(())
    }

    fn vmm_granularity(&mut self) -> Result<(u64, u64), DeviceError> {
        Ok((2 * MIB, 2 * MIB))
    }
    fn vmm_create(&mut self, bytes: u64) -> Result<Option<u64>, DeviceError> {
        if bytes % (2 * MIB) != 0 {
            return Err(format!("cuMemCreate({bytes}): not a multiple of the granularity").into());
        }
        Ok(self.take(bytes).map(|ptr| {
            let h = self.handles.keys().next_back().map_or(1, |k| k + 1);
            self.handles.insert(h, (ptr, bytes));
            h
        }))
    }
    fn vmm_release(&mut self, handle: u64) -> Result<(), DeviceError> {
        if self.maps.values().any(|&(_, h)| h == handle) {
            return Err("cuMemRelease of a mapped handle".into());
        }
        let (ptr, _) = self.handles.remove(&handle).ok_or("cuMemRelease of an unknown handle")?;
        self.give(ptr)
    }
    fn vmm_reserve(&mut self, bytes: u64) -> Result<u64, DeviceError> {
        let va = self.next_va;
        self.next_va += bytes;
        self.ranges.insert(va, bytes);
        Ok(va)
    }
    fn vmm_free_range(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError> {
        if self.ranges.get(&va) != Some(&bytes) {
            return Err("cuMemAddressFree of an unknown range".into());
        }
        if self.maps.range(va..va + bytes).next().is_some() {
            return Err("cuMemAddressFree of a mapped range".into());
        }
        self.ranges.remove(&va);
        Ok(())
    }
    fn vmm_map(&mut self, va: u64, bytes: u64, handle: u64) -> Result<(), DeviceError> {
        match self.handles.get(&handle) {
            Some(&(_, len)) if len == bytes => {}
            Some(_) => return Err("cuMemMap of a size other than the handle's".into()),
            None => return Err("cuMemMap of an unknown handle".into()),
        }
        let inside = self.ranges.range(..=va).next_back().is_some_and(|(&s, &l)| va + bytes <= s + l);
        let overlaps = self.maps.range(..va + bytes).next_back().is_some_and(|(&s, &(l, _))| s + l > va);
        if !inside || overlaps {
            return Err("cuMemMap onto an unreserved or mapped range".into());
        }
        self.maps.insert(va, (bytes, handle));
        Ok(())
    }
    fn vmm_access(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError> {
        // every byte of the range mapped
        let mut at = va;
        for (&s, &(l, _)) in self.maps.range(va..va + bytes) {
            if s != at {
                break;
            }
            at = s + l;
        }
        if at >= va + bytes { Ok(()) } else { Err("cuMemSetAccess on an unmapped range".into()) }
    }
    fn vmm_unmap(&mut self, va: u64, bytes: u64) -> Result<(), DeviceError> {
        let inside: Vec<u64> = self.maps.range(va..va + bytes).map(|(&s, _)| s).collect();
        if inside.is_empty() || inside.iter().any(|s| s + self.maps[s].0 > va + bytes) {
            return Err("cuMemUnmap of an unmapped range".into());
        }
        for s in inside {
            self.maps.remove(&s);
        }
        Ok(())
    }
}
