// Live updates: an element with data-live listens to the server's events and, when they say
// something changed, reloads its content from data-fragment. No framework, nothing from the
// network but this server.
"use strict";
document.querySelectorAll("[data-live]").forEach((el) => {
  const source = new EventSource(el.dataset.live);
  let busy = false;
  source.addEventListener("changed", async () => {
    if (busy) return;
    busy = true;
    try {
      const res = await fetch(el.dataset.fragment, { credentials: "same-origin" });
      if (res.ok) el.innerHTML = await res.text();
    } finally {
      busy = false;
    }
  });
});
