//! The out-of-memory messages of PyTorch 2.11, character for character.

use crate::async_backend::AsyncOom;
use crate::native::OomKind;

/// `c10::CachingAllocator::format_size`: `std::fixed` with two decimals; "N bytes" up to
/// 1024, then KiB up to 1 MiB, MiB up to 1 GiB, else GiB (so exactly 1 GiB is "1024.00 MiB").
pub fn format_size(size: u64) -> String {
    if size <= 1024 {
        format!("{size} bytes")
    } else if size <= 1_048_576 {
        format!("{} KiB", fixed2(size as f64 / 1024.0))
    } else if size <= 1_073_741_824 {
        format!("{} MiB", fixed2(size as f64 / 1_048_576.0))
    } else {
        format!("{} GiB", fixed2(size as f64 / 1_073_741_824.0))
    }
}

/// `printf("%.2f")` of glibc: the exact binary value, rounded half to even when it is exactly
/// halfway (Rust's `{:.2}` rounds the same way).
fn fixed2(v: f64) -> String {
    format!("{v:.2}")
}

/// The message of `torch.OutOfMemoryError` for the native allocator (`DeviceCachingAllocator::
/// malloc`). `process_memory`: what NVML reports for this process (context, other libraries and
/// the cache included); PyTorch prints it only when NVML is available, so `None` leaves it out.
pub fn native_message(oom: &OomKind, device_index: u32, process_memory: Option<u64>) -> String {
    match oom {
        OomKind::MoreThan1Eb => "CUDA out of memory. Tried to allocate more than 1EB memory.".to_string(),
        OomKind::Native { alloc_size, device_total, device_free, allowed, allocated_bytes, reserved_bytes, .. } => {
            let proc_info = match process_memory {
                Some(m) => format!("Including non-PyTorch memory, this process has {} memory in use. ", format_size(m)),
                None => String::new(),
            };
            let allowed_info = match allowed {
                Some(a) => format!("{} allowed; ", format_size(*a)),
                None => String::new(),
            };
            format!(
                "CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of which {} is free. {}{}Of the allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)",
                format_size(*alloc_size),
                device_index,
                format_size(*device_total),
                format_size(*device_free),
                proc_info,
                allowed_info,
                format_size(*allocated_bytes),
                format_size(reserved_bytes - allocated_bytes),
            )
        }
    }
}

/// The message of `torch.OutOfMemoryError` for `backend:cudaMallocAsync` (`mallocAsync`).
pub fn async_message(oom: &AsyncOom, device_index: u32) -> String {
    format!(
        "Allocation on device {} would exceed allowed memory. (out of memory)\nCurrently allocated     : {}\nRequested               : {}\nDevice limit            : {}\nFree (according to CUDA): {}\nPyTorch limit (set by user-supplied memory fraction)\n                        : {}",
        device_index,
        format_size(oom.used),
        format_size(oom.requested),
        format_size(oom.device_total),
        format_size(oom.device_free),
        format_size(oom.limit),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_size_thresholds() {
        assert_eq!(format_size(0), "0 bytes");
        assert_eq!(format_size(1024), "1024 bytes");
        assert_eq!(format_size(1025), "1.00 KiB");
        assert_eq!(format_size(1 << 20), "1024.00 KiB");
        assert_eq!(format_size((1 << 20) + 1), "1.00 MiB");
        assert_eq!(format_size(20 << 20), "20.00 MiB");
        assert_eq!(format_size(1 << 30), "1024.00 MiB");
        assert_eq!(format_size(150_109_880_320), "139.80 GiB");
        assert_eq!(format_size(u64::MAX), "17179869184.00 GiB");
        // 3.125 MiB is exactly halfway: glibc prints 3.12 (round half to even), as PyTorch did
        assert_eq!(format_size(3_276_800), "3.12 MiB");
        assert_eq!(format_size(150_118_133), "143.16 MiB");
    }

    #[test]
    fn native_message_matches_the_h200() {
        // probe_details.py device_free_default: 51 x 20 MiB with 1023.125 MiB free
        let oom = OomKind::Native {
            alloc_size: 20 << 20,
            rounded: 20 << 20,
            device_total: 150_109_880_320,
            device_free: 3_276_800,
            allowed: None,
            allocated_bytes: 1_069_547_520,
            reserved_bytes: 1_069_547_520,
        };
        let m = native_message(&oom, 0, Some(150_098_000_000));
        assert_eq!(
            m,
            "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 139.80 GiB of which 3.12 MiB is free. Including non-PyTorch memory, this process has 139.79 GiB memory in use. Of the allocated memory 1020.00 MiB is allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"
        );
    }

    #[test]
    fn allowed_info_with_a_fraction() {
        let oom = OomKind::Native {
            alloc_size: 20 << 20,
            rounded: 1_572_864,
            device_total: 150_109_880_320,
            device_free: 147_000_000_000,
            allowed: Some(1_503_238_553),
            allocated_bytes: 0,
            reserved_bytes: 0,
        };
        let m = native_message(&oom, 0, None);
        assert!(m.contains("is free. 1.40 GiB allowed; Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved"), "{m}");
    }

    #[test]
    fn async_message_matches_the_h200() {
        // probe async: 1 GiB under set_per_process_memory_fraction(0.001)
        let oom = AsyncOom { requested: 1 << 30, used: 0, device_total: 150_109_880_320, device_free: 147_714_000_000, limit: 150_109_880 };
        let m = async_message(&oom, 0);
        assert_eq!(
            m,
            "Allocation on device 0 would exceed allowed memory. (out of memory)\nCurrently allocated     : 0 bytes\nRequested               : 1024.00 MiB\nDevice limit            : 139.80 GiB\nFree (according to CUDA): 137.57 GiB\nPyTorch limit (set by user-supplied memory fraction)\n                        : 143.16 MiB"
        );
        assert_eq!(format_size(u64::MAX), "17179869184.00 GiB");
    }
}
