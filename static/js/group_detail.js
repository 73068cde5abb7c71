// Whole-job capture page: every process side by side, live until every process ends
// (polling the group's JSON), the straggler marked from the stored whole-job report,
// that report (group_evidence.js), and the merged flamegraph of the processes
// that have samples. A large job's processes come a page at a time (`rows_page`: the
// pager asks the JSON for the next) and its flamegraph offers one rank of each class
// (`flame`). Every text from the server goes in as text (frame names and errors are
// untrusted).
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const first = JSON.parse(document.getElementById("group-data").textContent);
  const container = document.getElementById("group-flamegraph");
  const filter = document.getElementById("process-filter");
  const sandwichLink = document.getElementById("group-sandwich");
  const view = new window.flamedeck.FlameView(container, { onZoom: offerSandwich });
  let rowsByNode = new Map();
  const unchecked = new Set();
  const POLL_MS = 1000;
  let shownWithSamples = null;
  let offset = (first.rows_page || {}).offset || 0;
  const liveUrl = () => (offset ? `${first.liveUrl}?offset=${offset}` : first.liveUrl);

  const dash = "—";
  const ROUNDS_TITLE = "sampling rounds so far; the result counts one sample per thread per round";
  const fmt = (value, digits = 1) => (value == null ? dash : Number(value).toFixed(digits));

  function statusCell(row) {
    return el("td", {}, el("span", { class: `badge status-${row.status}` }, row.status));
  }

  const ATTACHING = "attaching…";
  const ATTACHING_TITLE = "py-spy is starting on this process (connection, attach); it has not sampled yet";

  function elapsedText(row) {
    if (row.attaching) return ATTACHING;
    if (row.elapsed_s == null) return dash;
    return row.final ? `${fmt(row.elapsed_s)} s` : `${fmt(row.elapsed_s)} / ${row.duration_s} s`;
  }

  function lagCell(row) {
    if (row.status === "failed" || row.attaching) return el("td", { class: "num" }, dash);
    const behind = row.behind_s ? `${fmt(row.behind_s, 2)} s behind` : row.final ? "" : "keeping up";
    const parts = [];
    if (row.verdict) parts.push(el("span", { class: `badge verdict-${row.verdict}` }, row.verdict), " ");
    parts.push(el("span", { class: (row.behind_s || 0) >= 1 ? "behind" : "muted small" }, behind || (row.verdict ? "" : dash)));
    return el("td", { class: "lag" }, ...parts);
  }

  // Live progress counts py-spy's sampling rounds; the result counts one sample per
  // thread per round, so the number grows when the capture ends: say which is which.
  function samplesCell(row) {
    if (row.samples != null) {
      const rounds = row.rounds_estimated;
      if (rounds == null || rounds === row.samples) return el("td", { class: "num", "data-cell": "samples" }, String(row.samples));
      const why = `${row.samples} samples from ≈ ${rounds} sampling rounds: one sample per thread per round, threads found waiting left out without “idle”`;
      return el("td", { class: "num", "data-cell": "samples", title: why }, String(row.samples), el("span", { class: "muted small rounds-from" }, ` (≈ ${rounds} rounds)`));
    }
    if (row.attaching || row.samples_estimated == null) return el("td", { class: "num", "data-cell": "samples" }, dash);
    return el("td", { class: "num rounds", "data-cell": "samples", title: ROUNDS_TITLE }, `≈ ${row.samples_estimated} rounds`);
  }

  // Each rank's step threads in the states of "What the job says" (stored at analysis;
  // keyword sets stay a lens of the capture page, not of this table).
  function stateCell(row, state) {
    if (row.status === "failed" || !Object.keys(row.states || {}).length) return el("td", { class: "num" }, dash);
    return el("td", { class: "num", "data-state": state }, fmt(row.states[state] || 0));
  }

  function processRows(page) {
    const columns = 5 + page.states.length;
    // The stored report's straggler (what it does more is said above, in the report).
    const report = page.report || {};
    const straggler = report.ready && report.straggler ? (report.urls || {})[report.straggler.name] : null;
    return page.rows.flatMap((row) => {
      const isStraggler = straggler != null && straggler === row.url;
      const main = el("tr", { "data-capture": String(row.id), "data-status": row.status, class: isStraggler ? "outlier" : "" },
        el("td", {}, el("a", { href: row.url }, row.label), isStraggler ? el("span", { class: "badge verdict-degraded straggler-badge", title: "the rank the others wait for: see “What the job says”" }, "straggler") : null,
          row.python_only ? el("span", { class: "badge verdict-degraded python-only", title: row.note || "" }, "Python-only") : null,
          row.workers ? el("span", { class: "muted small workers-note", title: "its DataLoader workers, sampled with it (see “DataLoader workers of the ranks”); not in its numbers" }, ` + ${row.workers} worker${row.workers === 1 ? "" : "s"}`) : null),
        statusCell(row),
        el("td", { class: "num", "data-cell": "elapsed", title: row.attaching ? ATTACHING_TITLE : null }, elapsedText(row)),
        lagCell(row),
        samplesCell(row),
        ...page.states.map((state) => stateCell(row, state)));
      if (row.status !== "failed") return [main];
      const cause = el("tr", { class: "cause", "data-cause-of": String(row.id) },
        el("td", { colspan: String(columns) }, el("strong", {}, "Why " + row.label + " failed" + (row.error_cause ? " (" + row.error_cause + ")" : "") + ": "), row.error || "no reason was recorded"));
      return [main, cause];
    });
  }

  function renderTable(page) {
    const head = el("thead", {}, el("tr", {}, el("th", {}, "process"), el("th", {}, "status"), el("th", { class: "num" }, "elapsed"),
      el("th", {}, "lag"), el("th", { class: "num" }, "samples"),
      ...page.states.map((state) => el("th", { class: "num", title: "percent of the step threads' samples" }, fd.evidence.stateKey(state), " %"))));
    document.getElementById("group-table").replaceChildren(head, el("tbody", {}, ...processRows(page)));
  }

  // Past one page of processes: which ones the table shows, and the way to the others.
  function renderPager(page) {
    const pager = document.getElementById("group-pager");
    const at = page.rows_page || {};
    pager.hidden = !(at.total > at.limit);
    if (pager.hidden) return;
    const counts = Object.entries(page.counts || {}).map(([status, n]) => `${n} ${status}`).join(" · ");
    const step = (to) => el("button", { type: "button", class: "pager-step", "data-offset": String(to) }, to < at.offset ? `‹ previous ${at.limit}` : `next ${at.limit} ›`);
    pager.replaceChildren(...[`Processes ${at.offset + 1}–${Math.min(at.total, at.offset + at.limit)} of ${at.total} (${counts}) `,
      at.offset > 0 ? step(Math.max(0, at.offset - at.limit)) : null, at.next != null ? step(at.next) : null].filter(Boolean));
  }

  function renderFilter(page) {
    const ready = page.flame || [];
    const key = ready.map((row) => row.id).join(",");
    if (key === shownWithSamples) return false;
    shownWithSamples = key;
    if (!ready.length) {
      filter.replaceChildren(el("p", { class: "muted" }, "No process has samples yet."));
      return true;
    }
    // A large job's classes: one rank stands for the ranks alike (the tree's node says so).
    const alike = (row) => (row.alike ? el("span", { class: "muted small" }, ` (for ${row.alike} rank${row.alike === 1 ? "" : "s"} alike)`) : null);
    filter.replaceChildren(...ready.map((row) => el("label", { class: "inline" },
      el("input", { type: "checkbox", value: String(row.id), checked: !unchecked.has(String(row.id)) }), " ", row.label, alike(row))));
    return true;
  }

  function selected() {
    return [...filter.querySelectorAll("input:checked")].map((box) => box.value);
  }

  // The downloads follow the ticked processes (none ticked: nothing to download).
  function updateExports(ids) {
    const params = new URLSearchParams(ids.map((id) => ["capture", id]));
    for (const link of document.querySelectorAll("a[data-export]")) {
      link.href = `${link.dataset.export}?${params}`;
      link.hidden = !ids.length;
    }
  }

  async function loadFlamegraph() {
    const ids = selected();
    updateExports(ids);
    if (!ids.length) {
      container.textContent = shownWithSamples ? "No process selected." : "No samples yet.";
      return;
    }
    const params = new URLSearchParams(ids.map((id) => ["capture", id]));
    const tree = await fd.fetchJson(`/api/groups/${first.group}/flamegraph/?${params}`);
    if (!tree.value) { container.textContent = "No samples for the selected processes."; return; }
    view.render(tree);
    container.dataset.loaded = "true";
  }

  // A frame clicked in the merged tree belongs to one process (the node under the
  // root): its sandwich opens on that process's capture page, exact and already there
  // (a job-wide one would merge the ranks' trees again).
  function offerSandwich(path) {
    const row = path && path.length > 1 ? rowsByNode.get(path[0]) : null;
    const frame = path ? path[path.length - 1] : "";
    if (!row || frame.startsWith("[pruned")) { sandwichLink.hidden = true; return; }
    sandwichLink.href = `${row.url}?sandwich=${encodeURIComponent(frame)}`;
    sandwichLink.textContent = `sandwich of ${frame} in ${row.label}`;
    sandwichLink.hidden = false;
  }

  function render(page) {
    rowsByNode = new Map((page.flame || []).map((row) => [`process ${row.label}`, row]));
    const status = document.getElementById("group-status");
    status.textContent = page.status;
    status.className = `badge group-${page.status}`;
    document.getElementById("group-skew").textContent = page.start_skew_s == null ? "waiting for every process to start" : `${page.start_skew_s} s`;
    renderTable(page);
    renderPager(page);
    fd.groupEvidence.render(page.report);
    if (renderFilter(page)) loadFlamegraph().catch((err) => { container.textContent = `Could not load the flamegraph: ${err.message}`; });
  }

  function drawGpus(page) {
    if (window.flamedeck.drawGpuTimeline) window.flamedeck.drawGpuTimeline(document.getElementById("gpu-timeline"), page.processes);
  }

  async function poll() {
    const note = document.getElementById("live-note");
    try {
      const page = await fd.fetchJson(liveUrl());
      render(page);
      if (page.final && !fd.groupEvidence.awaited(page.report)) {
        note.textContent = "";
        drawGpus(page);
        document.body.dataset.groupFinal = "true";
        return;
      }
      note.textContent = "· live";
    } catch (err) {
      note.textContent = `· lost track (${err.message}), retrying`;
    }
    setTimeout(poll, POLL_MS);
  }

  document.getElementById("group-pager").addEventListener("click", (event) => {
    const to = event.target.dataset.offset;
    if (to == null) return;
    offset = Number(to);
    const next = new URLSearchParams(location.search);
    if (offset) next.set("offset", String(offset)); else next.delete("offset");
    history.replaceState(null, "", location.pathname + (next.toString() ? `?${next}` : "") + location.hash);
    fd.fetchJson(liveUrl()).then(render).catch((err) => { document.getElementById("live-note").textContent = `· lost track (${err.message})`; });
  });

  filter.addEventListener("change", (event) => {
    const box = event.target;
    if (box.checked) unchecked.delete(box.value); else unchecked.add(box.value);
    loadFlamegraph().catch((err) => { container.textContent = `Could not load the flamegraph: ${err.message}`; });
  });
  render(first);
  if (first.final && !fd.groupEvidence.awaited(first.report)) document.body.dataset.groupFinal = "true";
  else setTimeout(poll, POLL_MS);
  drawGpus(first);
})();
