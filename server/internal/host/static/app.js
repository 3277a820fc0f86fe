// assent web UI: live refresh of server-rendered regions.
//
// An element with data-refresh="URL" is re-fetched from URL (which returns
// the region's HTML) whenever the event stream reports a change; Trace
// events redraw only regions marked data-trace. What the person typed and
// the element that had focus are kept, and a region is not redrawn while
// the person types in it. The Inbox badge in the
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

  // where names an element of a region so that it can be found again in
  // the region drawn anew: its id, else its form's action, tag, name, type,
  // link and text.
  function where(e) {
    if (e.id) return "#" + e.id;
    const f = e.form || e.closest("form");
    return [f ? f.getAttribute("action") : "", e.tagName, e.name || "", e.type || "",
      e.getAttribute("href") || "", (e.textContent || "").trim()].join("|");
  }
  function editing(e) {
    return e && /^(INPUT|TEXTAREA|SELECT)$/.test(e.tagName) && e.type !== "hidden" && e.type !== "submit";
  }

  // draw replaces a region with html, keeping what the person typed into
  // its fields and the element that had focus.
  function draw(el, html) {
    const active = document.activeElement && el.contains(document.activeElement) ? where(document.activeElement) : null;
    const typed = new Map();
    for (const f of el.querySelectorAll("input, textarea")) {
      if (editing(f) && f.type !== "checkbox" && f.value !== f.defaultValue) typed.set(where(f), f.value);
    }
    // Ticked boxes (the inbox's selection) are kept by their id.
    const ticked = new Map();
    for (const f of el.querySelectorAll("input[type=checkbox][id]")) {
      if (f.checked !== f.defaultChecked) ticked.set(f.id, f.checked);
    }
    el.innerHTML = html;
    localTimes(el);
    for (const f of el.querySelectorAll("input, textarea")) {
      const k = where(f);
      if (typed.has(k)) f.value = typed.get(k);
    }
    for (const f of el.querySelectorAll("input[type=checkbox][id]")) {
      if (ticked.has(f.id)) f.checked = ticked.get(f.id);
    }
    if (active) {
      for (const e of el.querySelectorAll("a, button, input, select, textarea, [tabindex]")) {
        if (where(e) === active) { e.focus(); break; }
      }
    }
  }

  // A region is not drawn anew while the person types in it: it is drawn
  // once focus leaves it.
  const waiting = new Set();
  function refresh(ev) {
    const trace = ev && ev.type === "run.trace";
    for (const el of regions) {
      // Trace events redraw only the regions that show a Trace.
      if (!trace || el.dataset.trace !== undefined) waiting.add(el);
    }
    if (pending) return;
    pending = setTimeout(async function () {
      pending = null;
      for (const el of Array.from(waiting)) {
        if (editing(document.activeElement) && el.contains(document.activeElement)) {
          if (!el.dataset.deferred) {
            el.dataset.deferred = "1";
            el.addEventListener("focusout", function later(e) {
              if (e.relatedTarget && el.contains(e.relatedTarget)) return;
              el.removeEventListener("focusout", later);
              delete el.dataset.deferred;
              refresh();
            });
          }
          continue;
        }
        waiting.delete(el);
        try {
          const res = await fetch(el.dataset.refresh, { credentials: "same-origin" });
          if (!res.ok) continue;
          draw(el, await res.text());
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
