// assent screen renderer: the browser half.
//
// The server draws the screen (every value as text) and runs every check;
// this script only sends what the person types and presses, redraws the
// screen when the server says it changed, and shows the runtime's own
// confirmation dialog. It never reads markup from a screen's stream: the
// region it swaps in is the server's own HTML.
(function () {
  "use strict";
  const region = document.getElementById("screen-region");
  if (!region) return;
  const screenId = region.dataset.screen;
  const base = "/screens/" + encodeURIComponent(screenId);
  const meta = document.querySelector('meta[name="csrf-token"]');
  const csrf = meta ? meta.content : "";
  const status = document.getElementById("screen-status");
  const alertBox = document.getElementById("screen-alert");
  const dialog = document.getElementById("confirm-dialog");
  const sentence = document.getElementById("confirm-sentence");

  function announce(text) {
    if (!status || !text) return;
    status.textContent = "";
    setTimeout(function () { status.textContent = text; }, 50);
  }

  function showAlert(text) {
    if (!alertBox) return;
    alertBox.textContent = text || "";
    alertBox.hidden = !text;
  }

  async function post(path, body) {
    const res = await fetch(base + path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
      body: JSON.stringify(body),
    });
    let data = {};
    try { data = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) throw new Error((data.error && data.error.message) || res.statusText);
    return data;
  }

  // --- redraw, keeping what the person is doing --------------------------

  function noticeTexts() {
    const out = {};
    for (const n of region.querySelectorAll("[data-notice]")) out[n.id] = n.textContent;
    return out;
  }

  function openTabs() {
    const out = {};
    for (const t of region.querySelectorAll("[data-tabs]")) {
      const sel = t.querySelector('[role=tab][aria-selected="true"]');
      if (sel) out[t.dataset.tabs] = sel.id;
    }
    return out;
  }

  let refreshing = null, again = false, swapping = false;
  function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async function () {
      try {
        const res = await fetch(base + "?partial=1", { credentials: "same-origin" });
        if (!res.ok) return;
        const html = await res.text();
        const active = document.activeElement;
        const keep = active && region.contains(active) && active.id ? {
          id: active.id,
          value: active.dataset && active.dataset.kind === "text" ? active.value : null,
          start: typeof active.selectionStart === "number" ? active.selectionStart : null,
          end: typeof active.selectionEnd === "number" ? active.selectionEnd : null,
        } : null;
        const tabs = openTabs();
        const before = noticeTexts();
        // Removing the focused field fires focusout; that is not the
        // person leaving it.
        swapping = true;
        try { region.innerHTML = html; } finally { swapping = false; }
        for (const id in tabs) selectTab(document.getElementById(tabs[id]), false);
        remark();
        if (keep) {
          const el = document.getElementById(keep.id);
          if (el) {
            if (keep.value !== null) el.value = keep.value;
            el.focus({ preventScroll: true });
            if (keep.start !== null && el.setSelectionRange) {
              try { el.setSelectionRange(keep.start, keep.end); } catch (e) { /* not a text field */ }
            }
          }
        }
        const after = noticeTexts();
        for (const id in after) {
          if (before[id] !== after[id]) announce(after[id]);
        }
      } catch (e) { /* the next change retries */ }
    })();
    const p = refreshing;
    p.finally(function () {
      refreshing = null;
      if (again) { again = false; refresh(); }
    });
    return p;
  }

  // Versions this page caused itself (what the person typed): the page
  // already shows them, so their events need no redraw.
  const own = new Set();
  let timer = null;
  function soon() {
    if (timer) return;
    timer = setTimeout(function () { timer = null; refresh(); }, 80);
  }

  if (window.EventSource) {
    const es = new EventSource("/v1/events");
    const mine = function (ev) {
      try {
        const d = JSON.parse(ev.data || "{}");
        const form = d.formId || (d.identity && d.identity.formId);
        if (d.screen === screenId && (d.reveal || d.highlight)) { point(d); return; }
        if (d.screen === screenId && d.version && own.delete(d.version)) return;
        if (d.screen === screenId || form === screenId) soon();
      } catch (e) { /* ignore */ }
    };
    for (const t of ["screen.update", "control.command", "control.staged", "control.value", "control.proposal"]) {
      es.addEventListener(t, mine);
    }
    es.addEventListener("lagged", soon);
    // What changed between drawing the page and subscribing is not in the
    // stream: redraw once the subscription is open. The region is marked
    // live once that first redraw is done; later ones follow events.
    es.addEventListener("open", function () {
      refresh().finally(function () { region.dataset.live = "ready"; });
    });
    window.addEventListener("pagehide", function () { es.close(); });
  }

  // An agent points at a field: scroll it into view, and mark it for a
  // while. The person's focus stays where it is.
  // Marks are kept here (element id -> until, in ms since the epoch) so a
  // redraw of the region does not wipe one before its time is up.
  const marks = {};
  function point(d) {
    const el = document.getElementById("n-" + (d.reveal || d.highlight));
    if (!el) return;
    el.scrollIntoView({ block: "center", behavior: "smooth" });
    if (d.highlight) {
      const ms = Math.min(d.ms || 3000, 60000);
      marks[el.id] = Date.now() + ms;
      el.classList.add("o-highlight");
      setTimeout(remark, ms + 10);
    }
  }
  // The server names the highlights still on when it draws the region,
  // so a page opened, or redrawn after a missed event, shows them too.
  function readMarks() {
    const frame = region.querySelector("[data-marks]");
    if (!frame) return;
    try {
      const left = JSON.parse(frame.dataset.marks);
      const now = Date.now();
      for (const id in left) {
        const until = now + Math.min(left[id], 60000);
        if (!marks[id] || marks[id] < until) {
          marks[id] = until;
          setTimeout(remark, left[id] + 10);
        }
      }
    } catch (e) { /* no marks */ }
  }
  function remark() {
    readMarks();
    const now = Date.now();
    for (const id in marks) {
      const el = document.getElementById(id);
      const on = marks[id] > now;
      if (!on) delete marks[id];
      if (el) el.classList.toggle("o-highlight", on);
    }
  }

  remark();

  // --- fields ---------------------------------------------------------------

  function valueOf(el) {
    return el.dataset.kind === "switch" ? el.checked : el.value;
  }

  // The message last announced for each field, so each one is said once.
  const announced = {};
  function showMessage(el, text) {
    const id = el.dataset.field;
    const msg = document.getElementById("m-" + id);
    if (!msg) return;
    msg.textContent = text || "";
    msg.hidden = !text;
    if (text) {
      el.setAttribute("aria-invalid", "true");
      el.setAttribute("aria-describedby", msg.id);
      if (announced[id] !== text) { announced[id] = text; announce(text); }
    } else {
      delete announced[id];
      el.removeAttribute("aria-invalid");
      el.removeAttribute("aria-describedby");
    }
  }

  const inflight = new Set();
  const debounce = {};
  function sendState(el, touched) {
    const id = el.dataset.field;
    clearTimeout(debounce[id]);
    delete debounce[id];
    const p = post("/state", { field: id, value: valueOf(el), touched: touched })
      .then(function (d) {
        if (d.version) {
          if (own.size > 100) own.clear();
          own.add(d.version);
        }
        // Other components show this value: draw them again.
        if (d.redraw) soon();
        const cur = document.getElementById(el.id) || el;
        const msg = document.getElementById("m-" + id);
        // A message shows once the person left the field, and stays until
        // the field passes.
        if (touched || (msg && !msg.hidden)) showMessage(cur, d.message);
      })
      .catch(function (e) { showAlert(e.message); });
    inflight.add(p);
    p.finally(function () { inflight.delete(p); });
    return p;
  }

  async function flush() {
    for (const id in debounce) {
      clearTimeout(debounce[id]);
      const el = document.getElementById("f-" + id);
      delete debounce[id];
      if (el) sendState(el, false);
    }
    await Promise.allSettled(Array.from(inflight));
  }

  region.addEventListener("input", function (ev) {
    const el = ev.target;
    if (!el.dataset || !el.dataset.field || el.dataset.kind !== "text") return;
    const id = el.dataset.field;
    clearTimeout(debounce[id]);
    debounce[id] = setTimeout(function () { sendState(el, false); }, 200);
  });
  region.addEventListener("change", function (ev) {
    const el = ev.target;
    if (!el.dataset || !el.dataset.field) return;
    sendState(el, el.dataset.kind !== "text");
  });
  region.addEventListener("focusout", function (ev) {
    const el = ev.target;
    if (swapping || !el.isConnected || !el.dataset || !el.dataset.field) return;
    sendState(el, true);
  });

  // --- presses and the runtime's confirmation -----------------------------

  let press = null;
  // pressedBy is the id of the button whose press the dialog asks about:
  // focus returns to it when the dialog closes.
  let pressedBy = null;
  region.addEventListener("click", async function (ev) {
    const tab = ev.target.closest && ev.target.closest("[role=tab]");
    if (tab && region.contains(tab)) { selectTab(tab, true); return; }
    const btn = ev.target.closest && ev.target.closest("[data-press]");
    if (!btn || btn.disabled) return;
    showAlert("");
    btn.disabled = true;
    try {
      await flush();
      const d = await post("/press", { button: btn.dataset.press });
      if (d.status === "blocked") {
        await refresh();
        const f = document.getElementById("f-" + d.focus);
        if (f) f.focus();
        const m = document.getElementById("m-" + d.focus);
        if (m) announce(m.textContent);
      } else if (d.status === "confirm") {
        press = d.press;
        pressedBy = btn.id;
        sentence.textContent = d.sentence;
        dialog.showModal();
        document.getElementById("confirm-cancel").focus();
      } else if (d.status === "done") {
        await refresh();
        announce("Done.");
      } else {
        showAlert(d.message);
      }
    } catch (e) {
      showAlert(e.message);
    } finally {
      const again = document.getElementById(btn.id);
      if (again && again.getAttribute("aria-disabled") !== "true") again.disabled = false;
    }
  });

  async function answer(path) {
    const id = press;
    press = null;
    if (dialog.open) dialog.close();
    const back = pressedBy && document.getElementById(pressedBy);
    pressedBy = null;
    if (back) back.focus();
    if (!id) return;
    try {
      const d = await post(path, { press: id });
      if (d.status === "done") { await refresh(); announce("Done."); }
      else if (d.status === "failed") showAlert(d.message);
    } catch (e) {
      showAlert(e.message);
    }
  }
  // A press filed from the screen's view in an agent's host waits here for
  // the person: ask at once.
  if (region.dataset.pressWaiting) {
    press = region.dataset.pressWaiting;
    sentence.textContent = region.dataset.pressSentence || "";
    dialog.showModal();
    document.getElementById("confirm-cancel").focus();
  }
  document.getElementById("confirm-cancel").addEventListener("click", function () { answer("/cancel"); });
  document.getElementById("confirm-ok").addEventListener("click", function () { answer("/confirm"); });
  dialog.addEventListener("cancel", function (ev) { ev.preventDefault(); answer("/cancel"); });

  // --- tabs -----------------------------------------------------------------

  function selectTab(tab, focus) {
    if (!tab) return;
    const list = tab.closest("[role=tablist]");
    for (const t of list.querySelectorAll("[role=tab]")) {
      const on = t === tab;
      t.setAttribute("aria-selected", on ? "true" : "false");
      t.tabIndex = on ? 0 : -1;
      const panel = document.getElementById(t.getAttribute("aria-controls"));
      if (panel) panel.hidden = !on;
    }
    if (focus) tab.focus();
  }
  region.addEventListener("keydown", function (ev) {
    const tab = ev.target.closest && ev.target.closest("[role=tab]");
    if (!tab) return;
    const tabs = Array.from(tab.closest("[role=tablist]").querySelectorAll("[role=tab]"));
    let i = tabs.indexOf(tab);
    if (ev.key === "ArrowRight") i = (i + 1) % tabs.length;
    else if (ev.key === "ArrowLeft") i = (i - 1 + tabs.length) % tabs.length;
    else if (ev.key === "Home") i = 0;
    else if (ev.key === "End") i = tabs.length - 1;
    else return;
    ev.preventDefault();
    selectTab(tabs[i], true);
  });
})();
