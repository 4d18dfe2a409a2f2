// Live updates: an element with data-live listens to the server's events and, when they say
// something changed, reloads its content from data-fragment. A fragment made of parts
// (data-part="<id>") updates each element of the page with that id instead: an email's status
// at the top of its page and its timeline below. No framework, nothing from the network but
// this server.
"use strict";
document.querySelectorAll("[data-live]").forEach((el) => {
  let source = null;
  let busy = false;
  // The session ended (a revoked key, a sign-out elsewhere): said on the page, not left to
  // look current.
  const ended = () => {
    if (source) source.close();
    if (document.getElementById("live-ended")) return;
    const note = document.createElement("p");
    note.id = "live-ended";
    note.className = "error";
    note.setAttribute("role", "alert");
    note.textContent = "Live updates stopped (the session may have ended): reload the page.";
    el.before(note);
  };
  const refresh = async () => {
    if (busy) return;
    busy = true;
    try {
      const res = await fetch(el.dataset.fragment, { credentials: "same-origin" });
      if (res.status === 401) ended();
      if (!res.ok) return;
      const html = await res.text();
      const t = document.createElement("template");
      t.innerHTML = html;
      const parts = t.content.querySelectorAll("[data-part]");
      if (parts.length === 0) {
        swap(el, html);
        return;
      }
      parts.forEach((part) => {
        const target = document.getElementById(part.dataset.part);
        if (target) swap(target, part.innerHTML);
      });
    } finally {
      busy = false;
    }
  };
  const open = () => {
    source = new EventSource(el.dataset.live);
    const mine = source;
    // A stream the server ended for good.
    source.addEventListener("error", () => {
      if (mine.readyState === EventSource.CLOSED) ended();
    });
    source.addEventListener("changed", refresh);
  };
  // A tab out of sight lets its stream go: a browser holds at most six connections to a
  // server over HTTP/1.1, and six open tabs each holding one would leave none for a page to
  // load. Back in sight, it listens again and catches up on what it missed.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) {
      if (source) source.close();
      source = null;
    } else if (!source && !document.getElementById("live-ended")) {
      open();
      refresh();
    }
  });
  if (!document.hidden) open();
});

// swap redraws target with html and gives back what the user held in it: the focused link,
// button or field (found again by where it points or its name) and the open panels (found
// again by their content), so a live update moves neither the keyboard nor the reading.
function swap(target, html) {
  const key = (x) => x.getAttribute("href") || x.id || x.getAttribute("name") || "";
  const active = target.contains(document.activeElement) ? document.activeElement : null;
  const held = active && key(active);
  const open = new Set([...target.querySelectorAll("details[open]")].map((d) => d.textContent));
  // What the user has chosen or typed in a form of the redrawn part (a bounce's type, a
  // click's URL) stays: found again by the form's action and the field's name.
  // A box or a radio button is one of its name's choices (its value), and holds checked.
  const checkable = (x) => x.type === "checkbox" || x.type === "radio";
  const field = (x) => (x.form ? x.form.getAttribute("action") : "") + "|" + (x.name || x.id) + (checkable(x) ? "|" + x.value : "");
  const changed = (x) => checkable(x) ? x.checked !== x.defaultChecked
    : x.tagName === "SELECT" ? [...x.options].some((o) => o.selected !== o.defaultSelected) : x.value !== x.defaultValue;
  const fields = () => [...target.querySelectorAll("input, select, textarea")].filter((x) => x.type !== "hidden" && x.type !== "submit");
  const edited = new Map(fields().filter(changed).map((x) => [field(x), checkable(x) ? x.checked : x.value]));
  target.innerHTML = html;
  for (const x of fields()) {
    if (!edited.has(field(x))) continue;
    if (checkable(x)) x.checked = edited.get(field(x));
    else x.value = edited.get(field(x));
  }
  target.querySelectorAll("details").forEach((d) => { if (open.has(d.textContent)) d.open = true; });
  if (held) {
    const again = [...target.querySelectorAll(active.tagName)].find((x) => key(x) === held);
    if (again) again.focus({ preventScroll: true });
  }
}

// A form with data-confirm (revoking a key) asks first.
document.addEventListener("submit", (ev) => {
  const form = ev.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) ev.preventDefault();
});

// Copy buttons (a domain's DNS records): the clipboard where the browser allows it, otherwise
// the text is selected for the user's own Ctrl-C. Without JavaScript the text is plain.
for (const button of document.querySelectorAll("button[data-copy]")) button.hidden = false;
document.addEventListener("click", async (ev) => {
  const button = ev.target.closest("button[data-copy]");
  if (!button) return;
  // The button's label names what it copies; a polite live region says what happened.
  let said = document.getElementById("copy-status");
  if (!said) {
    said = document.createElement("p");
    said.id = "copy-status";
    said.className = "sr-only";
    said.setAttribute("role", "status");
    document.body.append(said);
  }
  try {
    await navigator.clipboard.writeText(button.dataset.copy);
    button.textContent = "Copied";
    said.textContent = "Copied to the clipboard.";
  } catch {
    const range = document.createRange();
    range.selectNodeContents(button.previousElementSibling);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    button.textContent = "Selected: press Ctrl-C";
    said.textContent = "The clipboard is not available: the text is selected, press Ctrl-C to copy it.";
  }
  setTimeout(() => { button.textContent = "Copy"; }, 2000);
});

// A page answered to a form (a key just created, shown once) takes its GET address in the
// history: a reload shows the page again instead of posting the form a second time.
if (document.querySelector("[data-posted]")) {
  history.replaceState(null, "", location.pathname);
}
