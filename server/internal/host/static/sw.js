// assent web UI: the service worker that keeps the inbox's shell offline.
//
// It precaches only the static shell (style, script, icons and the offline
// page), under a cache named after this release's static files, so a new
// release replaces it. Navigations go to the network first; when the
// network fails they show the cached offline page. Pages, API answers and
// anything else that may carry a person's data are never cached: the
// worker passes them to the network untouched.
"use strict";

const CACHE = "assent-shell-" + "__ASSENT_SHELL_VERSION__";
const OFFLINE = "/offline";
const SHELL = [
  OFFLINE,
  "/static/app.css",
  "/static/app.js",
  "/static/icon-192.png",
  "/static/icon-512.png",
  "/static/icon-maskable-512.png",
  "/manifest.webmanifest",
];

self.addEventListener("install", (event) => {
  event.waitUntil(
    caches.open(CACHE)
      .then((c) => c.addAll(SHELL.map((u) => new Request(u, { cache: "reload", credentials: "omit" }))))
      .then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(
    caches.keys()
      .then((keys) => Promise.all(keys.filter((k) => k.startsWith("assent-shell-") && k !== CACHE).map((k) => caches.delete(k))))
      .then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const req = event.request;
  if (req.method !== "GET") return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  if (req.mode === "navigate") {
    event.respondWith(fetch(req).catch(() => caches.match(OFFLINE, { cacheName: CACHE })
      .then((res) => res || Response.error())));
    return;
  }
  if (SHELL.includes(url.pathname) && url.search === "") {
    // The network first, so a reload shows what the server has now; the
    // cached copy only when it cannot be reached.
    event.respondWith(fetch(req).catch(() => caches.match(url.pathname, { cacheName: CACHE })
      .then((res) => res || Response.error())));
  }
});
