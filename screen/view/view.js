// assent screen view: the half that runs in the agent's host.
//
// The engine (engine.js) parses the stream, checks fields and draws the
// HTML, with the same rules and markup as the web UI. This script only talks
// to the host (JSON-RPC over postMessage, as MCP Apps defines it), feeds the
// engine the tool's argument as it streams in, and sends a pressed button's
// tool call back through the host.
(function () {
  "use strict";
  const cfg = JSON.parse(document.getElementById("view-config").textContent);
  const region = document.getElementById("screen-region");
  const notice = document.getElementById("view-notice");
  const status = document.getElementById("screen-status");
  const alertBox = document.getElementById("screen-alert");
  const dialog = document.getElementById("confirm-dialog");
  const WORD_REJECTED = "Some parts could not be shown.";
  const WORD_FAILED = "The action failed. Nothing was changed that you can see; try again.";
  const WORD_BLOCKED = "This can't be sent. Check the details and try again.";

  // --- the host ------------------------------------------------------------

  let nextId = 1;
  const waiting = new Map();
  function send(msg) {
    msg.jsonrpc = "2.0";
    window.parent.postMessage(msg, "*");
  }
  function request(method, params) {
    const id = nextId++;
    send({ id: id, method: method, params: params });
    return new Promise(function (resolve, reject) { waiting.set(id, { resolve: resolve, reject: reject }); });
  }
  function notify(method, params) { send({ method: method, params: params }); }

  window.addEventListener("message", function (ev) {
    if (ev.source !== window.parent) return;
    const m = ev.data;
    if (!m || m.jsonrpc !== "2.0") return;
    if (m.method === undefined && m.id !== undefined) {
      const w = waiting.get(m.id);
      if (!w) return;
      waiting.delete(m.id);
      if (m.error) w.reject(m.error); else w.resolve(m.result);
      return;
    }
    if (m.id !== undefined) { send({ id: m.id, result: {} }); return; }
    const p = m.params || {};
    switch (m.method) {
      case "ui/notifications/tool-input-partial": input(p.arguments, false); break;
      case "ui/notifications/tool-input": input(p.arguments, true); break;
      case "ui/notifications/tool-result": result(p); break;
      case "ui/notifications/host-context-changed": context(p); break;
    }
  });

  // context follows the host's theme and display mode.
  function context(c) {
    if (!c) return;
    if (c.theme === "dark" || c.theme === "light") document.documentElement.dataset.theme = c.theme;
    if (typeof c.displayMode === "string" && /^[a-z]+$/.test(c.displayMode)) document.documentElement.dataset.displayMode = c.displayMode;
  }

  // --- the stream (SPEC 10.26) ---------------------------------------------

  let session = null;
  let written = "";  // the text written to the parser, whole lines only until the end
  let ended = false; // one view shows one tool call
  let queued = null; // input that came before the engine was ready
  let screenURL = ""; // the screen's page in assent, from the tool's result
  let screenID = "";  // the screen assent keeps for this tool call

  function input(args, complete) {
    if (ended) return;
    const text = args && typeof args.screen === "string" ? args.screen : null;
    if (text === null) return;
    if (!timings.firstInput) timings.firstInput = performance.now();
    if (!session) {
      if (!queued || !queued.complete) queued = { text: text, complete: complete };
      return;
    }
    if (!text.startsWith(written)) {
      // A line is never rewritten: different text is a new stream.
      session.reset();
      written = "";
    }
    const rest = text.slice(written.length);
    if (complete) {
      if (rest) session.write(rest);
      written = text;
      session.end();
      ended = true;
    } else {
      const cut = rest.lastIndexOf("\n");
      if (cut < 0) return;
      const lines = rest.slice(0, cut + 1);
      session.write(lines);
      written += lines;
    }
    // The first lines are drawn at once; later ones once a frame.
    if (timings.firstPaint) soon(); else redraw();
  }

  function result(r) {
    const sc = r && r.structuredContent;
    if (sc && typeof sc.url === "string" && /^https?:\/\//.test(sc.url)) screenURL = sc.url;
    if (sc && typeof sc.screen === "string") screenID = sc.screen;
  }

  // --- drawing ---------------------------------------------------------------

  let frame = 0;
  function soon() {
    if (frame) return;
    frame = requestAnimationFrame(function () { frame = 0; redraw(); });
  }

  // Timings, for the figures: when the engine was running, when the first
  // input came, and when the first screen was drawn.
  const timings = { engineReady: 0, firstInput: 0, firstPaint: 0 };

  function redraw() {
    if (!session) return;
    const d = session.draw();
    if (!timings.firstPaint && d.html.indexOf("o-slot") !== 0) timings.firstPaint = performance.now();
    const active = document.activeElement;
    const keep = active && region.contains(active) && active.id ? active.id : null;
    region.innerHTML = d.html;
    if (keep) {
      const el = document.getElementById(keep);
      if (el) el.focus({ preventScroll: true });
    }
    notice.hidden = !(d.ended && d.rejected > 0) && !d.newer;
    notice.textContent = d.newer || WORD_REJECTED;
    for (const t of region.querySelectorAll("[data-tabs]")) tabs(t);
    // The ResizeObserver below reports the height once the frame is laid
    // out; measuring here would force a layout before the first paint.
    if (!window.ResizeObserver) size();
  }

  // size tells the host the height of the content, whenever it changes,
  // so the frame is as tall as the screen.
  let lastSize = "";
  function size() {
    const main = document.querySelector("main");
    const r = main.getBoundingClientRect();
    const w = Math.ceil(Math.max(r.width, document.documentElement.scrollWidth)), h = Math.ceil(r.height);
    const key = w + "x" + h;
    if (key === lastSize) return;
    lastSize = key;
    notify("ui/notifications/size-changed", { width: w, height: h });
  }
  if (window.ResizeObserver) new ResizeObserver(size).observe(document.querySelector("main"));

  // --- the model: what the person did -----------------------------------------

  // secretKeys are the $keys whose values feed a secret param of a
  // button's tool: the model is never told them.
  function secretKeys() {
    const keys = new Set();
    const doc = session.doc;
    for (const n of doc.nodes()) {
      const m = doc.mutation(n.id);
      const secret = m && cfg.secret && cfg.secret[m.tool];
      if (!secret) continue;
      for (const [k, v] of m.params.m) if (secret.indexOf(k) >= 0 && v && v.key) keys.add(v.key);
    }
    return keys;
  }

  // tellModel tells the model, through the host, the screen as the person
  // sees it now and what just happened.
  let modelTimer = 0;
  function tellModel(outcome) {
    if (!session) return;
    clearTimeout(modelTimer);
    const send = function () {
      const outline = session.outline(secretKeys());
      const text = "The person's screen" + (screenID ? " " + screenID : "") + " now reads:\n" + outline + (outcome ? "\n\n" + outcome : "");
      request("ui/update-model-context", {
        content: [{ type: "text", text: text }],
        structuredContent: { screen: screenID, outline: outline, outcome: outcome || "" },
      }).catch(function () { /* the host keeps no model context */ });
    };
    // A field's changes are told once the person pauses; a press at once.
    if (outcome) send(); else modelTimer = setTimeout(send, 400);
  }

  function announce(text) {
    status.textContent = "";
    setTimeout(function () { status.textContent = text; }, 50);
  }
  function showAlert(text) {
    alertBox.textContent = text || "";
    alertBox.hidden = !text;
  }

  function tabs(t) {
    const list = t.querySelectorAll("[role=tab]");
    list.forEach(function (tab) {
      tab.addEventListener("click", function () {
        list.forEach(function (o) {
          const on = o === tab;
          o.setAttribute("aria-selected", on ? "true" : "false");
          o.tabIndex = on ? 0 : -1;
          const panel = document.getElementById(o.getAttribute("aria-controls"));
          if (panel) panel.hidden = !on;
        });
      });
    });
  }

  // --- fields: what the person types stays here ------------------------------

  function valueOf(el) { return el.dataset.kind === "switch" ? el.checked : el.value; }
  function showMessage(el, text) {
    const msg = document.getElementById("m-" + el.dataset.field);
    if (!msg) return;
    msg.textContent = text || "";
    msg.hidden = !text;
    if (text) {
      el.setAttribute("aria-invalid", "true");
      el.setAttribute("aria-describedby", msg.id);
    } else {
      el.removeAttribute("aria-invalid");
    }
  }
  function record(el, touched) {
    if (!session || !el.dataset.field) return;
    showMessage(el, session.input(el.dataset.field, valueOf(el), touched));
  }
  region.addEventListener("input", function (ev) { record(ev.target, false); });
  region.addEventListener("change", function (ev) { record(ev.target, true); tellModel(""); });
  region.addEventListener("focusout", function (ev) { record(ev.target, true); });

  // --- buttons (SPEC 10.28, 10.35) -------------------------------------------

  region.addEventListener("click", function (ev) {
    const btn = ev.target.closest("[data-press]");
    if (!btn || btn.disabled || !session) return;
    press(btn);
  });

  function newKey() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    const b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.from(b, function (x) { return x.toString(16).padStart(2, "0"); }).join("");
  }

  function press(btn) {
    showAlert("");
    const id = btn.dataset.press;
    const r = session.press(id);
    const label = btn.textContent;
    if (r.blocked) {
      redraw();
      const f = document.getElementById("f-" + r.blocked);
      if (f) f.focus();
      tellModel("The person pressed " + label + "; nothing was sent, since a field it reads needs fixing first.");
      return;
    }
    if (r.refused) { showAlert(WORD_BLOCKED); return; }
    call(btn, id, r.tool, r.params);
  }

  // A tool that asks for a person's confirmation runs only after the person
  // confirms it in assent itself: nothing in a host's frame can prove a
  // person pressed, since a model can call the same tool. The server files
  // the press and answers with the app's sentence and the page where the
  // person confirms it; the dialog shows both.
  let confirmURL = "";
  function confirmElsewhere(sc) {
    const said = document.getElementById("confirm-sentence");
    const what = sc && typeof sc.sentence === "string" ? sc.sentence : "";
    said.textContent = (what ? what + " " : "") + "You confirm it in assent, where the app shows exactly what it will do.";
    confirmURL = sc && typeof sc.url === "string" && /^https?:\/\//.test(sc.url) ? sc.url : screenURL;
    document.getElementById("confirm-open").hidden = !confirmURL;
    document.getElementById("confirm-link").hidden = true;
    dialog.showModal();
  }
  document.getElementById("confirm-cancel").addEventListener("click", function () { dialog.close(); });
  document.getElementById("confirm-open").addEventListener("click", function () {
    if (!confirmURL) return;
    openLink(confirmURL).then(function (opened) {
      if (opened) { dialog.close(); return; }
      showLink(confirmURL);
    });
  });

  // openLink asks the host to open url (ui/open-link); it resolves to
  // whether the host did.
  function openLink(url) {
    return request("ui/open-link", { url: url }).then(function (r) {
      return !(r && r.isError);
    }, function () { return false; });
  }

  // showLink shows url as text to copy, for a host that opens no links.
  function showLink(url) {
    const box = document.getElementById("confirm-link");
    const text = document.getElementById("confirm-link-text");
    text.value = url;
    box.hidden = false;
    text.focus();
    text.select();
  }

  async function call(btn, button, tool, params) {
    btn.disabled = true;
    btn.setAttribute("aria-busy", "true");
    try {
      const res = await request("tools/call", {
        name: tool,
        arguments: params,
        _meta: { "io.omni-ir/idempotency-key": newKey(), "io.omni-ir/button": button, "io.assent/screen": screenID },
      });
      const sc = res && res.structuredContent;
      if (res && res.isError && sc && sc.code === "confirmation_required") {
        confirmElsewhere(sc);
        tellModel("The person pressed " + btn.textContent + ". It runs only once they confirm it in assent" +
          (typeof sc.sentence === "string" && sc.sentence ? " (\"" + sc.sentence + "\")" : "") +
          "; wait for their answer with inbox_wait {\"items\": [{\"screen\": \"" + (sc.screen || screenID) + "\"}]}.");
        return;
      }
      if (!res || res.isError) {
        showAlert(WORD_FAILED);
        tellModel("The person pressed " + btn.textContent + " and " + tool + " failed" + (sc && typeof sc.code === "string" ? " (" + sc.code + ")" : "") + "; nothing changed.");
        return;
      }
      const up = res.structuredContent && res.structuredContent.update;
      if (typeof up === "string") session.update(up);
      redraw();
      announce("Done.");
      tellModel("The person pressed " + btn.textContent + " and " + tool + " ran.");
    } catch (e) {
      showAlert(WORD_FAILED);
    } finally {
      btn.disabled = false;
      btn.removeAttribute("aria-busy");
    }
  }

  // --- start -----------------------------------------------------------------

  // start opens the engine's session; input that came first is fed now.
  function start() {
    // Read and draw a small screen once, so that the script engine has
    // compiled the reader and the drawing before the first line arrives.
    const warm = omniScreen.open({ tools: ["a.b"] });
    warm.write("root = Card([h, f, b])\nh = Heading(\"x\")\n$v = \"\"\nf = Input($v, label=\"x\", required=true)\nb = Button(\"x\", action=\"x\")\nm = McpMutation(b, tool=\"a.b\", params={v: $v})\n");
    warm.end();
    warm.draw();
    session = omniScreen.open({ tools: cfg.tools || [], pictures: cfg.pictures || {} });
    timings.engineReady = performance.now();
    if (queued) {
      const q = queued;
      queued = null;
      input({ screen: q.text }, q.complete);
    }
    document.documentElement.dataset.ready = "true";
  }

  try {
    start();
  } catch (e) {
    notice.textContent = "This screen can't be drawn here. Open it in assent.";
    notice.hidden = false;
  }
  request("ui/initialize", {
    protocolVersion: "2026-01-26",
    appInfo: { name: "assent screen", version: cfg.version || "" },
    appCapabilities: {},
  }).then(function (r) {
    if (r && r.hostContext) context(r.hostContext);
    notify("ui/notifications/initialized", {});
  }).catch(function () { /* no host: a test page feeds input directly */ });
  window.assentView = { input: input, result: result, timings: timings, openLink: openLink };
})();
