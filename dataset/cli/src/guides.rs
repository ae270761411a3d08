//! Reading the guides (`i18n/<lang>/guides/*.md`) for the pure renderer in headroom-core.

use std::path::{Path, PathBuf};

use headroom_core::guides::{Guide, check_languages, render_lang};
use headroom_core::{Dataset, Lang, Verdict};
use headroom_i18n::{k, t};

pub fn default_i18n_dir() -> PathBuf {
    std::env::var_os("HEADROOM_I18N").map(PathBuf::from).unwrap_or_else(|| {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../i18n");
        std::fs::canonicalize(&p).unwrap_or(p)
    })
}

fn verdict_label(lang: Lang) -> impl Fn(Verdict) -> String {
    move |v| {
        t(
            lang,
            match v {
                Verdict::Verified => k::VERDICT_VERIFIED,
                Verdict::Qualified => k::VERDICT_QUALIFIED,
                Verdict::Unverified => k::VERDICT_UNVERIFIED,
                Verdict::Contradicted => k::VERDICT_CONTRADICTED,
            },
        )
        .to_string()
    }
}

/// The reading order of the guides, from `i18n/guides.toml`.
fn order(dir: &Path) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Order {
        order: Vec<String>,
    }
    let path = dir.join("guides.toml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let o: Order = toml::from_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message()))?;
    Ok(o.order)
}

/// Renders every guide in every language, in reading order; all problems at once.
pub fn render_all(ds: &Dataset, dir: &Path) -> Result<Vec<(Lang, Vec<Guide>)>, String> {
    let order = order(dir)?;
    let mut problems = Vec::new();
    let mut rendered = Vec::new();
    for lang in Lang::ALL {
        let gdir = dir.join(lang.code()).join("guides");
        let mut sources = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&gdir) {
            let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "md")).collect();
            paths.sort();
            for p in paths {
                let slug = p.file_stem().unwrap_or_default().to_string_lossy().to_string();
                match std::fs::read_to_string(&p) {
                    Ok(text) => sources.push((slug, text)),
                    Err(e) => problems.push(format!("{}: {e}", p.display())),
                }
            }
        }
        for (slug, _) in &sources {
            if !order.contains(slug) {
                problems.push(format!("{}/guides/{slug}.md: not listed in guides.toml `order`", lang.code()));
            }
        }
        // Rendered per language with that language's data, like the pages that show them.
        let lds = ds.for_lang(lang);
        match render_lang(lang, &sources, &lds, &verdict_label(lang)) {
            Ok(mut guides) => {
                guides.sort_by_key(|g| order.iter().position(|s| *s == g.slug));
                rendered.push((lang, guides));
            }
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        problems.extend(check_languages(&rendered));
        if let Some((_, en)) = rendered.iter().find(|(l, _)| *l == Lang::En) {
            for slug in &order {
                if !en.iter().any(|g| &g.slug == slug) {
                    problems.push(format!("guides.toml lists `{slug}` but en/guides/{slug}.md does not exist"));
                }
            }
        }
    }
    problems.dedup();
    if problems.is_empty() {
        Ok(rendered)
    } else {
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let lines: Vec<String> = problems.iter().map(|p| format!("  {}/{p}", dir.display())).collect();
        Err(format!("{} problem(s) in the guides:\n{}", problems.len(), lines.join("\n")))
    }
}
