//! Matching a report to the GPU catalog, and the plausibility checks against it.

use super::*;

/// A device or catalog name split into what identifies the model.
#[derive(Debug, PartialEq)]
pub(super) struct NameKey {
    /// Model words, in order: `["rtx", "4060", "ti"]`, `["rtx", "3060", "laptop"]`.
    model: Vec<String>,
    /// Form factor family when named: `sxm`, `pcie` or `nvl`.
    form: Option<&'static str>,
    /// Capacity in GB when the name states it (`A100-SXM4-80GB`, `RTX 3060 12 GB`).
    capacity_gb: Option<u32>,
}

pub(super) fn name_key(name: &str) -> NameKey {
    // Parenthesized remarks in catalog names ("(GDDR5)", "(HGX)") are not part of the model.
    let mut plain = String::new();
    let mut depth = 0u32;
    for c in name.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let words: Vec<String> = plain.to_lowercase().split(|c: char| !c.is_ascii_alphanumeric()).filter(|w| !w.is_empty()).map(str::to_string).collect();
    const NOISE: [&str; 12] = ["nvidia", "geforce", "tesla", "gpu", "hbm2", "hbm2e", "hbm3", "hbm3e", "edition", "workstation", "max", "q"];
    let mut key = NameKey { model: Vec::new(), form: None, capacity_gb: None };
    let mut i = 0;
    while i < words.len() {
        let w = words[i].as_str();
        let number = |s: &str| s.parse::<u32>().ok();
        if let Some(n) = w.strip_suffix("gb").and_then(number) {
            key.capacity_gb = Some(n);
        } else if number(w).is_some() && words.get(i + 1).is_some_and(|n| n == "gb") {
            key.capacity_gb = number(w);
            i += 1;
        } else if w.starts_with("sxm") || w == "hgx" {
            key.form = Some("sxm");
        } else if w == "pcie" || w == "pci" {
            key.form = Some("pcie");
        } else if w == "nvl" {
            key.form = Some("nvl");
        } else if !NOISE.contains(&w) {
            key.model.push(w.to_string());
        }
        i += 1;
    }
    key
}

pub(super) const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Reported capacity may exceed the catalog's nominal GiB by this fraction before it is refused.
pub const CAPACITY_SLACK: f64 = 0.01;

/// The catalog GPU a device name (as the CUDA driver reports it, e.g. `NVIDIA GeForce RTX 4090`,
/// `NVIDIA A100-SXM4-80GB`, `NVIDIA H100 80GB HBM3`) refers to. Where several catalog entries
/// share a name (RTX 3080 10 GB / 12 GB) the reported capacity picks the smallest one it fits.
/// None for names the catalog does not know (such reports are accepted for review, never
/// aggregated).
pub fn match_gpu<'a>(name: &str, total_bytes: u64, gpus: &'a [Gpu]) -> Option<&'a Gpu> {
    let name = normalize_name(name);
    let dev = name_key(&name);
    if dev.model.is_empty() {
        return None;
    }
    // Only catalog names that contain the device's model number (or last word) are keyed.
    let anchor = dev.model.iter().rev().find(|w| w.bytes().any(|b| b.is_ascii_digit())).unwrap_or(&dev.model[dev.model.len() - 1]);
    let contains_anchor = |name: &str| name.as_bytes().windows(anchor.len()).any(|w| w.eq_ignore_ascii_case(anchor.as_bytes()));
    let keyed: Vec<(&Gpu, NameKey)> = gpus.iter().filter(|g| contains_anchor(&g.name)).map(|g| (g, name_key(&g.name))).collect();
    let mut candidates: Vec<&(&Gpu, NameKey)> = keyed
        .iter()
        .filter(|(_, k)| k.model == dev.model)
        .filter(|(_, k)| match dev.form {
            Some(f) => k.form.is_none_or(|kf| kf == f) && (f != "pcie" || k.form == Some("pcie")),
            None => true,
        })
        .collect();
    // CUDA names PCIe variants explicitly ("H100 PCIe"); a name without one is not the PCIe card
    // when another variant exists.
    if dev.form.is_none() && candidates.iter().any(|(_, k)| k.form != Some("pcie")) {
        candidates.retain(|(_, k)| k.form != Some("pcie"));
    }
    if let Some(cap) = dev.capacity_gb {
        candidates.retain(|(g, k)| k.capacity_gb == Some(cap) || (g.memory_gb - cap as f64).abs() < 0.5);
    }
    let fits = |g: &Gpu| total_bytes as f64 <= g.memory_gb * GIB * (1.0 + CAPACITY_SLACK);
    let by_memory = |a: &&&(&Gpu, NameKey), b: &&&(&Gpu, NameKey)| a.0.memory_gb.total_cmp(&b.0.memory_gb);
    candidates.iter().filter(|(g, _)| fits(g)).min_by(by_memory).or_else(|| candidates.iter().max_by(by_memory)).map(|(g, _)| *g)
}

/// Theoretical per-direction bandwidth (GB/s) of a catalog host interface: `PCIe 4.0 x16`,
/// `PCIe 5.0` (x16 assumed), SXM modules by their PCIe host link (SXM2: 3.0, SXM4: 4.0, SXM5:
/// 5.0, SXM6: 6.0, all x16). None when the interface is unknown.
pub fn host_link_gbs(interface: &str) -> Option<f64> {
    let s = interface.trim().to_ascii_lowercase();
    let (generation, lanes) = if let Some(rest) = s.strip_prefix("pcie") {
        let mut parts = rest.split_whitespace();
        let generation: u32 = parts.next()?.split('.').next()?.parse().ok()?;
        let lanes = match parts.next() {
            Some(x) => x.strip_prefix('x')?.parse().ok()?,
            None => 16,
        };
        (generation, lanes)
    } else if let Some(n) = s.strip_prefix("sxm") {
        let generation = match n {
            "2" => 3,
            "4" => 4,
            "5" => 5,
            "6" => 6,
            _ => return None,
        };
        (generation, 16)
    } else {
        return None;
    };
    // GB/s per lane and direction after line coding (8b/10b, 128b/130b, FLIT for 6.0).
    let per_lane = match generation {
        1 => 0.25,
        2 => 0.5,
        3 => 8.0 * 128.0 / 130.0 / 8.0,
        4 => 16.0 * 128.0 / 130.0 / 8.0,
        5 => 32.0 * 128.0 / 130.0 / 8.0,
        6 => 64.0 * 242.0 / 256.0 / 8.0,
        _ => return None,
    };
    Some(per_lane * lanes as f64)
}

/// Measured bandwidth may exceed the theoretical link or memory bandwidth by this fraction
/// (timer granularity) before it is refused.
pub const BANDWIDTH_SLACK: f64 = 0.05;
/// Upper bounds for devices the catalog does not know.
pub const MAX_TOTAL_BYTES: u64 = 2 << 40;
pub const MAX_HOST_LINK_GBS: f64 = 1_000.0;
pub const MAX_DEVICE_GBS: f64 = 20_000.0;
/// No allocation, mapping or free takes ten seconds.
pub const MAX_LATENCY_US: f64 = 10_000_000.0;
pub const MAX_SAMPLES: u64 = 1_000_000;
pub const MAX_DEVICE_INDEX: u64 = 1024;

/// No timed driver call returns in less (the probe's latencies are means over samples of calls
/// that each cross into the driver; the fastest in the reference report is 2 µs).
pub const MIN_LATENCY_US: f64 = 0.05;

/// A matched GPU reporting less than this share of its catalog capacity is not that GPU. What a
/// real card keeps from its nominal size is small: the real H200 report has 99.2 % of its 141
/// GiB, GDDR cards with ECC switched on keep back one sixteenth (6.25 %); 85 % leaves room for both.
pub const MIN_CAPACITY_SHARE: f64 = 0.85;

/// A CUDA context takes at most this share of the card (the real H200's took 0.37 %; a small
/// card's context of a few hundred MiB is well under a quarter of it).
pub const MAX_CONTEXT_SHARE: f64 = 0.25;

/// The largest single allocation is at least this share of the usable memory: the driver maps
/// physical pages wherever they are, so one allocation can take nearly all that is free (the
/// real H200's largest was 99.97 % of its usable memory).
pub const MIN_LARGEST_SHARE: f64 = 0.25;

/// No host↔device copy over any link a CUDA GPU sits on (PCIe 1.0 ×1 moves 0.25 GB/s) is slower.
pub const MIN_HOST_LINK_GBS: f64 = 0.1;

/// Device-to-device copies reach at least this share of the catalog's memory bandwidth (the real
/// H200 copied at 44 % of its 4.8 TB/s); for a GPU the catalog does not know, [`MIN_DEVICE_GBS`].
pub const MIN_DEVICE_SHARE: f64 = 0.1;
pub const MIN_DEVICE_GBS: f64 = 5.0;

/// The bandwidth is timed over copies of at least this many bytes (the probe copies 256 MiB, less
/// only on a card with under 1 GiB free).
pub const MIN_BANDWIDTH_BYTES: u64 = 1 << 20;

/// An allocation this many times larger than another cannot take less than half its time: the
/// driver maps every page of it (the real H200 took 24 µs for 2 MiB and 30 ms for 8 GiB).
pub const LATENCY_SIZE_RATIO: u64 = 1024;

/// The oldest driver the probe runs on: its pool measurements call `cuMemAllocAsync` and the
/// memory-pool API, which CUDA 11.2 introduced (CUDA Driver API reference, "Stream Ordered Memory
/// Allocator").
pub const MIN_DRIVER_CUDA: (u32, u32) = (11, 2);

/// The first CUDA release that supports each architecture the catalog holds by compute
/// capability: Ada (8.9) and Hopper (9.0) arrived with CUDA 11.8, Blackwell (10.0, 12.0) with
/// CUDA 12.8 (the CUDA Toolkit release notes of each version). A driver older than its GPU cannot
/// run it.
pub const FIRST_CUDA_FOR: &[(&str, (u32, u32))] = &[("8.9", (11, 8)), ("9.0", (11, 8)), ("10.0", (12, 8)), ("12.0", (12, 8))];

/// `MAJOR.MINOR` as numbers (`13.00` and `13.0` are one version); None when it is not one.
pub fn cuda_version(v: &str) -> Option<(u32, u32)> {
    let (a, b) = v.trim().split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The driver branch a report belongs to, written one way: `13.00` and `13.0` are `13.0`.
pub fn cuda_branch(v: &str) -> String {
    match cuda_version(v) {
        Some((a, b)) => format!("{a}.{b}"),
        None => v.to_string(),
    }
}

/// Usable memory below this share of the total is flagged for the reviewer (other processes held
/// the GPU during the run, or the value is made up).
pub const LOW_USABLE_SHARE: f64 = 0.5;

/// The newest CUDA driver API major version released when this build was made; a report naming a
/// newer one is flagged for the reviewer.
pub const NEWEST_CUDA_MAJOR: u32 = 13;

/// Whether `version` (`MAJOR.MINOR.PATCH`) is newer than this build's own version: no probe
/// newer than the server that checks it has been released.
pub(super) fn newer_than_this_build(version: &str) -> bool {
    let parse = |v: &str| -> Option<(u64, u64, u64)> {
        let mut it = v.split('.').map(|x| x.parse::<u64>().ok());
        Some((it.next()??, it.next()??, it.next()??))
    };
    match (parse(version), parse(env!("CARGO_PKG_VERSION"))) {
        (Some(v), Some(me)) => v > me,
        // Digits too many for a number are no version this build could have released.
        (None, _) => true,
        (Some(_), None) => false,
    }
}

/// Characters that must not appear in submitted text: control characters and the bidirectional
/// overrides that could disguise text in a reviewer's terminal.
/// Code points that render as nothing (Unicode's default-ignorable set: zero-width spaces and
/// joiners, the soft hyphen, variation selectors, tags, fillers, the byte-order mark).
pub(super) fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
        | '\u{FFF0}'..='\u{FFF8}' | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// A device name as it is matched against the catalog: NFKC (fullwidth `Ｈ２００` and other
/// compatibility forms become ASCII), invisible code points removed, runs of white space one
/// space. Look-alikes from other scripts (Cyrillic `А` for Latin `A`) are not changed:
/// [`plausibility`] refuses names that keep any non-ASCII character.
pub fn normalize_name(name: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let cleaned: String = name.nfkc().filter(|c| !invisible(*c)).collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(super) fn bad_char(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}')
}

/// What a reviewer should look at in a report that passed every check: usable memory far below
/// the total, a CUDA driver newer than any this build knows, a device name that differs from the
/// name it was matched as (its raw characters shown escaped).
pub fn review_notes(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    let m = &r.memory;
    if m.total_bytes > 0 && (m.usable_bytes as f64) < m.total_bytes as f64 * LOW_USABLE_SHARE {
        out.push(format!(
            "usable memory is {:.0} % of the total: other processes held the GPU, or the value is not real",
            m.usable_bytes as f64 / m.total_bytes as f64 * 100.0
        ));
    }
    let major = cuda_version(&r.device.driver_cuda_version).map(|(m, _)| m);
    if major.is_some_and(|m| m > NEWEST_CUDA_MAJOR) {
        out.push(format!("driver CUDA version {} is newer than any this build knows (up to {NEWEST_CUDA_MAJOR}.x)", quote(&r.device.driver_cuda_version)));
    }
    let normalized = normalize_name(&r.device.name);
    if normalized != r.device.name {
        let raw: String =
            r.device.name.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c.to_string() } else { format!("\\u{{{:04X}}}", c as u32) }).collect();
        out.push(format!("device name matched as \"{normalized}\"; sent as \"{raw}\""));
    }
    out
}

/// Every plausibility problem of a report that passed the schema, against its catalog GPU when
/// it has one: each names the field (`$.memory.total_bytes: …`). Checked in turn: the device
/// identity, capacity, latencies and sample sizes, bandwidth, the fragmentation experiment and
/// the allocator check.
pub fn plausibility(r: &Report, gpu: Option<&Gpu>) -> Vec<String> {
    let mut out = Vec::new();
    identity_problems(r, &mut out);
    capacity_problems(r, gpu, &mut out);
    timing_problems(r, &mut out);
    bandwidth_problems(r, gpu, &mut out);
    fragmentation_problems(r, &mut out);
    // The allocator check: schema 2 has it, schema 1 cannot.
    match (&r.allocator_check, r.schema_version) {
        (None, 2) => out.push("$.allocator_check: missing (schema version 2 reports carry it)".to_string()),
        (Some(_), 1) => out.push("$.allocator_check: not part of schema version 1".to_string()),
        _ => {}
    }
    if let Some(c) = &r.allocator_check {
        out.extend(alloc_check_problems(c, r.memory.total_bytes));
    }
    out.truncate(MAX_PROBLEMS);
    out
}

fn gib(b: u64) -> String {
    format!("{:.2} GiB", b as f64 / GIB)
}

/// The device's name and bus id (no control or look-alike characters), the probe's version, the index.
fn identity_problems(r: &Report, out: &mut Vec<String>) {
    for (field, text) in [("$.device.name", &r.device.name), ("$.device.pci_bus_id", &r.device.pci_bus_id)] {
        if text.chars().any(bad_char) {
            out.push(format!("{field}: control or bidirectional-override characters are not allowed"));
        }
    }
    let normalized = normalize_name(&r.device.name);
    let foreign: Vec<String> = normalized.chars().filter(|c| !c.is_ascii()).map(|c| format!("U+{:04X}", c as u32)).collect();
    if !foreign.is_empty() {
        out.push(format!(
            "$.device.name: characters outside ASCII after normalisation ({}): GPU drivers report ASCII names, so these are look-alikes",
            foreign.join(" ")
        ));
    }
    if normalized.is_empty() {
        out.push("$.device.name: empty".to_string());
    }
    if newer_than_this_build(&r.probe_version) {
        out.push(format!("$.probe_version: {} is newer than any probe released (this server is {})", quote(&r.probe_version), env!("CARGO_PKG_VERSION")));
    }
    if r.device.index > MAX_DEVICE_INDEX {
        out.push(format!("$.device.index: {} is not a device index", r.device.index));
    }
    let driver = &r.device.driver_cuda_version;
    match cuda_version(driver) {
        None => out.push(format!("$.device.driver_cuda_version: {} is not a CUDA version", quote(driver))),
        Some(v) if v < MIN_DRIVER_CUDA => out.push(format!(
            "$.device.driver_cuda_version: {} is older than CUDA {}.{}, whose memory-pool calls the probe makes",
            quote(driver),
            MIN_DRIVER_CUDA.0,
            MIN_DRIVER_CUDA.1
        )),
        Some(v) => {
            if let Some((cc, first)) = FIRST_CUDA_FOR.iter().find(|(cc, _)| *cc == r.device.compute_capability).filter(|(_, first)| v < *first) {
                out.push(format!(
                    "$.device.driver_cuda_version: {} is older than CUDA {}.{}, the first to support compute capability {cc}",
                    quote(driver),
                    first.0,
                    first.1
                ));
            }
        }
    }
}

/// Total memory against the catalog GPU (or any GPU), and every memory figure within it.
fn capacity_problems(r: &Report, gpu: Option<&Gpu>, out: &mut Vec<String>) {
    let m = &r.memory;
    let total = r.memory.total_bytes;
    // Capacity.
    if total == 0 {
        out.push("$.memory.total_bytes: a GPU with no memory".to_string());
    }
    match gpu {
        Some(g) => {
            let nominal = g.memory_gb * GIB;
            if (total as f64) < nominal * MIN_CAPACITY_SHARE {
                out.push(format!(
                    "$.memory.total_bytes: {} is less than {:.0} % of the {} GB the {} has ({}): not this GPU",
                    gib(total),
                    MIN_CAPACITY_SHARE * 100.0,
                    g.memory_gb,
                    g.name,
                    g.id
                ));
            }
            if total as f64 > nominal * (1.0 + CAPACITY_SLACK) {
                out.push(format!("$.memory.total_bytes: {} is above the {} GB the {} has ({})", gib(total), g.memory_gb, g.name, g.id));
            }
            if g.compute_capability != r.device.compute_capability {
                out.push(format!(
                    "$.device.compute_capability: {} reports {}, the catalog says {}",
                    g.name,
                    quote(&r.device.compute_capability),
                    g.compute_capability
                ));
            }
        }
        None if total > MAX_TOTAL_BYTES => out.push(format!("$.memory.total_bytes: {} is more than any GPU has", gib(total))),
        None => {}
    }
    for (field, v) in [
        ("free_bytes_with_context", m.free_bytes_with_context),
        ("free_bytes_after", m.free_bytes_after),
        ("context_bytes", m.context_bytes),
        ("largest_allocation_bytes", m.largest_allocation_bytes),
        ("usable_bytes", m.usable_bytes),
    ] {
        if v > total {
            out.push(format!("$.memory.{field}: {} is above total_bytes ({})", gib(v), gib(total)));
        }
    }
    if m.context_bytes as f64 > total as f64 * MAX_CONTEXT_SHARE {
        out.push(format!(
            "$.memory.context_bytes: {} is more than {:.0} % of the card: no CUDA context takes that much",
            gib(m.context_bytes),
            MAX_CONTEXT_SHARE * 100.0
        ));
    }
    if m.largest_allocation_bytes == 0 || (m.largest_allocation_bytes as f64) < m.usable_bytes as f64 * MIN_LARGEST_SHARE {
        out.push(format!(
            "$.memory.largest_allocation_bytes: {} is less than {:.0} % of usable_bytes ({}): one allocation can take nearly all free memory",
            gib(m.largest_allocation_bytes),
            MIN_LARGEST_SHARE * 100.0,
            gib(m.usable_bytes)
        ));
    }
    if m.usable_bytes > m.free_bytes_with_context && m.free_bytes_with_context <= total {
        out.push(format!("$.memory.usable_bytes: {} is above free_bytes_with_context ({})", gib(m.usable_bytes), gib(m.free_bytes_with_context)));
    }
    if m.largest_allocation_bytes > m.free_bytes_with_context && m.free_bytes_with_context <= total {
        out.push(format!(
            "$.memory.largest_allocation_bytes: {} is above free_bytes_with_context ({})",
            gib(m.largest_allocation_bytes),
            gib(m.free_bytes_with_context)
        ));
    }
}

/// Driver-call latencies within what a driver can do, and sizes and sample counts within the card.
fn timing_problems(r: &Report, out: &mut Vec<String>) {
    let total = r.memory.total_bytes;
    // Latencies.
    let mut latency = |field: String, us: f64| {
        if !us.is_finite() || us < 0.0 {
            out.push(format!("{field}: negative"));
        } else if us < MIN_LATENCY_US {
            out.push(format!("{field}: {us} µs is faster than any driver call returns (at least {MIN_LATENCY_US} µs)"));
        } else if us > MAX_LATENCY_US {
            out.push(format!("{field}: {us} µs is not a plausible latency (over {} s)", MAX_LATENCY_US / 1e6));
        }
    };
    for (i, l) in r.latency.iter().enumerate() {
        latency(format!("$.latency[{i}].alloc_us"), l.alloc_us);
        latency(format!("$.latency[{i}].free_us"), l.free_us);
    }
    for (i, a) in r.pools.alloc_async.iter().enumerate() {
        for (f, us) in [("first_us", a.first_us), ("reuse_us", a.reuse_us), ("free_us", a.free_us)] {
            latency(format!("$.pools.alloc_async[{i}].{f}"), us);
        }
    }
    for (i, v) in r.vmm.map.iter().enumerate() {
        for (f, us) in [
            ("create_us", v.create_us),
            ("reserve_us", v.reserve_us),
            ("map_us", v.map_us),
            ("access_us", v.access_us),
            ("unmap_us", v.unmap_us),
            ("release_us", v.release_us),
        ] {
            latency(format!("$.vmm.map[{i}].{f}"), us);
        }
    }
    // A much larger allocation is not much faster than a small one.
    for (i, big) in r.latency.iter().enumerate() {
        let faster = r.latency.iter().find(|small| small.bytes.saturating_mul(LATENCY_SIZE_RATIO) <= big.bytes && big.alloc_us < small.alloc_us * 0.5);
        if let Some(small) = faster {
            out.push(format!(
                "$.latency[{i}].alloc_us: {} µs for {} is less than half the {} µs taken for {}: a larger allocation maps more pages",
                big.alloc_us,
                gib(big.bytes),
                small.alloc_us,
                gib(small.bytes)
            ));
        }
    }
    // Sizes and sample counts.
    let mut sized = |field: String, bytes: u64, samples: Option<u64>| {
        if bytes > total {
            out.push(format!("{field}.bytes: {} is above total_bytes ({})", gib(bytes), gib(total)));
        }
        if let Some(n) = samples.filter(|n| *n > MAX_SAMPLES) {
            out.push(format!("{field}.samples: {n} samples is not plausible"));
        }
    };
    for (i, l) in r.latency.iter().enumerate() {
        sized(format!("$.latency[{i}]"), l.bytes, Some(l.samples));
    }
    for (i, a) in r.pools.alloc_async.iter().enumerate() {
        sized(format!("$.pools.alloc_async[{i}]"), a.bytes, Some(a.samples));
    }
    for (i, v) in r.vmm.map.iter().enumerate() {
        sized(format!("$.vmm.map[{i}]"), v.bytes, Some(v.samples));
    }
    sized("$.bandwidth".to_string(), r.bandwidth.bytes, None);
    if r.vmm.granularity_bytes < 4096 || !r.vmm.granularity_bytes.is_power_of_two() {
        out.push(format!("$.vmm.granularity_bytes: {} is not a page size (a power of two of at least 4 KiB)", r.vmm.granularity_bytes));
    }
    if r.vmm.granularity_bytes > total {
        out.push(format!("$.vmm.granularity_bytes: {} is above total_bytes", gib(r.vmm.granularity_bytes)));
    }
    if r.vmm.recommended_granularity_bytes < r.vmm.granularity_bytes || r.vmm.recommended_granularity_bytes > total {
        out.push("$.vmm.recommended_granularity_bytes: below the minimum granularity or above total_bytes".to_string());
    }
}

/// Copies within the host link and the memory bandwidth (the catalog GPU's, or any's).
fn bandwidth_problems(r: &Report, gpu: Option<&Gpu>, out: &mut Vec<String>) {
    // Bandwidth: the host link bounds host↔device copies, memory bandwidth bounds device copies.
    let b = &r.bandwidth;
    let link = gpu.and_then(|g| host_link_gbs(&g.interface).map(|l| (l, format!("the {} host link ({}, {l:.1} GB/s)", g.name, g.interface))));
    let (link_max, link_what) = link.unwrap_or((MAX_HOST_LINK_GBS, format!("any host link ({MAX_HOST_LINK_GBS} GB/s)")));
    for (field, v) in [
        ("h2d_pinned_gbs", b.h2d_pinned_gbs),
        ("d2h_pinned_gbs", b.d2h_pinned_gbs),
        ("h2d_pageable_gbs", b.h2d_pageable_gbs),
        ("d2h_pageable_gbs", b.d2h_pageable_gbs),
    ] {
        if !(v >= MIN_HOST_LINK_GBS) {
            out.push(format!("$.bandwidth.{field}: {v} GB/s is slower than any host link (at least {MIN_HOST_LINK_GBS} GB/s)"));
        } else if v > link_max * (1.0 + BANDWIDTH_SLACK) {
            out.push(format!("$.bandwidth.{field}: {v:.1} GB/s is above {link_what}"));
        }
    }
    let mem = gpu.and_then(|g| g.bandwidth_gbs.map(|bw| (bw, format!("the {}'s memory bandwidth ({bw} GB/s)", g.name))));
    let (mem_max, mem_what) = mem.unwrap_or((MAX_DEVICE_GBS, format!("any GPU's memory bandwidth ({MAX_DEVICE_GBS} GB/s)")));
    let mem_min = gpu.and_then(|g| g.bandwidth_gbs).map_or(MIN_DEVICE_GBS, |bw| bw * MIN_DEVICE_SHARE);
    if b.bytes < MIN_BANDWIDTH_BYTES {
        out.push(format!("$.bandwidth.bytes: {} bytes is too few to time a copy's bandwidth (at least 1 MiB)", b.bytes));
    }
    if !(b.d2d_gbs >= mem_min) {
        out.push(format!("$.bandwidth.d2d_gbs: {} GB/s is below {mem_min:.1} GB/s, the least a device copy reaches here", b.d2d_gbs));
    } else if b.d2d_gbs > mem_max * (1.0 + BANDWIDTH_SLACK) {
        out.push(format!("$.bandwidth.d2d_gbs: {:.1} GB/s is above {mem_what}", b.d2d_gbs));
    }
}

/// The fragmentation experiment within the card.
fn fragmentation_problems(r: &Report, out: &mut Vec<String>) {
    let total = r.memory.total_bytes;
    // Fragmentation experiment.
    let f = &r.fragmentation;
    if (f.block_bytes as u128) * (f.blocks as u128) > total as u128 {
        out.push("$.fragmentation.blocks: blocks × block_bytes is above total_bytes".to_string());
    }
    if f.free_bytes > total {
        out.push(format!("$.fragmentation.free_bytes: {} is above total_bytes", gib(f.free_bytes)));
    }
    if f.largest_bytes > f.free_bytes {
        out.push("$.fragmentation.largest_bytes: the largest free piece is above the free total".to_string());
    }
}

/// What cannot be true of an allocator check: an unknown verdict, a verdict its cases
/// contradict, a case whose free memory exceeds the card or whose `exact` flag disagrees with
/// its own figures.
pub(super) fn alloc_check_problems(c: &AllocCheck, total: u64) -> Vec<String> {
    let mut out = Vec::new();
    if !ALLOC_CHECK_VERDICTS.contains(&c.verdict.as_str()) {
        out.push(format!("$.allocator_check.verdict: `{}` is not one of {}", quote(&c.verdict), ALLOC_CHECK_VERDICTS.join(", ")));
    }
    let all_exact = c.cases.iter().all(|x| x.exact);
    let expected = if c.cases.is_empty() {
        "skipped"
    } else if all_exact {
        "exact"
    } else {
        "diverged"
    };
    if ALLOC_CHECK_VERDICTS.contains(&c.verdict.as_str()) && c.verdict != expected {
        out.push(format!("$.allocator_check.verdict: `{}` but its cases say `{expected}`", c.verdict));
    }
    if c.free_target_bytes > total {
        out.push("$.allocator_check.free_target_bytes: above total_bytes".to_string());
    }
    for (i, x) in c.cases.iter().enumerate() {
        let at = format!("$.allocator_check.cases[{i}]");
        if x.free_at_start_bytes > total {
            out.push(format!("{at}.free_at_start_bytes: above total_bytes"));
        }
        for (side, run) in [("model", &x.model), ("device", &x.device)] {
            if run.peak_reserved_bytes > x.free_at_start_bytes {
                out.push(format!("{at}.{side}.peak_reserved_bytes: above the free memory the case started with"));
            }
            if run.oom_at.is_some_and(|e| e >= x.events) {
                out.push(format!("{at}.{side}.oom_at: past the trace's last event"));
            }
        }
        let agrees = x.divergent_calls == 0
            && x.model.calls == x.device.calls
            && x.model.oom_at == x.device.oom_at
            && x.model.peak_reserved_bytes == x.device.peak_reserved_bytes;
        if x.exact != agrees {
            out.push(format!("{at}.exact: {} but its figures say {agrees}", x.exact));
        }
        if (x.divergent_calls > 0) != x.first_divergence.is_some() {
            out.push(format!("{at}.first_divergence: present exactly when divergent_calls is above 0"));
        }
        if (x.moved_placements > 0) != x.first_moved.is_some() {
            out.push(format!("{at}.first_moved: present exactly when moved_placements is above 0"));
        }
        if x.moved_placements > x.placements || x.placements > x.model.calls {
            out.push(format!("{at}.moved_placements: more than the placements, or placements more than the calls"));
        }
    }
    out
}
