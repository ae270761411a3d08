//! The standard suite on one device, written once against the `Device` trait: the real GPU
//! (cuda.rs) and the simulated one (sim.rs) run exactly the same steps.

use std::time::Instant;

use crate::measure::*;
use crate::report::*;

/// Below this much free memory the probe refuses to start (its copy buffers alone need 256 MiB).
pub const MIN_FREE_BYTES: u64 = 384 * MIB;

fn step(e: DeviceError) -> ProbeError {
    ProbeError::device("measurement")(e)
}

/// Runs every measurement on `dev` (device number `index`) and returns the report. Checks first
/// that the device is a whole GPU with enough free memory; frees everything on every path.
pub fn run<D: Device>(dev: &mut D, index: u32, install_id: &str, progress: &mut dyn FnMut(&str)) -> Result<Report, ProbeError> {
    let started = Instant::now();
    let id = dev.identity().map_err(step)?;
    if id.name.contains("MIG") {
        return Err(ProbeError::Mig { index, name: id.name });
    }
    let total = dev.total_bytes().map_err(step)?;
    let free = dev.free_bytes().map_err(step)?;
    if free < MIN_FREE_BYTES {
        return Err(ProbeError::TooLittleMemory { index, free, need: MIN_FREE_BYTES });
    }
    // Copies first, before the capacity searches fill and empty the device: measured after them
    // on the H200, pinned host->device ran at half speed in most runs and pageable copies at half
    // too, unlike a PyTorch process's (probe/README.md, "Compared with PyTorch").
    progress("host-device bandwidth");
    let bw_bytes = (256 * MIB).min(free / 4 / (2 * MIB) * (2 * MIB));
    let bandwidth = dev.bandwidth(bw_bytes, 10).map_err(step)?;
    progress("context overhead");
    let context = dev.context_bytes().map_err(step)?;
    progress("largest single allocation");
    let largest = largest_allocation(dev, 64 * MIB).map_err(step)?;
    progress("usable capacity");
    let usable = usable_capacity(dev, 1024 * MIB, 2 * MIB).map_err(step)?;
    progress("allocation latency (cuMemAlloc)");
    let sizes: Vec<u64> = [2, 8, 32, 128, 512, 2048, 8192].iter().map(|m| m * MIB).collect();
    let latency = alloc_latency(dev, &sizes, 20).map_err(step)?;
    progress("stream-ordered pool (cuMemAllocAsync)");
    let pool_sizes: Vec<u64> = [2, 32, 512, 2048].iter().map(|m| m * MIB).collect();
    let (threshold, alloc_async) = pool_latency(dev, &pool_sizes, 10).map_err(step)?;
    progress("virtual memory mapping (cuMemCreate/cuMemMap)");
    let (granularity, recommended, map) = vmm_latency(dev, &pool_sizes, 10).map_err(step)?;
    progress("fragmentation");
    let fragmentation = fragmentation(dev, 256 * MIB, 0.5, 64 * MIB).map_err(step)?;
    let free_after = dev.free_bytes().map_err(step)?;
    Ok(Report {
        schema_version: SCHEMA_VERSION,
        probe_version: env!("CARGO_PKG_VERSION").to_string(),
        run_seconds: (started.elapsed().as_secs_f64() * 1000.0).round() / 1000.0,
        device: ReportDevice {
            uuid_hash: crate::identity::uuid_hash(install_id, &id.uuid),
            install_id: install_id.to_string(),
            index: u64::from(index),
            name: id.name,
            compute_capability: id.compute_capability,
            driver_cuda_version: id.driver_cuda_version,
            pci_bus_id: id.pci_bus_id,
        },
        memory: Memory {
            total_bytes: total,
            free_bytes_with_context: free,
            context_bytes: context,
            largest_allocation_bytes: largest,
            usable_bytes: usable,
            free_bytes_after: free_after,
        },
        latency,
        pools: Pools { release_threshold_bytes: threshold, alloc_async },
        vmm: Vmm { granularity_bytes: granularity, recommended_granularity_bytes: recommended, map },
        bandwidth,
        fragmentation,
        // filled in by the shell, which runs each case in a process of its own (alloc_check.rs)
        allocator_check: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{SimDevice, parse_specs};

    const ID: &str = "0123456789abcdef0123456789abcdef";

    fn report(spec: &str) -> Result<(Report, SimDevice), ProbeError> {
        let specs = parse_specs(spec).unwrap();
        let mut d = SimDevice::from_spec(&specs[0], 0);
        run(&mut d, 0, ID, &mut |_| {}).map(|r| (r, d))
    }

    #[test]
    fn the_suite_on_a_simulated_card_matches_the_schema_and_leaves_nothing_behind() {
        let (r, d) = report("gpu=12").unwrap();
        assert_eq!(d.used_bytes(), 0);
        assert_eq!(r.memory.total_bytes, 12 << 30);
        assert_eq!(r.memory.usable_bytes, 12 << 30);
        assert_eq!(r.memory.free_bytes_after, r.memory.free_bytes_with_context);
        assert_eq!(r.latency.len(), 7, "every size up to 8 GiB fits in 12 GiB: {:?}", r.latency.iter().map(|l| l.bytes >> 20).collect::<Vec<_>>());
        assert_eq!(r.pools.alloc_async.len(), 4);
        assert!(r.pools.alloc_async.iter().all(|p| p.samples == 10));
        // The second request of every sample was served from what the first left in the pool.
        assert_eq!(d.pool_hits, 4 * 10);
        assert_eq!(r.vmm.granularity_bytes, 2 << 20);
        assert_eq!(r.vmm.map.len(), 4);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(crate::schema::validate_report(&v), Vec::<String>::new());
        assert!(r.device.name.contains("simulated"));
        assert_ne!(r.device.uuid_hash, "");
    }

    #[test]
    fn a_mig_slice_and_a_nearly_full_card_are_refused_before_any_allocation() {
        let e = report("mig").err().unwrap();
        assert_eq!(e.exit_code(), EXIT_MIG, "{e}");
        assert!(e.to_string().contains("MIG slice"), "{e}");
        let e = report("full").err().unwrap();
        assert_eq!(e.exit_code(), EXIT_TOO_LITTLE_MEMORY);
        assert!(e.to_string().contains("only 128 MiB free"), "{e}");
    }

    #[test]
    fn other_processes_memory_is_not_counted_as_usable() {
        let specs = vec![SimSpec { other_used: 2 << 30, ..parse_specs("gpu").unwrap()[0].clone() }];
        let mut d = SimDevice::from_spec(&specs[0], 0);
        let r = run(&mut d, 0, ID, &mut |_| {}).unwrap();
        assert_eq!(r.memory.usable_bytes, 6 << 30);
        assert_eq!(d.used_bytes(), 0);
    }

    use crate::sim::SimSpec;

    #[test]
    fn an_interrupt_during_the_pool_step_releases_the_pool() {
        let mut d = SimDevice::new(4 << 30);
        assert!(pool_latency(&mut d, &[2 << 20], 3).is_ok());
        assert_eq!(d.used_bytes(), 0);
        d.stop = true;
        assert_eq!(pool_latency(&mut d, &[2 << 20], 3).unwrap_err(), DeviceError::Interrupted);
        assert_eq!(d.used_bytes(), 0);
        assert_eq!(vmm_latency(&mut d, &[2 << 20], 3).unwrap_err(), DeviceError::Interrupted);
        assert_eq!(d.used_bytes(), 0);
    }

    #[test]
    fn vmm_sizes_are_rounded_to_the_granularity_and_every_step_is_undone() {
        let mut d = SimDevice::new(4 << 30);
        let (g, _, v) = vmm_latency(&mut d, &[3 << 20, 1 << 30, 8 << 30], 4).unwrap();
        assert_eq!(g, 2 << 20);
        assert_eq!(v.iter().map(|x| x.bytes).collect::<Vec<_>>(), vec![4 << 20, 1 << 30], "8 GiB does not fit");
        assert_eq!(v[0].samples, 4);
        assert_eq!(d.used_bytes(), 0);
    }
}
