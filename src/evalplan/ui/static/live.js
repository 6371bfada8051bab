// Live regions, without a framework: an element with data-live-src="URL" is re-fetched every
// data-live-every milliseconds (default 2000) and replaced by the response, an HTML fragment
// whose root is the new element. Refreshing stops when the new element has no data-live-src
// (a session that stopped, a job that finished); a new element marked data-live-reload reloads the
// page instead (the finished job's results are a different page). Hidden tabs wait; failures back off.
(function () {
  "use strict";
  var MAX_DELAY = 30000;

  function announce(region, text, state) {
    var status = region.querySelector("[data-live-status]");
    if (status) {
      status.textContent = text;
      status.dataset.state = state;
    }
  }

  function schedule(region, delay) {
    window.setTimeout(function () { refresh(region, delay); }, delay);
  }

  function refresh(region, delay) {
    var every = Number(region.dataset.liveEvery || 2000);
    if (document.hidden) { schedule(region, every); return; }
    fetch(region.dataset.liveSrc, { headers: { Accept: "text/html" }, credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        var template = document.createElement("template");
        template.innerHTML = html.trim();
        var next = template.content.firstElementChild;
        if (!next) { throw new Error("empty fragment"); }
        if (next.hasAttribute("data-live-reload")) { window.location.reload(); return; }
        var focusedId = region.contains(document.activeElement) ? document.activeElement.id : null;
        region.replaceWith(next);
        if (focusedId && document.getElementById(focusedId)) { document.getElementById(focusedId).focus(); }
        next.dispatchEvent(new CustomEvent("evalplan:updated", { bubbles: true }));
        if (next.dataset.liveSrc) {
          announce(next, "Live: updated " + new Date().toLocaleTimeString(), "live");
          schedule(next, Number(next.dataset.liveEvery || 2000));
        }
      })
      .catch(function (error) {
        var wait = Math.min(MAX_DELAY, Math.max(every, delay * 2));
        announce(region, "Live updates paused (" + error.message + "); retrying in " + Math.round(wait / 1000) + " s", "error");
        schedule(region, wait);
      });
  }

  function start() {
    document.querySelectorAll("[data-live-src]").forEach(function (region) {
      schedule(region, Number(region.dataset.liveEvery || 2000));
    });
  }

  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", start); } else { start(); }
})();
