//! `dataset review` (the moderation queue) and `dataset aggregate` (accepted submissions →
//! `data/measurements/aggregates.toml`, the measurement evidence claims can cite).

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

/// Submissions from one network prefix under several install ids, or many from one network in a
/// short time: what one script making up install ids looks like. One line per cluster, e.g.
/// "3 reports, 1 prefix (3f9a1c), 3 install ids, 40 s apart".
pub fn clusters(subs: &[Submission]) -> Vec<String> {
    let mut by_prefix: std::collections::BTreeMap<&str, Vec<&Submission>> = std::collections::BTreeMap::new();
    for s in subs {
        if let Some(p) = s.prefix_tag.as_deref() {
            by_prefix.entry(p).or_default().push(s);
        }
    }
    let mut out = Vec::new();
    for (prefix, group) in by_prefix {
        if group.len() < 2 {
            continue;
        }
        let installs: std::collections::BTreeSet<String> = group
            .iter()
            .filter_map(|s| serde_json::from_str::<Value>(&s.document).ok())
            .filter_map(|v| v["device"]["install_id"].as_str().map(str::to_owned))
            .collect();
        let times: Vec<f64> = group.iter().filter_map(|s| report::unix_seconds(&s.received_at)).collect();
        let span = times.iter().copied().reduce(f64::max).unwrap_or(0.0) - times.iter().copied().reduce(f64::min).unwrap_or(0.0);
        let apart = if span < 120.0 {
            format!("{span:.0} s apart")
        } else if span < 7200.0 {
            format!("{:.0} min apart", span / 60.0)
        } else {
            format!("{:.1} h apart", span / 3600.0)
        };
        let ids: Vec<&str> = group.iter().map(|s| s.id.as_str()).collect();
        out.push(format!(
            "{} reports, 1 prefix ({}), {} install id{}, {apart}: {}",
            group.len(),
            prefix.chars().take(6).collect::<String>(),
            installs.len(),
            if installs.len() == 1 { "" } else { "s" },
            ids.join(" ")
        ));
    }
    out
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

/// `dataset review [--accept ID | --reject ID --reason TEXT] [--json]`.
pub fn review(db: &Db, data: &Path, accept: Option<&str>, reject: Option<&str>, reason: Option<&str>, json: bool) -> Result<(), String> {
    let store = db.open_existing()?;
    let now = crate::ingest::now_rfc3339();
    let decide = |id: &str, status: Status, reason: Option<&str>| -> Result<(), String> {
        let before = store.set_status(id, status, reason, &now).map_err(|e| format!("database {}: {e}", db))?;
        match before {
            None => Err(format!("no submission `{}` in {}", printable(id, 40), db)),
            Some(before) => {
                println!("{id}: {} -> {}", before.code(), status.code());
                Ok(())
            }
        }
    };
    match (accept, reject) {
        (Some(id), None) => return decide(id, Status::Accepted, None),
        (None, Some(id)) => {
            let reason = reason.map(str::trim).filter(|r| !r.is_empty()).ok_or("--reject needs --reason TEXT (why, for the submitter)")?;
            if reason.chars().count() > 500 || reason.chars().any(char::is_control) {
                return Err("--reason must be one line of at most 500 characters".to_string());
            }
            return decide(id, Status::Rejected, Some(reason));
        }
        (Some(_), Some(_)) => return Err("give --accept or --reject, not both".to_string()),
        (None, None) => {}
    }
    let pending = store.list(Status::Pending).map_err(|e| e.to_string())?;
    let accepted_list = store.list(Status::Accepted).map_err(|e| e.to_string())?;
    // Clusters are looked for among everything that can still count: pending and accepted.
    let flags = clusters(&pending.iter().chain(&accepted_list).cloned().collect::<Vec<_>>());
    if json {
        let rows: Vec<Value> = pending
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
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({"pending": rows, "clusters": flags})).map_err(|e| e.to_string())?);
        return Ok(());
    }
    let gpus = crate::serve::load_gpus(data).unwrap_or_default();
    let accepted = accepted_list.len();
    let rejected = store.list(Status::Rejected).map_err(|e| e.to_string())?.len();
    if !pending.is_empty() {
        print!("{}", pending_table(&pending, &gpus));
    }
    for f in &flags {
        println!("cluster: {f}");
    }
    println!(
        "{} pending, {accepted} accepted, {rejected} rejected. `dataset review --accept ID` or `--reject ID --reason TEXT`; then `dataset aggregate`.",
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
                Some(gpu) => reports.push((gpu, c.report, report::Origin { prefix: s.prefix_tag.clone(), received_at: s.received_at.clone() })),
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
