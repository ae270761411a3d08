//! The site in real headless Chromium, served by the real `dataset serve`.

use headroom_core::{Dataset, Lang, Verdict};
use headroom_e2e::{Browser, Server, TempDir, site_dir};
use headroom_i18n::{k, t};

fn featured(ds: &Dataset) -> &headroom_core::Claim {
    ds.claims.iter().find(|c| c.verdict == Verdict::Contradicted).or(ds.claims.first()).expect("the dataset has claims")
}

#[test]
fn home_renders_switches_language_and_remembers_the_choice() {
    let site = site_dir();
    let dataset = Dataset::from_json(&std::fs::read_to_string(site.join("data/dataset.json")).unwrap()).unwrap();
    let claim = featured(&dataset);
    let tmp = TempDir::new("browser");
    let server = Server::start(&site, &tmp.path().join("headroom.sqlite3"));
    let browser = Browser::start();

    // First visit: the browser asks for en-US, so `/` leads to /en/ and the app renders the claim
    // (the prerendered copy of the page is gone once the app has taken over).
    browser.goto(&format!("{}/", server.url));
    browser.wait_text("#claim-card [data-verdict]", |s| s == t(Lang::En, k::VERDICT_CONTRADICTED));
    browser.wait_js("return document.getElementById('prerendered') === null");
    assert!(browser.current_url().ends_with("/en/"), "{}", browser.current_url());
    assert_eq!(browser.text("h1").unwrap(), t(Lang::En, k::HOME_TITLE));
    assert_eq!(browser.text(".said").unwrap(), claim.statement.en);
    assert_eq!(browser.js("return document.documentElement.lang"), "en");
    let id = browser.js("return document.querySelector('[data-claim-id]').dataset.claimId");
    assert_eq!(id, claim.id.as_str());

    // Switch to Portuguese: the text changes, <html lang> follows.
    browser.click("a[data-lang='pt']");
    browser.wait_text("h1", |s| s == t(Lang::Pt, k::HOME_TITLE));
    assert_eq!(browser.text("#claim-card [data-verdict]").unwrap(), t(Lang::Pt, k::VERDICT_CONTRADICTED));
    assert_eq!(browser.text(".said").unwrap(), claim.statement.pt);
    assert_eq!(browser.js("return document.documentElement.lang"), "pt-BR");
    assert!(browser.current_url().ends_with("/pt/"), "{}", browser.current_url());

    // The choice survives a reload, and a visit to `/` now lands on Portuguese, not the browser's English.
    browser.refresh();
    browser.wait_text("h1", |s| s == t(Lang::Pt, k::HOME_TITLE));
    browser.goto(&format!("{}/", server.url));
    browser.wait_text("#claim-card [data-verdict]", |s| s == t(Lang::Pt, k::VERDICT_CONTRADICTED));
    assert!(browser.current_url().ends_with("/pt/"), "{}", browser.current_url());
    assert_eq!(browser.text("h1").unwrap(), t(Lang::Pt, k::HOME_TITLE));

    // Every language renders its own strings.
    for lang in Lang::ALL {
        browser.goto(&format!("{}/{}/", server.url, lang.code()));
        browser.wait_text("#claim-card [data-verdict]", |s| s == t(lang, k::VERDICT_CONTRADICTED));
        assert_eq!(browser.text("h1").unwrap(), t(lang, k::HOME_TITLE), "{}", lang.code());
        assert_eq!(browser.js("return document.documentElement.lang"), lang.bcp47());
    }
}

#[test]
fn unknown_language_prefix_shows_the_not_found_page() {
    let site = site_dir();
    let tmp = TempDir::new("browser-404");
    let server = Server::start(&site, &tmp.path().join("headroom.sqlite3"));
    let browser = Browser::start();
    browser.goto(&format!("{}/de/", server.url));
    browser.wait_text("h1", |s| s == t(Lang::En, k::NOTFOUND_TITLE));
    assert!(browser.text("main").unwrap().contains(Lang::Zh.native_name()));
}
