// Headroom's service worker (written by the prerenderer, which fills in the cache name and the
// lists). It precaches the app; a language's data and main pages when a page in that language asks
// (index.html posts {cacheLang} once the page is idle), and every language a while later; a
// language not saved yet gets a page that says so, offline; a new deployment has a
// new cache name, installs alongside, takes over and deletes the old cache.
const CACHE = "__CACHE__";
const PRECACHE = __PRECACHE__;
// Each language's offline set (data and main pages), cached when a page in it asks.
const LANGS = __LANGS__;
// Per language: the "not saved for offline use yet" page's strings, and the stylesheet.
const OFFLINE = __OFFLINE__;
// The shapes of the site's pages (routes.rs): anything else is not a page.
const PAGE = /^\/(pt|es|zh|it|en)\/(|calculator\/|claims\/|claims\/[a-z0-9.-]+\/|gpus\/|guides\/|guides\/[a-z0-9-]+\/|allocator\/|probe\/|about\/)$/;

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(PRECACHE)).then(() => self.skipWaiting()));
});

// A language's offline set, into the current cache (one missing file does not stop the rest).
const cacheLanguage = (lang) =>
  caches.open(CACHE).then((c) => Promise.all((LANGS[lang] || []).map((u) => c.match(u).then((hit) => hit || c.add(u)).catch(() => null))));

self.addEventListener("message", (event) => {
  const lang = event.data && event.data.cacheLang;
  if (LANGS[lang]) event.waitUntil(cacheLanguage(lang));
  // A while after the first visit went idle (index.html): every language, one after another.
  if (lang === "*") event.waitUntil(Object.keys(LANGS).reduce((p, l) => p.then(() => cacheLanguage(l)), Promise.resolve()));
});

// Offline, a page in a language this device has not saved: say so in that language, with links
// to the languages it has.
const notSaved = async (lang) => {
  const o = OFFLINE[lang];
  const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const saved = [];
  for (const l of Object.keys(LANGS)) if (await caches.match(`/data/${l}.json`)) saved.push(l);
  const links = saved.map((l) => `<li><a href="/${l}/" hreflang="${l}">${esc(OFFLINE[l].name)}</a></li>`).join("");
  const html = `<!doctype html><html lang="${o.bcp47}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(o.title)} · Headroom</title><link rel="stylesheet" href="${OFFLINE.style}"></head><body><main id="main" class="offline-not-saved"><h1>${esc(o.title)}</h1><p>${esc(o.text)}</p>${saved.length ? `<p>${esc(o.saved)}</p><ul>${links}</ul>` : ""}</main></body></html>`;
  return new Response(html, { status: 503, headers: { "Content-Type": "text/html; charset=utf-8" } });
};

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then(async (keys) => {
        const old = keys.filter((k) => k.startsWith("headroom-") && k !== CACHE);
        // The languages an earlier version had cached come along into the new cache.
        for (const k of old) {
          const c = await caches.open(k);
          for (const lang of Object.keys(LANGS)) {
            if (await c.match(`/data/${lang}.json`)) await cacheLanguage(lang);
          }
        }
        await Promise.all(old.map((k) => caches.delete(k)));
      })
      .then(() => self.clients.claim())
  );
});

self.addEventListener("fetch", (event) => {
  const req = event.request;
  if (req.method !== "GET") return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin || url.pathname.startsWith("/api/")) return;
  if (req.mode === "navigate") {
    // Pages: the network first (fresh content), the cache when offline, else the app shell,
    // which renders any route from the cached data.
    event.respondWith(
      fetch(req)
        .then((resp) => {
          if (resp.ok) {
            const copy = resp.clone();
            caches.open(CACHE).then((c) => c.put(req, copy));
          }
          return resp;
        })
        .catch(async () => {
          const hit = await caches.match(req, { ignoreSearch: true });
          if (hit) return hit;
          // Offline: the app shell renders any page of the site from the cached data; a path
          // that is no page gets the cached "page not found" of its language, with status 404.
          const lang = (url.pathname.match(/^\/(pt|es|zh|it|en)\//) || [])[1] || "en";
          if (PAGE.test(url.pathname) && !(await caches.match(`/data/${lang}.json`))) return notSaved(lang);
          if (PAGE.test(url.pathname) || url.pathname === "/") return caches.match("/index.html");
          const missing = await caches.match(`/${lang}/404.html`);
          if (!missing) return caches.match("/index.html");
          return new Response(await missing.text(), { status: 404, headers: { "Content-Type": "text/html; charset=utf-8" } });
        })
    );
    return;
  }
  // Assets and data: the cache first (they are content-hashed or versioned by the cache name).
  event.respondWith(
    caches.match(req).then(
      (hit) =>
        hit ||
        fetch(req).then((resp) => {
          if (resp.ok) {
            const copy = resp.clone();
            caches.open(CACHE).then((c) => c.put(req, copy));
          }
          return resp;
        })
    )
  );
});
