//! The verdict rules and the data invariants `dataset check` enforces.

use std::collections::BTreeMap;
use std::fmt;

use crate::units::{UNITS, unit_scale};
use crate::{Claim, Dataset, Lang, Source, SourceKind, Text, Verdict};

/// One thing wrong with the data, located by file and claim id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    /// What kind of entry: `claim`, `gpu`, `llm`, `diffusion`, `quant`, `tool`, `seed`.
    pub kind: &'static str,
    pub id: Option<String>,
    pub message: String,
}

impl Problem {
    /// A problem with a claim (or with a whole file when `id` is None).
    pub fn new(file: &str, id: Option<&str>, message: String) -> Problem {
        Problem::of(file, "claim", id, message)
    }

    pub fn of(file: &str, kind: &'static str, id: Option<&str>, message: String) -> Problem {
        Problem { file: file.to_string(), kind, id: id.map(str::to_string), message }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.id {
            Some(id) => write!(f, "{}: {} `{}`: {}", self.file, self.kind, id, self.message),
            None => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

/// Default relative tolerance between an aggregate's median and the claim's value.
pub const MEASUREMENT_TOLERANCE: f64 = 0.05;

/// Default relative tolerance of a derivation.
pub const DERIVATION_TOLERANCE: f64 = 0.005;

/// Minimum number of independent, consistent measurements that verify a claim on their own.
pub const MIN_INDEPENDENT_MEASUREMENTS: u32 = 3;

/// Days an aggregate's independent submitters must be spread over (from the first report of the
/// earliest to that of the latest) before it counts as evidence at all.
pub const MIN_SPREAD_DAYS: f64 = 1.0;

/// Checks every claim and catalog entry. `file_of` maps `kind:id` (e.g. `claim:x`, `gpu:rtx-4090`)
/// to the file it came from.
pub fn check(dataset: &Dataset, file_of: &BTreeMap<String, String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let file = |kind: &str, id: &str| file_of.get(&format!("{kind}:{id}")).cloned().unwrap_or_else(|| "?".into());
    for claim in &dataset.claims {
        let f = file("claim", &claim.id);
        for message in check_claim(claim, dataset).into_iter().chain(check_claim_refs(claim, dataset)) {
            problems.push(Problem::new(&f, Some(&claim.id), message));
        }
    }
    crate::catalog_check::check_catalogs(dataset, &file, &mut problems);
    check_aggregates(dataset, &file, &mut problems);
    for (id, message) in shared_sentences(dataset) {
        problems.push(Problem::new(&file("claim", &id), Some(&id), message));
    }
    problems
}

/// Collapses white space, so that a quote is compared as words.
fn words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The seed articles' own words: every seed listed in seeds.toml has its text in `texts`
/// (file name, text), and every origin quote (each fragment of it, split at " … ") is in its
/// seed's text, white space aside. Returns (claim id or seed file, problem).
pub fn seed_quotes(ds: &Dataset, texts: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut text_of = BTreeMap::new();
    for s in &ds.seeds {
        match texts.iter().find(|(f, _)| f == &s.file) {
            Some((_, t)) => {
                text_of.insert(s.file.as_str(), words(t));
            }
            None => out.push((s.file.clone(), "the seed's text is missing (dataset/sources/seeds/)".to_string())),
        }
    }
    for c in &ds.claims {
        for o in &c.origins {
            let (Some(seed), Some(quote)) = (&o.seed, &o.quote) else { continue };
            let Some(text) = text_of.get(seed.as_str()) else { continue };
            for part in quote.split(" … ").map(words).filter(|p| !p.is_empty()) {
                if !text.contains(&part) {
                    out.push((c.id.clone(), format!("origin quote is not in {seed}: {part:?}")));
                }
            }
        }
    }
    out
}

/// One sentence, one verdict: claims from the same place of the same seed (seed file and English
/// locator) must each quote the words they judge, and no two quotes may overlap (neither inside
/// the other). Returns (claim id, problem).
pub fn shared_sentences(ds: &Dataset) -> Vec<(String, String)> {
    let mut at: BTreeMap<(String, String), Vec<(&str, Option<String>)>> = BTreeMap::new();
    for c in &ds.claims {
        for o in &c.origins {
            if let Some(seed) = &o.seed {
                at.entry((seed.clone(), o.locator.en.clone())).or_default().push((c.id.as_str(), o.quote.as_deref().map(words)));
            }
        }
    }
    let mut out = Vec::new();
    for ((seed, locator), claims) in at {
        if claims.len() < 2 {
            continue;
        }
        let others = |me: &str| claims.iter().filter(|(id, _)| *id != me).map(|(id, _)| *id).collect::<Vec<_>>().join(", ");
        for (i, (id, quote)) in claims.iter().enumerate() {
            match quote {
                None => out.push((
                    id.to_string(),
                    format!("origin {seed} \"{locator}\" is shared with {}: give each claim the `quote` (the seed's own words) it judges", others(id)),
                )),
                Some(q) if q.is_empty() => out.push((id.to_string(), "origin quote is empty".to_string())),
                Some(q) => {
                    // A quote may name several fragments of the sentence, separated by " … ".
                    let parts = |q: &str| q.split(" … ").map(str::to_owned).filter(|p| !p.is_empty()).collect::<Vec<_>>();
                    let mine = parts(q);
                    for (other, oq) in claims.iter().skip(i + 1) {
                        if let Some(oq) = oq {
                            let theirs = parts(oq);
                            if mine.iter().any(|a| theirs.iter().any(|b| a.contains(b.as_str()) || b.contains(a.as_str()))) {
                                out.push((
                                    id.to_string(),
                                    format!(
                                        "origin {seed} \"{locator}\": its quote overlaps that of `{other}`; split the sentence into parts that do not overlap"
                                    ),
                                ));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The aggregated measurements: known GPU and measurement, the measurement's unit, counts and
/// statistics that can be true together.
fn check_aggregates(ds: &Dataset, file: &dyn Fn(&str, &str) -> String, problems: &mut Vec<Problem>) {
    for a in &ds.measurements {
        let key = a.key();
        let mut m = Vec::new();
        if ds.gpu(&a.gpu).is_none() {
            m.push(format!("no GPU `{}` in the catalog", a.gpu));
        }
        match crate::report::measurement_kind(&a.measurement) {
            None => m.push(format!(
                "unknown measurement `{}` (known: {})",
                a.measurement,
                crate::report::MEASUREMENTS.iter().map(|k| k.id).collect::<Vec<_>>().join(", ")
            )),
            Some(k) if k.unit != a.unit => m.push(format!("unit `{}` but {} is measured in {}", a.unit, a.measurement, k.unit)),
            Some(_) => {}
        }
        if a.count == 0 {
            m.push("count is 0".into());
        }
        if a.submitters == 0 || a.submitters > a.count {
            m.push(format!("submitters {} must be between 1 and count ({})", a.submitters, a.count));
        }
        if !(a.min.is_finite() && a.median.is_finite() && a.max.is_finite() && a.min <= a.median && a.median <= a.max) {
            m.push(format!("min {} ≤ median {} ≤ max {} does not hold", a.min, a.median, a.max));
        }
        if a.min < 0.0 {
            m.push("negative values".into());
        }
        let version_ok = |v: &String| v.split('.').count() == 3 && v.split('.').all(|x| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit()));
        if a.probe_versions.is_empty() || !a.probe_versions.iter().all(version_ok) {
            m.push("probe_versions must list the probe versions (x.y.z) of the reports".into());
        }
        let f = file("aggregate", &key);
        for message in m {
            problems.push(Problem::of(&f, "aggregate", Some(&key), message));
        }
    }
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

fn check_claim(c: &Claim, ds: &Dataset) -> Vec<String> {
    let mut out = Vec::new();
    if c.id.is_empty() || !c.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.') || c.id.starts_with('-') {
        out.push("id must be lowercase letters, digits, '.' and '-'".to_string());
    }
    if c.topic.is_none() {
        let topics: Vec<&str> = crate::Topic::ALL.iter().map(|t| t.as_str()).collect();
        out.push(format!("topic is missing (topics: {})", topics.join(", ")));
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
    if let Some(v) = &c.value {
        if !UNITS.contains(&v.unit.as_str()) {
            out.push(format!("unknown unit `{}` (units: {})", v.unit, UNITS.join(" ")));
        }
    }
    for (i, o) in c.origins.iter().enumerate() {
        match (&o.seed, &o.url) {
            (Some(_), Some(_)) | (None, None) => out.push(format!("origins[{i}]: give exactly one of `seed` or `url`")),
            (None, Some(url)) if !url.starts_with("http") => out.push(format!("origins[{i}]: url `{url}` is not http(s)")),
            _ => {}
        }
        let blank = blank_languages(&o.locator);
        if !blank.is_empty() {
            out.push(format!("origins[{i}]: locator is empty in: {}", blank.join(", ")));
        }
    }
    for (i, s) in c.sources.iter().enumerate() {
        out.extend(check_source(s).into_iter().map(|m| format!("sources[{i}] ({}): {m}", s.kind.as_str())));
    }
    out.extend(verdict_rules(c, ds));
    out
}

/// Checks one source (claims and catalog entries share this).
pub fn check_source(s: &Source) -> Vec<String> {
    let mut out = Vec::new();
    if s.title.trim().is_empty() {
        out.push("title is empty".to_string());
    }
    if s.passage.trim().is_empty() {
        out.push("passage is empty (quote the exact passage, line or formula)".to_string());
    }
    if !is_date(&s.accessed) {
        out.push(format!("accessed `{}` is not a YYYY-MM-DD date", s.accessed));
    }
    match &s.url {
        Some(url) if !(url.starts_with("https://") || url.starts_with("http://")) => out.push(format!("url `{url}` is not an http(s) URL")),
        None if s.seed.is_none() && !matches!(s.kind, SourceKind::Derivation | SourceKind::Measurement) => {
            out.push("url is required for this kind".to_string())
        }
        _ => {}
    }
    if s.seed.is_some() && s.kind != SourceKind::Community {
        out.push("`seed` is for community sources (the seed articles)".to_string());
    }
    if s.kind == SourceKind::SourceCode && s.version.as_deref().is_none_or(|v| v.trim().is_empty()) {
        out.push("source code needs the pinned `version` (tag or commit) it was read at".to_string());
    }
    if s.kind == SourceKind::Measurement && s.submitters.is_none() && s.aggregate.is_none() {
        out.push("measurement needs `submitters` (independent submitters counted) or `aggregate`".to_string());
    }
    if s.aggregate.is_some() && s.kind != SourceKind::Measurement {
        out.push("`aggregate` belongs to measurement sources only".to_string());
    }
    let derivation_fields = s.compute.is_some() || s.expect.is_some() || s.unit.is_some() || (s.tolerance.is_some() && s.aggregate.is_none());
    if s.kind == SourceKind::Derivation {
        if s.compute.is_none() || s.expect.is_none() || s.unit.is_none() {
            out.push("a derivation needs `compute`, `expect` and `unit`".to_string());
        }
        if let Some(u) = &s.unit {
            if !UNITS.contains(&u.as_str()) {
                out.push(format!("unknown unit `{u}` (units: {})", UNITS.join(" ")));
            }
        }
        if let Some(t) = s.tolerance {
            if !(t > 0.0 && t < 0.5) {
                out.push(format!("tolerance {t} must be a relative tolerance between 0 and 0.5"));
            }
        }
    } else if derivation_fields {
        out.push("`compute`/`expect`/`unit`/`tolerance` belong to derivation sources only".to_string());
    }
    out
}

/// References from a claim to seeds, catalogs and other claims, and its derivations evaluated.
fn check_claim_refs(c: &Claim, ds: &Dataset) -> Vec<String> {
    let mut out = Vec::new();
    let seed_known = |f: &str| ds.seeds.iter().any(|s| s.file == f);
    for (i, o) in c.origins.iter().enumerate() {
        if let Some(seed) = &o.seed {
            if !seed_known(seed) {
                out.push(format!("origins[{i}]: unknown seed `{seed}` (not in seeds.toml)"));
            }
        }
    }
    for m in &c.models {
        if ds.llm(m).is_none() && ds.diffusion_model(m).is_none() {
            out.push(format!("models: no LLM or diffusion model `{m}` in the catalogs"));
        }
    }
    for g in &c.gpus {
        if ds.gpu(g).is_none() {
            out.push(format!("gpus: no GPU `{g}` in the catalog"));
        }
    }
    for t in &c.tools {
        if ds.tool(t).is_none() {
            out.push(format!("tools: no tool `{t}` in the catalog"));
        }
    }
    for r in &c.related {
        if ds.claim(r).is_none() {
            out.push(format!("related: no claim `{r}`"));
        } else if r == &c.id {
            out.push("related: a claim cannot relate to itself".to_string());
        }
    }
    for r in &c.replaces {
        if ds.claim(r).is_some() {
            out.push(format!("replaces: `{r}` is a claim of its own (only retired ids are replaced)"));
        } else if ds.claims.iter().filter(|o| o.replaces.contains(r)).count() > 1 {
            out.push(format!("replaces: `{r}` is replaced by more than one claim"));
        } else if r.is_empty() || !r.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
            out.push(format!("replaces: `{r}` is not a claim id"));
        }
    }
    for (i, s) in c.sources.iter().enumerate() {
        if !s.backs.is_empty() {
            out.push(format!("sources[{i}]: `backs` belongs to catalog sources (the fields of the entry a passage states), not to claims"));
        }
        if let Some(seed) = &s.seed {
            if !seed_known(seed) {
                out.push(format!("sources[{i}]: unknown seed `{seed}` (not in seeds.toml)"));
            }
        }
        if let Some(message) = derivation_problem(c, s, ds) {
            out.push(format!("sources[{i}] (derivation): {message}"));
        }
        if let Err(message) = aggregate_evidence(c, s, ds) {
            out.push(format!("sources[{i}] (measurement): {message}"));
        }
    }
    out
}

/// What an aggregate a measurement source cites says about its claim.
#[derive(Clone, Debug, PartialEq)]
pub enum AggregateEvidence {
    /// Not an aggregate source.
    NotAggregate,
    /// Too few independent submitters, or not spread over [`MIN_SPREAD_DAYS`]: no evidence yet.
    TooThin,
    /// Enough independent submitters over time, and the median agrees with the claim's value.
    Agrees,
    /// Enough independent submitters over time, but the median does not agree: the claim is to be
    /// reviewed (crowd measurements never fail the check on their own).
    Disagrees(String),
}

/// A measurement source citing an aggregate: what it is evidence of ([`AggregateEvidence`]),
/// or Err for a reference that is wrong (no such aggregate, units that do not convert).
pub fn aggregate_evidence(c: &Claim, s: &Source, ds: &Dataset) -> Result<AggregateEvidence, String> {
    let Some(key) = &s.aggregate else { return Ok(AggregateEvidence::NotAggregate) };
    let Some(a) = ds.aggregate(key) else {
        return Err(format!("no aggregate `{key}` in measurements/aggregates.toml (run `dataset aggregate`)"));
    };
    if let Some(n) = s.submitters {
        if n != a.submitters {
            return Err(format!("submitters = {n} but the aggregate has {}: leave `submitters` out, it comes from the aggregate", a.submitters));
        }
    }
    if let Some(t) = s.tolerance {
        if !(t > 0.0 && t < 0.5) {
            return Err(format!("tolerance {t} must be a relative tolerance between 0 and 0.5"));
        }
    }
    let Some(v) = &c.value else {
        return Err("a claim resting on an aggregate needs a `value` to compare with its median".to_string());
    };
    let (Some((dim, scale)), Some((adim, ascale))) = (unit_scale(&v.unit), unit_scale(&a.unit)) else {
        return Err(format!("the claim's unit `{}` does not convert to the aggregate's `{}`", v.unit, a.unit));
    };
    if dim != adim {
        return Err(format!("the claim's unit `{}` does not convert to the aggregate's `{}`", v.unit, a.unit));
    }
    if a.submitters < MIN_INDEPENDENT_MEASUREMENTS || a.spread_days < MIN_SPREAD_DAYS {
        return Ok(AggregateEvidence::TooThin);
    }
    let median = a.median * ascale / scale;
    let tol = s.tolerance.unwrap_or(MEASUREMENT_TOLERANCE);
    let agrees = match (v.number, v.min, v.max) {
        (Some(x), _, _) => crate::derive::close(median, x, tol),
        (None, lo, hi) => lo.is_none_or(|lo| median >= lo * (1.0 - tol)) && hi.is_none_or(|hi| median <= hi * (1.0 + tol)),
    };
    Ok(if agrees {
        AggregateEvidence::Agrees
    } else {
        AggregateEvidence::Disagrees(format!(
            "the aggregate `{key}` has a median of {median} {} from {} independent submitters over {} days, which does not agree with the claim's value within {tol}",
            v.unit, a.submitters, a.spread_days
        ))
    })
}

/// Claims to review: those whose cited aggregate (enough independent submitters, spread over
/// time) disagrees with the claim's value. Printed by `dataset check` and `dataset aggregate`;
/// never a check failure, so that crowd submissions cannot break the data's build.
pub fn review_flags(ds: &Dataset) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in &ds.claims {
        for s in &c.sources {
            if let Ok(AggregateEvidence::Disagrees(why)) = aggregate_evidence(c, s, ds) {
                out.push((c.id.clone(), why));
            }
        }
    }
    out
}

/// Evaluates a derivation source against the catalogs; None when it holds (or is not a derivation).
/// When the claim is verified, its own value must also agree with the derived one.
pub fn derivation_problem(c: &Claim, s: &Source, ds: &Dataset) -> Option<String> {
    let (Some(compute), Some(expect)) = (&s.compute, s.expect) else { return None };
    let got = match crate::derive::evaluate(compute, ds) {
        Ok(v) => v,
        Err(e) => return Some(format!("`{compute}`: {e}")),
    };
    let tol = s.tolerance.unwrap_or(DERIVATION_TOLERANCE);
    let unit = s.unit.as_deref().unwrap_or("");
    if !crate::derive::close(got, expect, tol) {
        return Some(format!("`{compute}` = {got} {unit}, but expect = {expect} (tolerance {tol})"));
    }
    if c.verdict == Verdict::Verified {
        if let Some(v) = &c.value {
            if v.unit == unit {
                let claim_tol = if v.approx { 0.10 } else { 0.01 };
                let said = v.number.or(v.min.zip(v.max).map(|(a, b)| (a + b) / 2.0));
                let inside_range = matches!((v.min, v.max), (Some(lo), Some(hi)) if got >= lo * (1.0 - claim_tol) && got <= hi * (1.0 + claim_tol));
                if let Some(said) = said {
                    if !inside_range && !crate::derive::close(said, got, claim_tol) {
                        return Some(format!(
                            "the claim says {said} {unit} and is verified, but the derivation gives {got} {unit}: give it the verdict the arithmetic supports"
                        ));
                    }
                }
            }
        }
    }
    None
}

/// The catalog values a claim's derivations read that no primary source backs, as
/// `value (source title)`.
pub fn community_inputs(c: &Claim, ds: &Dataset) -> Vec<String> {
    let mut out = Vec::new();
    for s in c.sources.iter().filter(|s| s.kind == SourceKind::Derivation) {
        let Some(compute) = &s.compute else { continue };
        if let Ok((_, inputs)) = crate::derive::evaluate_with_inputs(compute, ds) {
            for i in inputs.into_iter().filter(|i| !i.primary) {
                let line = match &i.source {
                    Some(src) => format!("{} ({})", i.value, src.title),
                    None => format!("{} (no source)", i.value),
                };
                if !out.contains(&line) {
                    out.push(line);
                }
            }
        }
    }
    out
}

fn verdict_rules(c: &Claim, ds: &Dataset) -> Vec<String> {
    let mut out = Vec::new();

    let primary = c.sources.iter().any(|s| s.kind.is_primary());
    // A derivation is evidence only when every catalog value it reads is backed by a primary
    // source: a verdict is no stronger than its weakest input.
    let community_inputs = community_inputs(c, ds);
    let derived = c.sources.iter().any(|s| s.kind == SourceKind::Derivation) && community_inputs.is_empty();
    if !community_inputs.is_empty() && c.verdict != Verdict::Unverified && !primary {
        out.push(format!(
            "{} rests on a derivation over values only community pages back ({}): back them with a primary source (`backs` on a vendor or publisher source), or give the verdict community evidence supports (unverified)",
            c.verdict.as_str(),
            community_inputs.join("; ")
        ));
    }
    let measured =
        c.sources.iter().any(|s| s.kind == SourceKind::Measurement && s.aggregate.is_none() && s.submitters.unwrap_or(0) >= MIN_INDEPENDENT_MEASUREMENTS);
    // Crowd measurements (probe submissions, aggregated) are shown beside a claim and flag it for
    // review when they disagree (see `review_flags`), but they alone give it no verdict: anyone
    // can submit, so a verdict (verified, qualified with its correction, contradicted) always
    // needs a primary source, a derivation or reproduced measurements of our own as well. Crowd
    // evidence alone leaves a claim unverified; it never fails the check on its own, so that
    // submissions can neither make a claim stronger nor break the build.
    let crowd = c
        .sources
        .iter()
        .any(|s| s.kind == SourceKind::Measurement && matches!(aggregate_evidence(c, s, ds), Ok(AggregateEvidence::Agrees | AggregateEvidence::Disagrees(_))));
    let evidence = primary || derived || measured || crowd;
    if c.verdict != Verdict::Unverified && crowd && !(primary || derived || measured) {
        out.push(format!(
            "{} on crowd measurements alone: probe submissions leave a claim unverified (shown, and flagged for review when they disagree) unless a primary source, a derivation or {MIN_INDEPENDENT_MEASUREMENTS} reproduced measurements of our own back the verdict",
            c.verdict.as_str()
        ));
    }
    match c.verdict {
        Verdict::Verified if !evidence => out.push(format!(
            "verified needs a primary source, a derivation, or a measurement from at least {MIN_INDEPENDENT_MEASUREMENTS} independent submitters"
        )),
        Verdict::Qualified | Verdict::Contradicted => {
            if c.correction.is_none() {
                out.push(format!("{} needs `correction`: the precise, correct statement", c.verdict.as_str()));
            }
            if !evidence && !crowd {
                out.push(format!(
                    "{} needs counter-evidence: a primary source, a derivation or measurements from at least {MIN_INDEPENDENT_MEASUREMENTS} independent submitters",
                    c.verdict.as_str()
                ));
            }
        }
        // Crowd evidence arriving later flags the claim for review instead (see `review_flags`).
        Verdict::Unverified if primary || derived || measured => {
            out.push("unverified but it has primary evidence: give the verdict that evidence supports".to_string())
        }
        _ => {}
    }
    if c.verdict == Verdict::Verified && c.correction.is_some() {
        out.push("verified claims carry no `correction`".to_string());
    }

    match c.history.last() {
        None => out.push("history is empty: record at least the first verdict".to_string()),
        Some(last) if last.to != c.verdict => out.push(format!("history ends at {} but the verdict is {}", last.to.as_str(), c.verdict.as_str())),
        _ => {}
    }
    for (i, h) in c.history.iter().enumerate() {
        if !is_date(&h.date) {
            out.push(format!("history[{i}]: date `{}` is not YYYY-MM-DD", h.date));
        }
        let blank = blank_languages(&h.why);
        if !blank.is_empty() {
            out.push(format!("history[{i}]: why is empty in: {}", blank.join(", ")));
        }
        if i > 0 {
            let prev = &c.history[i - 1];
            if h.from != Some(prev.to) {
                out.push(format!("history[{i}]: from must be {} (the previous entry's to)", prev.to.as_str()));
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
    use crate::fixtures::{claim, source};

    fn check_claim_t(c: &Claim) -> Vec<String> {
        check_claim(c, &Dataset::default())
    }

    /// A merged claim's id keeps resolving to the claim it went into; a live id cannot be
    /// "replaced", nor one id by two claims.
    #[test]
    fn replaced_ids_resolve_and_must_be_retired() {
        let mut a = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        a.id = "kept".into();
        a.replaces = vec!["old-one".into()];
        let mut b = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        b.id = "other".into();
        let ds = Dataset { claims: vec![a.clone(), b.clone()], ..Default::default() };
        assert!(check_claim_refs(&a, &ds).is_empty(), "{:?}", check_claim_refs(&a, &ds));
        assert_eq!(ds.claim_by_url("old-one").map(|c| c.id.as_str()), Some("kept"));
        assert_eq!(ds.claim_by_url("kept").map(|c| c.id.as_str()), Some("kept"));
        assert!(ds.claim("old-one").is_none() && ds.claim_by_url("gone").is_none());
        a.replaces = vec!["other".into()];
        let ds = Dataset { claims: vec![a.clone(), b.clone()], ..Default::default() };
        assert!(check_claim_refs(&a, &ds).iter().any(|e| e.contains("is a claim of its own")));
        a.replaces = vec!["old-one".into()];
        b.replaces = vec!["old-one".into()];
        let ds = Dataset { claims: vec![a.clone(), b], ..Default::default() };
        assert!(check_claim_refs(&a, &ds).iter().any(|e| e.contains("more than one claim")));
    }

    #[test]
    fn verified_needs_primary_evidence() {
        assert!(check_claim_t(&claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)])).is_empty());
        let errs = check_claim_t(&claim(Verdict::Verified, vec![source(SourceKind::Community)]));
        assert!(errs[0].starts_with("verified needs"), "{errs:?}");
    }

    #[test]
    fn measurements_verify_only_from_three_submitters() {
        let mut m = source(SourceKind::Measurement);
        m.submitters = Some(2);
        assert!(!check_claim_t(&claim(Verdict::Verified, vec![m.clone()])).is_empty());
        m.submitters = Some(3);
        assert!(check_claim_t(&claim(Verdict::Verified, vec![m])).is_empty());
    }

    #[test]
    fn contradicted_needs_a_correction() {
        let c = claim(Verdict::Contradicted, vec![source(SourceKind::SourceCode)]);
        let errs = check_claim_t(&c);
        assert!(errs.iter().any(|e| e.contains("needs `correction`")), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("pinned `version`")), "{errs:?}");
    }

    #[test]
    fn unverified_with_primary_evidence_is_inconsistent() {
        let errs = check_claim_t(&claim(Verdict::Unverified, vec![source(SourceKind::Paper)]));
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(check_claim_t(&claim(Verdict::Unverified, vec![source(SourceKind::Community)])).is_empty());
    }

    #[test]
    fn history_must_end_at_the_verdict() {
        let mut c = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        c.history[0].to = Verdict::Unverified;
        assert!(check_claim_t(&c).iter().any(|e| e.contains("history ends at unverified")));
    }

    #[test]
    fn blank_translations_and_bad_dates_are_named() {
        let mut c = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        c.statement.zh = " ".into();
        c.sources[0].accessed = "30/11/2026".into();
        let errs = check_claim_t(&c);
        assert!(errs.iter().any(|e| e == "statement is empty in: zh"), "{errs:?}");
        assert!(errs.iter().any(|e| e.contains("not a YYYY-MM-DD date")), "{errs:?}");
    }
}
