//! Aggregation: accepted reports become measurement evidence per catalog GPU.

use super::*;

/// One figure extracted from every report: its id (`<gpu>/<id>` names an aggregate), unit and
/// meaning.
pub struct MeasurementKind {
    pub id: &'static str,
    pub unit: &'static str,
    pub what: &'static str,
    pub get: fn(&Report) -> Option<f64>,
    /// Aggregated per driver branch too: one aggregate per `device.driver_cuda_version`, named
    /// `<id>@cuda<version>` (what the driver does differs between branches).
    pub by_driver: bool,
}

/// The allocator check's cases, when it ran.
pub(super) fn alloc_cases(r: &Report) -> Option<&[AllocCase]> {
    r.allocator_check.as_ref().map(|c| c.cases.as_slice()).filter(|c| !c.is_empty())
}

pub(super) const MIB2: u64 = 2 << 20;

/// The figures `dataset aggregate` computes per GPU.
pub const MEASUREMENTS: &[MeasurementKind] = &[
    MeasurementKind { id: "total_bytes", unit: "B", what: "total memory (cuDeviceTotalMem)", get: |r| Some(r.memory.total_bytes as f64), by_driver: false },
    MeasurementKind {
        id: "usable_bytes",
        unit: "B",
        what: "memory one process can allocate at once",
        get: |r| Some(r.memory.usable_bytes as f64),
        by_driver: false,
    },
    MeasurementKind {
        id: "context_bytes",
        unit: "B",
        what: "drop in free memory when a CUDA context is created",
        get: |r| Some(r.memory.context_bytes as f64),
        by_driver: false,
    },
    MeasurementKind {
        id: "largest_allocation_bytes",
        unit: "B",
        what: "largest single cuMemAlloc",
        get: |r| Some(r.memory.largest_allocation_bytes as f64),
        by_driver: false,
    },
    MeasurementKind { id: "h2d_pinned_gbs", unit: "GB/s", what: "host→device copy, pinned", get: |r| Some(r.bandwidth.h2d_pinned_gbs), by_driver: false },
    MeasurementKind { id: "d2h_pinned_gbs", unit: "GB/s", what: "device→host copy, pinned", get: |r| Some(r.bandwidth.d2h_pinned_gbs), by_driver: false },
    MeasurementKind {
        id: "h2d_pageable_gbs", unit: "GB/s", what: "host→device copy, pageable", get: |r| Some(r.bandwidth.h2d_pageable_gbs), by_driver: false
    },
    MeasurementKind {
        id: "d2h_pageable_gbs", unit: "GB/s", what: "device→host copy, pageable", get: |r| Some(r.bandwidth.d2h_pageable_gbs), by_driver: false
    },
    MeasurementKind { id: "d2d_gbs", unit: "GB/s", what: "device→device copy", get: |r| Some(r.bandwidth.d2d_gbs), by_driver: false },
    MeasurementKind {
        id: "alloc_2mib_us",
        unit: "us",
        what: "cuMemAlloc of 2 MiB",
        get: |r| r.latency.iter().find(|l| l.bytes == MIB2).map(|l| l.alloc_us),
        by_driver: false,
    },
    MeasurementKind {
        id: "alloc_async_reuse_2mib_us",
        unit: "us",
        what: "cuMemAllocAsync of 2 MiB served from the pool",
        get: |r| r.pools.alloc_async.iter().find(|a| a.bytes == MIB2).map(|a| a.reuse_us),
        by_driver: false,
    },
    MeasurementKind {
        id: "alloc_model_exact_pct",
        unit: "%",
        what: "allocator check: cases where headroom-alloc's model of PyTorch's caching allocator made the same driver calls as the driver, ran out of memory at the same event and reserved the same peak",
        get: |r| alloc_cases(r).map(|c| 100.0 * c.iter().filter(|x| x.exact).count() as f64 / c.len() as f64),
        by_driver: true,
    },
    MeasurementKind {
        id: "driver_kept_back_bytes",
        unit: "B",
        what: "allocator check: free memory (cuMemGetInfo) that one cuMemAlloc could not take at the end of a case (median over the cases)",
        get: |r| {
            alloc_cases(r).map(|c| {
                let mut v: Vec<f64> = c.iter().map(|x| x.kept_back_bytes as f64).collect();
                v.sort_by(f64::total_cmp);
                median(&v)
            })
        },
        by_driver: true,
    },
];

/// The kind of an aggregate's measurement: `usable_bytes`, or `alloc_model_exact_pct@cuda13.0`
/// for a kind aggregated per driver branch.
pub fn measurement_kind(id: &str) -> Option<&'static MeasurementKind> {
    match id.split_once("@cuda") {
        None => MEASUREMENTS.iter().find(|m| m.id == id && !m.by_driver),
        Some((base, version)) if pattern_ok("^[0-9]+\\.[0-9]+$", version) => MEASUREMENTS.iter().find(|m| m.id == base && m.by_driver),
        Some(_) => None,
    }
}

pub(super) fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// Where and when an accepted report came from, as the server recorded it: opaque keyed hashes
/// of the submitter's network prefix (IPv4 /24, IPv6 /48) and of the coarser block around it
/// (IPv4 /16, IPv6 /32) (None for reports stored before they were recorded), and the time it was
/// received (RFC 3339 UTC).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Origin {
    pub prefix: Option<String>,
    pub block: Option<String>,
    pub received_at: String,
}

/// What a report's measurements are, without who sent it or when: two reports with the same
/// fingerprint are one run (a report re-posted under a new install id is a replay, not a new
/// submitter).
pub fn measurement_fingerprint(r: &Report) -> String {
    let d = &r.device;
    serde_json::to_string(&(&d.name, &d.pci_bus_id, &r.memory, &r.latency, &r.pools, &r.vmm, &r.bandwidth, &r.fragmentation, &r.allocator_check))
        .unwrap_or_default()
}

/// What ties one report to others of the same submitter.
#[derive(Clone, Debug, Default)]
pub struct SubmitterKey<'a> {
    pub install: &'a str,
    pub prefix: Option<&'a str>,
    /// The coarser block and the UTC day received (`block/2026-12-05`): at most one submitter per
    /// block per day.
    pub block_day: Option<String>,
    pub fingerprint: String,
}

impl<'a> SubmitterKey<'a> {
    pub fn of(r: &'a Report, o: &'a Origin) -> SubmitterKey<'a> {
        SubmitterKey {
            install: &r.device.install_id,
            prefix: o.prefix.as_deref(),
            block_day: o.block.as_ref().map(|b| format!("{b}/{}", o.received_at.get(..10).unwrap_or(""))),
            fingerprint: measurement_fingerprint(r),
        }
    }
}

/// Install ids seen on more than one network prefix. An install id is the client's own word: one
/// that moves between networks may be a script joining honest submitters into one, so its reports
/// are left out of the aggregates (and shown to the reviewer), never used to join others.
pub fn roaming_installs<'a>(keys: &[SubmitterKey<'a>]) -> BTreeSet<&'a str> {
    let mut prefixes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for k in keys {
        if let Some(p) = k.prefix {
            prefixes.entry(k.install).or_default().insert(p);
        }
    }
    prefixes.into_iter().filter(|(_, p)| p.len() > 1).map(|(i, _)| i).collect()
}

/// Seconds since 1970 of an RFC 3339 UTC time (`2026-11-30T09:14:41.123Z`); None if it is not one.
pub fn unix_seconds(t: &str) -> Option<f64> {
    let b = t.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' || !t.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| t.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d, h, mi) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?);
    let sec = crate::format::parse_decimal(t.get(17..t.len() - 1)?)?;
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || !(0.0..61.0).contains(&sec) {
        return None;
    }
    // Days from civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60) as f64 + sec)
}

/// Groups reports into independent submitters: two reports are one submitter when they share an
/// install id, a network prefix, a coarser block on the same UTC day, or identical measurements
/// (a replay), directly or through other reports. Returns each report's group number. Reports of
/// [`roaming_installs`] are for the caller to leave out first.
pub fn submitter_groups(keys: &[SubmitterKey]) -> Vec<usize> {
    let mut parent: Vec<usize> = (0..keys.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    let mut first: BTreeMap<(u8, &str), usize> = BTreeMap::new();
    for (i, k) in keys.iter().enumerate() {
        let ties = [Some((0u8, k.install)), k.prefix.map(|p| (1, p)), k.block_day.as_deref().map(|b| (2, b)), Some((3, k.fingerprint.as_str()))];
        for tie in ties.into_iter().flatten() {
            match first.get(&tie) {
                Some(&f) => {
                    let (a, b) = (root(&mut parent, f), root(&mut parent, i));
                    parent[b] = a;
                }
                None => {
                    first.insert(tie, i);
                }
            }
        }
    }
    let mut number: BTreeMap<usize, usize> = BTreeMap::new();
    (0..keys.len())
        .map(|i| {
            let r = root(&mut parent, i);
            let next = number.len();
            *number.entry(r).or_insert(next)
        })
        .collect()
}

/// Aggregates accepted reports, each given with the catalog GPU id it matched and its origin.
/// Per GPU and measurement: `count` (reports), `submitters` (independent submitters, see
/// [`submitter_groups`]), `median` (the median of each submitter's own median, so that one
/// submitter sending many reports, under as many install ids as it likes from one network, moves
/// it by one vote at most), `min`, `max` (over all reports), `spread_days` and the probe versions
/// seen. Reports whose install id appears on several networks ([`roaming_installs`]) are left
/// out. Sorted by GPU id, then measurement in [`MEASUREMENTS`] order. Install ids and prefixes
/// are only counted; none is in the output.
pub fn aggregate(reports: &[(String, Report, Origin)]) -> Vec<Aggregate> {
    let mut out = Vec::new();
    let all_keys: Vec<SubmitterKey> = reports.iter().map(|(_, r, o)| SubmitterKey::of(r, o)).collect();
    let roaming = roaming_installs(&all_keys);
    let counted: Vec<&(String, Report, Origin)> = reports.iter().filter(|(_, r, _)| !roaming.contains(r.device.install_id.as_str())).collect();
    let gpus: BTreeSet<&str> = counted.iter().map(|(g, _, _)| g.as_str()).collect();
    for gpu in gpus {
        let mine: Vec<&(String, Report, Origin)> = counted.iter().copied().filter(|(g, _, _)| g == gpu).collect();
        let keys: Vec<SubmitterKey> = mine.iter().map(|(_, r, o)| SubmitterKey::of(r, o)).collect();
        let groups = submitter_groups(&keys);
        for kind in MEASUREMENTS {
            if !kind.by_driver {
                let all: Vec<usize> = (0..mine.len()).collect();
                out.extend(aggregate_one(gpu, kind.id.to_string(), kind, &mine, &groups, &all));
                continue;
            }
            // `13.00` and `13.0` are one branch.
            let drivers: BTreeSet<String> = mine.iter().map(|(_, r, _)| cuda_branch(&r.device.driver_cuda_version)).collect();
            for d in drivers {
                let these: Vec<usize> = (0..mine.len()).filter(|&i| cuda_branch(&mine[i].1.device.driver_cuda_version) == d).collect();
                out.extend(aggregate_one(gpu, format!("{}@cuda{d}", kind.id), kind, &mine, &groups, &these));
            }
        }
    }
    out
}

/// One aggregate: `kind` over the reports `which` (indices into `mine`), `groups` their
/// submitter groups; None when none of them has the figure.
pub(super) fn aggregate_one(
    gpu: &str,
    id: String,
    kind: &MeasurementKind,
    mine: &[&(String, Report, Origin)],
    groups: &[usize],
    which: &[usize],
) -> Option<Aggregate> {
    let mut by_submitter: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    let mut first_seen: BTreeMap<usize, f64> = BTreeMap::new();
    let mut all = Vec::new();
    let mut versions = BTreeSet::new();
    for &i in which {
        let ((_, r, o), group) = (mine[i], &groups[i]);
        if let Some(x) = (kind.get)(r).filter(|x| x.is_finite()) {
            by_submitter.entry(*group).or_default().push(x);
            all.push(x);
            versions.insert(r.probe_version.clone());
            if let Some(t) = unix_seconds(&o.received_at) {
                let f = first_seen.entry(*group).or_insert(t);
                *f = f.min(t);
            }
        }
    }
    if all.is_empty() {
        return None;
    }
    all.sort_by(f64::total_cmp);
    let mut per_submitter: Vec<f64> = by_submitter
        .values_mut()
        .map(|xs| {
            xs.sort_by(f64::total_cmp);
            median(xs)
        })
        .collect();
    per_submitter.sort_by(f64::total_cmp);
    let firsts: Vec<f64> = first_seen.values().copied().collect();
    let spread = match (firsts.iter().copied().reduce(f64::min), firsts.iter().copied().reduce(f64::max)) {
        (Some(a), Some(b)) => ((b - a) / 86_400.0 * 100.0).round() / 100.0,
        _ => 0.0,
    };
    Some(Aggregate {
        gpu: gpu.to_string(),
        measurement: id,
        unit: kind.unit.to_string(),
        count: all.len() as u32,
        submitters: by_submitter.len() as u32,
        spread_days: spread,
        median: median(&per_submitter),
        min: all[0],
        max: all[all.len() - 1],
        probe_versions: versions.into_iter().collect(),
    })
}
