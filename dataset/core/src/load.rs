//! Parsing the TOML data files (given as `(path, text)` pairs; reading them is the caller's job).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{Aggregate, Claim, Dataset, Diffusion, Gpu, Llm, Problem, Quant, Seed, Tool, check};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimsFile {
    #[serde(default)]
    claim: Vec<Claim>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GpusFile {
    #[serde(default)]
    gpu: Vec<Gpu>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LlmsFile {
    #[serde(default)]
    llm: Vec<Llm>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DiffusionFile {
    #[serde(default)]
    diffusion: Vec<Diffusion>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuantFile {
    #[serde(default)]
    quant: Vec<Quant>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsFile {
    #[serde(default)]
    tool: Vec<Tool>,
}

/// `measurements/aggregates.toml`, written by `dataset aggregate`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AggregatesFile {
    #[serde(default)]
    aggregate: Vec<Aggregate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WantedFile {
    #[serde(default)]
    wanted: Vec<crate::catalog::Wanted>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecipesFile {
    #[serde(default)]
    recipe: Vec<crate::catalog::AllocRecipe>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SeedsFile {
    #[serde(default)]
    seed: Vec<Seed>,
}

/// The dataset as loaded, with the file each entry came from (for error messages), keyed
/// `kind:id` (`claim:…`, `gpu:…`, `llm:…`, `diffusion:…`, `quant:…`, `tool:…`, `seed:…`).
#[derive(Debug, Default)]
pub struct Loaded {
    pub dataset: Dataset,
    pub file_of: BTreeMap<String, String>,
}

impl Loaded {
    fn note(&mut self, kind: &str, id: &str, path: &str, problems: &mut Vec<Problem>) -> bool {
        let key = format!("{kind}:{id}");
        if let Some(first) = self.file_of.get(&key) {
            let kind = match kind {
                "claim" => "claim",
                "gpu" => "gpu",
                "llm" => "llm",
                "diffusion" => "diffusion",
                "quant" => "quant",
                "tool" => "tool",
                "aggregate" => "aggregate",
                "recipe" => "recipe",
                _ => "seed",
            };
            problems.push(Problem::of(path, kind, Some(id), format!("duplicate {kind} id (first defined in {first})")));
            return false;
        }
        self.file_of.insert(key, path.to_string());
        true
    }
}

fn parse<T: serde::de::DeserializeOwned>(path: &str, text: &str, problems: &mut Vec<Problem>) -> Option<T> {
    match toml::from_str::<T>(text) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(Problem::new(path, None, toml_error(text, &e)));
            None
        }
    }
}

/// Parses every data file, then runs the verdict rules and the catalog checks. `files` are paths
/// relative to `dataset/data/` (e.g. `claims/allocator.toml`) with their contents.
pub fn load(files: &[(String, String)]) -> Result<Loaded, Vec<Problem>> {
    let mut loaded = Loaded::default();
    let mut problems = Vec::new();
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, text) in sorted {
        let p = path.as_str();
        let p_ref = &mut problems;
        match p {
            _ if p.starts_with("claims/") && p.ends_with(".toml") => {
                for c in parse::<ClaimsFile>(p, text, p_ref).map(|f| f.claim).unwrap_or_default() {
                    if loaded.note("claim", &c.id, p, p_ref) {
                        loaded.dataset.claims.push(c);
                    }
                }
            }
            "catalog/gpus.toml" => {
                for g in parse::<GpusFile>(p, text, p_ref).map(|f| f.gpu).unwrap_or_default() {
                    if loaded.note("gpu", &g.id, p, p_ref) {
                        loaded.dataset.gpus.push(g);
                    }
                }
            }
            "catalog/llms.toml" => {
                for m in parse::<LlmsFile>(p, text, p_ref).map(|f| f.llm).unwrap_or_default() {
                    if loaded.note("llm", &m.id, p, p_ref) {
                        loaded.dataset.llms.push(m);
                    }
                }
            }
            "catalog/diffusion.toml" => {
                for m in parse::<DiffusionFile>(p, text, p_ref).map(|f| f.diffusion).unwrap_or_default() {
                    if loaded.note("diffusion", &m.id, p, p_ref) {
                        loaded.dataset.diffusion.push(m);
                    }
                }
            }
            "catalog/quant.toml" => {
                for q in parse::<QuantFile>(p, text, p_ref).map(|f| f.quant).unwrap_or_default() {
                    if loaded.note("quant", &q.id, p, p_ref) {
                        loaded.dataset.quant.push(q);
                    }
                }
            }
            _ if p.starts_with("catalog/tools/") && p.ends_with(".toml") => {
                for t in parse::<ToolsFile>(p, text, p_ref).map(|f| f.tool).unwrap_or_default() {
                    if loaded.note("tool", &t.id, p, p_ref) {
                        loaded.dataset.tools.push(t);
                    }
                }
            }
            "catalog/alloc-recipes.toml" => {
                for r in parse::<RecipesFile>(p, text, p_ref).map(|f| f.recipe).unwrap_or_default() {
                    if loaded.note("recipe", &r.id, p, p_ref) {
                        loaded.dataset.alloc_recipes.push(r);
                    }
                }
            }
            "measurements/aggregates.toml" => {
                for a in parse::<AggregatesFile>(p, text, p_ref).map(|f| f.aggregate).unwrap_or_default() {
                    if loaded.note("aggregate", &a.key(), p, p_ref) {
                        loaded.dataset.measurements.push(a);
                    }
                }
            }
            "measurements/wanted.toml" => {
                for w in parse::<WantedFile>(p, text, p_ref).map(|f| f.wanted).unwrap_or_default() {
                    if loaded.note("wanted", &format!("{}/{:?}", w.claim, w.platform), p, p_ref) {
                        loaded.dataset.wanted.push(w);
                    }
                }
            }
            "seeds.toml" => {
                for s in parse::<SeedsFile>(p, text, p_ref).map(|f| f.seed).unwrap_or_default() {
                    if loaded.note("seed", &s.file, p, p_ref) {
                        loaded.dataset.seeds.push(s);
                    }
                }
            }
            _ => problems.push(Problem::new(
                p,
                None,
                "unexpected file: data files are claims/*.toml, catalog/{gpus,llms,diffusion,quant,alloc-recipes}.toml, catalog/tools/*.toml, measurements/{aggregates,wanted}.toml and seeds.toml".to_string(),
            )),
        }
    }
    problems.extend(check(&loaded.dataset, &loaded.file_of));
    if !problems.is_empty() {
        return Err(problems);
    }
    // A measurement source citing an aggregate carries the aggregate's submitter count in the
    // built data (what the site shows).
    let Dataset { claims, measurements, .. } = &mut loaded.dataset;
    for s in claims.iter_mut().flat_map(|c| c.sources.iter_mut()) {
        if let Some(a) = s.aggregate.as_deref().and_then(|k| measurements.iter().find(|a| a.key() == k)) {
            s.submitters = Some(a.submitters);
        }
    }
    Ok(loaded)
}

/// A TOML error as one line with the line number, e.g. `line 12: missing field `zh``.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[claim]]
id = "example-claim"
topic = "allocator"
verdict = "verified"
statement = { pt = "a", es = "b", zh = "c", it = "d", en = "e" }
note = { pt = "a", es = "b", zh = "c", it = "d", en = "e" }
[[claim.sources]]
kind = "official-doc"
title = "Doc"
url = "https://example.org/doc"
passage = "the passage"
accessed = "2026-11-30"
[[claim.history]]
date = "2026-11-30"
to = "verified"
why = { pt = "a", es = "b", zh = "c", it = "d", en = "first review" }
"#;

    fn files(text: &str) -> Vec<(String, String)> {
        vec![("claims/a.toml".to_string(), text.to_string())]
    }

    #[test]
    fn a_good_file_loads() {
        let loaded = load(&files(GOOD)).expect("loads");
        assert_eq!(loaded.dataset.claims.len(), 1);
        assert_eq!(loaded.file_of["claim:example-claim"], "claims/a.toml");
    }

    #[test]
    fn a_missing_language_names_the_file_line_and_field() {
        let broken = GOOD.replace(", zh = \"c\"", "");
        let problems = load(&files(&broken)).unwrap_err();
        let text = problems[0].to_string();
        assert!(text.starts_with("claims/a.toml: "), "{text}");
        assert!(text.contains("missing field `zh`"), "{text}");
        assert!(text.contains("line "), "{text}");
    }

    #[test]
    fn a_topic_outside_the_list_or_missing_names_the_line_and_the_topics() {
        let problems = load(&files(&GOOD.replace("topic = \"allocator\"", "topic = \"alocator\""))).unwrap_err();
        let msg = problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n");
        assert!(msg.contains("line 4") && msg.contains("alocator") && msg.contains("oom-message"), "{msg}");
        let problems = load(&files(&GOOD.replace("topic = \"allocator\"\n", ""))).unwrap_err();
        let msg = problems.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("\n");
        assert!(msg.contains("topic is missing") && msg.contains("llm-inference"), "{msg}");
    }

    #[test]
    fn duplicate_ids_across_files_are_reported() {
        let mut f = files(GOOD);
        f.push(("claims/b.toml".to_string(), GOOD.to_string()));
        let problems = load(&f).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].file, "claims/b.toml");
        assert!(problems[0].message.contains("duplicate claim id (first defined in claims/a.toml)"));
    }

    const AGGREGATES: &str = r#"
[[aggregate]]
gpu = "test-gpu"
measurement = "usable_bytes"
unit = "B"
count = 4
submitters = 3
spread_days = 9.0
median = 23.5e9
min = 23.4e9
max = 23.6e9
probe_versions = ["0.1.0"]
"#;

    const GPUS: &str = r#"
[[gpu]]
id = "test-gpu"
name = "Test GPU"
segment = "desktop"
architecture = "Ada"
compute_capability = "8.9"
memory_gb = 24
memory_type = "GDDR6X"
bus_width_bits = 384
bandwidth_gbs = 1008
interface = "PCIe 4.0 x16"
source = { kind = "vendor-spec", title = "Spec", url = "https://example.org/spec", passage = "24 GB", accessed = "2026-11-30" }
"#;

    fn measured_claim(verdict: &str, value: &str) -> String {
        let correction = if verdict == "verified" { "" } else { r#"correction = { pt = "a", es = "b", zh = "c", it = "d", en = "f" }"# };
        format!(
            r#"
[[claim]]
id = "measured"
topic = "hardware"
verdict = "{verdict}"
value = {value}
statement = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
note = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
{correction}
[[claim.sources]]
kind = "measurement"
title = "Probe submissions"
passage = "median of accepted submissions"
accessed = "2026-11-30"
aggregate = "test-gpu/usable_bytes"
[[claim.history]]
date = "2026-11-30"
to = "{verdict}"
why = {{ pt = "a", es = "b", zh = "c", it = "d", en = "aggregated" }}
"#
        )
    }

    fn with_aggregates(claim: &str, aggregates: &str) -> Vec<(String, String)> {
        vec![
            ("catalog/gpus.toml".to_string(), GPUS.to_string()),
            ("measurements/aggregates.toml".to_string(), aggregates.to_string()),
            ("claims/m.toml".to_string(), claim.to_string()),
        ]
    }

    #[test]
    fn three_independent_submitters_over_days_whose_median_agrees_are_shown_with_the_claim() {
        let loaded = load(&with_aggregates(&measured_claim("unverified", r#"{ number = 21.9, unit = "GiB" }"#), AGGREGATES)).expect("unverified");
        assert_eq!(loaded.dataset.measurements.len(), 1);
        // The built data carries the aggregate's submitter count.
        assert_eq!(loaded.dataset.claims[0].sources[0].submitters, Some(3));
        assert!(crate::check::review_flags(&loaded.dataset).is_empty());
    }

    fn derived_claim(verdict: &str) -> String {
        format!(
            r#"
[[claim]]
id = "derived"
topic = "hardware"
verdict = "{verdict}"
value = {{ number = 24, unit = "GB" }}
statement = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
note = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
[[claim.sources]]
kind = "derivation"
title = "The catalog's memory size"
passage = "gpu(test-gpu, memory_gb)"
accessed = "2026-11-30"
compute = "gpu(test-gpu, memory_gb)"
expect = 24
unit = "GB"
[[claim.history]]
date = "2026-11-30"
to = "{verdict}"
why = {{ pt = "a", es = "b", zh = "c", it = "d", en = "derived" }}
"#
        )
    }

    fn with_gpus(gpus: &str, claim: &str) -> Vec<(String, String)> {
        vec![("catalog/gpus.toml".to_string(), gpus.to_string()), ("claims/d.toml".to_string(), claim.to_string())]
    }

    #[test]
    fn a_derivation_over_community_values_cannot_verify() {
        // The vendor's page backs the value: the derivation verifies.
        let loaded = load(&with_gpus(GPUS, &derived_claim("verified"))).expect("primary chain");
        let d = loaded.dataset.details();
        assert!(d["derived"].inputs[0].inputs.iter().all(|i| i.primary && i.title == "Spec"), "{:?}", d["derived"].inputs);
        // Only a community page backs it: verified is refused, naming the input and its source.
        let community = GPUS.replace(r#"kind = "vendor-spec", title = "Spec""#, r#"kind = "community", title = "A spec aggregator""#);
        assert_ne!(community, GPUS);
        let problems = load(&with_gpus(&community, &derived_claim("verified"))).unwrap_err();
        assert!(
            problems.iter().any(|p| p.message.contains("values only community pages back") && p.message.contains("gpu test-gpu memory_gb (A spec aggregator)")),
            "{problems:?}"
        );
        assert!(load(&with_gpus(&community, &derived_claim("unverified"))).is_ok(), "unverified is what community evidence supports");
        // A vendor source among the extras that names the field restores the chain; one that
        // does not name it (context, e.g. a compute-capability table) does not.
        let extra = |backs: &str| {
            format!(
                "{community}[[gpu.extra_sources]]\nkind = \"vendor-spec\"\ntitle = \"Vendor table\"\nurl = \"https://example.org/t\"\npassage = \"24 GB\"\naccessed = \"2026-11-30\"\n{backs}\n"
            )
        };
        assert!(load(&with_gpus(&extra("backs = [\"memory_gb\"]"), &derived_claim("verified"))).is_ok());
        assert!(load(&with_gpus(&extra("backs = [\"compute_capability\"]"), &derived_claim("verified"))).is_err());
        assert!(load(&with_gpus(&extra(""), &derived_claim("verified"))).is_err());
    }

    fn seed_claim(id: &str, verdict: &str, quote: Option<&str>) -> String {
        let correction = if verdict == "verified" { "" } else { r#"correction = { pt = "a", es = "b", zh = "c", it = "d", en = "f" }"# };
        let quote = quote.map(|q| format!("quote = \"{q}\"")).unwrap_or_default();
        format!(
            r#"
[[claim]]
id = "{id}"
topic = "hardware"
verdict = "{verdict}"
statement = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
note = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
{correction}
[[claim.origins]]
seed = "002_145f3f392590e592.txt"
locator = {{ pt = "s", es = "s", zh = "s", it = "s", en = "section 1.1" }}
{quote}
[[claim.sources]]
kind = "official-doc"
title = "Doc"
url = "https://example.org/doc"
passage = "p"
accessed = "2026-11-30"
[[claim.history]]
date = "2026-11-30"
to = "{verdict}"
why = {{ pt = "a", es = "b", zh = "c", it = "d", en = "e" }}
"#
        )
    }

    #[test]
    fn one_sentence_gets_one_verdict_per_named_part() {
        let files = |a: &str, b: &str| {
            vec![("seeds.toml".to_string(), include_str!("../../data/seeds.toml").to_string()), ("claims/s.toml".to_string(), format!("{a}{b}"))]
        };
        // Two claims from one sentence without quotes: refused, naming the other claim.
        let problems = load(&files(&seed_claim("half-a", "verified", None), &seed_claim("half-b", "contradicted", None))).unwrap_err();
        assert!(problems.iter().any(|p| p.message.contains("is shared with half-b") && p.message.contains("`quote`")), "{problems:?}");
        // Quotes that overlap (one inside the other): refused.
        let problems = load(&files(
            &seed_claim("half-a", "verified", Some("o alocador guarda blocos")),
            &seed_claim("half-b", "contradicted", Some("o alocador  guarda blocos e pega 8 GB")),
        ))
        .unwrap_err();
        assert!(problems.iter().any(|p| p.message.contains("overlaps that of `half-b`")), "{problems:?}");
        // Named, separate parts: each half gets its own verdict.
        let ok = load(&files(
            &seed_claim("half-a", "verified", Some("o alocador guarda blocos")),
            &seed_claim("half-b", "contradicted", Some("e pega 8 GB de uma vez")),
        ));
        assert!(ok.is_ok(), "{:?}", ok.err());
    }

    #[test]
    fn crowd_measurements_alone_give_no_verdict() {
        // Issue 40 point 2: qualified and contradicted on crowd aggregates alone passed the check.
        for verdict in ["verified", "qualified", "contradicted"] {
            let problems = load(&with_aggregates(&measured_claim(verdict, r#"{ number = 21.9, unit = "GiB" }"#), AGGREGATES)).unwrap_err();
            assert!(problems.iter().any(|p| p.message.starts_with(&format!("{verdict} on crowd measurements alone"))), "{verdict}: {problems:?}");
        }
        // Unverified, with the aggregate shown beside it: fine.
        assert!(load(&with_aggregates(&measured_claim("unverified", r#"{ number = 21.9, unit = "GiB" }"#), AGGREGATES)).is_ok());
    }

    #[test]
    fn a_median_that_disagrees_flags_the_claim_for_review_without_failing() {
        let loaded = load(&with_aggregates(&measured_claim("unverified", r#"{ number = 24, unit = "GiB" }"#), AGGREGATES)).expect("still checks");
        let flags = crate::check::review_flags(&loaded.dataset);
        assert_eq!(flags.len(), 1, "{flags:?}");
        assert_eq!(flags[0].0, "measured");
        assert!(flags[0].1.contains("does not agree with the claim's value"), "{flags:?}");
    }

    #[test]
    fn submitters_within_a_day_are_not_evidence() {
        let burst = AGGREGATES.replace("spread_days = 9.0", "spread_days = 0.01");
        let problems = load(&with_aggregates(&measured_claim("qualified", r#"{ number = 21.9, unit = "GiB" }"#), &burst)).unwrap_err();
        assert!(problems.iter().any(|p| p.message.contains("needs counter-evidence")), "{problems:?}");
    }

    #[test]
    fn two_submitters_are_not_enough() {
        let two = AGGREGATES.replace("submitters = 3", "submitters = 2");
        let problems = load(&with_aggregates(&measured_claim("verified", r#"{ number = 21.9, unit = "GiB" }"#), &two)).unwrap_err();
        assert!(problems.iter().any(|p| p.message.starts_with("verified needs")), "{problems:?}");
    }

    #[test]
    fn aggregates_are_checked() {
        let bad = AGGREGATES.replace("test-gpu", "no-such-gpu").replace("submitters = 3", "submitters = 9").replace("unit = \"B\"", "unit = \"GB/s\"");
        let problems = load(&with_aggregates("", &bad)).unwrap_err();
        let text: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        assert!(text.iter().any(|p| p.starts_with("measurements/aggregates.toml: aggregate `no-such-gpu/usable_bytes`: no GPU")), "{text:?}");
        assert!(text.iter().any(|p| p.contains("submitters 9 must be between 1 and count (4)")), "{text:?}");
        assert!(text.iter().any(|p| p.contains("unit `GB/s` but usable_bytes is measured in B")), "{text:?}");
        let problems = load(&with_aggregates(
            &measured_claim("verified", r#"{ number = 21.9, unit = "GiB" }"#).replace("test-gpu/usable_bytes", "test-gpu/nothing"),
            AGGREGATES,
        ))
        .unwrap_err();
        assert!(problems.iter().any(|p| p.message.contains("no aggregate `test-gpu/nothing`")), "{problems:?}");
    }

    #[test]
    fn unknown_files_are_reported() {
        let problems = load(&[("notes.txt".to_string(), String::new())]).unwrap_err();
        assert!(problems[0].to_string().contains("notes.txt"));
    }
}
