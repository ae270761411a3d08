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
//! Approximate (the driver's pool is not documented; fitted to measurements on an H200 with
//! driver 580 / CUDA 13, see `alloc/fidelity/probe_details.py`):
//! * the pool is one address range per device that grows at its end in 32 MiB steps
//!   (`ReservedMemCurrent` moves in 32 MiB steps), an allocation that does not fit a free range
//!   may use the free range at the end of the pool and extend it;
//! * allocations are packed at 512-byte alignment, best fit (smallest free range, lowest
//!   address), freed ranges coalesce and are reused at once on any stream;
//! * growing needs the extension in free device memory, else the allocation fails (OOM);
//! * `empty_cache()` trims the pool to its used size (`cudaMemPoolTrimTo(pool, 0)`): here, the
//!   free chunks at the end of the pool.
//!
//! On the probe's 200-step mixed sequence this reproduces the final reserved bytes exactly and
//! is within 96 MiB (one to three 32 MiB chunks) at every step.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::device::Device;
use crate::freeset::FreeSet;

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

type OffsetMap = HashMap<u64, u64, BuildHasherDefault<OffsetHasher>>;

#[derive(Clone, Debug)]
pub struct AsyncPool {
    /// Free ranges inside the pool, by start: start -> len. Free ranges never touch (they
    /// coalesce), so a neighbour is an exact lookup by start or by end.
    free_by_start: OffsetMap,
    /// The same ranges by end: end -> start.
    free_by_end: OffsetMap,
    /// (len, start) for best fit.
    free_by_size: FreeSet,
    /// End of the pool's range (= reserved bytes).
    end: u64,
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
            free_by_size: FreeSet::default(),
            end: 0,
            used: 0,
            limit,
            peak_used: 0,
            peak_reserved: 0,
            device,
        }
    }

    pub fn reserved(&self) -> u64 {
        self.end
    }

    fn add_free(&mut self, start: u64, len: u64) {
        let mut s = start;
        let mut l = len;
        if let Some(ps) = self.free_by_end.remove(&start) {
            let pl = start - ps;
            self.free_by_start.remove(&ps);
            self.free_by_size.remove(pl, ps);
            s = ps;
            l += pl;
        }
        if let Some(nl) = self.free_by_start.remove(&(start + len)) {
            self.free_by_end.remove(&(start + len + nl));
            self.free_by_size.remove(nl, start + len);
            l += nl;
        }
        self.free_by_start.insert(s, l);
        self.free_by_end.insert(s + l, s);
        self.free_by_size.insert(l, s, 0);
    }

    fn take_free(&mut self, start: u64, len: u64) {
        self.free_by_start.remove(&start);
        self.free_by_end.remove(&(start + len));
        self.free_by_size.remove(len, start);
    }

    /// The free range that ends at the pool's end, if any: (start, len).
    fn tail_free(&self) -> Option<(u64, u64)> {
        self.free_by_end.get(&self.end).map(|&s| (s, self.end - s))
    }

    /// `mallocAsync`: the offset inside the pool, or the OOM.
    pub fn malloc(&mut self, size: u64) -> Result<u64, AsyncOom> {
        let oom = |p: &Self| AsyncOom {
            requested: size,
            used: p.used,
            device_total: p.device.total,
            device_free: p.device.free_now(),
            limit: p.limit,
        };
        if self.used.checked_add(size).is_none_or(|u| u > self.limit) {
            return Err(oom(self));
        }
        let sz = size.div_ceil(ALIGN) * ALIGN;
        let fit = self.free_by_size.lower_bound(sz).map(|p| {
            let (l, s, _) = self.free_by_size.get(p);
            (l, s)
        });
        let start = if let Some((l, s)) = fit {
            self.take_free(s, l);
            if l > sz {
                self.add_free(s + sz, l - sz);
            }
            s
        } else {
            // extend the pool at its end, using the free range that ends there
            let start = match self.tail_free() {
                Some((s, _)) => s,
                None => self.end,
            };
            let new_end = (start + sz).div_ceil(CHUNK) * CHUNK;
            let grow = new_end - self.end;
            if !self.device.can_take(grow + POOL_DEVICE_RESERVE) {
                return Err(oom(self));
            }
            self.device.used += grow;
            if start < self.end {
                let l = self.end - start;
                self.take_free(start, l);
            }
            self.end = new_end;
            if new_end > start + sz {
                self.add_free(start + sz, new_end - start - sz);
            }
            start
        };
        self.used += size;
        self.peak_used = self.peak_used.max(self.used);
        self.peak_reserved = self.peak_reserved.max(self.end);
        Ok(start)
    }

    /// `freeAsync` of an allocation made at `offset` with `size` bytes.
    pub fn free(&mut self, offset: u64, size: u64) {
        self.used -= size;
        let sz = size.div_ceil(ALIGN) * ALIGN;
        self.add_free(offset, sz);
    }

    /// `emptyCache`: `cudaDeviceSynchronize` + `cudaMemPoolTrimTo(pool, 0)`.
    pub fn empty_cache(&mut self) {
        if let Some((s, l)) = self.tail_free() {
            let new_end = s.div_ceil(CHUNK) * CHUNK;
            if new_end < self.end {
                self.take_free(s, l);
                self.device.used -= self.end - new_end;
                self.end = new_end;
                if new_end > s {
                    self.add_free(s, new_end - s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const MIB: u64 = 1 << 20;

    fn pool() -> AsyncPool {
        AsyncPool::new(Device::new(150_109_880_320, 150_109_880_320), None)
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
