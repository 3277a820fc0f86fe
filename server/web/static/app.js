// assent web UI: live refresh of server-rendered regions.
//
// An element with data-refresh="URL" is re-fetched from URL (which returns
// the region's HTML) whenever the event stream reports a change. Focus is
// kept on the element that had it when possible.
(function () {
  "use strict";
  const regions = document.querySelectorAll("[data-refresh]");
  if (!regions.length || !window.EventSource) return;
  let pending = null;
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
          if (focusedId) {
            const again = document.getElementById(focusedId);
            if (again) again.focus();
          }
        } catch (e) { /* the next event retries */ }
      }
      const live = document.getElementById("live");
      if (live) live.textContent = "Updated.";
    }, 150);
  }
  const es = new EventSource("/v1/events");
  es.onopen = function () { document.body.dataset.live = "1"; };
  es.onmessage = refresh;
  es.addEventListener("lagged", refresh);
  for (const type of (document.body.dataset.events || "control.staged control.command control.proposal flow.approval flow.instance run.trace run.status screen.update").split(" ")) {
    es.addEventListener(type, refresh);
  }
})();
