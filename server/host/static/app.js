// assent web UI: live refresh of server-rendered regions.
//
// An element with data-refresh="URL" is re-fetched from URL (which returns
// the region's HTML) whenever the event stream reports a change. Focus is
// kept on the element that had it when possible. The Inbox badge in the
// navigation follows the same events, and every <time datetime> shows its
// instant in the reader's local time zone.
(function () {
  "use strict";
  const fmt = new Intl.DateTimeFormat(undefined, {
    day: "numeric", month: "short", year: "numeric", hour: "2-digit", minute: "2-digit",
  });
  function localTimes(root) {
    for (const t of root.querySelectorAll("time[datetime]")) {
      const d = new Date(t.getAttribute("datetime"));
      if (isNaN(d)) continue;
      if (!t.title) t.title = t.getAttribute("datetime");
      t.textContent = fmt.format(d);
    }
  }
  localTimes(document);

  if (!window.EventSource || !document.querySelector("nav")) return;
  const regions = document.querySelectorAll("[data-refresh]");
  let pending = null;

  // updateBadge copies the Inbox link of a freshly drawn page into this one.
  async function updateBadge() {
    try {
      const res = await fetch("/inbox", { credentials: "same-origin" });
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const fresh = doc.querySelector('nav a[href="/inbox"]');
      const here = document.querySelector('nav a[href="/inbox"]');
      if (fresh && here && fresh.innerHTML !== here.innerHTML) here.innerHTML = fresh.innerHTML;
    } catch (e) { /* the next event retries */ }
  }

  function refresh() {
    if (pending) return;
    pending = setTimeout(async function () {
      pending = null;
      for (const el of regions) {
        try {
          const res = await fetch(el.dataset.refresh, { credentials: "same-origin" });
          if (!res.ok) continue;
          const html = await res.text();
          const focusedId = document.activeElement && document.activeElement.id;
          el.innerHTML = html;
          localTimes(el);
          if (focusedId) {
            const again = document.getElementById(focusedId);
            if (again) again.focus();
          }
        } catch (e) { /* the next event retries */ }
      }
      await updateBadge();
      const live = document.getElementById("live");
      if (live && regions.length) live.textContent = "Updated.";
    }, 150);
  }
  // The page was drawn as of event data-seq: the stream starts after it,
  // so a change made between drawing the page and opening the stream
  // still arrives and draws the regions again.
  const seq = document.body.dataset.seq;
  const es = new EventSource("/v1/events" + (/^[0-9]+$/.test(seq || "") ? "?after=" + seq : ""));
  es.onopen = function () { document.body.dataset.live = "1"; };
  es.onmessage = refresh;
  es.addEventListener("lagged", refresh);
  for (const type of (document.body.dataset.events || "control.staged control.command control.proposal flow.approval flow.instance run.trace run.status screen.update").split(" ")) {
    es.addEventListener(type, refresh);
  }
  window.addEventListener("pagehide", function () { es.close(); });
})();
