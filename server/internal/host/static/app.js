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

  // An inbox section's "Select all N <kind>" box ticks, or unticks, every
  // item of that kind in the section (the boxes of its batch form).
  document.addEventListener("change", function (ev) {
    const all = ev.target;
    if (!all.matches || !all.matches("input[data-select-all]")) return;
    const sec = document.getElementById(all.dataset.section);
    if (!sec) return;
    for (const box of sec.querySelectorAll("input[type=checkbox][name=id]")) {
      if (box.dataset.kind === all.dataset.selectAll) box.checked = all.checked;
    }
  });

  // afterHold redraws the regions a card held while it offered an undo
  // (set below once the live refresh runs).
  let afterHold = function () {};

  // send posts params to url as the page's forms do, asking for JSON; it
  // returns whether it succeeded and the server's message.
  async function send(url, params) {
    try {
      const res = await fetch(url, { method: "POST", body: params, credentials: "same-origin", headers: { Accept: "application/json" } });
      let out = {};
      try { out = await res.json(); } catch (e) { /* no body */ }
      const msg = out.message || (out.error && out.error.message) || "";
      return { ok: res.ok && out.ok !== false, msg: msg };
    } catch (e) {
      return { ok: false, msg: "The server could not be reached; reload the page and try again." };
    }
  }

  // An action the page may take back (a form with data-undo, a control's
  // Apply) is sent from the card: the card then says it is done and
  // offers Undo for ten seconds, and stays where it is meanwhile.
  const undoSeconds = 10;
  document.addEventListener("submit", async function (ev) {
    const form = ev.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.undo || !window.fetch) return;
    ev.preventDefault();
    const card = form.closest(".item") || form.parentElement;
    const heading = card.querySelector("h3");
    const name = heading ? heading.textContent.trim() : "";
    const params = new URLSearchParams(new FormData(form));
    for (const b of card.querySelectorAll("button")) b.disabled = true;
    const done = await send(form.action, params);
    if (!done.ok) {
      for (const b of card.querySelectorAll("button")) b.disabled = false;
      const warn = document.createElement("p");
      warn.className = "warn";
      warn.setAttribute("role", "alert");
      warn.textContent = "Not applied: " + (done.msg || "the server refused it; reload the page and try again.");
      form.parentElement.before(warn);
      return;
    }
    card.dataset.hold = "1";
    const offer = document.createElement("div");
    offer.className = "undo-offer";
    const said = document.createElement("p");
    said.setAttribute("role", "status");
    said.textContent = "Applied: " + name + ".";
    const undo = document.createElement("button");
    undo.type = "button";
    undo.className = "undo";
    undo.append("Undo");
    const hidden = document.createElement("span");
    hidden.className = "visually-hidden";
    hidden.textContent = ": " + name;
    undo.append(hidden);
    const left = document.createElement("span");
    left.className = "undo-left kind";
    offer.append(said, undo, left);
    card.replaceChildren(offer);
    undo.focus();
    let n = undoSeconds;
    const tick = function () { left.textContent = "You can undo for " + n + " s."; };
    tick();
    const timer = setInterval(function () {
      n--;
      if (n > 0) { tick(); return; }
      finish();
    }, 1000);
    function finish() {
      clearInterval(timer);
      undo.remove();
      left.remove();
      delete card.dataset.hold;
      afterHold();
    }
    undo.addEventListener("click", async function () {
      clearInterval(timer);
      undo.disabled = true;
      const back = new URLSearchParams();
      for (const k of ["csrf", "formId", "controlId", "subjectType", "subjectId"]) {
        if (params.has(k)) back.set(k, params.get(k));
      }
      const r = await send(form.dataset.undo, back);
      said.textContent = r.ok ? "Undone: " + name + " has its earlier value again." : "Not undone: " + (r.msg || "the server refused it.");
      finish();
    });
  });

  // The service worker keeps the inbox's shell for when the device is
  // offline (see /sw.js); a browser without one simply goes without.
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/sw.js", { scope: "/" }).catch(function () { /* the page works without it */ });
  }

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
        // A card offering an undo keeps its region until the offer ends.
        if (el.querySelector("[data-hold]")) continue;
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
  afterHold = refresh;
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
