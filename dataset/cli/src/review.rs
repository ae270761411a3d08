//! `dataset review` (the moderation queue) and `dataset aggregate` (accepted submissions →
//! `data/measurements/aggregates.toml`, the measurement evidence claims can cite).

use std::collections::BTreeSet;
use std::path::Path;

use headroom_core::report::{self, Report};
use headroom_core::{Aggregate, Gpu};
use serde_json::Value;

use crate::store::{Db, Status, Submission};

/// Where `dataset aggregate` writes, relative to the data directory.
pub const AGGREGATES_FILE: &str = "measurements/aggregates.toml";

/// Submitted text for a terminal: control and other invisible characters shown escaped, at most
/// `max` characters.
fn printable(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() || matches!(c, '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}') {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

fn gib(b: u64) -> String {
    format!("{:.2}", b as f64 / (1u64 << 30) as f64)
}

/// Short opaque tags a reviewer can compare by eye: the install id (hashed here, never shown),
/// and the first characters of the server's keyed network-prefix and user-agent tags. `-` where
/// the server did not record one (submissions stored before it did).
fn tags(s: &Submission, install_id: Option<&str>) -> (String, String, String) {
    let short = |t: Option<&str>| t.map(|t| t.chars().take(6).collect()).unwrap_or_else(|| "-".to_string());
    let install = install_id.map(|i| crate::ingest::content_hash(&format!("install\0{i}")));
    (short(install.as_deref()), short(s.prefix_tag.as_deref()), short(s.agent_tag.as_deref()))
}

/// The clusters among stored submissions ([`report::clusters`]): reports that look like one
/// source posing as several, each with the id `--reject-cluster` takes.
pub fn clusters(subs: &[Submission]) -> Vec<report::Cluster> {
    let parsed: Vec<Option<Report>> = subs.iter().map(|s| serde_json::from_str::<Report>(&s.document).ok()).collect();
    let items: Vec<report::Reviewed> = subs
        .iter()
        .zip(&parsed)
        .map(|(s, r)| report::Reviewed {
            id: &s.id,
            report: r.as_ref(),
            prefix: s.prefix_tag.as_deref(),
            agent: s.agent_tag.as_deref(),
            received_at: &s.received_at,
        })
        .collect();
    report::clusters(&items)
}

/// One line per pending submission: id, received, who (opaque tags), GPU (and the catalog id it
/// matched), key figures.
fn pending_table(pending: &[Submission], gpus: &[Gpu]) -> String {
    let mut out = format!(
        "{:<22}  {:<19}  {:<6} {:<6} {:<6}  {:<32}  {:<18}  {:>9}  {:>9}  {:>8}  {:>9}  {}\n",
        "id", "received (UTC)", "instal", "net", "agent", "GPU", "catalog", "total GiB", "usable", "H2D GB/s", "D2D GB/s", "probe"
    );
    for s in pending {
        let received = s.received_at.get(..19).unwrap_or(&s.received_at).replace('T', " ");
        match serde_json::from_str::<Report>(&s.document) {
            Ok(r) => {
                let catalog = report::match_gpu(&r.device.name, r.memory.total_bytes, gpus).map_or("(not in catalog)".to_string(), |g| g.id.clone());
                let (install, net, agent) = tags(s, Some(&r.device.install_id));
                out += &format!(
                    "{:<22}  {:<19}  {:<6} {:<6} {:<6}  {:<32}  {:<18}  {:>9}  {:>9}  {:>8.1}  {:>9.1}  {}\n",
                    s.id,
                    received,
                    install,
                    net,
                    agent,
                    printable(&r.device.name, 32),
                    catalog,
                    gib(r.memory.total_bytes),
                    gib(r.memory.usable_bytes),
                    r.bandwidth.h2d_pinned_gbs,
                    r.bandwidth.d2d_gbs,
                    printable(&r.probe_version, 12)
                );
                for note in report::review_notes(&r) {
                    out += &format!("{:<22}  note: {}\n", "", printable(&note, 200));
                }
            }
            Err(e) => out += &format!("{:<22}  {:<19}  (stored document does not parse: {e})\n", s.id, received),
        }
    }
    out
}

/// What `dataset review` is asked to do.
pub enum Decision<'a> {
    /// List the pending submissions (one page) and the clusters.
    List {
        json: bool,
        page: usize,
        per_page: usize,
    },
    Accept(&'a str),
    Reject {
        id: &'a str,
        reason: &'a str,
    },
    /// Reject every pending or accepted member of a cluster.
    RejectCluster {
        cluster: &'a str,
        reason: &'a str,
    },
    /// Reject every pending or accepted submission from one network (the `net` tag shown, or
    /// more of its characters).
    RejectNetwork {
        tag: &'a str,
        reason: &'a str,
    },
}

fn valid_reason(reason: &str) -> Result<&str, String> {
    let reason = reason.trim();
    if reason.is_empty() {
        return Err("a rejection needs --reason TEXT (why, for the submitter)".to_string());
    }
    if reason.chars().count() > 500 || reason.chars().any(char::is_control) {
        return Err("--reason must be one line of at most 500 characters".to_string());
    }
    Ok(reason)
}

/// `dataset review`: list, or decide one submission, a cluster or a network.
pub fn review(db: &Db, data: &Path, decision: Decision) -> Result<(), String> {
    let store = db.open_existing()?;
    let now = crate::ingest::now_rfc3339();
    let decide = |id: &str, status: Status, reason: Option<&str>| -> Result<Status, String> {
        let before = store.set_status(id, status, reason, &now).map_err(|e| format!("database {}: {e}", db))?;
        before.ok_or_else(|| format!("no submission `{}` in {}", printable(id, 40), db))
    };
    let open_ones = || -> Result<Vec<Submission>, String> {
        let mut all = store.list(Status::Pending).map_err(|e| e.to_string())?;
        all.extend(store.list(Status::Accepted).map_err(|e| e.to_string())?);
        Ok(all)
    };
    let reject_all = |ids: &[String], reason: &str, what: &str| -> Result<(), String> {
        for id in ids {
            decide(id, Status::Rejected, Some(reason))?;
        }
        println!("{what}: {} submission(s) rejected", ids.len());
        Ok(())
    };
    match decision {
        Decision::Accept(id) => {
            let before = decide(id, Status::Accepted, None)?;
            println!("{id}: {} -> accepted", before.code());
            Ok(())
        }
        Decision::Reject { id, reason } => {
            let before = decide(id, Status::Rejected, Some(valid_reason(reason)?))?;
            println!("{id}: {} -> rejected", before.code());
            Ok(())
        }
        Decision::RejectCluster { cluster, reason } => {
            let reason = valid_reason(reason)?;
            let found = clusters(&open_ones()?);
            let c = found
                .iter()
                .find(|c| c.id == cluster.trim())
                .ok_or_else(|| format!("no cluster `{}` among pending and accepted submissions (`dataset review` lists them)", printable(cluster, 20)))?;
            reject_all(&c.members, reason, &format!("cluster {} ({})", c.id, c.kind))
        }
        Decision::RejectNetwork { tag, reason } => {
            let reason = valid_reason(reason)?;
            let tag = tag.trim();
            if tag.len() < 6 || !tag.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("--reject-network takes the `net` tag `dataset review` shows (6 or more hex digits)".to_string());
            }
            let all = open_ones()?;
            let prefixes: BTreeSet<&str> = all.iter().filter_map(|s| s.prefix_tag.as_deref()).filter(|p| p.starts_with(tag)).collect();
            match prefixes.len() {
                0 => Err(format!("no pending or accepted submission from a network tagged {tag}")),
                1 => {
                    let ids: Vec<String> = all.iter().filter(|s| s.prefix_tag.as_deref().is_some_and(|p| p.starts_with(tag))).map(|s| s.id.clone()).collect();
                    reject_all(&ids, reason, &format!("network {tag}"))
                }
                n => Err(format!("{n} networks have tags starting with {tag}: give more of its characters")),
            }
        }
        Decision::List { json, page, per_page } => list(&store, db, data, json, page, per_page),
    }
}

/// The pending submissions, one page of them, and the clusters among everything that can still
/// count (pending and accepted).
fn list(store: &std::sync::Arc<dyn crate::store::Store>, db: &Db, data: &Path, json: bool, page: usize, per_page: usize) -> Result<(), String> {
    let _ = db;
    let pending = store.list(Status::Pending).map_err(|e| e.to_string())?;
    let accepted_list = store.list(Status::Accepted).map_err(|e| e.to_string())?;
    let flags = clusters(&pending.iter().chain(&accepted_list).cloned().collect::<Vec<_>>());
    let per_page = per_page.max(1);
    let pages = pending.len().div_ceil(per_page).max(1);
    let page = page.clamp(1, pages);
    let shown = &pending[((page - 1) * per_page).min(pending.len())..(page * per_page).min(pending.len())];
    if json {
        let rows: Vec<Value> = shown
            .iter()
            .map(|s| {
                let parsed = serde_json::from_str::<Value>(&s.document).ok();
                let install = parsed.as_ref().and_then(|v| v["device"]["install_id"].as_str().map(str::to_owned));
                let (install, net, agent) = tags(s, install.as_deref());
                let doc = parsed.map(|v| report::public_document(&v)).unwrap_or(Value::Null);
                let notes = serde_json::from_str::<Report>(&s.document).map(|r| report::review_notes(&r)).unwrap_or_default();
                serde_json::json!({ "id": s.id, "received_at": s.received_at, "tags": {"install": install, "net": net, "agent": agent}, "notes": notes, "document": doc })
            })
            .collect();
        let clusters: Vec<Value> = flags.iter().map(|c| serde_json::json!({"id": c.id, "kind": c.kind, "why": c.why, "members": c.members})).collect();
        let out = serde_json::json!({"pending": rows, "page": page, "pages": pages, "pending_total": pending.len(), "clusters": clusters});
        println!("{}", serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let gpus = crate::serve::load_gpus(data).unwrap_or_default();
    let accepted = accepted_list.len();
    let rejected = store.list(Status::Rejected).map_err(|e| e.to_string())?.len();
    if !shown.is_empty() {
        print!("{}", pending_table(shown, &gpus));
        if pages > 1 {
            println!("page {page} of {pages} ({} pending; --page N for another)", pending.len());
        }
    }
    for c in &flags {
        println!("cluster {} ({}): {}: {}", c.id, c.kind, c.why, c.members.join(" "));
    }
    println!(
        "{} pending, {accepted} accepted, {rejected} rejected. `dataset review --accept ID`, `--reject ID --reason TEXT`, `--reject-cluster ID --reason TEXT` or `--reject-network NET --reason TEXT`; then `dataset aggregate`.",
        pending.len()
    );
    Ok(())
}

/// The TOML text of the aggregates file.
fn aggregates_toml(aggregates: &[Aggregate]) -> Result<String, String> {
    #[derive(serde::Serialize)]
    struct File<'a> {
        aggregate: &'a [Aggregate],
    }
    let body = if aggregates.is_empty() { String::new() } else { toml::to_string(&File { aggregate: aggregates }).map_err(|e| e.to_string())? };
    Ok(format!(
        "# Measurement evidence from accepted probe submissions, per catalog GPU and measurement.\n\
         # Written by `dataset aggregate` (do not edit by hand; see dataset/README.md).\n\
         # median: the median of each independent submitter's median; count: accepted reports;\n\
         # submitters: independent submitters (reports sharing an install id or a network prefix are\n\
         # one); spread_days: from the first report of the earliest to that of the latest.\n\
         # Units: B, GB/s, us.\n{}{body}",
        if body.is_empty() { "" } else { "\n" }
    ))
}

/// `dataset aggregate`: every accepted submission whose GPU is in the catalog, aggregated.
pub fn aggregate(db: &Db, data: &Path) -> Result<(), String> {
    let loaded = crate::data::load_checked(data)?;
    let gpus = &loaded.dataset.gpus;
    let store = db.open_existing()?;
    let accepted = store.list(Status::Accepted).map_err(|e| format!("database {}: {e}", db))?;
    let mut reports: Vec<(String, Report, report::Origin)> = Vec::new();
    let mut skipped: Vec<String> = Vec::new();
    for s in &accepted {
        let checked =
            serde_json::from_str::<Value>(&s.document).map_err(|e| e.to_string()).and_then(|v| report::check_value(&v, gpus).map_err(|r| r.message()));
        match checked {
            Ok(c) => match c.gpu {
                Some(gpu) => reports.push((
                    gpu,
                    c.report,
                    report::Origin { prefix: s.prefix_tag.clone(), block: s.block_tag.clone(), received_at: s.received_at.clone() },
                )),
                None => skipped.push(format!("{} ({}: not in the GPU catalog)", s.id, printable(&c.report.device.name, 40))),
            },
            Err(e) => skipped.push(format!("{} ({})", s.id, printable(&e, 120))),
        }
    }
    let aggregates = report::aggregate(&reports);
    let text = aggregates_toml(&aggregates)?;

    // The data with the new file must still check (claims citing aggregates are re-verified).
    let mut files = headroom_core::files::read_tree(data)?;
    files.retain(|(p, _)| p != AGGREGATES_FILE);
    files.push((AGGREGATES_FILE.to_string(), text.clone()));
    let problems = headroom_core::load::load(&files).err();

    let path = data.join(AGGREGATES_FILE);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let tmp = path.with_extension("toml.tmp");
    std::fs::write(&tmp, &text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))?;

    let gpu_count = aggregates.iter().map(|a| a.gpu.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    println!(
        "dataset aggregate: {} accepted submission(s), {} aggregated -> {} aggregates for {gpu_count} GPU(s) in {}",
        accepted.len(),
        reports.len(),
        aggregates.len(),
        path.display()
    );
    for s in &skipped {
        println!("  skipped {s}");
    }
    if let Ok(l) = headroom_core::load::load(&files) {
        for (claim, why) in headroom_core::check::review_flags(&l.dataset) {
            println!("  review claim {claim}: {why}");
        }
    }
    match problems {
        None => Ok(()),
        Some(problems) => {
            let lines: Vec<String> = problems.iter().map(|p| format!("  {}/{p}", data.display())).collect();
            Err(format!(
                "the aggregates are written, but the data no longer checks ({} problem(s)); review these claims:\n{}",
                problems.len(),
                lines.join("\n")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_output_shows_control_characters_escaped() {
        assert_eq!(printable("GPU\u{1b}[2J\u{202e}x", 40), "GPU\\u{1b}[2J\\u{202e}x");
        assert_eq!(printable("abcdef", 3), "abc…");
    }

    #[test]
    fn the_aggregates_file_parses_back() {
        let a = Aggregate {
            gpu: "h200".into(),
            measurement: "usable_bytes".into(),
            unit: "B".into(),
            count: 3,
            submitters: 3,
            spread_days: 12.5,
            median: 149554200576.0,
            min: 149554200576.0,
            max: 149554200577.0,
            probe_versions: vec!["0.1.0".into()],
        };
        let text = aggregates_toml(&[a.clone()]).unwrap();
        #[derive(serde::Deserialize)]
        struct File {
            aggregate: Vec<Aggregate>,
        }
        let back: File = toml::from_str(&text).unwrap();
        assert_eq!(back.aggregate, vec![a]);
        assert!(toml::from_str::<toml::Table>(&aggregates_toml(&[]).unwrap()).unwrap().is_empty());
    }
}
