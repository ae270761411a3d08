//! The site's routes: one list used by the router, the prerenderer, the service worker and tests.

use headroom_core::Lang;

/// A page of the site (without its language prefix).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Home,
    Calculator,
    Claims,
    Claim(String),
    Gpus,
    Guides,
    Guide(String),
    Probe,
    /// The allocator lab.
    Allocator,
    About,
}

impl Route {
    /// The path under the language prefix, with a trailing slash: `claims/x/`.
    pub fn rel(&self) -> String {
        match self {
            Route::Home => String::new(),
            Route::Calculator => "calculator/".into(),
            Route::Claims => "claims/".into(),
            Route::Claim(id) => format!("claims/{id}/"),
            Route::Gpus => "gpus/".into(),
            Route::Guides => "guides/".into(),
            Route::Guide(slug) => format!("guides/{slug}/"),
            Route::Probe => "probe/".into(),
            Route::Allocator => "allocator/".into(),
            Route::About => "about/".into(),
        }
    }

    pub fn path(&self, lang: Lang) -> String {
        format!("/{}/{}", lang.code(), self.rel())
    }

    /// Parses `/pt/claims/x/` (trailing slash optional).
    pub fn parse(path: &str) -> Option<(Lang, Route)> {
        let mut parts = path.trim_matches('/').split('/');
        let lang = Lang::from_code(parts.next()?)?;
        let rest: Vec<&str> = parts.filter(|p| !p.is_empty()).collect();
        let route = match rest.as_slice() {
            [] => Route::Home,
            ["calculator"] => Route::Calculator,
            ["claims"] => Route::Claims,
            ["claims", id] => Route::Claim(id.to_string()),
            ["gpus"] => Route::Gpus,
            ["guides"] => Route::Guides,
            ["guides", slug] => Route::Guide(slug.to_string()),
            ["probe"] => Route::Probe,
            ["allocator"] => Route::Allocator,
            ["about"] => Route::About,
            _ => return None,
        };
        Some((lang, route))
    }

    /// The pages in the main navigation, in order.
    pub const NAV: [Route; 8] = [Route::Home, Route::Calculator, Route::Claims, Route::Gpus, Route::Guides, Route::Allocator, Route::Probe, Route::About];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip() {
        for r in [Route::Home, Route::Calculator, Route::Allocator, Route::Claim("a-b.c".into()), Route::Guide("oom-message".into()), Route::About] {
            for l in Lang::ALL {
                assert_eq!(Route::parse(&r.path(l)), Some((l, r.clone())));
            }
        }
        assert_eq!(Route::parse("/en/claims/x"), Some((Lang::En, Route::Claim("x".into()))));
        assert_eq!(Route::parse("/de/"), None);
        assert_eq!(Route::parse("/en/nope/"), None);
    }
}

static SITE_URL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sets the site's public address, once, at the prerenderer's start (its `HEADROOM_SITE_URL`).
pub fn set_site_url(url: &str) {
    let _ = SITE_URL.set(url.trim_end_matches('/').to_string());
}

/// The one site address every absolute link uses (canonical links, og:url, hreflang alternates,
/// cite snippets): the page's own origin in the browser, the configured address when
/// prerendering.
pub fn site_url() -> String {
    #[cfg(feature = "csr")]
    {
        if let Some(origin) = web_sys::window().and_then(|w| w.location().origin().ok()) {
            return origin;
        }
    }
    SITE_URL.get().cloned().unwrap_or_else(|| "http://127.0.0.1:8080".into())
}

/// The browser app comes in three bundles built from this crate: the calculator (`calc`, the
/// page a first visit most often opens), the allocator lab (`lab`) and every other page (`app`).
/// Each renders only its own routes, so none carries another's code; links between them are
/// normal navigations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bundle {
    Calculator,
    Lab,
    Pages,
}

impl Bundle {
    /// The bundle that renders a route.
    pub fn of(route: &Route) -> Bundle {
        match route {
            Route::Calculator => Bundle::Calculator,
            Route::Allocator => Bundle::Lab,
            _ => Bundle::Pages,
        }
    }

    /// Its file name stem in site/dist (`cargo xtask dist`).
    pub fn name(self) -> &'static str {
        match self {
            Bundle::Calculator => "calc",
            Bundle::Lab => "lab",
            Bundle::Pages => "app",
        }
    }

    /// Where its data for a language is (`dataset build` writes them): the calculator's part
    /// (`Dataset::for_calculator`) or the compact dataset every other page reads (the lab too:
    /// GPUs, aggregates, claims, allocator settings).
    pub fn data_url(self, lang: Lang) -> String {
        match self {
            Bundle::Calculator => format!("/data/calc-{}.json", lang.code()),
            Bundle::Lab | Bundle::Pages => format!("/data/{}.json", lang.code()),
        }
    }
}

/// Where a language's UI strings are (`dataset build` writes them; the browser build of
/// headroom-i18n loads them): the calculator's table leaves out the other pages' strings
/// (`headroom_i18n::CALCULATOR_OMITS`).
pub fn ui_url(bundle: Bundle, lang: Lang) -> String {
    match bundle {
        Bundle::Calculator => format!("/data/ui-calc-{}.json", lang.code()),
        Bundle::Lab | Bundle::Pages => format!("/data/ui-{}.json", lang.code()),
    }
}
