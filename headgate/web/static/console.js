"use strict";
// The console's few interactive bits: action buttons that call the API, Enqueue
// now, delete, the schedule form, refreshing the enqueue history, logging in and
// out. All of it lives here, none inline: the pages' CSP runs no inline script.
const base = document.body.dataset.base || "";
const FLASH_KEY = "headgate-flash";
// Logged in, the page carries the session's CSRF token; every write sends it
// back, which a page on another origin cannot do.
const csrfMeta = document.querySelector('meta[name="csrf-token"]');

async function send(method, url, body, headers = {}) {
  const options = {method, headers: {...headers, "X-Headgate-Client": "console"}};
  if (csrfMeta) options.headers["X-CSRF-Token"] = csrfMeta.content;
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(url, options);
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  return {ok: response.ok, status: response.status, data};
}

function api(method, path, body, headers = {}) {
  return send(method, base + "/api/v1" + path, body, headers);
}

function flash(text, isError = false) {
  const box = document.getElementById("action-result");
  box.className = isError ? "error" : "";
  box.textContent = text;
}

function errorText(response) {
  return (response.data && response.data.error) || `failed (HTTP ${response.status})`;
}

// A message saved before a reload is shown once on the page that follows.
const saved = sessionStorage.getItem(FLASH_KEY);
if (saved) {
  sessionStorage.removeItem(FLASH_KEY);
  flash(saved);
}

// <button class="action" data-path="/jobs/1/retry" [data-method="DELETE"]
// [data-body='{"note": "..."}'] [data-confirm="Sure?"] data-done="Retried.">: calls
// the API (with the JSON body, if any), disabled while the
// request is in flight; on success reloads the page to show the new state (and
// data-done), otherwise shows the API's error.
for (const button of document.querySelectorAll("button.action[data-path]")) {
  button.addEventListener("click", async () => {
    if (button.disabled) return;
    if (button.dataset.confirm && !confirm(button.dataset.confirm)) return;
    button.disabled = true;
    let response;
    try {
      const body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
      response = await api(button.dataset.method || "POST", button.dataset.path, body);
    } catch (e) {
      response = {ok: false, status: 0, data: {error: "the server did not answer; try again"}};
    }
    if (response.ok) {
      sessionStorage.setItem(FLASH_KEY, button.dataset.done || "Done.");
      location.reload();
      return;
    }
    flash(errorText(response), true);
    button.disabled = false;
  });
}

function newKey() {
  return (crypto.randomUUID && crypto.randomUUID()) || String(Date.now()) + Math.random();
}

const enqueueButton = document.getElementById("enqueue-now");
if (enqueueButton) {
  // Clicks less than REPEAT_MS apart are one intent and share an idempotency
  // key, so a double-click makes one job however fast the first request
  // returns; the button is also disabled while a request is in flight.
  const REPEAT_MS = 2000;
  let key = newKey();
  let lastClick = -Infinity;
  enqueueButton.addEventListener("click", async () => {
    if (enqueueButton.disabled) return;
    const now = performance.now();
    if (now - lastClick > REPEAT_MS) key = newKey();
    lastClick = now;
    enqueueButton.disabled = true;
    const result = document.getElementById("action-result");
    const id = enqueueButton.dataset.schedule;
    try {
      const response = await api("POST", `/schedules/${encodeURIComponent(id)}/enqueue-now`, undefined, {"Idempotency-Key": key});
      if (response.ok) {
        result.className = "";
        const verb = response.data.replayed ? "Already enqueued" : "Enqueued";
        const link = document.createElement("a");
        link.id = "manual-job";
        link.href = `${base}/jobs/${encodeURIComponent(response.data.id)}`;
        link.textContent = response.data.id;
        result.replaceChildren(`${verb} job `, link, ".");
      } else {
        flash("Not enqueued: " + errorText(response), true);
      }
    } finally {
      enqueueButton.disabled = false;
    }
  });
}

const deleteButton = document.getElementById("delete");
if (deleteButton) {
  deleteButton.addEventListener("click", async () => {
    const id = deleteButton.dataset.schedule;
    if (!confirm(`Delete schedule ${id}? Its enqueue history stays readable.`)) return;
    const response = await api("DELETE", `/schedules/${encodeURIComponent(id)}`);
    if (response.ok) {
      sessionStorage.setItem(FLASH_KEY, `Deleted ${id}: it no longer ticks; its history stays below.`);
      location.reload();
    } else flash(errorText(response), true);
  });
}

const form = document.getElementById("schedule-form");
if (form) {
  const previewBox = document.getElementById("spec-preview");
  let timer = null;
  const showPreview = async () => {
    const spec = form.spec.value.trim();
    if (!spec) { previewBox.textContent = ""; return; }
    const response = await fetch(`${base}/api/v1/spec-preview?spec=${encodeURIComponent(spec)}`);
    const data = await response.json();
    if (!data.valid) {
      previewBox.className = "preview error";
      previewBox.textContent = data.error;
      return;
    }
    previewBox.className = "preview";
    const ticks = data.next_ticks_ms.map((t) => new Date(t).toISOString().replace(".000Z", "Z"));
    previewBox.textContent = `${data.description}. Next: ${ticks.join(", ")}`;
  };
  const backfillField = document.getElementById("backfill-field");
  form.on_missed.addEventListener("change", () => {
    backfillField.hidden = form.on_missed.value !== "backfill";
  });
  form.spec.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(showPreview, 250); });
  showPreview();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const errorBox = document.getElementById("form-error");
    errorBox.textContent = "";
    // Every field of the definition, each read as its data-type says: PUT is a
    // full replace, so the body carries them all.
    const body = {};
    for (const input of form.querySelectorAll("[data-field]")) {
      const name = input.dataset.field;
      const text = input.value.trim();
      switch (input.dataset.type) {
        case "bool": body[name] = input.checked; break;
        case "int": body[name] = text === "" ? null : Number(text); break;
        case "int-or-null": body[name] = text === "" ? null : Number(text); break;
        case "text-or-null": body[name] = text === "" ? null : text; break;
        case "json":
          try { body[name] = JSON.parse(text || "null"); }
          catch (e) { errorBox.textContent = `${name}: is not valid JSON`; return; }
          break;
        default: body[name] = text;
      }
    }
    const id = form.id.value.trim();
    if (!id) { errorBox.textContent = "id: is required"; return; }
    const response = await api("PUT", `/schedules/${encodeURIComponent(id)}`, body);
    if (response.ok) location.href = `${base}/schedules/${encodeURIComponent(id)}`;
    else errorBox.textContent = response.data ? response.data.error : `failed (${response.status})`;
  });
}

// The newest page of a schedule's history refreshes itself: every few seconds
// the page is fetched again and only its [data-refresh] regions (which hold no
// buttons or fields) are swapped, so scroll position and forms are kept.
const autoRefresh = document.getElementById("auto-refresh");
if (autoRefresh) {
  // A control hidden without script (the page is whole without it) is shown here.
  const control = document.getElementById("auto-refresh-control");
  if (control) control.hidden = false;
  const REFRESH_MS = 3000;
  const refresh = async () => {
    if (!autoRefresh.checked || document.hidden) return;
    const response = await fetch(location.href).catch(() => null);
    if (!response || !response.ok) return;
    const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
    for (const region of document.querySelectorAll("[data-refresh]")) {
      const replacement = fresh.getElementById(region.id);
      if (replacement) region.replaceWith(replacement);
    }
  };
  setInterval(refresh, REFRESH_MS);
}

const loginForm = document.getElementById("login");
if (loginForm) {
  loginForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const errorBox = document.getElementById("login-error");
    errorBox.textContent = "";
    const response = await send("POST", base + "/login", {token: loginForm.token.value})
      .catch(() => ({ok: false, status: 0, data: {error: "the server did not answer; try again"}}));
    if (response.ok) {
      // On /login itself, go to the schedules; on a page that asked for the token, show it.
      if (location.pathname === base + "/login") location.href = base + "/";
      else location.reload();
    } else if (response.status === 401) errorBox.textContent = "wrong token";
    else errorBox.textContent = errorText(response);
  });
}

for (const button of document.querySelectorAll("button.logout")) {
  button.addEventListener("click", async () => {
    button.disabled = true;
    const response = await send("POST", base + "/logout")
      .catch(() => ({ok: false, status: 0, data: {error: "the server did not answer; try again"}}));
    if (response.ok) location.href = base + "/login";
    else {
      flash(errorText(response), true);
      button.disabled = false;
    }
  });
}

// <form class="api-form" data-method="PUT" data-path="/rates/{rate_class}"
// data-done="Set.">: its named inputs are the JSON body (a number input as a
// number, an empty one left out); an input marked data-in-path fills its
// {name} in the path instead. On success reloads with data-done, otherwise
// shows the API's error.
for (const apiForm of document.querySelectorAll("form.api-form")) {
  apiForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {};
    let path = apiForm.dataset.path;
    for (const input of apiForm.querySelectorAll("input[name]")) {
      const value = input.value.trim();
      if (input.hasAttribute("data-in-path")) {
        path = path.replace(`{${input.name}}`, encodeURIComponent(value));
      } else if (value !== "") {
        body[input.name] = input.type === "number" ? Number(value) : value;
      }
    }
    const response = await api(apiForm.dataset.method || "POST", path, body);
    if (response.ok) {
      sessionStorage.setItem(FLASH_KEY, apiForm.dataset.done || "Done.");
      location.reload();
      return;
    }
    flash(errorText(response), true);
  });
}

// <button class="bulk-action" data-action="retry" data-state="failed"
// data-filters='{"state": "failed", "kind": "..."}'>: counts the jobs the
// filters match now (GET /jobs:count), asks, then POST /jobs:{action} with the
// same filters and reports what changed and what was skipped.
for (const bulk of document.querySelectorAll("button.bulk-action")) {
  bulk.addEventListener("click", async () => {
    if (bulk.disabled) return;
    const filters = JSON.parse(bulk.dataset.filters);
    const action = bulk.dataset.action;
    const unstated = Object.entries(filters).filter(([name]) => name !== "state");
    bulk.disabled = true;
    try {
      const counted = await api("GET", "/jobs:count?" + new URLSearchParams(unstated));
      if (!counted.ok) { flash(errorText(counted), true); return; }
      const matching = counted.data.counts[bulk.dataset.state];
      const more = matching >= counted.data.cap ? "+" : "";
      const cap = Number(bulk.dataset.max);
      const limit = Math.min(matching, cap);
      const asked = `${action} ${limit.toLocaleString()} of the ${matching.toLocaleString()}${more} ` +
        `${bulk.dataset.state} jobs these filters match (newest first, at most ${cap.toLocaleString()})?`;
      if (matching === 0) { flash(`No ${bulk.dataset.state} jobs match now.`); return; }
      if (!confirm(asked[0].toUpperCase() + asked.slice(1))) return;
      const response = await api("POST", `/jobs:${action}`, filters);
      if (!response.ok) { flash(errorText(response), true); return; }
      const done = action === "retry" ? "Retried" : "Cancelled";
      const moreLeft = response.data.more ? " More match: click again for the next ones." : "";
      sessionStorage.setItem(FLASH_KEY,
        `${done} ${response.data.changed} jobs; skipped ${response.data.skipped} that changed state meanwhile.${moreLeft}`);
      location.reload();
    } catch (e) {
      flash("the server did not answer; try again", true);
    } finally {
      bulk.disabled = false;
    }
  });
}
