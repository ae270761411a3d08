//! What a reviewer should see together: reports that look like one source posing as several.
//! Pure: the review command feeds it the stored reports with their private origin tags.

use super::*;

/// One stored report as the reviewer's cluster search sees it.
pub struct Reviewed<'a> {
    pub id: &'a str,
    /// None when the stored document no longer parses.
    pub report: Option<&'a Report>,
    pub prefix: Option<&'a str>,
    pub agent: Option<&'a str>,
    pub received_at: &'a str,
}

/// Reports that belong together, with a stable id (the first 8 hex digits of a hash of its
/// members' ids) that `dataset review --reject-cluster` takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Cluster {
    pub id: String,
    /// `network`, `roaming-install`, `replay` or `look-alike`.
    pub kind: &'static str,
    /// For the reviewer: what ties them (no install id, no address).
    pub why: String,
    pub members: Vec<String>,
}

/// Reports whose values are this close (relative) look alike.
pub const LOOK_ALIKE_TOLERANCE: f64 = 0.005;
/// Look-alikes are searched among reports received this close together (seconds, chained).
pub const LOOK_ALIKE_WINDOW_S: f64 = 600.0;
/// A look-alike cluster has at least this many reports.
pub const LOOK_ALIKE_MIN: usize = 3;

fn cluster(kind: &'static str, why: String, mut members: Vec<String>) -> Cluster {
    members.sort();
    members.dedup();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in kind.bytes().chain(members.iter().flat_map(|m| m.bytes().chain([0u8]))) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    Cluster { id: format!("{:08x}", h >> 32), kind, why, members }
}

fn apart(times: &[f64]) -> String {
    let span = times.iter().copied().reduce(f64::max).unwrap_or(0.0) - times.iter().copied().reduce(f64::min).unwrap_or(0.0);
    if span < 120.0 {
        format!("{span:.0} s apart")
    } else if span < 7200.0 {
        format!("{:.0} min apart", span / 60.0)
    } else {
        format!("{:.1} h apart", span / 3600.0)
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= LOOK_ALIKE_TOLERANCE * a.abs().max(b.abs())
}

/// Whether two reports' key figures are near-identical: the same card and total, usable memory,
/// context, and both copy bandwidths within [`LOOK_ALIKE_TOLERANCE`].
fn look_alike(a: &Report, b: &Report) -> bool {
    a.device.name == b.device.name
        && a.memory.total_bytes == b.memory.total_bytes
        && close(a.memory.usable_bytes as f64, b.memory.usable_bytes as f64)
        && close(a.memory.context_bytes as f64, b.memory.context_bytes as f64)
        && close(a.bandwidth.h2d_pinned_gbs, b.bandwidth.h2d_pinned_gbs)
        && close(a.bandwidth.d2d_gbs, b.bandwidth.d2d_gbs)
}

/// Every cluster among `items`: several install ids on one network prefix (`network`); one install
/// id on several prefixes (`roaming-install`: left out of the aggregates); identical measurements
/// under different install ids (`replay`: counted once); and near-identical values with the same
/// user agent from several prefixes within minutes of each other (`look-alike`: one machine
/// posing as many networks, or a coincidence for the reviewer to judge).
pub fn clusters(items: &[Reviewed]) -> Vec<Cluster> {
    let mut out = Vec::new();
    let time = |r: &Reviewed| unix_seconds(r.received_at).unwrap_or(0.0);
    // One network prefix, several reports.
    let mut by_prefix: BTreeMap<&str, Vec<&Reviewed>> = BTreeMap::new();
    for r in items {
        if let Some(p) = r.prefix {
            by_prefix.entry(p).or_default().push(r);
        }
    }
    for (prefix, group) in &by_prefix {
        if group.len() < 2 {
            continue;
        }
        let installs: BTreeSet<&str> = group.iter().filter_map(|r| r.report.map(|x| x.device.install_id.as_str())).collect();
        let times: Vec<f64> = group.iter().map(|r| time(r)).collect();
        let why = format!(
            "{} reports, 1 prefix ({}), {} install id{}, {}",
            group.len(),
            prefix.chars().take(6).collect::<String>(),
            installs.len(),
            if installs.len() == 1 { "" } else { "s" },
            apart(&times)
        );
        out.push(cluster("network", why, group.iter().map(|r| r.id.to_string()).collect()));
    }
    // One install id, several prefixes.
    let mut by_install: BTreeMap<&str, Vec<&Reviewed>> = BTreeMap::new();
    for r in items {
        if let Some(rep) = r.report {
            by_install.entry(rep.device.install_id.as_str()).or_default().push(r);
        }
    }
    for group in by_install.values() {
        let prefixes: BTreeSet<&str> = group.iter().filter_map(|r| r.prefix).collect();
        if prefixes.len() > 1 {
            let why = format!("1 install id on {} networks, {} reports: left out of the aggregates", prefixes.len(), group.len());
            out.push(cluster("roaming-install", why, group.iter().map(|r| r.id.to_string()).collect()));
        }
    }
    // Identical measurements.
    let mut by_run: BTreeMap<String, Vec<&Reviewed>> = BTreeMap::new();
    for r in items {
        if let Some(rep) = r.report {
            by_run.entry(measurement_fingerprint(rep)).or_default().push(r);
        }
    }
    for group in by_run.values().filter(|g| g.len() > 1) {
        let installs: BTreeSet<&str> = group.iter().filter_map(|r| r.report.map(|x| x.device.install_id.as_str())).collect();
        let prefixes: BTreeSet<&str> = group.iter().filter_map(|r| r.prefix).collect();
        let why = format!(
            "{} reports with identical measurements under {} install id(s) from {} network(s): one run, counted once",
            group.len(),
            installs.len(),
            prefixes.len()
        );
        out.push(cluster("replay", why, group.iter().map(|r| r.id.to_string()).collect()));
    }
    // Look-alikes across prefixes: same agent, near-identical values, chained within the window.
    let mut by_agent: BTreeMap<&str, Vec<&Reviewed>> = BTreeMap::new();
    for r in items.iter().filter(|r| r.report.is_some()) {
        if let Some(a) = r.agent {
            by_agent.entry(a).or_default().push(r);
        }
    }
    for group in by_agent.values_mut() {
        group.sort_by(|a, b| time(a).total_cmp(&time(b)));
        let mut taken = vec![false; group.len()];
        for i in 0..group.len() {
            if taken[i] {
                continue;
            }
            let mut members = vec![i];
            let mut last = time(group[i]);
            for j in i + 1..group.len() {
                if time(group[j]) - last > LOOK_ALIKE_WINDOW_S {
                    break;
                }
                if !taken[j] && look_alike(group[i].report.unwrap(), group[j].report.unwrap()) {
                    members.push(j);
                    last = time(group[j]);
                }
            }
            let prefixes: BTreeSet<&str> = members.iter().filter_map(|&m| group[m].prefix).collect();
            if members.len() >= LOOK_ALIKE_MIN && prefixes.len() > 1 {
                for &m in &members {
                    taken[m] = true;
                }
                let times: Vec<f64> = members.iter().map(|&m| time(group[m])).collect();
                let why = format!(
                    "{} reports with near-identical values (within {} %) and one user agent from {} networks, {}",
                    members.len(),
                    LOOK_ALIKE_TOLERANCE * 100.0,
                    prefixes.len(),
                    apart(&times)
                );
                out.push(cluster("look-alike", why, members.iter().map(|&m| group[m].id.to_string()).collect()));
            }
        }
    }
    out
}
