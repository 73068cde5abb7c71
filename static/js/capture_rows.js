// Capture tables (run and host pages): rows of captures still queued, running or
// parsing follow their capture live — status, elapsed, current lag, samples — until
// it ends, so a page reloaded mid-capture keeps moving. One request at a time.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const LIVE = ["queued", "running", "parsing"];
  const EVERY_MS = 1500;
  // Live progress counts py-spy's sampling rounds; the result counts one sample per
  // thread per round, so the number grows when the capture ends: say which is which.
  const ROUNDS_TITLE = "sampling rounds so far; the result counts one sample per thread per round";

  function liveRows() {
    return [...document.querySelectorAll("tr[data-capture]")].filter((row) => LIVE.includes(row.dataset.status));
  }

  function badge(status) {
    return el("span", { class: `badge status-${status}` }, status.charAt(0).toUpperCase() + status.slice(1));
  }

  function update(row, capture) {
    const p = capture.progress || {};
    const cell = (name) => row.querySelector(`[data-cell=${name}]`);
    const status = [badge(capture.status)];
    if (capture.status === "queued" && p.retry) status.push(el("span", { class: "small muted retryline" }, ` ${p.retry.message}`));
    if (capture.status === "running" && p.duration_s) status.push(el("span", { class: "muted small elapsed" }, ` ${fd.sampledText(p)}`));
    cell("status").replaceChildren(...status);
    row.dataset.status = capture.status;
    if (LIVE.includes(capture.status)) {
      cell("samples").textContent = p.expected_samples ? `≈ ${p.expected_samples} rounds` : "–";
      cell("samples").title = p.expected_samples ? ROUNDS_TITLE : "";
      cell("lag").replaceChildren(capture.status === "running" && p.duration_s
        ? el("span", { class: (p.behind_s || 0) >= 1 ? "error small" : "muted small" }, p.behind_s ? `${p.behind_s} s behind` : "keeping up")
        : el("span", { class: "muted" }, "–"));
      return;
    }
    const stats = capture.stats || {};
    cell("samples").textContent = stats.total_samples != null ? String(stats.total_samples) : "–";
    cell("samples").title = "";
    const verdict = stats.lag && stats.lag.verdict;
    cell("lag").replaceChildren(verdict ? el("span", { class: `badge verdict-${verdict}` }, verdict) : el("span", { class: "muted" }, "–"));
    const first = (stats.categories || [])[0];
    cell("categories").replaceChildren(first
      ? el("span", { class: "catlabel" }, `${first.category} ${first.percent.toFixed(1)}%`)
      : el("span", { class: capture.status === "failed" ? "error small" : "muted" }, capture.status === "failed" ? (capture.error || "failed") : "–"));
  }

  async function tick() {
    const rows = liveRows();
    if (!rows.length) return;
    for (const row of rows) {
      try { update(row, await fd.fetchJson(`/api/captures/${row.dataset.capture}/`)); }
      catch (err) { row.querySelector("[data-cell=status]").title = `lost track: ${err.message}`; }
    }
    setTimeout(tick, EVERY_MS);
  }

  // A capture started from this page (the dock) is not in the table yet: say so.
  document.addEventListener("flamedeck:capture-final", (event) => {
    const id = event.detail && event.detail.id;
    if (!document.querySelector(`tr[data-capture="${id}"]`)) document.getElementById("captures")?.classList.add("stale");
  });
  tick();
})();
