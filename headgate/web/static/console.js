"use strict";
// The console's few interactive bits: Enqueue now, delete, and the schedule form.
const base = document.body.dataset.base || "";

async function api(method, path, body, headers = {}) {
  const options = {method, headers: {...headers}};
  if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(base + "/api/v1" + path, options);
  const data = response.status === 204 ? null : await response.json().catch(() => null);
  return {ok: response.ok, status: response.status, data};
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
      const response = await api("POST", `/periodic/${encodeURIComponent(id)}/run`, undefined, {"Idempotency-Key": key});
      if (response.ok) {
        const verb = response.data.replayed ? "Already enqueued" : "Enqueued";
        result.innerHTML = `${verb} job <a id="manual-job" href="${base}/jobs/${response.data.id}">${response.data.id}</a>.`;
      } else {
        result.textContent = "Not enqueued: " + (response.data ? response.data.error : response.status);
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
    const response = await api("DELETE", `/periodic/${encodeURIComponent(id)}`);
    if (response.ok) location.href = base + "/";
    else document.getElementById("action-result").textContent = response.data ? response.data.error : "delete failed";
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
  form.spec.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(showPreview, 250); });
  showPreview();
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const errorBox = document.getElementById("form-error");
    errorBox.textContent = "";
    let payload;
    try { payload = JSON.parse(form.payload.value || "null"); }
    catch (e) { errorBox.textContent = "payload: is not valid JSON"; return; }
    const body = {
      spec: form.spec.value.trim(), kind: form.kind.value.trim(), queue: form.queue.value.trim() || "default",
      payload, on_missed: form.on_missed.value, backfill_limit: Number(form.backfill_limit.value),
      paused: form.paused.checked,
      start_at_ms: form.start_at_ms.value ? Number(form.start_at_ms.value) : null,
      end_at_ms: form.end_at_ms.value ? Number(form.end_at_ms.value) : null,
      jitter_ms: Number(form.jitter_ms.value || 0),
    };
    const id = form.id.value.trim();
    if (!id) { errorBox.textContent = "id: is required"; return; }
    const response = await api("PUT", `/periodic/${encodeURIComponent(id)}`, body);
    if (response.ok) location.href = `${base}/schedules/${encodeURIComponent(id)}`;
    else errorBox.textContent = response.data ? response.data.error : `failed (${response.status})`;
  });
}
