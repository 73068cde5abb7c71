// Timelines: a strip per thread (or per rank) of its dominant state bucket by bucket,
// in base.css's state colours, on an axis of seconds; a tooltip with the bucket's shares
// and the host clock; marks where a periodic stall's bursts fell; the GPU utilisation
// under the strips on the same axis; and a window picked by dragging (d3.brushX).
// `flamedeck.timeline.StripChart` draws it (the whole-job page uses it too); the
// capture page's Timeline panel, below, loads the window's flamegraph, states, findings
// and top frames and keeps the window in the URL (`?from=&to=`, seconds since the first
// sample). Thread and frame names are untrusted: they reach the page as text only.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const LABEL_W = 190, ROW_H = 16, GAP = 6, RIGHT = 14, AXIS_H = 24, GPU_H = 56, MIN_WINDOW_S = 0.05;
  const fmt = (n) => Number(n ?? 0).toLocaleString("en-US");
  const secs = (s) => `${Number(s).toFixed(2)} s`;
  const round2 = (s) => Math.round(s * 100) / 100;
  const stateLabel = (s) => (fd.evidence ? fd.evidence.label(s) : s);
  const stateClass = (s) => `st-${String(s).replace(/[^a-z_]/g, "")}`;

  // "14:33:34.52": a host epoch in seconds, as the viewer's clock shows that instant.
  function clock(epoch) {
    const d = new Date(epoch * 1000);
    const two = (n) => String(n).padStart(2, "0");
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${two(Math.floor(d.getMilliseconds() / 10))}`;
  }

  function shortName(text, max = 26) {
    const s = String(text);
    return s.length > max ? `${s.slice(0, max - 1)}…` : s;
  }

  // A tooltip built with textContent, placed by the CSSOM (the CSP allows no style="").
  function tooltip() {
    const box = el("div", { class: "fg-tip tl-tip", role: "tooltip" });
    box.hidden = true;
    document.body.append(box);
    return {
      show(event, lines) {
        box.replaceChildren(...lines.map((line, i) => el("div", { class: i ? "fg-tip-figures" : "fg-tip-frame" }, line)));
        box.hidden = false;
        const left = Math.min(event.pageX + 12, window.scrollX + window.innerWidth - box.offsetWidth - 8);
        box.style.left = `${Math.max(4, left)}px`;
        box.style.top = `${event.pageY + 14}px`;
      },
      hide() { box.hidden = true; },
    };
  }

  // Consecutive buckets with the same dominant state: one rect each.
  function runs(dominant) {
    const out = [];
    dominant.forEach((state, i) => {
      const last = out[out.length - 1];
      if (last && last.state === state) last.end = i + 1;
      else out.push({ state, begin: i, end: i + 1 });
    });
    return out.filter((r) => r.state);
  }

  function bucketLines(row, i) {
    const shares = Object.entries(row.states || {}).map(([s, v]) => [s, v[i] || 0]).filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1]);
    return shares.length ? shares.map(([s, v]) => `${stateLabel(s)} ${Math.round(100 * v)}%`).join(" · ")
      : "no sample in this bucket";
  }

  // rows: [{label, title, href, dominant: [state|null], states: {state: [share]}, marks: [{from, to, text}]}]
  // rows may carry `device` (a rank's GPU utilisation per bucket, percent or null): drawn
  // as a band under its strip, darker when busy.
  // options: {start (epoch s of bucket 0), bucketS, span (s), clockName, device (the
  // timeline's `device`: per GPU its utilisation per bucket, on the strips' buckets),
  // onSelect(from, to) (null, null when cleared)}.
  function StripChart(container, rows, options) {
    this.container = container;
    this.rows = rows;
    this.options = options;
    this.selection = null;
    this.tip = tooltip();
    this.draw();
    let timer = null;
    window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(() => this.draw(), 200); });
  }

  StripChart.prototype.draw = function () {
    const { rows, options } = this;
    const width = Math.max(520, this.container.clientWidth || 900);
    const gpus = ((options.device && options.device.gpus) || []).filter((g) => (g.util || []).some((u) => u !== null));
    const stripsH = rows.length * (ROW_H + GAP);
    const gpuTop = stripsH + (gpus.length ? GAP : 0);
    const bottom = gpuTop + (gpus.length ? GPU_H : 0);
    const height = bottom + AXIS_H;
    const x = d3.scaleLinear([0, options.span], [LABEL_W, width - RIGHT]);
    this.x = x;
    this.container.replaceChildren();
    const svg = d3.select(this.container).append("svg").attr("class", "tl-svg")
      .attr("width", width).attr("height", height).attr("viewBox", `0 0 ${width} ${height}`)
      .attr("role", "img").attr("aria-label", options.ariaLabel || "States over time; drag to select a window");
    const strips = svg.append("g").attr("class", "tl-rows");
    rows.forEach((row, i) => this.drawRow(strips.append("g").attr("class", "tl-row").attr("data-row", i)
      .attr("transform", `translate(0,${i * (ROW_H + GAP)})`), row, x));
    if (gpus.length) this.drawGpu(svg.append("g").attr("class", "tl-gpu").attr("transform", `translate(0,${gpuTop})`), gpus, x);
    svg.append("g").attr("class", "tl-axis").attr("transform", `translate(0,${bottom + 2})`)
      .call(d3.axisBottom(x).ticks(Math.max(4, Math.floor(width / 110))).tickFormat((s) => `${s}s`));
    const brush = d3.brushX().extent([[LABEL_W, 0], [width - RIGHT, Math.max(bottom, ROW_H)]])
      .on("end", (event) => this.brushed(event));
    this.brush = brush;
    this.brushG = svg.append("g").attr("class", "tl-brush").call(brush);
    if (this.selection) this.brushG.call(brush.move, this.selection.map(x));
    svg.on("pointermove", (event) => this.hover(event, gpus, stripsH, gpuTop))
      .on("pointerleave", () => this.tip.hide());
    this.container.append(this.legend());
    this.container.dataset.ready = "1";
  };

  // The states the strips show, in the vocabulary's order, and what a dashed box means.
  StripChart.prototype.legend = function () {
    const shown = new Set(this.rows.flatMap((r) => r.dominant || []).filter(Boolean));
    const order = fd.evidence ? fd.evidence.STATES.map(([s]) => s) : [...shown];
    const keys = order.filter((s) => shown.has(s)).map((s) => (fd.evidence ? fd.evidence.stateKey(s) : el("span", {}, s)));
    const marks = this.rows.some((r) => (r.marks || []).length);
    return el("div", { class: "tl-legend small muted" }, ...keys,
      marks ? el("span", { class: "tl-burst-key" }, "dashed box: a burst of a periodic stall") : null,
      el("span", {}, "each bucket shows its most frequent state; hover for the shares"));
  };

  StripChart.prototype.drawRow = function (g, row, x) {
    const b = this.options.bucketS;
    const label = row.href ? g.append("a").attr("href", row.href).attr("class", "tl-label-link") : g;
    label.append("text").attr("class", "tl-label").attr("x", LABEL_W - 8).attr("y", ROW_H - 4)
      .attr("text-anchor", "end").text(shortName(row.label)).append("title").text(row.title || row.label);
    g.append("rect").attr("class", "tl-bg").attr("x", x(0)).attr("width", x(this.options.span) - x(0)).attr("height", ROW_H);
    for (const run of runs(row.dominant || [])) {
      const x0 = x(run.begin * b), x1 = x(Math.min(this.options.span, run.end * b));
      g.append("rect").attr("class", `tl-seg ${stateClass(run.state)}`).attr("data-state", run.state)
        .attr("x", x0).attr("width", Math.max(0.5, x1 - x0)).attr("height", ROW_H);
    }
    (row.device || []).forEach((u, i) => {
      if (u === null || u === undefined) return;
      const x0 = x(i * b), x1 = x(Math.min(this.options.span, (i + 1) * b));
      g.append("rect").attr("class", "tl-device").attr("data-util", u).attr("x", x0).attr("y", ROW_H - 4)
        .attr("width", Math.max(0.5, x1 - x0)).attr("height", 4).attr("fill", d3.interpolateGreys(0.15 + 0.85 * u / 100));
    });
    for (const mark of row.marks || []) {
      g.append("rect").attr("class", "tl-burst").attr("x", x(mark.from)).attr("y", -2)
        .attr("width", Math.max(1, x(mark.to) - x(mark.from))).attr("height", ROW_H + 4);
    }
  };

  StripChart.prototype.drawGpu = function (g, gpus, x) {
    const y = d3.scaleLinear([0, 100], [GPU_H, 2]);
    g.append("rect").attr("class", "tl-bg").attr("x", x(0)).attr("width", x(this.options.span) - x(0)).attr("height", GPU_H);
    const about = this.options.device || {};
    const whose = about.source === "host" ? "every GPU of the host (not attributed to this rank)" : `this rank's GPU (found by ${about.source})`;
    g.append("text").attr("class", "tl-label").attr("x", LABEL_W - 8).attr("y", GPU_H / 2 + 4).attr("text-anchor", "end")
      .text("GPU utilisation").append("title").text(`nvidia-smi beside py-spy, on the same clock: ${whose}`);
    const colour = d3.scaleOrdinal(d3.schemeTableau10);
    const b = this.options.bucketS;
    const line = d3.line().x((_, i) => x(Math.min(this.options.span, (i + 0.5) * b))).y((u) => y(u)).defined((u) => u !== null);
    for (const gpu of gpus) {
      g.append("path").attr("class", "tl-gpu-util").attr("data-gpu", gpu.index).attr("stroke", colour(gpu.index)).attr("d", line(gpu.util));
    }
  };

  StripChart.prototype.hover = function (event, gpus, stripsH, gpuTop) {
    const [px, py] = d3.pointer(event);
    const t = this.x.invert(px);
    if (px < LABEL_W || t < 0 || t > this.options.span) { this.tip.hide(); return; }
    const start = this.options.start;
    const when = `${secs(t)} · ${clock(start + t)} on ${this.options.clockName || "the host's clock"}`;
    if (py >= gpuTop && gpus.length) {
      const i = Math.floor(t / this.options.bucketS);
      const lines = gpus.map((gpu) => {
        const u = (gpu.util || [])[i];
        return u === null || u === undefined ? `GPU ${gpu.index}: no reading ([N/A] or none)` : `GPU ${gpu.index}: ${u}% busy`;
      });
      this.tip.show(event, ["GPU utilisation", when, ...lines]);
      return;
    }
    const row = this.rows[Math.floor(py / (ROW_H + GAP))];
    if (!row || py > stripsH) { this.tip.hide(); return; }
    const b = this.options.bucketS;
    const i = Math.min(Math.floor(t / b), (row.dominant || []).length - 1);
    const span = `${secs(i * b)}–${secs(Math.min(this.options.span, (i + 1) * b))} · ${clock(start + i * b)} on ${this.options.clockName || "the host's clock"}`;
    const lines = [row.title || row.label, span, bucketLines(row, i)];
    if (row.device) {
      const u = row.device[i];
      lines.push(u === null || u === undefined ? "GPU: no reading" : `GPU: ${u}% busy (band under the strip)`);
    }
    for (const mark of row.marks || []) if (t >= mark.from && t <= mark.to) lines.push(mark.text);
    this.tip.show(event, lines);
  };

  StripChart.prototype.brushed = function (event) {
    if (!event.sourceEvent) return; // moved by select() or a redraw, not by the user
    if (!event.selection) { this.selection = null; this.options.onSelect(null, null); return; }
    const [from, to] = event.selection.map((px) => round2(Math.min(this.options.span, Math.max(0, this.x.invert(px)))));
    if (to - from < MIN_WINDOW_S) { this.clear(); this.options.onSelect(null, null); return; }
    this.selection = [from, to];
    this.options.onSelect(from, to);
  };

  // New rows (and options): drawn again, the selection kept.
  StripChart.prototype.update = function (rows, options) {
    this.rows = rows;
    Object.assign(this.options, options || {});
    this.draw();
  };

  // Show [from, to) as the selection without telling onSelect (the caller loads it).
  StripChart.prototype.select = function (from, to) {
    this.selection = [from, to];
    this.brushG.call(this.brush.move, [from, to].map(this.x));
  };

  StripChart.prototype.clear = function () {
    this.selection = null;
    this.brushG.call(this.brush.move, null);
  };

  // ?from=&to= when they make a window inside [0, span]; else null.
  function windowFromUrl(span) {
    const params = new URLSearchParams(location.search);
    const from = Number.parseFloat(params.get("from")), to = Number.parseFloat(params.get("to"));
    if (!Number.isFinite(from) || !Number.isFinite(to) || from < 0 || to - from < MIN_WINDOW_S || from >= span) return null;
    return [from, Math.min(to, span)];
  }

  // The window into the URL (other parameters kept), and the forms that carry the view.
  function windowToUrl(from, to) {
    const next = new URLSearchParams(location.search);
    if (from === null) { next.delete("from"); next.delete("to"); }
    else { next.set("from", String(from)); next.set("to", String(to)); }
    const query = next.toString();
    const url = location.pathname + (query ? "?" + query : "");
    history.replaceState(null, "", url + location.hash);
    document.querySelectorAll(".keep-state").forEach((input) => { input.value = url; });
  }

  fd.timeline = { StripChart, clock, windowFromUrl, windowToUrl, MIN_WINDOW_S };

  // --- the capture page's Timeline panel ----------------------------------------------
  const $ = (id) => document.getElementById(id);
  const box = $("timeline");
  const pageData = $("capture-data");
  if (!box || !pageData) return;
  const data = JSON.parse(pageData.textContent);
  const stats = data.stats || {};
  const time = stats.time || {};
  let chart = null, windowView = null, loading = 0;

  // Each periodic stall's bursts, marked on the strip of its thread.
  function marksFor(name) {
    return (stats.findings || []).filter((f) => f.rule === "periodic_stall" && f.thread === name)
      .flatMap((f) => (f.bursts || []).map(([from, to]) => ({
        from, to, text: `periodic stall: every ${f.period_s} s, ${f.duration_s} s in ${f.function || stateLabel(f.state)}`,
      })));
  }

  function untimedNote(untimed) {
    if (!untimed.length) return null;
    return el("p", { class: "muted small", id: "tl-untimed" }, "Not placed in time: ",
      ...untimed.flatMap((t, i) => [i ? "; " : "", el("span", { class: "threadname" }, t.name || String(t.tid)), ` (${fmt(t.samples)} samples): ${t.reason}`]));
  }

  async function loadTimeline() {
    let line;
    try { line = await fd.fetchJson(`/api/captures/${data.id}/timeline/`); }
    catch (err) { box.replaceChildren(el("p", { class: "error" }, `Could not load the timeline: ${err.message}`)); return; }
    const buckets = ((line.threads[0] || {}).dominant || []).length || 1;
    const span = time.end > time.start ? time.end - time.start : line.bucket_s * buckets;
    const rows = line.threads.map((t) => ({
      label: t.name || String(t.tid), title: `${t.name || "(unnamed)"} (${t.tid})`,
      dominant: t.dominant, states: t.states, marks: marksFor(t.name),
    }));
    box.replaceChildren();
    if (!rows.length) { box.append(el("p", { class: "muted" }, "No thread was sampled in every round: none can be placed in time.")); }
    else {
      chart = new fd.timeline.StripChart(box, rows, {
        start: line.start, bucketS: line.bucket_s, span, clockName: "the host's clock",
        device: line.device, onSelect: pick,
        ariaLabel: "Each thread's state over the capture; drag to select a window",
      });
    }
    const note = untimedNote(line.untimed || []);
    if (note) box.after(note);
    $("tl-from").max = $("tl-to").max = String(span);
    const wanted = windowFromUrl(span);
    if (wanted && chart) { chart.select(...wanted); showWindow(...wanted); }
  }

  function pick(from, to) {
    if (from === null) { closeWindow(); return; }
    showWindow(from, to);
  }

  function closeWindow() {
    loading += 1;
    $("tl-window").hidden = true;
    $("tl-from").value = $("tl-to").value = "";
    windowToUrl(null, null);
  }

  async function showWindow(from, to) {
    const mine = (loading += 1);
    windowToUrl(from, to);
    $("tl-from").value = String(from);
    $("tl-to").value = String(to);
    const panel = $("tl-window");
    panel.hidden = false;
    delete panel.dataset.ready;
    $("tl-window-title").textContent = `Window ${secs(from)} – ${secs(to)} (${secs(to - from)}) · ${clock(time.start + from)}–${clock(time.start + to)} on the host's clock`;
    $("tl-window-note").textContent = "Loading the window…";
    const query = `from=${from}&to=${to}`;
    let tree, win;
    try {
      [tree, win] = await Promise.all([
        fd.fetchJson(`/api/captures/${data.id}/flamegraph/?${query}&max_nodes=8000`),
        fd.fetchJson(`/api/captures/${data.id}/window/?${query}`),
      ]);
    } catch (err) {
      if (mine === loading) $("tl-window-note").textContent = `Could not load the window: ${err.message}`;
      return;
    }
    if (mine !== loading) return; // a newer window was asked for meanwhile
    $("tl-window-note").textContent = `${fmt(win.total_samples)} samples of the placed threads in the window; the rest of the capture is everything outside it.`;
    windowView = windowView || new fd.FlameView($("tl-window-flamegraph"), {});
    windowView.render(tree);
    renderStates(win);
    renderDevice(win.device);
    $("tl-window-findings").replaceChildren(fd.evidence.findingsList(win.findings, () => null,
      "No finding in this window: no rule's whole 95% interval is past its threshold on its step threads."));
    $("tl-window-top").replaceChildren(frameTable("Top self", win.top_self), frameTable("Top total", win.top_total));
    panel.dataset.ready = "1";
  }

  // The device's mean utilisation in the window, beside its states (null: no GPU sampled).
  function renderDevice(device) {
    const box = $("tl-window-device");
    if (!box) return;
    box.hidden = !device;
    if (!device) return;
    box.textContent = device.util === null
      ? `GPU: no reading in this window${device.reason ? ` (${device.reason})` : ""}.`
      : `GPU ${device.source === "host" ? "(every GPU of the host, not attributed)" : "of this rank"}: ${device.util}% busy on average in this window (${device.readings} reading${device.readings === 1 ? "" : "s"} of nvidia-smi).`;
  }

  // --- the window's states against the rest of the capture, for one thread or all ----
  function pooled(threads, tid) {
    const chosen = threads.filter((t) => tid === "" || String(t.tid) === tid);
    const states = {};
    let samples = 0;
    for (const t of chosen) {
      samples += t.samples;
      for (const [s, n] of Object.entries(t.states || {})) states[s] = (states[s] || 0) + n;
    }
    return { samples, states };
  }

  function renderStates(win) {
    const select = $("tl-window-thread");
    const step = new Set(((stats.step_threads || {}).tids || []).map(String));
    const previous = select.value;
    select.replaceChildren(el("option", { value: "" }, "all placed threads"),
      ...win.threads.map((t) => el("option", { value: String(t.tid) }, `${t.name || "(unnamed)"} (${t.tid})${step.has(String(t.tid)) ? " · step thread" : ""}`)));
    const stepTid = win.threads.map((t) => String(t.tid)).find((tid) => step.has(tid));
    select.value = [...select.options].some((o) => o.value === previous && previous) ? previous : stepTid || "";
    select.onchange = () => drawStates(win, select.value);
    drawStates(win, select.value);
  }

  function drawStates(win, tid) {
    const inside = pooled(win.threads, tid), rest = pooled(win.rest, tid);
    const share = (part, n) => (part.samples ? (100 * (part.states[n] || 0)) / part.samples : 0);
    const order = (fd.evidence ? fd.evidence.STATES.map(([s]) => s) : []);
    const names = Object.keys({ ...inside.states, ...rest.states }).sort((a, b) => order.indexOf(a) - order.indexOf(b));
    const rows = names.map((s) => {
      const w = share(inside, s), r = share(rest, s), diff = w - r;
      const sign = diff > 0.05 ? "+" : diff < -0.05 ? "−" : "±";
      return el("tr", { "data-state": s },
        el("td", {}, fd.evidence ? fd.evidence.stateKey(s) : s),
        el("td", { class: "num" }, `${w.toFixed(1)}%`),
        el("td", { class: "num" }, `${r.toFixed(1)}%`),
        el("td", { class: `num tl-diff${Math.abs(diff) >= 5 ? " big" : ""}`, title: "points: the window's share less the rest's" }, `${sign}${Math.abs(diff).toFixed(1)}`));
    });
    $("tl-window-states").replaceChildren(el("table", { class: "dense tl-states" },
      el("thead", {}, el("tr", {}, el("th", {}, "State"), el("th", { class: "num" }, `Window (${fmt(inside.samples)})`),
        el("th", { class: "num" }, `Rest (${fmt(rest.samples)})`), el("th", { class: "num" }, "Difference, points"))),
      el("tbody", {}, ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: "4", class: "empty" }, "No samples."))]))));
  }

  function frameTable(title, frames) {
    const rows = (frames || []).slice(0, 10).map((f) => el("tr", {},
      el("td", { class: "frame" }, el("button", { type: "button", class: "tl-frame oneline mono", "data-frame": f.frame, title: `${f.frame}: highlight it in the window's flamegraph` }, f.frame)),
      el("td", { class: "num" }, fmt(f.samples)), el("td", { class: "num" }, `${Number(f.percent).toFixed(1)}%`)));
    return el("div", { class: "tl-top" }, el("h4", {}, title),
      rows.length ? el("table", { class: "dense" }, el("tbody", {}, ...rows)) : el("p", { class: "muted" }, "No samples."));
  }

  function wire() {
    $("tl-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const from = round2(Number.parseFloat($("tl-from").value)), to = round2(Number.parseFloat($("tl-to").value));
      if (!chart || !Number.isFinite(from) || !Number.isFinite(to) || to - from < MIN_WINDOW_S) {
        $("tl-form-note").textContent = `A window runs from a second to a later one, at least ${MIN_WINDOW_S} s apart.`;
        return;
      }
      $("tl-form-note").textContent = "";
      chart.select(from, to);
      showWindow(from, to);
    });
    $("tl-clear").addEventListener("click", () => { if (chart) chart.clear(); closeWindow(); });
    $("tl-window-top").addEventListener("click", (event) => {
      const frame = event.target.closest(".tl-frame");
      if (frame && windowView) windowView.search(frame.dataset.frame);
    });
  }

  wire();
  loadTimeline();
})();
