//! The device under the allocator: physical memory (the second limit, after the fraction) and
//! virtual addresses.
//!
//! * Physical memory: `cudaMalloc(n)` and `cuMemCreate(n)` take `n` rounded up to the 2 MiB
//!   page; they fail when that would exceed the free memory the device had when the replay
//!   started (`--device-free`, default the device total). Nothing else on the device changes
//!   during a replay.
//! * Addresses: the caching allocator breaks best-fit ties between equal-sized free blocks by
//!   address, so addresses matter. What the driver does is not documented; the model follows
//!   what `replay_torch.py --segments` recorded on an H200 (driver 580, CUDA 13): `cudaMalloc`
//!   carves address chunks of 32 MiB multiples going *down* the address space, places each
//!   allocation at the bottom of its chunk, and fills the space left in earlier chunks (lowest
//!   address first) before carving a new one; freed ranges are reused the same way.
//!   `cuMemAddressReserve` (expandable segments) reserves going *up*, in a separate range.
//!   A fresh process on that machine also had two free ranges above the first chunk (2 MiB at
//!   +414 MiB and about 22 MiB at +488 MiB, left by the CUDA context's own mappings); they are
//!   part of the model because the first segments of every recorded run landed in them.

use std::collections::BTreeMap;

pub const PAGE: u64 = 2 * 1024 * 1024;

/// Top of the modelled cudaMalloc address space (a typical Linux device VA); chunks go down.
pub const VA_TOP: u64 = 0x7f00_0000_0000;
/// Bottom of the `cuMemAddressReserve` range; reservations go up.
pub const VA_RESERVE_BASE: u64 = 0x7f80_0000_0000;
/// Granularity of the driver's address chunks for cudaMalloc.
pub const VA_CHUNK: u64 = 32 * 1024 * 1024;

#[inline]
pub fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

#[derive(Clone, Debug)]
pub struct Device {
    /// `cudaMemGetInfo` total (`totalGlobalMem`).
    pub total: u64,
    /// Free memory at replay start: what cudaMalloc can get.
    pub free_at_start: u64,
    /// Physical bytes this replay holds now.
    pub used: u64,
    va: Va,
    reserve_next: u64,
}

impl Device {
    pub fn new(total: u64, free_at_start: u64) -> Self {
        Device {
            total,
            free_at_start,
            used: 0,
            va: Va::new(),
            reserve_next: VA_RESERVE_BASE,
        }
    }

    /// `cudaMemGetInfo` free, as the OOM message reports it.
    pub fn free_now(&self) -> u64 {
        self.free_at_start.saturating_sub(self.used)
    }

    /// Would `bytes` of physical memory (already page-rounded) fit?
    #[inline]
    pub fn can_take(&self, bytes: u64) -> bool {
        self.used
            .checked_add(bytes)
            .is_some_and(|u| u <= self.free_at_start)
    }

    /// `cudaMalloc(size)`: an address, or `None` for `cudaErrorMemoryAllocation`.
    pub fn malloc(&mut self, size: u64) -> Option<u64> {
        let phys = round_up(size.max(1), PAGE);
        if !self.can_take(phys) {
            return None;
        }
        self.used += phys;
        Some(self.va.alloc(phys))
    }

    pub fn free(&mut self, addr: u64, size: u64) {
        let phys = round_up(size.max(1), PAGE);
        self.used -= phys;
        self.va.free(addr, phys);
    }

    /// `cuMemAddressReserve(size)` (no physical memory).
    pub fn reserve(&mut self, size: u64) -> u64 {
        let a = self.reserve_next;
        self.reserve_next += round_up(size, VA_CHUNK);
        a
    }

    pub fn unreserve(&mut self, _addr: u64, _size: u64) {}

    /// `cuMemCreate` of `n` handles of `handle_size` bytes each, all or nothing (the allocator
    /// releases the ones it made when one fails).
    pub fn create_handles(&mut self, n: u64, handle_size: u64) -> bool {
        let phys = n * round_up(handle_size, PAGE);
        if !self.can_take(phys) {
            return false;
        }
        self.used += phys;
        true
    }

    pub fn release_handles(&mut self, n: u64, handle_size: u64) {
        self.used -= n * round_up(handle_size, PAGE);
    }
}

/// The cudaMalloc address model: holes inside carved chunks, filled lowest address first;
/// otherwise a new chunk (size rounded up to 32 MiB) below everything carved so far.
#[derive(Clone, Debug)]
struct Va {
    /// Bottom of the carved region.
    low: u64,
    /// Free ranges inside carved chunks: start -> len.
    holes: BTreeMap<u64, u64>,
}

impl Va {
    fn new() -> Self {
        let mut holes = BTreeMap::new();
        holes.insert(VA_TOP + 414 * 1024 * 1024, 2 * 1024 * 1024);
        holes.insert(VA_TOP + 488 * 1024 * 1024, 22 * 1024 * 1024);
        Va { low: VA_TOP, holes }
    }

    fn alloc(&mut self, size: u64) -> u64 {
        if let Some((start, len)) = self
            .holes
            .iter()
            .find(|&(_, &len)| len >= size)
            .map(|(&s, &l)| (s, l))
        {
            self.holes.remove(&start);
            if len > size {
                self.holes.insert(start + size, len - size);
            }
            return start;
        }
        let chunk = round_up(size, VA_CHUNK);
        self.low -= chunk;
        if chunk > size {
            self.insert_hole(self.low + size, chunk - size);
        }
        self.low
    }

    fn free(&mut self, addr: u64, size: u64) {
        self.insert_hole(addr, size);
    }

    fn insert_hole(&mut self, addr: u64, size: u64) {
        let mut start = addr;
        let mut len = size;
        if let Some((&ps, &pl)) = self.holes.range(..addr).next_back()
            && ps + pl == addr
        {
            self.holes.remove(&ps);
            start = ps;
            len += pl;
        }
        if let Some(&nl) = self.holes.get(&(addr + size)) {
            self.holes.remove(&(addr + size));
            len += nl;
        }
        self.holes.insert(start, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_go_down_and_holes_fill_lowest_first() {
        // the pattern recorded on the H200 (churn trace): 38 MiB, 62 MiB, 2 MiB, 134 MiB, 20 MiB
        const M: u64 = 1 << 20;
        let mut d = Device::new(1 << 40, 1 << 40);
        d.va.holes.clear();
        let a = d.malloc(38 * M).unwrap();
        let b = d.malloc(62 * M).unwrap();
        assert_eq!(a - b, 64 * M);
        let c = d.malloc(2 * M).unwrap();
        assert_eq!(c, b + 62 * M); // the 2 MiB left in b's chunk
        let e = d.malloc(134 * M).unwrap();
        assert_eq!(b - e, 160 * M);
        let f = d.malloc(20 * M).unwrap();
        assert_eq!(f, e + 134 * M); // the lowest hole that fits (26 MiB left in e's chunk)
        d.free(b, 62 * M);
        // the freed range merges with the 6 MiB left above f: the lowest fit starts there
        assert_eq!(d.malloc(60 * M).unwrap(), f + 20 * M);
    }

    #[test]
    fn the_first_segments_use_the_context_holes() {
        // model trace on the H200: 64 MiB at 0, then 20 MiB at +552 and 2 MiB at +478
        const M: u64 = 1 << 20;
        let mut d = Device::new(1 << 40, 1 << 40);
        let a = d.malloc(64 * M).unwrap();
        assert_eq!(d.malloc(20 * M).unwrap(), a + 552 * M);
        assert_eq!(d.malloc(2 * M).unwrap(), a + 478 * M);
        assert_eq!(d.malloc(16 * M).unwrap(), a - 32 * M);
        // resolution trace: 2 MiB at 0, then 20 MiB at +74
        let mut d = Device::new(1 << 40, 1 << 40);
        let a = d.malloc(2 * M).unwrap();
        assert_eq!(d.malloc(20 * M).unwrap(), a + 74 * M);
    }

    #[test]
    fn physical_limit_counts_pages() {
        let mut d = Device::new(10 * PAGE, 4 * PAGE);
        assert!(d.malloc(3 * PAGE + 1).is_some()); // takes 4 pages
        assert!(d.malloc(1).is_none());
        assert_eq!(d.free_now(), 0);
    }
}
