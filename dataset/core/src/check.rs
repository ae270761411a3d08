//! The verdict rules and the data invariants `dataset check` enforces.

use std::collections::BTreeMap;
use std::fmt;

use crate::{Claim, Dataset, Lang, SourceKind, Text, Verdict};

/// One thing wrong with the data, located by file and claim id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub id: Option<String>,
    pub message: String,
}

impl Problem {
    pub fn new(file: &str, id: Option<&str>, message: String) -> Problem {
        Problem { file: file.to_string(), id: id.map(str::to_string), message }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id {
            Some(id) => write!(f, "{}: claim `{}`: {}", self.file, id, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Minimum number of independent, consistent measurements that verify a claim on their own.
pub const MIN_INDEPENDENT_MEASUREMENTS: u32 = 3;

/// Checks every claim. `file_of` maps claim ids to the file they came from.
pub fn check(dataset: &Dataset, file_of: &BTreeMap<String, String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for claim in &dataset.claims {
        let file = file_of.get(&claim.id).map(String::as_str).unwrap_or("?");
        for message in check_claim(claim) {
            problems.push(Problem::new(file, Some(&claim.id), message));
        }
    }
    problems
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit())
        && (1..=12).contains(&s[5..7].parse::<u8>().unwrap_or(0))
        && (1..=31).contains(&s[8..10].parse::<u8>().unwrap_or(0))
}

fn blank_languages(text: &Text) -> Vec<&'static str> {
    Lang::ALL.into_iter().filter(|l| text.get(*l).trim().is_empty()).map(Lang::code).collect()
}

fn check_claim(c: &Claim) -> Vec<String> {
    let mut out = Vec::new();
    if c.id.is_empty()
        || !c.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        || c.id.starts_with('-')
    {
        out.push("id must be lowercase letters, digits, '.' and '-'".to_string());
    }
    if c.topic.trim().is_empty() {
        out.push("topic is empty".to_string());
    }
    for (field, text) in [("statement", Some(&c.statement)), ("note", Some(&c.note)), ("correction", c.correction.as_ref())] {
        if let Some(text) = text {
            let blank = blank_languages(text);
            if !blank.is_empty() {
                out.push(format!("{field} is empty in: {}", blank.join(", ")));
            }
        }
    }
    if let Some(v) = &c.value {
        if v.unit.trim().is_empty() {
            out.push("value.unit is empty".to_string());
        }
        match (v.number, v.min, v.max) {
            (None, None, None) => out.push("value needs number, or min and/or max".to_string()),
            (_, Some(lo), Some(hi)) if lo > hi => out.push(format!("value.min {lo} is above value.max {hi}")),
            _ => {}
        }
    }
    if c.sources.is_empty() {
        out.push("no sources".to_string());
    }
    for (i, s) in c.sources.iter().enumerate() {
        let at = format!("sources[{i}] ({})", s.kind.code());
        if s.title.trim().is_empty() {
            out.push(format!("{at}: title is empty"));
        }
        if s.passage.trim().is_empty() {
            out.push(format!("{at}: passage is empty (quote the exact passage, line or formula)"));
        }
        if !is_date(&s.accessed) {
            out.push(format!("{at}: accessed `{}` is not a YYYY-MM-DD date", s.accessed));
        }
        match &s.url {
            Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => {
                out.push(format!("{at}: url `{url}` is not an http(s) URL"))
            }
            None if !matches!(s.kind, SourceKind::Derivation | SourceKind::Measurement) => {
                out.push(format!("{at}: url is required for this kind"))
            }
            _ => {}
        }
        if s.kind == SourceKind::SourceCode && s.version.as_deref().map_or(true, |v| v.trim().is_empty()) {
            out.push(format!("{at}: source code needs the pinned `version` (tag or commit) it was read at"));
        }
        if s.kind == SourceKind::Measurement && s.submitters.is_none() {
            out.push(format!("{at}: measurement needs `submitters` (independent submitters counted)"));
        }
    }

    let primary = c.sources.iter().any(|s| s.kind.is_primary());
    let derived = c.sources.iter().any(|s| s.kind == SourceKind::Derivation);
    let measured = c
        .sources
        .iter()
        .any(|s| s.kind == SourceKind::Measurement && s.submitters.unwrap_or(0) >= MIN_INDEPENDENT_MEASUREMENTS);
    let evidence = primary || derived || measured;
    match c.verdict {
        Verdict::Verified if !evidence => out.push(format!(
            "verified needs a primary source, a derivation, or a measurement from at least {MIN_INDEPENDENT_MEASUREMENTS} independent submitters"
        )),
        Verdict::Qualified | Verdict::Contradicted => {
            if c.correction.is_none() {
                out.push(format!("{} needs `correction`: the precise, correct statement", c.verdict.code()));
            }
            if !evidence {
                out.push(format!(
                    "{} needs counter-evidence: a primary source, a derivation or measurements from at least {MIN_INDEPENDENT_MEASUREMENTS} independent submitters",
                    c.verdict.code()
                ));
            }
        }
        Verdict::Unverified if evidence => out.push(
            "unverified but it has primary evidence: give the verdict that evidence supports".to_string(),
        ),
        _ => {}
    }
    if c.verdict == Verdict::Verified && c.correction.is_some() {
        out.push("verified claims carry no `correction`".to_string());
    }

    match c.history.last() {
        None => out.push("history is empty: record at least the first verdict".to_string()),
        Some(last) if last.to != c.verdict => out.push(format!(
            "history ends at {} but the verdict is {}",
            last.to.code(),
            c.verdict.code()
        )),
        _ => {}
    }
    for (i, h) in c.history.iter().enumerate() {
        if !is_date(&h.date) {
            out.push(format!("history[{i}]: date `{}` is not YYYY-MM-DD", h.date));
        }
        if h.why.trim().is_empty() {
            out.push(format!("history[{i}]: why is empty"));
        }
        if i > 0 {
            let prev = &c.history[i - 1];
            if h.from != Some(prev.to) {
                out.push(format!("history[{i}]: from must be {} (the previous entry's to)", prev.to.code()));
            }
            if h.date < prev.date {
                out.push(format!("history[{i}]: dates go backwards"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HistoryEntry, Source};

    fn text(s: &str) -> Text {
        Text { pt: s.into(), es: s.into(), zh: s.into(), it: s.into(), en: s.into() }
    }

    fn source(kind: SourceKind) -> Source {
        Source {
            kind,
            title: "t".into(),
            url: Some("https://example.org".into()),
            passage: "p".into(),
            version: None,
            accessed: "2026-11-30".into(),
            submitters: None,
        }
    }

    fn claim(verdict: Verdict, sources: Vec<Source>) -> Claim {
        Claim {
            id: "c".into(),
            topic: "t".into(),
            statement: text("s"),
            value: None,
            conditions: Default::default(),
            origins: vec![],
            sources,
            verdict,
            note: text("n"),
            correction: None,
            history: vec![HistoryEntry { date: "2026-11-30".into(), from: None, to: verdict, why: "w".into() }],
        }
    }

    #[test]
    fn verified_needs_primary_evidence() {
        assert!(check_claim(&claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)])).is_empty());
        let errs = check_claim(&claim(Verdict::Verified, vec![source(SourceKind::Community)]));
        assert!(errs[0].starts_with("verified needs"), "{errs:?}");
    }

    #[test]
    fn measurements_verify_only_from_three_submitters() {
        let mut m = source(SourceKind::Measurement);
        m.submitters = Some(2);
        assert!(!check_claim(&claim(Verdict::Verified, vec![m.clone()])).is_empty());
        m.submitters = Some(3);
        assert!(check_claim(&claim(Verdict::Verified, vec![m])).is_empty());
    }

    #[test]
    fn contradicted_needs_a_correction() {
        let c = claim(Verdict::Contradicted, vec![source(SourceKind::SourceCode)]);
        let errs = check_claim(&c);
        assert!(errs.iter().any(|e| e.contains("needs `correction`")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("pinned `version`")), "{errs:?}");
    }

    #[test]
    fn unverified_with_primary_evidence_is_inconsistent() {
        let errs = check_claim(&claim(Verdict::Unverified, vec![source(SourceKind::Paper)]));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(check_claim(&claim(Verdict::Unverified, vec![source(SourceKind::Community)])).is_empty());
    }

    #[test]
    fn history_must_end_at_the_verdict() {
        let mut c = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        c.history[0].to = Verdict::Unverified;
        assert!(check_claim(&c).iter().any(|e| e.contains("history ends at unverified")));
    }

    #[test]
    fn blank_translations_and_bad_dates_are_named() {
        let mut c = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        c.statement.zh = " ".into();
        c.sources[0].accessed = "30/11/2026".into();
        let errs = check_claim(&c);
        assert!(errs.iter().any(|e| e == "statement is empty in: zh"), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("not a YYYY-MM-DD date")), "{errs:?}");
    }
}
