//! Parsing the TOML data files (given as `(path, text)` pairs; reading them is the caller's job).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::{check, Claim, Dataset, Problem};

/// One claims file: `[[claim]]` tables.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimsFile {
    #[serde(default)]
    claim: Vec<Claim>,
}

/// The dataset as loaded, with the file each claim came from (for error messages).
#[derive(Debug, Default)]
pub struct Loaded {
    pub dataset: Dataset,
    pub file_of: BTreeMap<String, String>,
}

/// Parses every data file, then runs the verdict rules. `files` are paths relative to
/// `dataset/data/` (e.g. `claims/allocator.toml`) with their contents.
pub fn load(files: &[(String, String)]) -> Result<Loaded, Vec<Problem>> {
    let mut loaded = Loaded::default();
    let mut problems = Vec::new();
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (path, text) in sorted {
        if path.starts_with("claims/") && path.ends_with(".toml") {
            match toml::from_str::<ClaimsFile>(text) {
                Ok(file) => {
                    for claim in file.claim {
                        if let Some(first) = loaded.file_of.get(&claim.id) {
                            problems.push(Problem::new(
                                path,
                                Some(&claim.id),
                                format!("duplicate claim id (first defined in {first})"),
                            ));
                            continue;
                        }
                        loaded.file_of.insert(claim.id.clone(), path.clone());
                        loaded.dataset.claims.push(claim);
                    }
                }
                Err(e) => problems.push(Problem::new(path, None, toml_error(text, &e))),
            }
        } else {
            problems.push(Problem::new(
                path,
                None,
                "unexpected file: data files are claims/*.toml".to_string(),
            ));
        }
    }
    problems.extend(check(&loaded.dataset, &loaded.file_of));
    if problems.is_empty() { Ok(loaded) } else { Err(problems) }
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
why = "first review"
"#;

    fn files(text: &str) -> Vec<(String, String)> {
        vec![("claims/a.toml".to_string(), text.to_string())]
    }

    #[test]
    fn a_good_file_loads() {
        let loaded = load(&files(GOOD)).expect("loads");
        assert_eq!(loaded.dataset.claims.len(), 1);
        assert_eq!(loaded.file_of["example-claim"], "claims/a.toml");
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
    fn duplicate_ids_across_files_are_reported() {
        let mut f = files(GOOD);
        f.push(("claims/b.toml".to_string(), GOOD.to_string()));
        let problems = load(&f).unwrap_err();
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].file, "claims/b.toml");
        assert!(problems[0].message.contains("duplicate claim id (first defined in claims/a.toml)"));
    }

    #[test]
    fn unknown_files_are_reported() {
        let problems = load(&[("notes.txt".to_string(), String::new())]).unwrap_err();
        assert!(problems[0].to_string().contains("notes.txt"));
    }
}
