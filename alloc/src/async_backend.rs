//! `backend:cudaMallocAsync` (`c10/cuda/CUDAMallocAsyncAllocator.cpp`): PyTorch keeps no cache
//! of its own; every allocation is `cudaMallocAsync` on the device's default memory pool (release
//! threshold UINT64_MAX, so the pool never shrinks by itself) and every free is `cudaFreeAsync`.
//!
//! Exact (from PyTorch's source):
//! * `allocated_bytes` / `active_bytes` are the driver's used bytes: the exact requested sizes,
//!   no 512-byte rounding;
//! * the only limit PyTorch applies is `set_per_process_memory_fraction(f)`:
//!   `used + size > f x cudaMemGetInfo total` fails before the driver is called; the
//!   `per_process_memory_fraction` config key, `max_split_size_mb`, `roundup_power2_divisions`,
//!   `garbage_collection_threshold`, `expandable_segments` and `large_segment_size_mb` are all
//!   ignored (and not even validated: the config is never parsed beyond `backend`);
//! * no retries, so `num_alloc_retries` stays 0; the native counters (`num_device_alloc`, ...)
//!   are all 0 (`memory_stats()` fills only allocated/active/reserved bytes).
//!
//! Measured (the driver's pool is not documented; H200, driver 580 / CUDA 13, bare processes
//! replaying the fidelity traces with cuMemAllocAsync, `alloc/fidelity/pool_probe.py`):
//! * physical memory is held in 32 MiB chunks that back whichever 32 MiB chunks of the pool's
//!   address range hold live allocations; memory of an emptied address chunk backs new addresses
//!   elsewhere, so `ReservedMemCurrent` is the most address chunks ever touched at once
//!   ([`Backing`]; exact after each of 216,850 operations of seven traces, given the driver's
//!   addresses);
//! * growing needs the new chunks in free device memory, else the allocation fails (OOM);
//! * `empty_cache()` trims the pool (`cudaMemPoolTrimTo(pool, 0)`): the chunks no allocation
//!   touches go back to the device.
//!
//! Approximate: where an allocation goes. The driver's rule was not found: given the driver's own
//! state before each allocation, best fit predicts 14-43 % of its choices, most recently freed
//! 14-50 %, first freed 2-17 %, and 12-30 % of its choices are not at the start of a free range
//! at all. The model takes the most recently freed range that fits (coalesced,
//! 512-byte granules), else the end of the used range, which gives the driver's peak reserved
//! bytes within -2.4 % to +1.4 % on the four traces it was chosen on and -1.1 %, -3.2 % and
//! -9.2 % on three hold-out traces (`alloc/tests/pool.rs`): mostly a little low.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::device::Device;

pub const CHUNK: u64 = 32 << 20;
pub const ALIGN: u64 = 512;
/// Device memory the driver's pool would not take: on the H200 it stopped growing with 95 MiB
/// free and grew with 127 MiB free (a 32 MiB step), so its margin is between 64 and 95 MiB.
pub const POOL_DEVICE_RESERVE: u64 = 64 << 20;

/// Why a cudaMallocAsync allocation failed.
#[derive(Clone, Debug, PartialEq)]
pub struct AsyncOom {
    pub requested: u64,
    pub used: u64,
    pub device_total: u64,
    pub device_free: u64,
    /// `pytorch_memory_limits[device]` (UINT64_MAX when no fraction was set).
    pub limit: u64,
}

/// Offsets are multiples of 512 and distinct keys: one multiply spreads them well enough, and
/// the replay needs no protection against adversarial keys.
#[derive(Default, Clone, Copy)]
struct OffsetHasher(u64);

impl Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v >> 9).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type OffsetMap<V> = HashMap<u64, V, BuildHasherDefault<OffsetHasher>>;

/// The pool's physical memory. It is held in 32 MiB chunks that back the 32 MiB-aligned chunks
/// of the pool's address range where live allocations are; a chunk of addresses left with no
/// allocation gives its memory back to the pool (not to the device), to back addresses elsewhere.
/// So the pool holds the most chunks that were ever touched at once, and grows only when an
/// allocation touches more chunks than it holds. Measured: with the driver's own placements
/// (`alloc/fidelity/pool_probe.py`), this is `ReservedMemCurrent` after every one of 216,850
/// operations of seven traces (`alloc/tests/pool.rs`), while the address range grew to 1.1 to
/// 2.2 times that.
#[derive(Clone, Debug, Default)]
pub struct Backing {
    /// Live allocations touching each chunk of the address range.
    users: Vec<u32>,
    /// Chunks with at least one live allocation.
    touched: u64,
    /// Chunks of physical memory held (`ReservedMemCurrent` / 32 MiB).
    held: u64,
}

impl Backing {
    fn chunks(start: u64, len: u64) -> std::ops::RangeInclusive<usize> {
        (start / CHUNK) as usize..=((start + len.max(1) - 1) / CHUNK) as usize
    }

    pub fn held_bytes(&self) -> u64 {
        self.held * CHUNK
    }

    /// Bytes the pool must take from the device to back `[start, start + len)`.
    pub fn growth(&self, start: u64, len: u64) -> u64 {
        let chunks = Self::chunks(start, len);
        let (first, last, known) = (*chunks.start(), *chunks.end(), self.users.len());
        // chunks past the end of `users` have never been touched; nothing is allocated here, so
        // a request far larger than the device costs nothing before it is refused
        let beyond = (last + 1).saturating_sub(known.max(first)) as u64;
        let fresh: u64 = if first >= known {
            0
        } else if first == last {
            // most allocations lie inside one chunk: no loop whose length the CPU must guess
            u64::from(self.users[first] == 0)
        } else {
            self.users[first..=last.min(known - 1)].iter().map(|&u| u64::from(u == 0)).sum()
        };
        (self.touched + fresh + beyond).saturating_sub(self.held) * CHUNK
    }

    /// A live allocation at `[start, start + len)` (after `growth` for the same range).
    pub fn map(&mut self, start: u64, len: u64) {
        let chunks = Self::chunks(start, len);
        if self.users.len() <= *chunks.end() {
            self.users.resize(chunks.end() + 1, 0);
        }
        if chunks.start() == chunks.end() {
            let u = &mut self.users[*chunks.start()];
            self.touched += u64::from(*u == 0);
            *u += 1;
        } else {
            for u in &mut self.users[chunks] {
                self.touched += u64::from(*u == 0);
                *u += 1;
            }
        }
        self.held = self.held.max(self.touched);
    }

    /// The allocation at `[start, start + len)` is freed.
    pub fn unmap(&mut self, start: u64, len: u64) {
        let chunks = Self::chunks(start, len);
        if chunks.start() == chunks.end() {
            let u = &mut self.users[*chunks.start()];
            *u -= 1;
            self.touched -= u64::from(*u == 0);
        } else {
            for u in &mut self.users[chunks] {
                *u -= 1;
                self.touched -= u64::from(*u == 0);
            }
        }
    }

    /// `cudaMemPoolTrimTo(pool, 0)`: every chunk no allocation touches goes back to the device;
    /// the bytes given back.
    pub fn trim(&mut self) -> u64 {
        let freed = (self.held - self.touched) * CHUNK;
        self.held = self.touched;
        freed
    }
}

/// Free ranges in the order they were freed, for "the most recently freed range that fits":
/// each range holds a slot in an append-only array (a later slot = freed later), and every 64
/// slots keep the longest length among them, so the search reads the blocks' maxima from the
/// newest back and then one block. Dead slots are squeezed out once they outnumber the live
/// ones. (The pool rarely holds more than a few dozen free ranges, so this stays small.)
#[derive(Clone, Debug, Default)]
struct Recency {
    /// Length of the range in each slot (0 = dead).
    lens: Vec<u64>,
    /// Start of the range in each slot.
    starts: Vec<u64>,
    /// The longest length in each block of `BLOCK` slots.
    block_max: Vec<u64>,
    live: usize,
}

const BLOCK: usize = 64;

impl Recency {
    fn set(&mut self, slot: usize, len: u64) {
        let old = std::mem::replace(&mut self.lens[slot], len);
        let b = slot / BLOCK;
        if len >= self.block_max[b] {
            self.block_max[b] = len;
        } else if old == self.block_max[b] {
            let end = ((b + 1) * BLOCK).min(self.lens.len());
            self.block_max[b] = self.lens[b * BLOCK..end].iter().copied().max().unwrap_or(0);
        }
    }

    fn push(&mut self, start: u64, len: u64) -> usize {
        let slot = self.lens.len();
        if slot.is_multiple_of(BLOCK) {
            self.block_max.push(0);
        }
        self.lens.push(0);
        self.starts.push(start);
        self.live += 1;
        self.set(slot, len);
        slot
    }

    /// The latest slot whose range holds at least `len` bytes.
    fn latest_fit(&self, len: u64) -> Option<usize> {
        let b = self.block_max.iter().rposition(|&m| m >= len)?;
        let end = ((b + 1) * BLOCK).min(self.lens.len());
        self.lens[b * BLOCK..end].iter().rposition(|&l| l >= len).map(|i| b * BLOCK + i)
    }
}

#[derive(Clone, Debug)]
pub struct AsyncPool {
    /// Free ranges below the pool's end, by start: start -> (len, slot in `recency`). Free
    /// ranges never touch (they coalesce), so a neighbour is an exact lookup by start or by end.
    free_by_start: OffsetMap<(u64, u32)>,
    /// The same ranges by end: end -> start.
    free_by_end: OffsetMap<u64>,
    recency: Recency,
    /// End of the used address range: above it everything is free.
    end: u64,
    backing: Backing,
    /// Sum of requested bytes of live allocations (`pytorch_used_bytes`).
    pub used: u64,
    pub limit: u64,
    pub peak_used: u64,
    pub peak_reserved: u64,
    pub device: Device,
}

impl AsyncPool {
    pub fn new(device: Device, fraction: Option<f64>) -> Self {
        let limit = match fraction {
            Some(f) => (f * device.total as f64) as u64,
            None => u64::MAX,
        };
        AsyncPool {
            free_by_start: OffsetMap::default(),
            free_by_end: OffsetMap::default(),
            recency: Recency::default(),
            end: 0,
            backing: Backing::default(),
            used: 0,
            limit,
            peak_used: 0,
            peak_reserved: 0,
            device,
        }
    }

    pub fn reserved(&self) -> u64 {
        self.backing.held_bytes()
    }

    /// A new slot at the recent end of the order, first squeezing out the dead slots when they
    /// outnumber the live ones.
    fn new_slot(&mut self, start: u64, len: u64) -> u32 {
        if self.recency.lens.len() - self.recency.live > self.recency.live.max(BLOCK) {
            let old = std::mem::take(&mut self.recency);
            for (&l, &st) in old.lens.iter().zip(&old.starts) {
                if l > 0 {
                    let n = self.recency.push(st, l);
                    self.free_by_start.get_mut(&st).expect("a live slot has its range").1 = n as u32;
                }
            }
        }
        self.recency.push(start, len) as u32
    }

    fn take_free(&mut self, start: u64) -> u64 {
        let (len, slot) = self.free_by_start.remove(&start).expect("a free range");
        self.free_by_end.remove(&(start + len));
        self.recency.set(slot as usize, 0);
        self.recency.live -= 1;
        len
    }

    /// Frees `[start, start + len)`: merged with its free neighbours it becomes the most recently
    /// freed range, or, when it reaches the end, the used range shrinks.
    fn add_free(&mut self, start: u64, len: u64) {
        let mut s = start;
        let mut e = start + len;
        if let Some(&ps) = self.free_by_end.get(&start) {
            self.take_free(ps);
            s = ps;
        }
        if self.free_by_start.contains_key(&e) {
            e += self.take_free(e);
        }
        if e == self.end {
            self.end = s;
            return;
        }
        let slot = self.new_slot(s, e - s);
        self.free_by_start.insert(s, (e - s, slot));
        self.free_by_end.insert(e, s);
    }

    /// `mallocAsync`: the offset inside the pool, or the OOM.
    pub fn malloc(&mut self, size: u64) -> Result<u64, AsyncOom> {
        let oom = |p: &Self| AsyncOom { requested: size, used: p.used, device_total: p.device.total, device_free: p.device.free_now(), limit: p.limit };
        if self.used.checked_add(size).is_none_or(|u| u > self.limit) {
            return Err(oom(self));
        }
        let sz = size.div_ceil(ALIGN) * ALIGN;
        // Where: the most recently freed range that fits, else the end of the used range.
        let slot = self.recency.latest_fit(sz);
        let start = match slot {
            Some(slot) => self.recency.starts[slot],
            None => self.end,
        };
        let grow = self.backing.growth(start, sz);
        if grow > 0 && !self.device.can_take(grow + POOL_DEVICE_RESERVE) {
            return Err(oom(self));
        }
        match slot {
            Some(slot) => {
                let len = self.recency.lens[slot];
                if len > sz {
                    // the rest keeps the range's place in the order
                    let rest = start + sz;
                    self.free_by_start.remove(&start);
                    self.free_by_start.insert(rest, (len - sz, slot as u32));
                    *self.free_by_end.get_mut(&(start + len)).expect("a free range") = rest;
                    self.recency.starts[slot] = rest;
                    self.recency.set(slot, len - sz);
                } else {
                    self.take_free(start);
                }
            }
            None => self.end += sz,
        }
        self.backing.map(start, sz);
        self.device.used += grow;
        self.used += size;
        self.peak_used = self.peak_used.max(self.used);
        self.peak_reserved = self.peak_reserved.max(self.reserved());
        Ok(start)
    }

    /// `freeAsync` of an allocation made at `offset` with `size` bytes.
    pub fn free(&mut self, offset: u64, size: u64) {
        self.used -= size;
        let sz = size.div_ceil(ALIGN) * ALIGN;
        self.backing.unmap(offset, sz);
        self.add_free(offset, sz);
    }

    /// `emptyCache`: `cudaDeviceSynchronize` + `cudaMemPoolTrimTo(pool, 0)`: the pool gives back
    /// every chunk no allocation touches.
    pub fn empty_cache(&mut self) {
        self.device.used -= self.backing.trim();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const MIB: u64 = 1 << 20;

    fn pool() -> AsyncPool {
        AsyncPool::new(Device::new(150_109_880_320, 150_109_880_320), None)
    }

    /// The pool against a plain reference (a list of free ranges with the time each was
    /// freed, scanned in full) on a random workload long enough to squeeze the recency array
    /// many times.
    #[test]
    fn placement_is_the_most_recently_freed_range_that_fits() {
        struct Reference {
            free: Vec<(u64, u64, u64)>, // (start, len, time)
            end: u64,
            time: u64,
        }
        impl Reference {
            fn malloc(&mut self, sz: u64) -> u64 {
                let best = self.free.iter().enumerate().filter(|(_, f)| f.1 >= sz).max_by_key(|(_, f)| f.2).map(|(i, _)| i);
                match best {
                    Some(i) => {
                        let (s, l, t) = self.free[i];
                        if l > sz {
                            self.free[i] = (s + sz, l - sz, t);
                        } else {
                            self.free.remove(i);
                        }
                        s
                    }
                    None => {
                        self.end += sz;
                        self.end - sz
                    }
                }
            }
            fn free(&mut self, mut s: u64, len: u64) {
                let mut e = s + len;
                if let Some(i) = self.free.iter().position(|f| f.0 + f.1 == s) {
                    s = self.free.remove(i).0;
                }
                if let Some(i) = self.free.iter().position(|f| f.0 == e) {
                    e += self.free.remove(i).1;
                }
                self.time += 1;
                if e == self.end {
                    self.end = s;
                } else {
                    self.free.push((s, e - s, self.time));
                }
            }
        }
        let mut p = pool();
        let mut r = Reference { free: Vec::new(), end: 0, time: 0 };
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rand = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for step in 0..40_000 {
            if live.len() < 300 && (live.is_empty() || rand() % 100 < 55) {
                let size = 1 + rand() % (1u64 << (9 + rand() % 18));
                let sz = size.div_ceil(ALIGN) * ALIGN;
                let off = p.malloc(size).unwrap();
                assert_eq!(off, r.malloc(sz), "step {step}: malloc({size})");
                live.push((off, size));
            } else {
                let (off, size) = live.swap_remove((rand() % live.len() as u64) as usize);
                p.free(off, size);
                r.free(off, size.div_ceil(ALIGN) * ALIGN);
            }
        }
        assert!(p.recency.lens.len() >= BLOCK);
    }

    #[test]
    fn memory_of_emptied_chunks_backs_new_addresses_and_trim_gives_it_back() {
        let mut p = pool();
        // a, b, c each in its own chunk; freeing b leaves its chunk untouched
        let a = p.malloc(32 * MIB).unwrap();
        let b = p.malloc(32 * MIB).unwrap();
        let _c = p.malloc(32 * MIB).unwrap();
        assert_eq!(p.reserved(), 96 * MIB);
        p.free(b, 32 * MIB);
        // 40 MiB does not fit b's range: it goes to the end, touching two new chunks; one is
        // backed by b's memory, one is new
        p.malloc(40 * MIB).unwrap();
        assert_eq!(p.reserved(), 128 * MIB);
        assert_eq!(p.device.used, 128 * MIB);
        p.free(a, 32 * MIB);
        p.empty_cache();
        assert_eq!(p.reserved(), 96 * MIB);
        assert_eq!(p.device.used, 96 * MIB);
    }

    #[test]
    fn a_request_far_beyond_the_device_is_refused_without_allocating_for_it() {
        let mut p = pool();
        p.malloc(MIB).unwrap();
        // 2^59 bytes: 2^34 chunks, which a per-chunk table would need 64 GiB for
        assert!(p.malloc(1 << 59).is_err());
        assert!(p.backing.users.len() < 8);
        assert_eq!(p.reserved(), 32 * MIB);
    }

    #[test]
    fn growth_matches_the_h200_probe() {
        // probe_details.py async_growth: sizes kept alive, ReservedMemCurrent after each
        let mut p = pool();
        let steps = [
            (1000, 32),
            (512 * 1024, 32),
            (MIB, 32),
            (2 * MIB + 1, 32),
            (5 * MIB, 32),
            (10 * MIB, 32),
            (33 * MIB, 64),
            (64 * MIB, 128),
            (100 * MIB + 1000, 224),
            (300 * MIB, 544),
            (700 * MIB, 1216),
            (1024 * MIB + 5, 2240),
        ];
        for (size, reserved_mib) in steps {
            p.malloc(size).unwrap();
            assert_eq!(p.reserved(), reserved_mib * MIB, "after {size}");
        }
    }

    #[test]
    fn holes_are_reused_and_the_pool_never_shrinks() {
        // probe: 64 x 8 MiB = 512; free every other; 32 x 12 MiB grows to 896; 32 x 3 MiB fit the holes
        let mut p = pool();
        let offs: Vec<u64> = (0..64).map(|_| p.malloc(8 * MIB).unwrap()).collect();
        assert_eq!(p.reserved(), 512 * MIB);
        for o in offs.iter().step_by(2) {
            p.free(*o, 8 * MIB);
        }
        assert_eq!(p.reserved(), 512 * MIB);
        for _ in 0..32 {
            p.malloc(12 * MIB).unwrap();
        }
        assert_eq!(p.reserved(), 896 * MIB);
        for _ in 0..32 {
            p.malloc(3 * MIB).unwrap();
        }
        assert_eq!(p.reserved(), 896 * MIB);
    }

    #[test]
    fn fraction_limit_uses_exact_bytes_and_device_limit_the_growth() {
        let total = 150_109_880_320u64;
        let mut p = AsyncPool::new(Device::new(total, total), Some(0.001));
        let limit = (0.001 * total as f64) as u64;
        assert_eq!(p.limit, limit);
        p.malloc(limit - 10).unwrap();
        assert!(p.malloc(11).is_err());
        p.malloc(10).unwrap();
        // device free: 2047.125 MiB after the ballast (probe async_free)
        let mut p = AsyncPool::new(Device::new(total, 2_146_566_144), None);
        let a = p.malloc(1536 * MIB).unwrap();
        p.free(a, 1536 * MIB);
        p.malloc(1843 * MIB).unwrap();
        assert_eq!(p.reserved(), 1856 * MIB);
    }
}
