//! The counters of `torch.cuda.memory_stats()` that the model keeps.

use serde::Serialize;

/// One `c10::CachingDeviceAllocator::Stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Stat {
    pub current: i64,
    pub peak: i64,
    pub allocated: i64,
    pub freed: i64,
}

impl Stat {
    #[inline]
    pub fn increase(&mut self, amount: u64) {
        let a = amount as i64;
        self.current += a;
        self.allocated += a;
        if self.current > self.peak {
            self.peak = self.current;
        }
    }

    #[inline]
    pub fn decrease(&mut self, amount: u64) {
        let a = amount as i64;
        self.current -= a;
        self.freed += a;
    }
}

/// `StatArray`: all / small_pool / large_pool.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StatArray {
    pub all: Stat,
    pub small_pool: Stat,
    pub large_pool: Stat,
}

impl StatArray {
    #[inline]
    pub fn increase(&mut self, small: bool, amount: u64) {
        self.all.increase(amount);
        if small { self.small_pool.increase(amount) } else { self.large_pool.increase(amount) }
    }

    #[inline]
    pub fn decrease(&mut self, small: bool, amount: u64) {
        self.all.decrease(amount);
        if small { self.small_pool.decrease(amount) } else { self.large_pool.decrease(amount) }
    }
}

/// `DeviceStats`, as `torch.cuda.memory_stats()` names them (`allocation`, not `allocated`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeviceStats {
    pub allocation: StatArray,
    pub segment: StatArray,
    pub active: StatArray,
    pub inactive_split: StatArray,
    pub allocated_bytes: StatArray,
    pub reserved_bytes: StatArray,
    pub active_bytes: StatArray,
    pub inactive_split_bytes: StatArray,
    pub requested_bytes: StatArray,
    pub num_alloc_retries: u64,
    pub num_ooms: u64,
    pub num_sync_all_streams: u64,
    pub num_device_alloc: u64,
    pub num_device_free: u64,
    pub oversize_allocations: Stat,
    pub oversize_segments: Stat,
    /// -1 = unlimited.
    pub max_split_size: i64,
}
