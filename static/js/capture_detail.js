// Capture page: live progress, the findings and thread states (drawn by evidence.js),
// the interactive flamegraph, stats tables, the lag chart, pinned comments, and the
// view's state (threads, search, zoomed frame) in the URL so a pasted link opens the
// same view (`?frame=NAME` zooms to a frame by name, as the whole-job capture page links do).
// Untrusted frame names only ever reach the page through textContent.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const ev = fd.evidence;
  const data = JSON.parse(document.getElementById("capture-data").textContent);
  const $ = (id) => document.getElementById(id);
  const fmt = (n) => Number(n ?? 0).toLocaleString("en-US");
  const params = new URLSearchParams(location.search);
  const state = {
    threads: (params.get("thread") || "").split(",").filter(Boolean),
    search: params.get("search") || "",
    focus: parseFocus(params.get("focus")),
    icicle: params.get("view") === "icicle",
    sandwich: params.get("sandwich") || "",
    frame: params.get("frame") || "",
  };
  let view = null;
  let sandwichViews = null;

  function parseFocus(text) {
    try { const path = JSON.parse(text || "null"); return Array.isArray(path) ? path.map(String) : null; }
    catch (err) { return null; }
  }

  const el = window.flamedeck.el;
  const CALLERS_SHOWN = 3;
  const NO_PYTHON = "(no Python frame)";

  // --- state in the URL ----------------------------------------------------------
  function writeState() {
    const next = new URLSearchParams(location.search);
    const set = (k, v) => (v ? next.set(k, v) : next.delete(k));
    set("thread", state.threads.join(","));
    set("search", state.search);
    set("focus", state.focus && state.focus.length ? JSON.stringify(state.focus) : "");
    set("view", state.icicle ? "icicle" : "");
    set("sandwich", state.sandwich);
    set("frame", state.frame);
    const query = next.toString();
    history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
    document.querySelectorAll(".keep-state").forEach((input) => { input.value = location.pathname + (query ? "?" + query : ""); });
  }

  // --- tables ----------------------------------------------------------------------
  // Frame rows count every occurrence of a frame, so a click opens its sandwich (all
  // callers and callees merged) rather than zooming to one occurrence.
  const frameCell = (name) => el("td", { class: "frame" }, el("button", { type: "button", class: "sandwich-link oneline", "data-frame": name, title: name }, name));
  const callerButton = (frame, figures = "") => el("button", { type: "button", class: "caller-link frame-link oneline mono", "data-frame": frame, title: `${frame}: ${figures}Click to zoom the flamegraph to it.` }, frame);
  const pctCell = (p) => el("td", { class: "num" }, `${Number(p ?? 0).toFixed(1)}%`);
  const barCell = (p, cls) => el("td", { class: "barcell" }, el("div", { class: `bar ${cls || ""}`, style: `width:${Math.min(100, Math.max(0, p || 0))}%` }));

  function table(headers, rows, empty) {
    if (!rows.length) return el("p", { class: "muted" }, empty);
    return el("table", { class: "dense" },
      el("thead", {}, el("tr", {}, ...headers.map(([h, cls]) => el("th", { class: cls || "" }, h)))),
      el("tbody", {}, ...rows));
  }

  function frameTable(list, empty) {
    return table([["Frame"], ["", ""], ["Samples", "num"], ["Share", "num"]],
      (list || []).map((f) => el("tr", {}, frameCell(f.frame), barCell(f.percent), el("td", { class: "num" }, fmt(f.samples)), pctCell(f.percent))), empty);
  }

  // "95% from train_step (train.py:45)": each caller's share of the row's samples,
  // linking to the flamegraph zoomed to that caller and searched for it.
  function callersRow(entry, span) {
    const callers = (entry.python_callers || []).slice(0, CALLERS_SHOWN);
    if (!entry.samples || !callers.length) return null;
    const items = callers.map((c) => el("li", {},
      el("span", { class: "num" }, `${Math.round((100 * c.samples) / entry.samples)}%`), " from ",
      c.frame === NO_PYTHON ? el("span", { class: "muted" }, c.frame) : callerButton(c.frame, `${fmt(c.samples)} samples, ${Number(c.percent).toFixed(1)}% of all. `)));
    return el("tr", { class: "callers" }, el("td", { colspan: String(span) }, el("ul", { class: "callerlist" }, ...items)));
  }

  // Stats analysed before call sites were counted have no python_callers at all.
  function callersNote(stats) {
    const old = (stats.categories || []).some((c) => c.samples && !("python_callers" in c));
    let note = $("callers-note");
    if (!note) { note = el("p", { id: "callers-note", class: "muted small" }); $("categories").after(note); }
    note.textContent = old ? "Call sites (which Python line leads to each category) appear once this capture is re-analysed: it was analysed before they were counted." : "";
    note.hidden = !old;
  }

  function withCallers(rows, entries, span) {
    return rows.flatMap((row, i) => [row, callersRow(entries[i], span)].filter(Boolean));
  }

  function renderTables(stats) {
    const slug = (s) => String(s).toLowerCase().replace(/[^a-z0-9]+/g, "-");
    const categories = stats.categories || [];
    $("categories").replaceChildren(table([["Category"], [""], ["Samples", "num"], ["Share", "num"]],
      withCallers(categories.map((c) => el("tr", { class: c.samples ? "" : "zero" }, el("td", {}, c.category), barCell(c.percent, `cat-${slug(c.category)}`), el("td", { class: "num" }, fmt(c.samples)), pctCell(c.percent))), categories, 4),
      "No keyword matched."));
    const keywords = (stats.keywords || []).filter((k) => k.samples);
    $("keywords").replaceChildren(table([["Keyword"], ["Category"], [""], ["Samples", "num"], ["Share", "num"]],
      withCallers(keywords.map((k) => el("tr", {},
        el("td", { class: "frame" }, el("button", { type: "button", class: "search-link", "data-search": k.keyword, title: "Highlight in the flamegraph" }, k.keyword)),
        el("td", {}, k.category), barCell(k.percent, `cat-${slug(k.category)}`), el("td", { class: "num" }, fmt(k.samples)), pctCell(k.percent))), keywords, 5),
      "No keyword matched any frame."));
    callersNote(stats);
    $("top-self").replaceChildren(frameTable(stats.top_self, "No samples."));
    $("top-total").replaceChildren(frameTable(stats.top_total, "No samples."));
    $("uncovered").replaceChildren(frameTable(stats.uncovered_native, "Every hot native frame is covered by a keyword (or the capture has no native frames)."));
    const step = ev.stepTids(stats);
    $("threads").replaceChildren(table([["Thread"], ["TID", "num"], ["States"], ["Active", "num"], ["Samples", "num"], ["Share", "num"]],
      (stats.threads || []).map((t) => el("tr", { "data-tid": String(t.tid) },
        el("td", {}, el("button", { type: "button", class: "thread-link", "data-tid": String(t.tid), title: "Show only this thread" }, t.name || "(unnamed)"), step.has(String(t.tid)) ? ev.stepMark() : null),
        el("td", { class: "num mono" }, String(t.tid)), el("td", { class: "barcell" }, t.states ? ev.stateBar(t.states, "small") : ""),
        ev.activeCell(t, stats.idle_included), el("td", { class: "num" }, fmt(t.samples)), pctCell(t.percent))),
      "No thread frames (captured without --threads)."));
    renderStates(stats);
  }


  function renderStates(stats) {
    const scope = state.threads.length ? `threads ${(stats.threads || []).map((t) => t.name || t.tid).join(", ")}` : "all threads";
    $("states-scope").textContent = `every sample in exactly one state · ${scope}`;
    if (!stats.states) {
      $("states").replaceChildren(el("p", { class: "muted" }, "This capture was analysed before thread states existed: re-analyse it to see them."));
      return;
    }
    $("states-bar").replaceChildren(ev.headline(stats, state.threads.length > 0));
    $("states").replaceChildren(ev.statesTable(stats, callerButton, state.threads.length > 0));
    $("hidden-waits-box").replaceChildren(...[ev.hiddenWaits(stats)].filter(Boolean));
  }

  // --- flamegraph ------------------------------------------------------------------
  function showFocus(path) {
    const box = $("fg-focus");
    const pin = $("pin-label");
    $("fg-focus-sandwich").hidden = !path || !path.length;
    if (!path || !path.length) { box.textContent = ""; if (pin) pin.hidden = true; return; }
    box.textContent = "zoomed: " + path[path.length - 1];
    if (pin) { pin.hidden = false; $("pin-frame-name").textContent = path[path.length - 1]; syncPin(); }
  }

  function syncPin() {
    const checked = $("pin-frame") && $("pin-frame").checked;
    $("comment-frame").value = checked && state.focus ? state.focus[state.focus.length - 1] : "";
  }

  function showSearch(result) {
    $("fg-search-info").textContent = result
      ? `${fmt(result.matches)} frame${result.matches === 1 ? "" : "s"} match · ${fmt(result.samples)} samples · ${result.percent.toFixed(2)}% of all`
      : "";
  }

  async function loadFlamegraph() {
    const box = $("flamegraph");
    if (!box) return;
    if (!data.hasFlamegraph) { box.replaceChildren(el("p", { class: "muted" }, "This capture has no flamegraph.")); return; }
    const query = new URLSearchParams({ max_nodes: "8000" });
    if (state.threads.length) query.set("thread", state.threads.join(","));
    let tree;
    try { tree = await fd.fetchJson(`/api/captures/${data.id}/flamegraph/?${query}`); }
    catch (err) { box.replaceChildren(el("p", { class: "error" }, `Could not load the flamegraph: ${err.message}`)); return; }
    view = view || new fd.FlameView(box, {
      inverted: state.icicle, onSearch: showSearch,
      onZoom: (path) => { state.focus = path; showFocus(path); writeState(); },
    });
    view.render(tree);
    box.dataset.ready = "1";
    if (state.focus && view.focusPath(state.focus)) showFocus(state.focus);
    if (state.search) { $("fg-search").value = state.search; showSearch(view.search(state.search)); }
    if (state.frame) { const name = state.frame; state.frame = ""; focusFrame(name); }
  }

  function focusFrame(name) {
    if (!view) return;
    const node = view.focusFrame(name);
    state.focus = node ? fd.FlameView.pathOf(node) : null;
    showFocus(state.focus);
    state.search = name;
    $("fg-search").value = name;
    showSearch(view.search(name));
    if (!node) $("fg-search-info").textContent += " (not in the current flamegraph view)";
    writeState();
    $("flame").scrollIntoView({ behavior: "smooth", block: "start" });
  }

  // --- sandwich: one frame's callers and callees, merged across stacks -----------------
  function sandwichTip(total) {
    return (d) => `${fmt(d.data.value)} samples · ${total ? ((100 * d.data.value) / total).toFixed(1) : "0"}% of the frame's samples`;
  }

  function sandwichSummary(result) {
    const pct = (n) => `${Number(n).toFixed(2)}%`;
    if (!result.samples) return `No sample of ${state.threads.length ? "the chosen threads " : "this capture "}passes through this frame.`;
    let text = `${fmt(result.samples)} samples (${pct(result.percent)} of all) pass through it, each counted once; ` +
      `${fmt(result.self_samples)} (${pct(result.self_percent)}) end in it; it sits in ${fmt(result.occurrences)} place${result.occurrences === 1 ? "" : "s"} of the flamegraph.`;
    if (result.samples === result.self_samples) text += " It calls nothing: every sample through it ends in it.";
    if (result.approximate) text += ` Approximate: the stored flamegraph was pruned, and up to ${fmt(result.hidden_samples)} samples in pruned parts may pass through it too.`;
    if (result.hidden_self_samples) text += ` Its self count leaves out pruned parts: up to ${fmt(result.hidden_self_samples)} more samples may end in it.`;
    return text;
  }

  function renderSuggestions(result) {
    const box = $("sandwich-suggestions");
    const names = result.samples ? [] : result.suggestions || [];
    box.hidden = !names.length;
    box.replaceChildren(...(names.length ? [el("span", { class: "muted" }, "Frames containing this text: ")] : []),
      ...names.map((name) => el("button", { type: "button", class: "sandwich-link oneline mono", "data-frame": name, title: name }, name)));
  }

  function drawSandwich(result) {
    sandwichViews = sandwichViews || {
      callers: new fd.FlameView($("sandwich-callers"), { inverted: false, describe: sandwichTip(0), onZoom: offerRecentre }),
      callees: new fd.FlameView($("sandwich-callees"), { inverted: true, describe: sandwichTip(0), onZoom: offerRecentre }),
    };
    for (const side of ["callers", "callees"]) {
      const chart = sandwichViews[side];
      chart.options.describe = sandwichTip(result.samples);
      if (result.samples) chart.render(result[side]);
      else chart.container.replaceChildren();
    }
  }

  // A frame clicked inside the sandwich can become the sandwich's frame.
  function offerRecentre(path) {
    const name = path && path.length ? path[path.length - 1] : "";
    const button = $("sandwich-recentre");
    button.hidden = !name || name === state.sandwich || name.startsWith("[pruned");
    button.dataset.frame = name;
    button.textContent = `sandwich of ${name}`;
  }

  async function openSandwich(name, scroll = true) {
    if (!name) return;
    state.sandwich = name;
    writeState();
    $("sandwich").hidden = false;
    $("sandwich-frame").textContent = name;
    $("sandwich-recentre").hidden = true;
    $("sandwich-summary").textContent = "Loading…";
    const query = new URLSearchParams({ frame: name });
    if (state.threads.length) query.set("thread", state.threads.join(","));
    let result;
    try { result = await fd.fetchJson(`/api/captures/${data.id}/sandwich/?${query}`); }
    catch (err) { $("sandwich-summary").textContent = `Could not load the sandwich: ${err.message}`; return; }
    $("sandwich-summary").textContent = sandwichSummary(result);
    renderSuggestions(result);
    drawSandwich(result);
    $("sandwich").dataset.ready = "1";
    if (scroll) $("sandwich").scrollIntoView({ behavior: "smooth", block: "start" });
  }

  function closeSandwich() {
    state.sandwich = "";
    $("sandwich").hidden = true;
    writeState();
  }

  function wireToolbar() {
    let timer = null;
    $("fg-search").addEventListener("input", (e) => {
      clearTimeout(timer);
      timer = setTimeout(() => { state.search = e.target.value.trim(); showSearch(view && view.search(state.search)); writeState(); }, 150);
    });
    $("fg-sandwich").addEventListener("click", () => openSandwich($("fg-search").value.trim()));
    $("fg-focus-sandwich").addEventListener("click", () => state.focus && openSandwich(state.focus[state.focus.length - 1]));
    $("sandwich-close").addEventListener("click", closeSandwich);
    $("fg-reset").addEventListener("click", () => { if (view) view.reset(); state.focus = null; showFocus(null); writeState(); });
    const orient = (icicle) => {
      state.icicle = icicle;
      $("fg-flame").setAttribute("aria-pressed", String(!icicle));
      $("fg-icicle").setAttribute("aria-pressed", String(icicle));
      if (view) view.setInverted(icicle);
      writeState();
    };
    $("fg-flame").addEventListener("click", () => orient(false));
    $("fg-icicle").addEventListener("click", () => orient(true));
    orient(state.icicle);
    $("fg-copy").addEventListener("click", async () => {
      try { await navigator.clipboard.writeText(location.href); $("fg-copy").textContent = "Copied"; }
      catch (err) { prompt("Copy this link", location.href); }
    });
    let resize = null;
    window.addEventListener("resize", () => { clearTimeout(resize); resize = setTimeout(() => view && view.resize(), 200); });
  }

  // --- thread filter ---------------------------------------------------------------
  function renderThreadPicker(threads) {
    const box = $("thread-options");
    if (!threads || !threads.length) { $("thread-pick").hidden = true; return; }
    box.replaceChildren(...threads.map((t) => el("label", {},
      el("input", { type: "checkbox", value: String(t.tid), checked: state.threads.includes(String(t.tid)) }),
      ` ${t.name || "(unnamed)"} `, el("span", { class: "muted" }, `${String(t.tid)} · ${Number(t.percent).toFixed(1)}%`))));
    box.append(el("button", { type: "button", class: "linklike", onclick: () => setThreads([]) }, "all threads"));
    box.addEventListener("change", () => setThreads([...box.querySelectorAll("input:checked")].map((i) => i.value)));
    updateThreadSummary();
  }

  function updateThreadSummary() {
    $("thread-summary").textContent = state.threads.length ? `${state.threads.length} selected` : "all";
    $("thread-options").querySelectorAll("input").forEach((i) => { i.checked = state.threads.includes(i.value); });
  }

  async function setThreads(tids) {
    state.threads = tids;
    state.focus = null;
    updateThreadSummary();
    writeState();
    await Promise.all([loadFlamegraph(), loadStats(), state.sandwich ? openSandwich(state.sandwich, false) : null]);
  }

  function threadNote(text) {
    let note = $("thread-note");
    if (!note) { note = el("p", { id: "thread-note", class: "error" }); $("categories").before(note); }
    note.textContent = text;
    note.hidden = !text;
  }

  async function loadStats() {
    threadNote("");
    if (!state.threads.length) { renderTables(data.stats); return; }
    try {
      const capture = await fd.fetchJson(`/api/captures/${data.id}/?thread=${encodeURIComponent(state.threads.join(","))}`);
      if (capture.stats) renderTables(capture.stats);
      else threadNote("This capture has no per-thread stats (it was analysed before they were stored): re-analyse it to filter the tables by thread. The flamegraph is filtered.");
    } catch (err) { threadNote(`Could not filter the stats: ${err.message}`); }
  }

  // --- lag chart -------------------------------------------------------------------
  function drawLagChart(lag) {
    const box = $("lag-chart");
    const series = (lag && lag.series) || [];
    if (!box || !series.length || !window.d3) return;
    const w = 320, h = 130, m = { t: 10, r: 10, b: 26, l: 40 };
    const xs = series.map((p, i) => (p.approx_s ?? i));
    const x = d3.scaleLinear().domain([0, d3.max(xs) || 1]).range([m.l, w - m.r]);
    const y = d3.scaleLinear().domain([0, d3.max(series, (p) => p.behind_s) || 1]).nice().range([h - m.b, m.t]);
    const svg = d3.select(box).append("svg").attr("viewBox", `0 0 ${w} ${h}`).attr("width", w).attr("height", h);
    svg.append("g").attr("transform", `translate(0,${h - m.b})`).call(d3.axisBottom(x).ticks(5).tickFormat((d) => `${d}s`));
    svg.append("g").attr("transform", `translate(${m.l},0)`).call(d3.axisLeft(y).ticks(4).tickFormat((d) => `${d}s`));
    svg.append("path").datum(series).attr("class", "lagline")
      .attr("d", d3.line().x((p, i) => x(xs[i])).y((p) => y(p.behind_s)));
    svg.selectAll("circle").data(series).join("circle").attr("r", 2.5).attr("class", "lagdot")
      .attr("cx", (p, i) => x(xs[i])).attr("cy", (p) => y(p.behind_s))
      .append("title").text((p) => `${p.behind_s} s behind at ~${p.approx_s ?? "?"} s`);
    svg.append("text").attr("x", m.l).attr("y", h - 2).attr("class", "axislabel").text("seconds behind, over the capture");
  }

  // --- live progress and actions ---------------------------------------------------
  async function pollLive() {
    let capture;
    try { capture = await fd.fetchJson(`/api/captures/${data.id}/`); }
    catch (err) { setTimeout(pollLive, 3000); return; }
    const p = capture.progress || {};
    $("status-badge").textContent = capture.status;
    $("status-badge").className = `badge status-${capture.status}`;
    if (["done", "failed", "cancelled"].includes(capture.status)) { location.reload(); return; }
    $("live-fill").style.width = `${p.duration_s ? Math.min(100, (100 * p.elapsed_s) / p.duration_s) : 2}%`;
    $("live-fill").classList.toggle("behind", (p.behind_s || 0) >= 1);
    $("live-line").textContent = capture.status === "running" && p.duration_s
      ? `${fd.sampledText(p)} · ≈ ${fmt(p.expected_samples)} sampling rounds so far (the result counts one sample per thread per round) · ${p.behind_s ? p.behind_s + " s behind" : "keeping up"}`
      : capture.status === "parsing" ? "analysing samples…"
      : p.retry ? p.retry.message : "queued, waiting for a worker…";
    setTimeout(pollLive, 1000);
  }

  function wireActions() {
    document.addEventListener("click", (e) => {
      const sandwich = e.target.closest(".sandwich-link");
      if (sandwich) { openSandwich(sandwich.dataset.frame); return; }
      const frame = e.target.closest(".frame-link");
      if (frame) { focusFrame(frame.dataset.frame); return; }
      const search = e.target.closest(".search-link");
      if (search && view) { state.search = search.dataset.search; $("fg-search").value = state.search; showSearch(view.search(state.search)); writeState(); $("flame").scrollIntoView({ behavior: "smooth" }); return; }
      const thread = e.target.closest(".thread-link");
      if (thread) setThreads([thread.dataset.tid]);
    });
    if ($("pin-frame")) $("pin-frame").addEventListener("change", syncPin);
    if ($("cancel-capture")) $("cancel-capture").addEventListener("click", async (e) => {
      e.target.disabled = true;
      try { await fd.fetchJson(`/api/captures/${data.id}/cancel/`, { method: "POST" }); $("live-line").textContent = "cancelling: py-spy stops and keeps its samples…"; }
      catch (err) { $("live-line").textContent = `cancel refused: ${err.message}`; }
    });
    if ($("recapture")) $("recapture").addEventListener("click", async (e) => {
      e.target.disabled = true;
      const settings = Object.assign({ kind: "record" }, data.settings, { rate: parseInt(e.target.dataset.rate, 10) });
      try {
        const created = await fd.launcher.launch({ host: data.host, pid: data.pid, process: data.process }, settings);
        location.href = `/captures/${created.id}/`;
      } catch (err) { e.target.disabled = false; alert(`Could not start the capture: ${err.message}`); }
    });
  }

  wireActions();
  writeState();
  if (data.stats) {
    drawLagChart(data.stats.lag);
    if ($("flamegraph")) {
      $("findings").replaceChildren(ev.captureFindings(data.stats));
      wireToolbar();
      renderThreadPicker(data.stats.threads);
      loadStats();
      loadFlamegraph();
      if (state.sandwich) openSandwich(state.sandwich, false);
    }
  }
  if (!data.final) pollLive();
})();
