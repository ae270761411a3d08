//! The evidence model: claims, their sources and verdicts, and the catalogs they talk about.
//! Field names here are the field names of the TOML data files and of the built JSON.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::Lang;
use crate::catalog::*;

/// A text in all five languages. Every field is required: a file that lacks one does not parse.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Text {
    pub pt: String,
    pub es: String,
    pub zh: String,
    pub it: String,
    pub en: String,
}

impl Text {
    pub fn get(&self, lang: Lang) -> &str {
        match lang {
            Lang::Pt => &self.pt,
            Lang::Es => &self.es,
            Lang::Zh => &self.zh,
            Lang::It => &self.it,
            Lang::En => &self.en,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// A primary source states it, or ≥3 consistent measurements from independent submitters,
    /// or it is derived by code from verified values.
    Verified,
    /// True only under conditions the original wording leaves out; `correction` states them.
    Qualified,
    /// Only community sources back it.
    Unverified,
    /// A primary source or measurements say otherwise; `correction` gives the right statement.
    Contradicted,
}
crate::string_enum!(Verdict { Verified = "verified", Qualified = "qualified", Unverified = "unverified", Contradicted = "contradicted" });

/// What a claim is about: the claims browser filters by it and the guides' index counts by it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topic {
    Allocator,
    OomMessage,
    Diagnostics,
    Diffusion,
    Video,
    LlmInference,
    Training,
    Hardware,
}
crate::string_enum!(Topic { Allocator = "allocator", OomMessage = "oom-message", Diagnostics = "diagnostics", Diffusion = "diffusion", Video = "video", LlmInference = "llm-inference", Training = "training", Hardware = "hardware" });

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceKind {
    OfficialDoc,
    /// Source code at a pinned version (`version` is required).
    SourceCode,
    ModelCard,
    Paper,
    VendorSpec,
    /// Forum posts, blogs, single benchmarks, the seed articles.
    Community,
    /// Aggregated probe submissions or reference runs (`submitters` says how many independent ones).
    Measurement,
    /// Computed by code from catalog values; the test suite recomputes it.
    Derivation,
}
crate::string_enum!(SourceKind { OfficialDoc = "official-doc", SourceCode = "source-code", ModelCard = "model-card", Paper = "paper", VendorSpec = "vendor-spec", Community = "community", Measurement = "measurement", Derivation = "derivation" });

impl SourceKind {
    /// Kinds that count as primary evidence on their own.
    pub fn is_primary(self) -> bool {
        matches!(self, SourceKind::OfficialDoc | SourceKind::SourceCode | SourceKind::ModelCard | SourceKind::Paper | SourceKind::VendorSpec)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(not(feature = "slim"), serde(deny_unknown_fields))]
pub struct Source {
    pub kind: SourceKind,
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub title: String,
    /// Where to read it. Absent only for derivations and measurements kept in this repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub url: Option<String>,
    /// The exact passage, code line or formula the claim rests on (quoted, not paraphrased).
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub passage: String,
    /// Version, tag or commit the passage was read at (required for source code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub version: Option<String>,
    /// Date accessed, YYYY-MM-DD.
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub accessed: String,
    /// For measurements: how many independent submitters agree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub submitters: Option<u32>,
    /// For community sources that are one of the seed articles: its file name (see seeds.toml).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub seed: Option<String>,
    /// Derivations: the expression over catalog values (see `derive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute: Option<String>,
    /// Derivations: the value `compute` must produce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<f64>,
    /// Derivations: the unit of `expect`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub unit: Option<String>,
    /// Derivations: relative tolerance (default 0.005). Measurements citing an aggregate: how far
    /// its median may be from the claim's value (default 0.05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub tolerance: Option<f64>,
    /// Measurements: the aggregate of accepted probe submissions this rests on, as
    /// `<gpu id>/<measurement>` (e.g. `rtx-4090/usable_bytes`, see `measurements/aggregates.toml`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub aggregate: Option<String>,
    /// Catalog sources: the fields of the entry its passage states (`memory_gb`, `bandwidth_gbs`,
    /// …). An entry's main source without it backs every field; an extra source without it backs
    /// none (it is context). A value's provenance is that of the best source backing it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backs: Vec<String>,
}

impl Source {
    /// A source reduced to its kind and derivation expression (the app's compact data).
    pub fn bare(kind: SourceKind, compute: Option<String>) -> Source {
        Source {
            kind,
            title: String::new(),
            url: None,
            passage: String::new(),
            version: None,
            accessed: String::new(),
            submitters: None,
            seed: None,
            compute,
            expect: None,
            unit: None,
            tolerance: None,
            aggregate: None,
            backs: Vec::new(),
        }
    }
}

/// Who said the claim in the first place, and where: a seed article or a URL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    /// A seed article's file name (listed in seeds.toml).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<String>,
    /// Or the address of a forum post, article or issue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Section or paragraph within it, in every language (quoted section titles stay as the
    /// source writes them).
    pub locator: Text,
    /// The source's own words this claim judges, verbatim in its language. Required where claims
    /// share a locator: they split the sentence into parts that do not overlap, so that one
    /// sentence never gets two verdicts for the same words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
}

/// A number, a range or an approximation, with its unit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Value {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    pub unit: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approx: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryEntry {
    /// YYYY-MM-DD
    pub date: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Verdict>,
    pub to: Verdict,
    /// Why the verdict changed, in every language.
    pub why: Text,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// Stable, lowercase, `[a-z0-9-]`; part of the claim's permanent URL.
    pub id: String,
    /// Required in the data files; the calculator's copy leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<Topic>,
    pub statement: Text,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// model, task, resolution, precision, gpu, software and version, flags…
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub conditions: BTreeMap<String, String>,
    /// Catalog ids this claim is about (LLM or diffusion models, GPUs, tools) and related claims.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related: Vec<String>,
    /// Ids of claims merged into this one (duplicates of the same sentence): their permanent
    /// URLs keep working and show this claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub origins: Vec<Origin>,
    pub sources: Vec<Source>,
    pub verdict: Verdict,
    /// Why the verdict is what it is.
    pub note: Text,
    /// The precise, correct statement (required for qualified and contradicted claims).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<Text>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub history: Vec<HistoryEntry>,
}

/// Measurement evidence: one figure of one catalog GPU over every accepted probe submission
/// (`dataset aggregate` writes them to `data/measurements/aggregates.toml`). Counts only: no
/// submitter identity.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Aggregate {
    /// A catalog GPU id.
    pub gpu: String,
    /// What was measured (`usable_bytes`, `h2d_pinned_gbs`, … see `report::MEASUREMENTS`).
    pub measurement: String,
    /// `B`, `GB/s` or `us`.
    pub unit: String,
    /// Accepted reports.
    pub count: u32,
    /// Independent submitters among them: reports that share an install id or a network prefix
    /// are one submitter (one script with three made-up install ids on one network is one).
    pub submitters: u32,
    /// Days between the first report of the earliest and of the latest independent submitter
    /// (0 with one submitter): an aggregate counts as evidence only when it is spread over time.
    #[serde(default)]
    pub spread_days: f64,
    /// The median of each submitter's median.
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Probe versions that produced the reports.
    pub probe_versions: Vec<String>,
}

impl Aggregate {
    /// `<gpu>/<measurement>`, what a measurement source's `aggregate` names.
    pub fn key(&self) -> String {
        format!("{}/{}", self.gpu, self.measurement)
    }
}

/// The parts of a claim only its own page shows (`data/details-<lang>.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClaimDetail {
    pub note: Text,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origins: Vec<Origin>,
    pub sources: Vec<Source>,
    pub history: Vec<HistoryEntry>,
    /// For each derivation among `sources`: the catalog values it reads and what backs each (the
    /// provenance chain of a derived verdict).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<SourceInputs>,
}

/// The catalog values derivation `source` (an index into the claim's sources) reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SourceInputs {
    pub source: usize,
    pub inputs: Vec<InputRef>,
}

/// One catalog value and the source backing it, as the claim page shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InputRef {
    pub value: String,
    pub primary: bool,
    #[serde(default)]
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

impl ClaimDetail {
    pub fn of(c: &Claim) -> ClaimDetail {
        ClaimDetail { note: c.note.clone(), origins: c.origins.clone(), sources: c.sources.clone(), history: c.history.clone(), inputs: Vec::new() }
    }

    /// The details with each derivation's inputs and their provenance.
    pub fn with_inputs(c: &Claim, ds: &Dataset) -> ClaimDetail {
        let mut d = ClaimDetail::of(c);
        for (i, s) in c.sources.iter().enumerate() {
            let Some(expr) = s.compute.as_deref() else { continue };
            if let Ok((_, inputs)) = crate::derive::evaluate_with_inputs(expr, ds) {
                let inputs = inputs
                    .into_iter()
                    .map(|x| InputRef {
                        value: x.value,
                        primary: x.primary,
                        title: x.source.as_ref().map(|s| s.title.clone()).unwrap_or_default(),
                        url: x.source.and_then(|s| s.url),
                    })
                    .collect();
                d.inputs.push(SourceInputs { source: i, inputs });
            }
        }
        d
    }

    /// The catalog values derivation `source` reads (none for other sources).
    pub fn inputs_of(&self, source: usize) -> &[InputRef] {
        self.inputs.iter().find(|x| x.source == source).map_or(&[], |x| &x.inputs)
    }

    /// Whether the claim still carries its details (full data) or they were left out (compact).
    pub fn present(c: &Claim) -> bool {
        !c.history.is_empty()
    }
}

/// Everything the site and the fit engine read, as one document (`data/dataset.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    pub claims: Vec<Claim>,
    #[serde(default)]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub seeds: Vec<Seed>,
    #[serde(default)]
    pub gpus: Vec<Gpu>,
    #[serde(default)]
    pub llms: Vec<Llm>,
    #[serde(default)]
    pub diffusion: Vec<Diffusion>,
    #[serde(default)]
    pub quant: Vec<Quant>,
    /// The tools and their flags (`compact` keeps only the settings the calculator writes).
    #[serde(default)]
    pub tools: Vec<Tool>,
    /// Aggregated probe measurements per catalog GPU.
    #[serde(default)]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub measurements: Vec<Aggregate>,
    /// Measurements wanted from Macs and AMD cards (the probe page lists them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub wanted: Vec<crate::catalog::Wanted>,
    /// The allocator settings the allocator lab tries, cheapest change first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub alloc_recipes: Vec<crate::catalog::AllocRecipe>,
    /// The guides of one language, in reading order (title and summary; the rendered text is in
    /// `guides-<lang>.json`). Set by `dataset build` in each language's compact data.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "slim", serde(skip_deserializing))]
    pub guides: Vec<crate::guides::GuideSummary>,
    /// Claims per verdict (verified, qualified, unverified, contradicted) where `claims` holds
    /// only some of them (the calculator's data); see [`Dataset::verdict_count`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict_counts: Option<[usize; 4]>,
}

impl Dataset {
    /// How many claims of the whole dataset have this verdict.
    pub fn verdict_count(&self, v: Verdict) -> usize {
        let i = [Verdict::Verified, Verdict::Qualified, Verdict::Unverified, Verdict::Contradicted].iter().position(|x| *x == v).unwrap_or(0);
        match &self.verdict_counts {
            Some(counts) => counts[i],
            None => self.claims.iter().filter(|c| c.verdict == v).count(),
        }
    }

    pub fn claim(&self, id: &str) -> Option<&Claim> {
        self.claims.iter().find(|c| c.id == id)
    }
    /// The claim a permanent URL names: the claim with that id, else the one it was merged into.
    pub fn claim_by_url(&self, id: &str) -> Option<&Claim> {
        self.claim(id).or_else(|| self.claims.iter().find(|c| c.replaces.iter().any(|r| r == id)))
    }
    pub fn gpu(&self, id: &str) -> Option<&Gpu> {
        self.gpus.iter().find(|g| g.id == id)
    }
    pub fn llm(&self, id: &str) -> Option<&Llm> {
        self.llms.iter().find(|m| m.id == id)
    }
    pub fn diffusion_model(&self, id: &str) -> Option<&Diffusion> {
        self.diffusion.iter().find(|m| m.id == id)
    }
    /// A quantization format by id; GGUF names match case-insensitively (`q8_0` = `Q8_0`).
    pub fn quant(&self, id: &str) -> Option<&Quant> {
        self.quant.iter().find(|q| q.id == id).or_else(|| self.quant.iter().find(|q| q.id.eq_ignore_ascii_case(id)))
    }
    pub fn tool(&self, id: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.id == id)
    }
    /// An aggregate by `<gpu>/<measurement>`.
    pub fn aggregate(&self, key: &str) -> Option<&Aggregate> {
        let (gpu, measurement) = key.split_once('/')?;
        self.measurements.iter().find(|a| a.gpu == gpu && a.measurement == measurement)
    }

    /// The same dataset with every text kept only in `lang` (the others empty): what the site
    /// loads for one language.
    pub fn for_lang(&self, lang: Lang) -> Dataset {
        let keep = |t: &mut Text| {
            let kept = t.get(lang).to_string();
            *t = Text { pt: String::new(), es: String::new(), zh: String::new(), it: String::new(), en: String::new() };
            match lang {
                Lang::Pt => t.pt = kept,
                Lang::Es => t.es = kept,
                Lang::Zh => t.zh = kept,
                Lang::It => t.it = kept,
                Lang::En => t.en = kept,
            }
        };
        let mut ds = self.clone();
        for c in &mut ds.claims {
            keep(&mut c.statement);
            keep(&mut c.note);
            if let Some(t) = c.correction.as_mut() {
                keep(t);
            }
            for o in &mut c.origins {
                keep(&mut o.locator);
            }
            for h in &mut c.history {
                keep(&mut h.why);
            }
        }
        for t in &mut ds.tools {
            for f in &mut t.flags {
                keep(&mut f.effect);
            }
        }
        for w in &mut ds.wanted {
            keep(&mut w.look_for);
        }
        ds
    }

    /// What every page of the app loads: claims without their details (note, origins, sources,
    /// history: `details` has them) and catalog entries without quoted passages. Claim pages fetch
    /// the details of their language where they are shown. A derivation's expression stays (the
    /// fit engine finds the claims it cites by them), without the rest of its source. The tools
    /// catalog stays in `dataset.json` only: no page of the app reads it.
    pub fn compact(&self) -> Dataset {
        let mut ds = self.clone();
        for c in &mut ds.claims {
            c.note = Text::default();
            c.origins.clear();
            c.sources.retain(|s| s.compute.is_some());
            for s in &mut c.sources {
                *s = Source::bare(s.kind, s.compute.take());
            }
            c.history.clear();
        }
        for g in &mut ds.gpus {
            g.source.passage.clear();
            g.extra_sources.clear();
        }
        for m in &mut ds.llms {
            m.source.passage.clear();
            if m.repo.is_none() {
                m.repo = m.source.url.as_deref().and_then(crate::fit::setup::hf_repo);
            }
        }
        for d in &mut ds.diffusion {
            d.source.passage.clear();
            for c in &mut d.components {
                c.source.passage.clear();
            }
        }
        for q in &mut ds.quant {
            q.source.passage.clear();
        }
        // The calculator writes its settings in each tool's words (`fit::setup`): the tools keep
        // the flags that set a field, without their effects and sources (the claims they cite
        // carry the evidence).
        for t in &mut ds.tools {
            t.version.clear();
            t.flags.retain(|f| !f.sets.is_empty());
            for f in &mut t.flags {
                f.effect = Text::default();
                f.default.clear();
                f.source = Source::bare(f.source.kind, None);
            }
        }
        ds.tools.retain(|t| !t.flags.is_empty());
        ds
    }

    /// What the calculator loads (from a compact dataset): only what the fit engine and the
    /// calculator's pages read. Claims: those a breakdown term can cite or the engine reads (not
    /// those that only label a lever), with the counts per verdict of all of them; contradicted
    /// ones keep only their id and verdict (the engine never cites them); the others lose their
    /// derivations other than those over a model's components (`params(…)`), their notes (and the
    /// corrections of all but qualified claims, the only ones the calculator shows), topics,
    /// histories, tools, cards and related claims and, left without a derivation, their
    /// conditions. The catalog's sources, the GPUs' values other than memory, the seeds and the
    /// guides go too. `tests/calculator_data.rs` checks that the engine answers the same on it.
    pub fn for_calculator(&self) -> Dataset {
        let mut ds = self.clone();
        ds.verdict_counts = Some([Verdict::Verified, Verdict::Qualified, Verdict::Unverified, Verdict::Contradicted].map(|v| self.verdict_count(v)));
        // Only the claims the calculator can show or the engine reads are kept (the footer's
        // counts are `verdict_counts`).
        let settings: BTreeSet<&str> = self.tools.iter().flat_map(|t| &t.flags).flat_map(|f| &f.sets).flat_map(|s| &s.claims).map(String::as_str).collect();
        ds.claims.retain(|c| {
            crate::fit::engine_cites_claim(&c.id)
                || settings.contains(c.id.as_str())
                || c.sources.iter().any(|s| s.compute.as_deref().is_some_and(|e| e.contains("params(")))
        });
        ds.alloc_recipes.clear();
        ds.wanted.clear();
        for c in &mut ds.claims {
            if c.verdict == Verdict::Contradicted {
                c.statement = Text::default();
                c.correction = None;
            }
            // The engine reads only the expressions over a model's components.
            c.sources.retain(|s| s.compute.as_deref().is_some_and(|e| e.contains("params(")));
            // The calculator shows the statements of the claims its terms cite: those the engine
            // names, and the derivations it looks up. The others keep id, verdict and value.
            if c.sources.is_empty() && !crate::fit::engine_names_claim(&c.id) && !settings.contains(c.id.as_str()) {
                c.statement = Text::default();
                c.correction = None;
            }
            // The calculator shows a claim's statement and, when qualified, its condition; the
            // note (why the verdict is what it is) is on the claim's own page.
            c.note = Text::default();
            if c.verdict != Verdict::Qualified {
                c.correction = None;
            }
            c.topic = None;
            c.history.clear();
            c.tools.clear();
            c.related.clear();
            c.gpus.clear();
            // Conditions matter to the engine only beside a derivation (which format a weight
            // claim is about).
            if c.sources.is_empty() {
                c.conditions.clear();
            }
        }
        let bare = |s: &mut Source| *s = Source::bare(s.kind, None);
        // The calculator reads a GPU's id, name, vendor, segment and memory; the GPU table the rest.
        for g in &mut ds.gpus {
            bare(&mut g.source);
            g.extra_sources.clear();
            g.architecture.clear();
            g.compute_capability.clear();
            g.memory_type.clear();
            g.interface.clear();
            g.bus_width_bits = 0;
            g.bandwidth_gbs = None;
            g.llvm_target = None;
            g.rocm_linux = None;
        }
        for m in &mut ds.llms {
            bare(&mut m.source);
        }
        for d in &mut ds.diffusion {
            bare(&mut d.source);
            for c in &mut d.components {
                bare(&mut c.source);
            }
        }
        for q in &mut ds.quant {
            bare(&mut q.source);
        }
        ds.seeds.clear();
        ds.guides.clear();
        ds
    }

    /// Every claim's details (what `compact` leaves out), by claim id.
    pub fn details(&self) -> BTreeMap<String, ClaimDetail> {
        self.claims.iter().map(|c| (c.id.clone(), ClaimDetail::with_inputs(c, self))).collect()
    }

    /// The built JSON document.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("dataset serializes")
    }

    /// A built JSON document read back. Through a `Value`: the dataset's deserializers are then
    /// instantiated for `Value`, which the calculator's wasm carries anyway, and come out smaller.
    pub fn from_json(text: &str) -> Result<Dataset, serde_json::Error> {
        serde_json::from_value(serde_json::from_str(text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn for_lang_keeps_one_language() {
        let mut claim = crate::fixtures::claim(Verdict::Contradicted, vec![]);
        claim.correction = Some(crate::fixtures::text("c"));
        let ds = Dataset { claims: vec![claim], ..Default::default() };
        let it = ds.for_lang(Lang::It);
        let c = &it.claims[0];
        assert_eq!((c.statement.it.as_str(), c.note.it.as_str(), c.correction.as_ref().unwrap().it.as_str()), ("s-it", "n-it", "c-it"));
        assert!(c.statement.en.is_empty() && c.statement.zh.is_empty() && c.note.pt.is_empty());
        assert_eq!(Dataset::from_json(&it.to_json()).unwrap(), it);
    }
}
