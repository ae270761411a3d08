//! Writes every route in every language as static HTML (title, description, OpenGraph, JSON-LD,
//! the page's content readable without JavaScript), plus the web manifest and the service worker.
//!
//!   prerender --data dataset/data --site site/dist
//!
//! It reads `site/dist/index.html` (the shell `cargo xtask dist` wrote) as the template.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use headroom_core::{Dataset, Lang, Verdict};
use headroom_i18n::{fmt, k, t};
use headroom_site::pages::guides::Rendered;
use headroom_site::pages::{Bundle, Page, description, title, ui_url};
use headroom_site::routes::Route;
use leptos::prelude::*;
use leptos::tachys::view::RenderHtml;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

// The site's public address (`HEADROOM_SITE_URL`), set once in `main`.
use headroom_site::routes::site_url;

/// Whether an address points at this machine (a build for the public site must not).
fn is_loopback(url: &str) -> bool {
    let host = url.split("://").nth(1).unwrap_or(url).split(['/', ':']).next().unwrap_or("");
    host == "localhost" || host.starts_with("127.") || host == "[::1]" || host == "0.0.0.0" || host.is_empty()
}

/// The link-preview image of a page type (site/assets/og-*.png, written by scripts/og-images.py).
fn og_image(route: &Route) -> &'static str {
    match route {
        Route::Home => "og-home.png",
        Route::Calculator => "og-calculator.png",
        Route::Claims | Route::Claim(_) => "og-claims.png",
        Route::Gpus => "og-gpus.png",
        Route::Guides | Route::Guide(_) => "og-guides.png",
        Route::Probe => "og-probe.png",
        Route::Allocator => "og-allocator.png",
        Route::About => "og-about.png",
    }
}

fn claim_review(ds: &Dataset, lang: Lang, id: &str, url: &str) -> Option<String> {
    let c = ds.claim(id)?;
    let rating = match c.verdict {
        Verdict::Verified => 4,
        Verdict::Qualified => 3,
        Verdict::Unverified => 2,
        Verdict::Contradicted => 1,
    };
    let author = c
        .origins
        .iter()
        .find_map(|o| o.seed.as_ref().and_then(|f| ds.seeds.iter().find(|s| &s.file == f)))
        .map(|s| s.publisher.clone())
        .unwrap_or_else(|| "Community".into());
    let v = serde_json::json!({
        "@context": "https://schema.org",
        "@type": "ClaimReview",
        "url": url,
        "claimReviewed": c.statement.get(lang),
        "datePublished": c.history.first().map(|h| h.date.clone()),
        "inLanguage": lang.bcp47(),
        "author": {"@type": "Organization", "name": "Headroom"},
        "itemReviewed": {"@type": "Claim", "author": {"@type": "Organization", "name": author}},
        "reviewRating": {
            "@type": "Rating", "ratingValue": rating, "bestRating": 4, "worstRating": 1,
            "alternateName": t(lang, headroom_site::ui::verdict_key(c.verdict)),
        },
    });
    Some(serde_json::to_string(&v).unwrap().replace("</", "<\\/"))
}

fn page_html(template: &str, lang: Lang, route: &Route, ds: &Arc<Dataset>, guides: &Rendered) -> String {
    let body = Owner::new().with(|| {
        provide_context(guides.clone());
        view! { <Page lang=lang route=route.clone() ds=ds.clone() body=headroom_site::pages::any_body /> }.to_html()
    });
    // A merged claim's old URL names the live claim as canonical.
    let canonical = match route {
        Route::Claim(id) if ds.claim(id).is_none() => ds.claim_by_url(id).map_or_else(|| route.clone(), |c| Route::Claim(c.id.clone())),
        _ => route.clone(),
    };
    let url = format!("{}{}", site_url(), canonical.path(lang));
    let title = title(lang, route, ds);
    let desc = description(lang, route, ds);
    let mut head = format!(
        "<title>{}</title>\n  <meta name=\"description\" content=\"{}\" />\n  <link rel=\"canonical\" href=\"{}\" />\n",
        esc(&title),
        esc(&desc),
        esc(&url)
    );
    for l in Lang::ALL {
        head += &format!("  <link rel=\"alternate\" hreflang=\"{}\" href=\"{}{}\" />\n", l.bcp47(), site_url(), canonical.path(l));
    }
    let og_type = if matches!(route, Route::Claim(_) | Route::Guide(_)) { "article" } else { "website" };
    head += &format!(
        "  <meta property=\"og:title\" content=\"{}\" />\n  <meta property=\"og:description\" content=\"{}\" />\n  <meta property=\"og:type\" content=\"{og_type}\" />\n  <meta property=\"og:url\" content=\"{}\" />\n  <meta property=\"og:site_name\" content=\"Headroom\" />\n  <meta property=\"og:locale\" content=\"{}\" />\n  <meta property=\"og:image\" content=\"{}/{}\" />\n  <meta property=\"og:image:width\" content=\"1200\" />\n  <meta property=\"og:image:height\" content=\"630\" />\n  <meta name=\"twitter:card\" content=\"summary_large_image\" />\n",
        esc(&title),
        esc(&desc),
        esc(&url),
        lang.bcp47().replace('-', "_"),
        esc(&site_url()),
        og_image(route)
    );
    if let Route::Claim(id) = route {
        if let Some(json) = claim_review(ds, lang, id, &url) {
            head += &format!("  <script type=\"application/ld+json\">{json}</script>\n");
        }
    }
    template
        .replacen("<html lang=\"en\">", &format!("<html lang=\"{}\">", lang.bcp47()), 1)
        .replacen("<title>Headroom</title>\n", &head, 1)
        .replacen(BUNDLE_MARKER, &bundle_tags(template, Bundle::of(route), lang), 1)
        .replacen("<body>", &format!("<body>\n<div id=\"prerendered\">{body}</div>"), 1)
}

/// A bundle's (JS, wasm) paths, from the `headroom-bundles` meta `cargo xtask dist` writes into
/// the template (`app=/app-….js /app-….wasm;calc=…`).
fn bundle_files(template: &str, bundle: Bundle) -> (String, String) {
    let content = template
        .split("<meta name=\"headroom-bundles\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("the template has no headroom-bundles meta (build with cargo xtask dist)");
    content
        .split(';')
        .filter_map(|entry| entry.split_once('='))
        .find(|(name, _)| *name == bundle.name())
        .and_then(|(_, files)| files.split_once(' '))
        .map(|(js, wasm)| (js.to_string(), wasm.to_string()))
        .unwrap_or_else(|| panic!("headroom-bundles names no `{}` bundle", bundle.name()))
}

/// The tags that load a page's bundle: fetched early with the data it will ask for (its
/// language's strings and data, `app.rs`), started as a module.
fn bundle_tags(template: &str, bundle: Bundle, lang: Lang) -> String {
    let (js, wasm) = bundle_files(template, bundle);
    let mut tags = format!(
        "<link rel=\"modulepreload\" href=\"{js}\" />\n  <link rel=\"preload\" href=\"{wasm}\" as=\"fetch\" type=\"application/wasm\" crossorigin />\n"
    );
    for url in [bundle.data_url(lang), ui_url(bundle, lang)] {
        tags += &format!("  <link rel=\"preload\" href=\"{url}\" as=\"fetch\" type=\"application/json\" crossorigin />\n");
    }
    tags + &format!("  <script type=\"module\">import init from \"{js}\"; init({{ module_or_path: \"{wasm}\" }});</script>")
}

/// The shell's loader (`/`, and any page offline that the cache lacks): it picks the bundle for
/// the address it is shown at.
fn bundle_loader(template: &str) -> String {
    let calc: Vec<String> = Lang::ALL.into_iter().map(|l| Route::Calculator.path(l)).collect();
    let lab: Vec<String> = Lang::ALL.into_iter().map(|l| Route::Allocator.path(l)).collect();
    let (cj, cw) = bundle_files(template, Bundle::Calculator);
    let (lj, lw) = bundle_files(template, Bundle::Lab);
    let (aj, aw) = bundle_files(template, Bundle::Pages);
    format!(
        "<script>(() => {{ const p = location.pathname; const b = {calc:?}.includes(p) ? [\"{cj}\", \"{cw}\"] : {lab:?}.includes(p) ? [\"{lj}\", \"{lw}\"] : [\"{aj}\", \"{aw}\"]; const l = document.createElement(\"link\"); l.rel = \"preload\"; l.as = \"fetch\"; l.type = \"application/wasm\"; l.crossOrigin = \"\"; l.href = b[1]; document.head.append(l); import(b[0]).then((m) => m.default({{ module_or_path: b[1] }})); }})();</script>"
    )
}

const BUNDLE_MARKER: &str = "<!-- headroom:bundle -->";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// FNV-1a over the precached files: the service worker's cache version.
fn fnv(bytes: &[u8], mut h: u64) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn main() {
    let mut data = PathBuf::from("dataset/data");
    let mut site = PathBuf::from("site/dist");
    let mut local = false;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--data" if i + 1 < args.len() => data = PathBuf::from(&args[i + 1]),
            "--site" if i + 1 < args.len() => site = PathBuf::from(&args[i + 1]),
            "--local" => {
                local = true;
                i += 1;
                continue;
            }
            other => {
                eprintln!("prerender: unknown argument {other} (usage: prerender --data DIR --site DIR [--local])");
                std::process::exit(2);
            }
        }
        i += 2;
    }
    // One address for every absolute link. A build for the public site must name it; a local
    // build (`--local`, what `cargo xtask serve` and the tests use) defaults to this machine.
    let url = match std::env::var("HEADROOM_SITE_URL").ok().filter(|u| !u.trim().is_empty()) {
        Some(u) => u.trim().trim_end_matches('/').to_string(),
        None if local => "http://127.0.0.1:8080".to_string(),
        None => {
            eprintln!("prerender: set HEADROOM_SITE_URL to the site's public address (https://…), or pass --local for a build served on this machine");
            std::process::exit(2);
        }
    };
    if !url.starts_with("http://") && !url.starts_with("https://") {
        eprintln!("prerender: HEADROOM_SITE_URL `{url}` is not an http(s) address");
        std::process::exit(2);
    }
    if is_loopback(&url) && !local {
        eprintln!("prerender: HEADROOM_SITE_URL `{url}` points at this machine; a public build needs the public address (or pass --local)");
        std::process::exit(2);
    }
    headroom_site::routes::set_site_url(&url);
    let files = headroom_core::files::read_tree(&data).unwrap_or_else(|e| {
        eprintln!("prerender: {e}");
        std::process::exit(1);
    });
    let loaded = headroom_core::load::load(&files).unwrap_or_else(|problems| {
        eprintln!("prerender: the data does not pass `dataset check` ({} problems)", problems.len());
        std::process::exit(1);
    });
    let template = std::fs::read_to_string(site.join("index.html")).expect("site/dist/index.html (run cargo xtask dist)");
    let mut pages = 0;
    for lang in Lang::ALL {
        // Each language's pages render from that language's compact data, like the app, and the
        // guides `dataset build` rendered into site/dist/data.
        let read = |name: String| {
            let p = site.join("data").join(name);
            std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e} (run `dataset build` first)", p.display()))
        };
        // Full passages for readers without JavaScript; the guide index from the compact data.
        let mut full = loaded.dataset.for_lang(lang);
        full.guides = Dataset::from_json(&read(format!("{}.json", lang.code()))).expect("compact data").guides;
        let ds = Arc::new(full);
        let guides: Vec<headroom_core::guides::Guide> = serde_json::from_str(&read(format!("guides-{}.json", lang.code()))).expect("guides JSON");
        let guides = Rendered(Arc::new(guides));
        let mut routes = vec![Route::Home, Route::Calculator, Route::Claims, Route::Gpus, Route::Guides, Route::Allocator, Route::Probe, Route::About];
        routes.extend(ds.guides.iter().map(|g| Route::Guide(g.slug.clone())));
        routes.extend(ds.claims.iter().map(|c| Route::Claim(c.id.clone())));
        // The permanent URLs of claims merged into others show the claim they were merged into
        // (its canonical link names the live id).
        routes.extend(ds.claims.iter().flat_map(|c| c.replaces.iter().map(|r| Route::Claim(r.clone()))));
        for r in &routes {
            let html = page_html(&template, lang, r, &ds, &guides);
            write(&site.join(r.path(lang).trim_start_matches('/')).join("index.html"), &html);
            pages += 1;
        }
    }
    // `/` and unknown paths: the shell with links to every language for readers without JavaScript.
    let choose: String =
        Lang::ALL.into_iter().map(|l| format!("<li><a href=\"{}\" lang=\"{}\">{}</a></li>", Route::Home.path(l), l.bcp47(), l.native_name())).collect();
    let root = template.replacen(BUNDLE_MARKER, &bundle_loader(&template), 1).replacen(
        "<body>",
        &format!(
            "<body>\n<div id=\"prerendered\"><main id=\"main\"><h1>Headroom</h1><p>{}</p><ul>{choose}</ul></main></div>",
            esc(t(Lang::En, k::META_DESCRIPTION))
        ),
        1,
    );
    write(&site.join("index.html"), &root);
    write(&site.join("404.html"), &root);
    // A "page not found" in each language (the server answers unknown paths under /<lang>/ with
    // it, status 404; the service worker does the same offline).
    for lang in Lang::ALL {
        let ds = Arc::new(loaded.dataset.for_lang(lang));
        let body = Owner::new().with(|| view! { <headroom_site::pages::NotFoundPage lang=lang ds=ds.clone() /> }.to_html());
        let head = format!("<title>{} · Headroom</title>\n  <meta name=\"robots\" content=\"noindex\" />\n", esc(t(lang, k::NOTFOUND_TITLE)));
        let html = template
            .replacen("<html lang=\"en\">", &format!("<html lang=\"{}\">", lang.bcp47()), 1)
            .replacen("<title>Headroom</title>\n", &head, 1)
            .replacen(BUNDLE_MARKER, &bundle_tags(&template, Bundle::Pages, lang), 1)
            .replacen("<body>", &format!("<body>\n<div id=\"prerendered\">{body}</div>"), 1);
        write(&site.join(lang.code()).join("404.html"), &html);
    }

    // The web app manifest and the service worker (precaches the app; each language's data and
    // main pages; other pages come from the app shell offline).
    let manifest = serde_json::json!({
        "name": "Headroom", "short_name": "Headroom",
        "description": t(Lang::En, k::META_DESCRIPTION),
        "start_url": "/", "scope": "/", "display": "standalone",
        "background_color": "#fbfbf8", "theme_color": "#0b5cad",
        "icons": [
            {"src": "/icon-192.png", "sizes": "192x192", "type": "image/png"},
            {"src": "/icon-512.png", "sizes": "512x512", "type": "image/png"},
            {"src": "/icon.svg", "sizes": "any", "type": "image/svg+xml"},
            {"src": "/icon-maskable-512.png", "sizes": "512x512", "type": "image/png", "purpose": "maskable"}
        ]
    });
    write(&site.join("manifest.webmanifest"), &serde_json::to_string_pretty(&manifest).unwrap());
    let mut precache: Vec<String> = vec!["/".into(), "/index.html".into(), "/manifest.webmanifest".into()];
    for e in std::fs::read_dir(&site).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if e.path().is_file()
            && (name.ends_with(".wasm") || name.ends_with(".js") && name != "sw.js" || name.ends_with(".css") || name.starts_with("icon"))
            && !name.ends_with(".br")
            && !name.ends_with(".gz")
        {
            precache.push(format!("/{name}"));
        }
    }
    // Each language's offline set: cached when a page in that language asks (a first visit
    // precaches the app and one language, not five).
    let mut langs = serde_json::Map::new();
    for lang in Lang::ALL {
        let mut set = vec![
            Bundle::Pages.data_url(lang),
            Bundle::Calculator.data_url(lang),
            ui_url(Bundle::Pages, lang),
            ui_url(Bundle::Calculator, lang),
            format!("/data/guides-{}.json", lang.code()),
            format!("/data/details-{}.json", lang.code()),
        ];
        set.extend(Route::NAV.iter().map(|r| r.path(lang)));
        set.push(format!("/{}/404.html", lang.code()));
        langs.insert(lang.code().to_string(), serde_json::json!(set));
    }
    precache.sort();
    precache.dedup();
    // The "not saved for offline use yet" page of each language (the service worker writes it).
    let mut offline = serde_json::Map::new();
    for lang in Lang::ALL {
        // The language's name as its own sentences write it ("le pagine in italiano").
        let name = match lang {
            Lang::En | Lang::Zh => lang.native_name().to_string(),
            _ => lang.native_name().to_lowercase(),
        };
        offline.insert(
            lang.code().to_string(),
            serde_json::json!({
                "bcp47": lang.bcp47(),
                "name": lang.native_name(),
                "title": t(lang, k::OFFLINE_NOT_SAVED_TITLE),
                "text": fmt(lang, k::OFFLINE_NOT_SAVED, &[("language", &name)]),
                "saved": t(lang, k::OFFLINE_SAVED),
            }),
        );
    }
    let style = precache.iter().find(|p| p.starts_with("/style-") && p.ends_with(".css")).cloned().unwrap_or_default();
    offline.insert("style".into(), serde_json::json!(style));
    let every: Vec<String> =
        precache.iter().cloned().chain(langs.values().flat_map(|v| v.as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()))).collect();
    let mut h = 0xcbf29ce484222325u64;
    for p in &every {
        let file = if p.ends_with('/') { site.join(p.trim_start_matches('/')).join("index.html") } else { site.join(p.trim_start_matches('/')) };
        h = fnv(p.as_bytes(), h);
        h = fnv(&std::fs::read(&file).unwrap_or_else(|e| panic!("precache {}: {e}", file.display())), h);
    }
    let sw = include_str!("../../sw.js")
        .replace("__CACHE__", &format!("headroom-{h:016x}"))
        .replace("__PRECACHE__", &serde_json::to_string(&precache).unwrap())
        .replace("__LANGS__", &serde_json::to_string(&langs).unwrap())
        .replace("__OFFLINE__", &serde_json::to_string(&offline).unwrap());
    write(&site.join("sw.js"), &sw);
    println!(
        "prerender: {pages} pages, service worker precaches {} URLs and {} more per language",
        precache.len(),
        langs.values().next().map(|v| v.as_array().unwrap().len()).unwrap_or(0)
    );
}
