//! Guides: Markdown articles in `i18n/<lang>/guides/<slug>.md`, rendered to HTML at build time.
//!
//! Every number that matters is a claim reference, rendered from the dataset in the reader's
//! language with its verdict badge and a link to the claim page:
//!
//! - `{{id}}`: the claim's value (refused for contradicted claims and claims without a value);
//! - `{{id:claimed}}`: the value as claimed, for any verdict (quoting folklore);
//! - `{{id:correct}}`: the value its derivation computes (the true figure of a derived claim);
//! - `[text](claim:id)`: a link to the claim with its badge;
//! - `[text](guide:slug#anchor)`, `[text](calc:?kind=...)`: another guide, the calculator with a
//!   workload (checked by running the fit engine on it).
//!
//! Outside code and references, prose may not state a quantity (a number with a unit) unless the
//! guide's front matter lists the exact phrase in `plain_numbers`. Rendering is pure: the shell
//! reads the files and passes their text.

use serde::{Deserialize, Serialize};

use crate::{Dataset, Lang, SourceKind, Value, Verdict};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Heading {
    pub level: u8,
    pub id: String,
    pub text: String,
}

/// One rendered guide in one language (`data/guides-<lang>.json` holds all of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Guide {
    pub slug: String,
    pub title: String,
    pub summary: String,
    pub related: Vec<String>,
    pub html: String,
    pub headings: Vec<Heading>,
    /// Claim ids referenced, in order of first appearance.
    pub claims: Vec<String>,
    /// Calculator queries linked.
    pub calculator: Vec<String>,
    pub words: usize,
}

/// What the guide index and page titles need, carried in each language's compact data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GuideSummary {
    pub slug: String,
    pub title: String,
    pub summary: String,
}

impl Guide {
    pub fn summary(&self) -> GuideSummary {
        GuideSummary { slug: self.slug.clone(), title: self.title.clone(), summary: self.summary.clone() }
    }
}

/// The front matter between `+++` lines.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrontMatter {
    pub title: String,
    pub summary: String,
    #[serde(default)]
    pub related: Vec<String>,
    #[serde(default)]
    pub plain_numbers: Vec<String>,
}

/// Splits `+++\n<toml>\n+++\n<markdown>`.
pub fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text.strip_prefix("+++\n").or_else(|| text.strip_prefix("+++\r\n")).ok_or("the file must start with a `+++` front matter line")?;
    let end = rest.find("\n+++").ok_or("the front matter has no closing `+++` line")?;
    let body = &rest[end + 4..];
    Ok((&rest[..end + 1], body.strip_prefix('\n').or_else(|| body.strip_prefix("\r\n")).unwrap_or(body)))
}

/// Units that make a number a quantity (prose must take those from claims).
const UNITS: &[&str] = &[
    "GB/s", "TB/s", "MB/s", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "B", "%", "bytes", "byte", "bits", "bit", "ms", "µs", "us", "字节", "比特",
    "位",
];

/// Quantities (number + unit) in a piece of prose, as written.
pub fn quantities(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let prev_ok = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '.' || chars[i - 1] == ',');
        if !(chars[i].is_ascii_digit() && prev_ok) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (chars[i].is_ascii_digit() || (matches!(chars[i], '.' | ',') && chars.get(i + 1).is_some_and(|c| c.is_ascii_digit()))) {
            i += 1;
        }
        let mut j = i;
        while j < chars.len() && matches!(chars[j], ' ' | '\u{a0}' | '\u{202f}') {
            j += 1;
        }
        let tail: String = chars[j..chars.len().min(j + 6)].iter().collect();
        if let Some(u) = UNITS.iter().find(|u| tail.starts_with(**u)) {
            let after = chars.get(j + u.chars().count());
            let boundary = match after {
                None => true,
                Some(c) => !(c.is_ascii_alphanumeric() || *c == '/' && !u.ends_with("/s")),
            };
            // "8B" names a model size (billions of parameters); "8 B" is bytes.
            if boundary && !(*u == "B" && j == i) {
                out.push(chars[start..j + u.chars().count()].iter().collect());
            }
        }
        i = i.max(start + 1);
    }
    out
}

/// Text with every `{{…}}` reference replaced by a space.
pub fn without_references(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        out.push(' ');
        match rest[open..].find("}}") {
            Some(close) => rest = &rest[open + close + 2..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// The anchor of a heading: lowercase letters and digits of any script, spaces and hyphens to `-`.
pub fn slugify(text: &str) -> String {
    let mut s = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_alphanumeric() {
            s.push(c);
        } else if (c.is_whitespace() || c == '-') && !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_matches('-').to_string()
}

#[cfg_attr(not(feature = "guides"), allow(dead_code))]
fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg_attr(not(feature = "guides"), allow(dead_code))]
/// What a `{{...}}` reference renders to, or why it cannot.
fn reference(ds: &Dataset, lang: Lang, inner: &str, verdict_label: &dyn Fn(Verdict) -> String) -> Result<(String, String), String> {
    let (id, mode) = inner.split_once(':').unwrap_or((inner, ""));
    let id = id.trim();
    let c = ds.claim(id).ok_or_else(|| format!("`{{{{{inner}}}}}`: no claim `{id}`"))?;
    let (value, verdict, class) = match mode.trim() {
        "" => {
            if c.verdict == Verdict::Contradicted {
                return Err(format!(
                    "`{{{{{inner}}}}}`: `{id}` is contradicted; quote it with `{{{{{id}:claimed}}}}` or show its true value with `{{{{{id}:correct}}}}`"
                ));
            }
            let v = c.value.as_ref().ok_or_else(|| format!("`{{{{{inner}}}}}`: `{id}` has no value; link it with [text](claim:{id})"))?;
            (crate::format::value(v, lang), c.verdict, "cval")
        }
        "claimed" => {
            let v = c.value.as_ref().ok_or_else(|| format!("`{{{{{inner}}}}}`: `{id}` has no value; link it with [text](claim:{id})"))?;
            (crate::format::value(v, lang), c.verdict, if c.verdict == Verdict::Contradicted { "cval said" } else { "cval" })
        }
        "correct" => {
            let d = c
                .sources
                .iter()
                .find(|s| s.kind == SourceKind::Derivation && s.expect.is_some())
                .ok_or_else(|| format!("`{{{{{inner}}}}}`: `{id}` has no derivation to compute a correct value from"))?;
            let v = Value { number: d.expect, min: None, max: None, unit: d.unit.clone().unwrap_or_default(), approx: false };
            // The derivation is recomputed by `dataset check` and the tests: verified by code.
            (crate::format::value(&v, lang), Verdict::Verified, "cval")
        }
        other => return Err(format!("`{{{{{inner}}}}}`: unknown form `:{other}` (use :claimed or :correct)")),
    };
    let code = verdict.as_str();
    let html = format!(
        "<a class=\"cref\" href=\"/{}/claims/{}/\" data-claim=\"{}\"><span class=\"{class}\">{}</span> <span class=\"badge {code}\" data-verdict=\"{code}\">{}</span></a>",
        lang.code(),
        esc(id),
        esc(id),
        esc(&value),
        esc(&verdict_label(verdict))
    );
    Ok((id.to_string(), html))
}

#[cfg_attr(not(feature = "guides"), allow(dead_code))]
/// Links a guide may hold, resolved after every guide is rendered.
#[derive(Debug)]
struct GuideLink {
    slug: String,
    anchor: Option<String>,
}

#[cfg(feature = "guides")]
mod render {
    use super::*;
    use pulldown_cmark::{CowStr, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};

    struct Out {
        guide: Guide,
        links: Vec<GuideLink>,
        anchors: Vec<String>,
    }

    fn level(l: HeadingLevel) -> u8 {
        match l {
            HeadingLevel::H1 => 1,
            HeadingLevel::H2 => 2,
            HeadingLevel::H3 => 3,
            HeadingLevel::H4 => 4,
            HeadingLevel::H5 => 5,
            HeadingLevel::H6 => 6,
        }
    }

    fn plain(events: &[Event]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Text(t) | Event::Code(t) => Some(t.to_string()),
                Event::Html(h) | Event::InlineHtml(h) => {
                    // Claim values inside headings: keep their visible text.
                    let mut s = String::new();
                    let mut in_tag = false;
                    for c in h.chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => s.push(c),
                            _ => {}
                        }
                    }
                    Some(s)
                }
                _ => None,
            })
            .collect()
    }

    fn one(slug: &str, text: &str, lang: Lang, ds: &Dataset, verdict_label: &dyn Fn(Verdict) -> String, problems: &mut Vec<String>) -> Option<Out> {
        let (fm, body) = match split_front_matter(text) {
            Ok(x) => x,
            Err(e) => {
                problems.push(e);
                return None;
            }
        };
        let fm: FrontMatter = match toml::from_str(fm) {
            Ok(f) => f,
            Err(e) => {
                problems.push(format!("front matter: {}", e.message()));
                return None;
            }
        };
        for (field, v) in [("title", &fm.title), ("summary", &fm.summary)] {
            if v.trim().is_empty() {
                problems.push(format!("front matter: `{field}` is empty"));
            }
            for q in quantities(v) {
                if !fm.plain_numbers.contains(&q) {
                    problems.push(format!("front matter `{field}` states the quantity `{q}`: quantities come from claim references"));
                }
            }
        }
        let mut opts = Options::empty();
        opts.insert(Options::ENABLE_TABLES);
        opts.insert(Options::ENABLE_STRIKETHROUGH);
        // Merge adjacent text so that a `{{…}}` reference is never split across events.
        let mut merged: Vec<Event> = Vec::new();
        for e in Parser::new_ext(body, opts) {
            if let (Event::Text(t), Some(Event::Text(prev))) = (&e, merged.last_mut()) {
                *prev = CowStr::from(format!("{prev}{t}"));
                continue;
            }
            merged.push(e);
        }
        let mut out = Vec::new();
        let mut claims: Vec<String> = Vec::new();
        let mut calculator = Vec::new();
        let mut links = Vec::new();
        let mut words = 0usize;
        let mut link_close: Vec<Option<String>> = Vec::new();
        let mut in_code_block = false;
        for e in merged {
            match e {
                Event::Start(Tag::CodeBlock(_)) => {
                    in_code_block = true;
                    out.push(e);
                }
                Event::End(TagEnd::CodeBlock) => {
                    in_code_block = false;
                    out.push(e);
                }
                Event::Text(t) if !in_code_block => {
                    words += t.split_whitespace().count() + t.chars().filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c)).count() / 2;
                    let mut rest: &str = &t;
                    let mut literal = String::new();
                    while let Some(open) = rest.find("{{") {
                        let Some(close) = rest[open..].find("}}") else {
                            problems.push(format!("unclosed `{{{{` in `{}`", rest.chars().take(60).collect::<String>()));
                            break;
                        };
                        literal.push_str(&rest[..open]);
                        out.push(Event::Text(CowStr::from(std::mem::take(&mut literal))));
                        let inner = &rest[open + 2..open + close];
                        match reference(ds, lang, inner, verdict_label) {
                            Ok((id, html)) => {
                                if !claims.contains(&id) {
                                    claims.push(id);
                                }
                                out.push(Event::InlineHtml(CowStr::from(html)));
                            }
                            Err(p) => problems.push(p),
                        }
                        rest = &rest[open + close + 2..];
                    }
                    literal.push_str(rest);
                    // The lint reads the prose with references taken out.
                    for q in quantities(&without_references(&t)) {
                        if !fm.plain_numbers.contains(&q) {
                            problems.push(format!(
                                "states the quantity `{q}` in prose: use a claim reference ({{{{id}}}}), or list the phrase in `plain_numbers` if it only names a card class"
                            ));
                        }
                    }
                    out.push(Event::Text(CowStr::from(literal)));
                }
                Event::Html(_) | Event::InlineHtml(_) => problems.push("raw HTML is not allowed in guides".into()),
                Event::Start(Tag::Image { .. }) => problems.push("images are not supported in guides".into()),
                Event::Start(Tag::Heading { level: l, .. }) if l == HeadingLevel::H1 => {
                    problems.push("`#` headings are not allowed: the title is the page's only h1".into());
                    out.push(e);
                }
                Event::Start(Tag::Link { link_type, dest_url, title, id }) => {
                    let dest = dest_url.to_string();
                    let (href, close) = if let Some(cid) = dest.strip_prefix("claim:") {
                        match ds.claim(cid) {
                            Some(c) => {
                                if !claims.contains(&c.id) {
                                    claims.push(c.id.clone());
                                }
                                let code = c.verdict.as_str();
                                (
                                    format!("/{}/claims/{cid}/", lang.code()),
                                    Some(format!(" <span class=\"badge {code}\" data-verdict=\"{code}\">{}</span>", esc(&verdict_label(c.verdict)))),
                                )
                            }
                            None => {
                                problems.push(format!("link to unknown claim `{cid}`"));
                                (String::new(), None)
                            }
                        }
                    } else if let Some(g) = dest.strip_prefix("guide:") {
                        let (s, anchor) = g.split_once('#').map_or((g, None), |(s, a)| (s, Some(a.to_string())));
                        links.push(GuideLink { slug: s.to_string(), anchor: anchor.clone() });
                        (format!("/{}/guides/{s}/{}", lang.code(), anchor.map(|a| format!("#{a}")).unwrap_or_default()), None)
                    } else if let Some(q) = dest.strip_prefix("calc:") {
                        let mut state = crate::fit::query::parse_query(ds, q);
                        // The card fields: a card and the other cards in the same machine.
                        let spec = |v: Option<serde_json::Value>| v.map(|v| v.as_str().map_or(v.to_string(), str::to_string));
                        let card = spec(state.remove("card"));
                        let others = spec(state.remove("cards"));
                        for key in crate::fit::query::CARD_KEYS {
                            state.remove(key);
                        }
                        let checked = crate::fit::workload::Workload::from_value(&serde_json::Value::Object(state)).and_then(|w| match &card {
                            Some(c) => {
                                let cards = std::iter::once(c.as_str())
                                    .chain(others.iter().flat_map(|o| o.split(',')))
                                    .map(|x| crate::fit::Card::parse(ds, x.trim(), 0.0))
                                    .collect::<Result<Vec<_>, String>>()?;
                                crate::fit::fit_on_cards(ds, &w, &cards)
                            }
                            None => crate::fit::fit(ds, &w),
                        });
                        if let Err(err) = checked {
                            problems.push(format!("calculator link `{q}` is not a valid workload: {err}"));
                        }
                        calculator.push(q.to_string());
                        (format!("/{}/calculator/{q}", lang.code()), None)
                    } else if let Some(a) = dest.strip_prefix('#') {
                        links.push(GuideLink { slug: slug.to_string(), anchor: Some(a.to_string()) });
                        (dest.clone(), None)
                    } else if dest.starts_with("https://") || dest.starts_with("http://") {
                        (dest.clone(), None)
                    } else {
                        problems.push(format!("link `{dest}`: use claim:, guide:, calc:, #anchor or an https:// address"));
                        (dest.clone(), None)
                    };
                    link_close.push(close);
                    out.push(Event::Start(Tag::Link {
                        link_type: if link_type == LinkType::Autolink { LinkType::Inline } else { link_type },
                        dest_url: CowStr::from(href),
                        title,
                        id,
                    }));
                }
                Event::End(TagEnd::Link) => {
                    if let Some(Some(badge)) = link_close.pop() {
                        out.push(Event::InlineHtml(CowStr::from(badge)));
                    }
                    out.push(e);
                }
                other => out.push(other),
            }
        }
        // Headings get ids (anchors); their text is collected for the table of contents.
        let mut html_events: Vec<Event> = Vec::new();
        let mut headings = Vec::new();
        let mut i = 0;
        while i < out.len() {
            if let Event::Start(Tag::Heading { level: l, .. }) = &out[i] {
                let l = level(*l);
                let end = out[i..].iter().position(|e| matches!(e, Event::End(TagEnd::Heading(_)))).map_or(out.len(), |p| i + p);
                let inner = &out[i + 1..end];
                let text = plain(inner);
                let mut id = slugify(&text);
                if id.is_empty() {
                    problems.push("a heading has no text".into());
                }
                let base = id.clone();
                let mut n = 2;
                while headings.iter().any(|h: &Heading| h.id == id) {
                    id = format!("{base}-{n}");
                    n += 1;
                }
                let mut inner_html = String::new();
                pulldown_cmark::html::push_html(&mut inner_html, inner.iter().cloned());
                html_events.push(Event::Html(CowStr::from(format!("<h{l} id=\"{}\">{inner_html}</h{l}>\n", esc(&id)))));
                headings.push(Heading { level: l, id, text });
                i = end + 1;
                continue;
            }
            html_events.push(out[i].clone());
            i += 1;
        }
        let mut html = String::new();
        pulldown_cmark::html::push_html(&mut html, html_events.into_iter());
        // External links open as usual but carry no referrer.
        let html = html
            .replace("<a href=\"https://", "<a rel=\"noopener noreferrer\" href=\"https://")
            .replace("<a href=\"http://", "<a rel=\"noopener noreferrer\" href=\"http://");
        let anchors = headings.iter().map(|h| h.id.clone()).collect();
        Some(Out {
            guide: Guide { slug: slug.to_string(), title: fm.title, summary: fm.summary, related: fm.related, html, headings, claims, calculator, words },
            links,
            anchors,
        })
    }

    /// Renders every guide of one language. `sources` are (slug, file text); problems name the
    /// file (`<lang>/guides/<slug>.md`).
    pub fn render_lang(lang: Lang, sources: &[(String, String)], ds: &Dataset, verdict_label: &dyn Fn(Verdict) -> String) -> Result<Vec<Guide>, Vec<String>> {
        let mut problems = Vec::new();
        let mut outs = Vec::new();
        for (slug, text) in sources {
            let mut p = Vec::new();
            if slugify(slug) != *slug || slug.contains(char::is_uppercase) {
                p.push(format!("the file name `{slug}` is not a slug (lowercase letters, digits, hyphens)"));
            }
            if let Some(o) = one(slug, text, lang, ds, verdict_label, &mut p) {
                outs.push(o);
            }
            problems.extend(p.into_iter().map(|m| format!("{}/guides/{slug}.md: {m}", lang.code())));
        }
        for o in &outs {
            let related = o.guide.related.iter().map(|r| GuideLink { slug: r.clone(), anchor: None });
            for l in o.links.iter().map(|l| GuideLink { slug: l.slug.clone(), anchor: l.anchor.clone() }).chain(related) {
                match outs.iter().find(|x| x.guide.slug == l.slug) {
                    None => problems.push(format!("{}/guides/{}.md: links to unknown guide `{}`", lang.code(), o.guide.slug, l.slug)),
                    Some(t) => {
                        if let Some(a) = &l.anchor {
                            if !t.anchors.contains(a) {
                                problems.push(format!(
                                    "{}/guides/{}.md: guide `{}` has no heading `#{a}` (its anchors: {})",
                                    lang.code(),
                                    o.guide.slug,
                                    l.slug,
                                    t.anchors.join(", ")
                                ));
                            }
                        }
                    }
                }
            }
        }
        if problems.is_empty() { Ok(outs.into_iter().map(|o| o.guide).collect()) } else { Err(problems) }
    }

    /// Every language must have the same guides, referencing the same claims.
    pub fn check_languages(rendered: &[(Lang, Vec<Guide>)]) -> Vec<String> {
        let mut problems = Vec::new();
        let Some((base_lang, base)) = rendered.iter().find(|(l, _)| *l == Lang::En).or(rendered.first()) else {
            return problems;
        };
        for (lang, guides) in rendered {
            for g in base {
                match guides.iter().find(|x| x.slug == g.slug) {
                    None => problems.push(format!("{}/guides/{}.md: missing (it exists in {})", lang.code(), g.slug, base_lang.code())),
                    Some(x) => {
                        let (mut a, mut b) = (g.claims.clone(), x.claims.clone());
                        a.sort();
                        b.sort();
                        if a != b {
                            let missing: Vec<_> = a.iter().filter(|c| !b.contains(c)).cloned().collect();
                            let extra: Vec<_> = b.iter().filter(|c| !a.contains(c)).cloned().collect();
                            problems.push(format!(
                                "{}/guides/{}.md: references different claims than the {} version (missing: {}; extra: {})",
                                lang.code(),
                                g.slug,
                                base_lang.code(),
                                missing.join(", "),
                                extra.join(", ")
                            ));
                        }
                        if x.related != g.related {
                            problems.push(format!("{}/guides/{}.md: `related` differs from the {} version", lang.code(), g.slug, base_lang.code()));
                        }
                    }
                }
            }
            for x in guides {
                if !base.iter().any(|g| g.slug == x.slug) {
                    problems.push(format!("{}/guides/{}.md: has no {} version", lang.code(), x.slug, base_lang.code()));
                }
            }
        }
        problems
    }
}

#[cfg(feature = "guides")]
pub use render::{check_languages, render_lang};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_are_numbers_with_units() {
        assert_eq!(quantities("on 8 GB cards and 12GB ones"), vec!["8 GB", "12GB"]);
        assert_eq!(quantities("PyTorch 2.1 and Llama 3.1 8B, 4-bit, RTX 3060"), Vec::<String>::new());
        assert_eq!(quantities("about 0,92 % or 1.5 GiB/s? 2 bytes per parameter"), vec!["0,92 %", "2 bytes"]);
        assert_eq!(quantities("显存 24 GB 的卡，20 字节"), vec!["24 GB", "20 字节"]);
        assert_eq!(quantities("batch 4, 8 GBit"), Vec::<String>::new());
    }

    #[test]
    fn slugs_keep_every_script() {
        assert_eq!(slugify("What uses VRAM?"), "what-uses-vram");
        assert_eq!(slugify("Lendo a mensagem — campo a campo"), "lendo-a-mensagem-campo-a-campo");
        assert_eq!(slugify("显存 去哪了"), "显存-去哪了");
    }

    #[test]
    fn front_matter_is_required() {
        assert!(split_front_matter("# x").is_err());
        assert_eq!(split_front_matter("+++\ntitle = \"a\"\n+++\nbody\n").unwrap(), ("title = \"a\"\n", "body\n"));
    }
}

#[cfg(all(test, feature = "guides"))]
mod render_tests {
    use super::*;

    fn label(v: Verdict) -> String {
        v.as_str().to_uppercase()
    }

    fn ds() -> Dataset {
        use crate::fixtures::{claim, source};
        let mut c = claim(Verdict::Verified, vec![source(SourceKind::OfficialDoc)]);
        c.id = "max-split-min".into();
        c.value = Some(Value { number: Some(20.0), min: None, max: None, unit: "MiB".into(), approx: false });
        let mut wrong = claim(Verdict::Contradicted, vec![source(SourceKind::OfficialDoc)]);
        wrong.id = "myth".into();
        wrong.value = Some(Value { number: Some(16.0), min: None, max: None, unit: "MiB".into(), approx: false });
        Dataset { claims: vec![c, wrong], ..Default::default() }
    }

    fn guide(body: &str) -> String {
        format!("+++\ntitle = \"T\"\nsummary = \"S\"\nplain_numbers = [\"8 GB\"]\n+++\n{body}")
    }

    #[test]
    fn references_render_values_badges_and_links() {
        let ds = ds();
        let c = ds.claims.iter().find(|c| c.value.is_some() && c.verdict != Verdict::Contradicted).expect("fixture claim with a value");
        let src = guide(&format!("## Part one\n\nThe value is {{{{{}}}}} on 8 GB cards; see [the rule](claim:{}) and [more](#part-one).\n", c.id, c.id));
        let g = render_lang(Lang::Pt, &[("a".into(), src)], &ds, &label).unwrap_or_else(|p| panic!("{p:?}"));
        let html = &g[0].html;
        assert!(html.contains(&format!("<h2 id=\"part-one\">Part one</h2>")), "{html}");
        assert!(html.contains(&format!("href=\"/pt/claims/{}/\"", c.id)), "{html}");
        assert!(html.contains(&crate::format::value(c.value.as_ref().unwrap(), Lang::Pt)), "{html}");
        assert!(html.contains(&format!("data-verdict=\"{}\">{}</span>", c.verdict.as_str(), label(c.verdict))), "{html}");
        assert_eq!(g[0].claims, vec![c.id.clone()]);
    }

    #[test]
    fn every_mistake_is_reported_with_the_file() {
        let ds = ds();
        let bad = guide("# Title\n\nIt takes 12 GB. {{myth}} {{no-such-claim}} [x](guide:nowhere) [y](calc:?kind=training&model=nope) [z](./rel) <b>raw</b>\n");
        let p = render_lang(Lang::En, &[("a".into(), bad)], &ds, &label).unwrap_err();
        let all = p.join("\n");
        for needle in [
            "en/guides/a.md: ",
            "`#` headings",
            "`myth` is contradicted",
            "`12 GB`",
            "no claim `no-such-claim`",
            "unknown guide `nowhere`",
            "not a valid workload",
            "use claim:",
            "raw HTML",
        ] {
            assert!(all.contains(needle), "missing {needle:?} in:\n{all}");
        }
    }

    #[test]
    fn languages_must_match() {
        let ds = ds();
        let en = render_lang(Lang::En, &[("a".into(), guide("x")), ("b".into(), guide("y"))], &ds, &label).unwrap();
        let pt = render_lang(Lang::Pt, &[("a".into(), guide("x"))], &ds, &label).unwrap();
        let p = check_languages(&[(Lang::En, en), (Lang::Pt, pt)]);
        assert_eq!(p, vec!["pt/guides/b.md: missing (it exists in en)".to_string()]);
    }
}
