//! Allocations whose out-of-memory error PyTorch catches and goes on from.
//!
//! Most allocations that fail end the program with "CUDA out of memory". A few do not: PyTorch
//! 2.11 catches the allocator's error around them and tries something smaller (cuDNN's next
//! engine configuration, with another workspace). Before the error reaches that `catch`, the
//! allocator has already done everything it does before raising (freed its cached blocks and
//! tried again), so the state a replay continues from is the one the failed allocation left.
//! The replay then skips the allocation (and its free), counts a fallback and goes on.
//!
//! What the fallback then allocates is not in the trace (the trace recorded the uncapped run,
//! where the first candidate fit): the replay says so and bounds it (see
//! [`crate::Fallback::unrecorded_at_most`]).
//!
//! An allocation is recognised by the stack frames a snapshot recorded with it (C++ frames:
//! `torch.cuda.memory._record_memory_history(stacks="all")`), by a frame pattern the user
//! gives, or by its size (JSON traces have no frames).

/// A place in PyTorch 2.11's source that catches an allocation's out-of-memory error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Site {
    /// A substring of the demangled C++ frame name of the function that allocates.
    pub frame: &'static str,
    /// What PyTorch does instead, for the report.
    pub what: &'static str,
}

/// The sites of PyTorch 2.11 (alloc/README.md, "Allocations PyTorch recovers from"): every
/// function of its libraries that catches `c10::OutOfMemoryError` and goes on is in cuDNN's
/// convolutions.
pub const SITES: &[Site] = &[
    // The default path (cudnn.benchmark off), and a cached plan: each engine configuration
    // allocates its own workspace; on failure the next one is tried.
    Site { frame: "run_conv_plan", what: "cuDNN tried its next engine configuration (another workspace)" },
    // cudnn.benchmark on: one shared workspace, retried at half the size on failure.
    Site { frame: "generate_and_filter_plans", what: "cuDNN's benchmark retried its workspace at half the size" },
    // The legacy API (TORCH_CUDNN_V8_API_DISABLED=1): the next algorithm.
    Site { frame: "AlgoIterator<", what: "cuDNN (legacy API) tried its next algorithm" },
];

/// How allocations are recognised as recoverable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Match the built-in [`SITES`] in snapshot frames.
    pub builtin: bool,
    /// More frame-name substrings (snapshots only).
    pub frames: Vec<String>,
    /// Allocations of exactly these sizes in bytes (any trace).
    pub sizes: Vec<u64>,
}

impl Default for Rules {
    fn default() -> Self {
        Rules { builtin: true, frames: Vec::new(), sizes: Vec::new() }
    }
}

impl Rules {
    /// No allocation is recoverable: every failure ends the replay.
    pub fn none() -> Self {
        Rules { builtin: false, frames: Vec::new(), sizes: Vec::new() }
    }

    /// Adds one `--recoverable` value: a size (`536870912`, `512MiB`, `1.5GiB`, `64KB`) or a
    /// frame-name pattern (anything else).
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("--recoverable: empty value (give a size such as 512MiB, or a frame name pattern)".into());
        }
        // A size starts with a digit; a C++ frame name never does.
        if spec.starts_with(|c: char| c.is_ascii_digit()) {
            self.sizes.push(crate::sweep::parse_size(spec).map_err(|e| format!("--recoverable {e}"))?);
        } else {
            self.frames.push(spec.to_string());
        }
        Ok(())
    }

    /// The label of the first rule a stack matches: a built-in site's frame or a user pattern.
    pub fn match_frames<'a>(&self, mut names: impl Iterator<Item = &'a str>) -> Option<String> {
        names.find_map(|n| {
            if self.builtin
                && let Some(s) = SITES.iter().find(|s| n.contains(s.frame))
            {
                return Some(s.frame.to_string());
            }
            self.frames.iter().find(|p| n.contains(p.as_str())).cloned()
        })
    }
}

/// What a site label means, for the report.
pub fn describe(label: &str) -> String {
    match SITES.iter().find(|s| s.frame == label) {
        Some(s) => s.what.to_string(),
        None if label.starts_with("size ") => format!("an allocation of {} marked recoverable", &label[5..]),
        None => format!("an allocation under a frame matching \"{label}\" marked recoverable"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_patterns() {
        let mut r = Rules::none();
        assert!(r.add("512MiB").is_ok());
        r.add("1000").unwrap();
        r.add("1.5GiB").unwrap();
        r.add("my_workspace").unwrap();
        assert_eq!(r.sizes, vec![512 << 20, 1000, 3 << 29]);
        assert_eq!(r.frames, vec!["my_workspace".to_string()]);
        assert!(r.add("").is_err());
        assert!(r.add("0.4B").is_err());
        assert!(r.add("1.2.3MiB").is_err());
    }

    #[test]
    fn frames_match_builtin_sites_only_when_on() {
        let frames = [
            "c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)",
            "at::native::(anonymous namespace)::run_conv_plan(cudnnContext*, at::Tensor const&, at::Tensor const&, at::Tensor const&, cudnn_frontend::ExecutionPlan_v8 const&, at::native::cudnn_frontend_conv_operation_t)",
        ];
        assert_eq!(Rules::default().match_frames(frames.iter().copied()).as_deref(), Some("run_conv_plan"));
        assert_eq!(Rules::none().match_frames(frames.iter().copied()), None);
    }
}
