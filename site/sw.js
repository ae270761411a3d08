// Headroom's service worker (written by the prerenderer, which fills in the cache name and the
// list). It precaches the app, the data and every language's main pages; a new deployment has a
// new cache name, installs alongside, takes over and deletes the old cache.
const CACHE = "__CACHE__";
const PRECACHE = __PRECACHE__;
// The shapes of the site's pages (routes.rs): anything else is not a page.
const PAGE = /^\/(pt|es|zh|it|en)\/(|calculator\/|claims\/|claims\/[a-z0-9.-]+\/|gpus\/|guides\/|guides\/[a-z0-9-]+\/|probe\/|about\/)$/;

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((c) => c.addAll(PRECACHE)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((keys) => Promise.all(keys.filter((k) => k.startsWith("headroom-") && k !== CACHE).map((k) => caches.delete(k))))
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
          if (PAGE.test(url.pathname) || url.pathname === "/") return caches.match("/index.html");
          const lang = (url.pathname.match(/^\/(pt|es|zh|it|en)\//) || [])[1] || "en";
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
