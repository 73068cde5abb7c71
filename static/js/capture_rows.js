// Capture tables (captures list, run and host pages): new captures appear at the top
// without a reload (rows rendered by the server, `table[data-rows-url]`), and rows of
// captures still queued, running or parsing follow their capture live — status,
// elapsed, current lag, samples — until it ends. One request at a time.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const LIVE = ["queued", "running", "parsing"];
  const EVERY_MS = 1500;
  const NEW_EVERY_MS = 4000;
  const table = document.querySelector("table.captures[data-rows-url]");
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
    const states = rowStates(stats);
    cell("states").replaceChildren(...(states
      ? [stateBar(states), el("span", { class: "catlabel statelabel" }, `${states.top[0]} ${states.top[1].toFixed(1)}%`)]
      : [el("span", { class: capture.status === "failed" ? "error small" : "muted" }, capture.status === "failed" ? (capture.error || "failed") : "–")]));
  }

  // The row's states, as the server renders them (profiles/captures/selectors.py
  // row_states): the step threads', else every thread's for an older analysis.
  const STATES = ["compute", "gpu_launch", "gpu_sync", "host_sync", "allocator", "collective", "data_wait", "backpressure", "gil", "idle", "unknown"];
  function rowStates(stats) {
    const step = stats.step_threads || {};
    let who = (step.names || []).length ? `step thread${step.names.length === 1 ? "" : "s"}: ${step.names.slice(0, 3).join(", ")}` : "step threads";
    let shares = (step.states || []).filter((s) => s.percent > 0);
    if (!shares.length) { shares = (stats.states || []).filter((s) => s.samples && s.percent > 0); who = "all threads"; }
    shares = shares.filter((s) => STATES.includes(s.state));
    if (!shares.length) return null;
    const top = [...shares].sort((a, b) => b.percent - a.percent);
    const title = `${who}: ${top.slice(0, 4).map((s) => `${s.state} ${s.percent.toFixed(1)}%`).join(" · ")}`;
    return { shares, title, top: [top[0].state, top[0].percent] };
  }

  function stateBar(states) {
    const bar = el("div", { class: "statebar small", role: "img", title: states.title, "aria-label": states.title });
    for (const s of states.shares) {
      const seg = el("span", { class: `seg st-${s.state}`, "data-state": s.state });
      seg.style.width = `${Math.min(100, s.percent)}%`;
      bar.append(seg);
    }
    return bar;
  }

  function newest() {
    return Math.max(0, ...[...document.querySelectorAll("tr[data-capture]")].map((row) => Number(row.dataset.capture)));
  }

  // Rows of captures newer than the newest shown, as the server renders them.
  async function addNewRows() {
    const after = newest(); // none shown: every capture the filters take is new
    const url = after ? `${table.dataset.rowsUrl}&after=${after}` : table.dataset.rowsUrl;
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } });
    if (!response.ok) throw new Error(response.statusText);
    const template = document.createElement("template");
    template.innerHTML = await response.text();
    const rows = [...template.content.querySelectorAll("tr[data-capture]")];
    if (!rows.length) return;
    const body = table.tBodies[0];
    body.querySelector("td.empty")?.parentNode.remove();
    body.prepend(...rows);
    rows.forEach((row) => fd.applyWidths(row));
    const limit = Number(table.dataset.rowsLimit || 0);
    if (limit) [...body.rows].slice(limit).forEach((row) => row.remove());
  }

  async function follow(row) {
    try { update(row, await fd.fetchJson(`/api/captures/${row.dataset.capture}/`)); }
    catch (err) { row.querySelector("[data-cell=status]").title = `lost track: ${err.message}`; }
  }

  let lastNew = Date.now(); // the page was rendered just now
  async function tick() {
    if (table && !document.hidden && Date.now() - lastNew >= NEW_EVERY_MS) {
      lastNew = Date.now();
      try { await addNewRows(); } catch (err) { table.title = `could not check for new captures: ${err.message}`; }
    }
    for (const row of liveRows()) await follow(row);
    if (table || liveRows().length) setTimeout(tick, liveRows().length ? EVERY_MS : NEW_EVERY_MS);
  }

  // A capture started or finished from this page (the dock): look for it at once.
  document.addEventListener("flamedeck:capture-final", () => { lastNew = 0; });
  tick();
})();
