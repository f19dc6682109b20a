// Live updates: the page listens to its event stream (body[data-events])
// and, on a change, fetches itself again and swaps in each region
// ([data-live]) whose content changed, so a form being filled stays as it
// is until its requests change.
(() => {
  "use strict";
  const body = document.body;
  let source = null, url = "", timer = 0, busy = false, again = false;

  function connect() {
    const u = body.dataset.events || "";
    if (!u || u === url) return;
    if (source) source.close();
    url = u;
    source = new EventSource(u);
    source.addEventListener("change", schedule);
  }

  function schedule() {
    if (!timer) timer = setTimeout(refresh, 100);
  }

  async function refresh() {
    timer = 0;
    if (busy) { again = true; return; }
    busy = true;
    try {
      const r = await fetch(location.href, { headers: { Accept: "text/html" }, cache: "no-store" });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      for (const el of document.querySelectorAll("[data-live]")) {
        const next = doc.getElementById(el.id);
        if (next && next.dataset.live !== el.dataset.live) el.replaceWith(document.importNode(next, true));
      }
      body.dataset.events = doc.body.dataset.events || "";
      body.dataset.refreshes = String(Number(body.dataset.refreshes || 0) + 1);
      connect();
    } finally {
      busy = false;
      if (again) { again = false; schedule(); }
    }
  }

  connect();
})();
