// Share trends: draws every `.trend-chart[data-trend-url]` on the page from its JSON
// ({series: [{key, name, kind, shown, reason, points: [{at, percent, low, high, url,
// label, lag, scheduled}]}], measure?, measures?, label?, view?, names?, ranks?}). One
// path per series, and a series is one rank, the whole job or (for one rank) one state
// or category: no path joins two ranks. With many ranks a picker chooses which are drawn
// (the server marks a few `shown`). The run chart plots the step threads' states unless
// the user picks the keyword lens (labelled as one, naming its sets), and its select
// switches between "a state, a line per rank" and "a rank, a line per state". Text goes
// in via textContent / .text() only.
(function () {
  "use strict";
  const el = window.flamedeck.el;
  const HEIGHT = 300;
  const MARGIN = { top: 12, right: 16, bottom: 34, left: 48 };
  const MIN_SPAN_MS = 10 * 60e3;
  const DAY_MS = 24 * 3600e3;
  const JOB_COLOUR = "#1b2230";
  const BANDS_UP_TO = 4;

  // Times, never bare seconds or milliseconds: the date appears once the span passes a day.
  function timeFormat(domain) {
    const span = domain[1] - domain[0];
    if (span <= DAY_MS) return d3.timeFormat("%H:%M");
    if (span <= 7 * DAY_MS) return d3.timeFormat("%b %d %H:%M");
    return d3.timeFormat("%b %d");
  }

  function isLagging(point) {
    return Boolean(point.lag) && point.lag !== "ok";
  }

  function describe(series, point) {
    const lines = [
      point.label,
      series.name + ": " + point.percent.toFixed(2) + "% [" + point.low.toFixed(1) + ", " + point.high.toFixed(1) + "]",
      new Date(point.at).toLocaleString(),
    ];
    if (point.scheduled) lines.push("scheduled capture");
    if (isLagging(point)) lines.push("sampler lag: " + point.lag + " (share biased)");
    return lines.join("\n");
  }

  // A line per state takes the state's colour (base.css), as on every state bar.
  function stateColour(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(`--st-${name}`).trim();
  }

  function colours(series) {
    const palette = d3.schemeTableau10;
    const map = new Map();
    let next = 0;
    for (const s of series) {
      const own = s.kind === "state" ? stateColour(s.name) : "";
      map.set(s.key, s.kind === "job" ? JOB_COLOUR : own || palette[next++ % palette.length]);
    }
    return (key) => map.get(key);
  }

  function scales(series, width) {
    const points = series.flatMap((s) => s.points);
    const times = d3.extent(points, (p) => new Date(p.at));
    // Points seconds apart would get millisecond ticks (":500"): keep at least 10 minutes.
    const pad = Math.max(0, MIN_SPAN_MS - (times[1] - times[0])) / 2;
    times[0] = new Date(+times[0] - pad);
    times[1] = new Date(+times[1] + pad);
    const top = Math.max(1, d3.max(points, (p) => p.high) * 1.08);
    return {
      x: d3.scaleTime().domain(times).range([MARGIN.left, width - MARGIN.right]),
      y: d3.scaleLinear().domain([0, Math.min(100, top)]).nice().range([HEIGHT - MARGIN.bottom, MARGIN.top]),
      colour: colours(series),
    };
  }

  function drawAxes(svg, s, xLabel) {
    svg.append("g").attr("class", "axis x").attr("transform", "translate(0," + (HEIGHT - MARGIN.bottom) + ")")
      .call(d3.axisBottom(s.x).ticks(6).tickFormat(timeFormat(s.x.domain())));
    svg.append("g").attr("class", "axis y").attr("transform", "translate(" + MARGIN.left + ",0)")
      .call(d3.axisLeft(s.y).ticks(5).tickFormat((v) => v + "%"));
    svg.append("text").attr("class", "axis-label").attr("x", MARGIN.left).attr("y", HEIGHT - 2).text(xLabel);
  }

  function drawSeries(svg, series, s) {
    const at = (p) => s.x(new Date(p.at));
    const band = d3.area().x(at).y0((p) => s.y(p.low)).y1((p) => s.y(p.high));
    const line = d3.line().x(at).y((p) => s.y(p.percent));
    const groups = svg.selectAll("g.series").data(series).join("g")
      .attr("class", (d) => "series series-" + d.kind)
      .attr("data-series", (d) => d.name).attr("data-key", (d) => d.key).attr("data-kind", (d) => d.kind);
    // Presentation attributes too, so the chart reads right even where trends.css is absent.
    if (series.length <= BANDS_UP_TO) {
      groups.append("path").attr("class", "band").attr("fill", (d) => s.colour(d.key))
        .attr("fill-opacity", 0.1).attr("d", (d) => band(d.points));
    }
    groups.append("path").attr("class", "line").attr("fill", "none").attr("stroke-width", (d) => (d.kind === "job" ? 2.2 : 1.6))
      .attr("stroke-dasharray", (d) => (d.kind === "job" ? "6 3" : null))
      .attr("stroke", (d) => s.colour(d.key)).attr("d", (d) => line(d.points));
    const symbol = d3.symbol().size(60).type((p) => (p.scheduled ? d3.symbolDiamond : d3.symbolCircle));
    const links = groups.selectAll("a.point").data((d) => d.points.map((p) => ({ series: d, point: p }))).join("a")
      .attr("class", (d) => "point" + (isLagging(d.point) ? " lagging" : "") + (d.point.scheduled ? " scheduled" : ""))
      .attr("href", (d) => d.point.url)
      .attr("data-capture", (d) => d.point.capture);
    links.append("line").attr("class", "ci").attr("stroke", (d) => s.colour(d.series.key))
      .attr("stroke-opacity", 0.45)
      .attr("x1", (d) => at(d.point)).attr("x2", (d) => at(d.point))
      .attr("y1", (d) => s.y(d.point.low)).attr("y2", (d) => s.y(d.point.high));
    links.append("path")
      .attr("transform", (d) => "translate(" + at(d.point) + "," + s.y(d.point.percent) + ")")
      .attr("d", (d) => symbol(d.point)).attr("fill", (d) => s.colour(d.series.key))
      .attr("stroke", (d) => (isLagging(d.point) ? "#c92a2a" : "#fff"))
      .attr("stroke-width", (d) => (isLagging(d.point) ? 2.5 : 1));
    links.append("title").text((d) => describe(d.series, d.point));
  }

  // A run's launches: a dashed rule where each began (a role keeps its line across them).
  function drawLaunches(svg, s, launches) {
    const [from, to] = s.x.domain();
    const shown = launches.filter((l) => new Date(l.start) >= from && new Date(l.start) <= to);
    const marks = svg.selectAll("g.launch-mark").data(shown).join("g").attr("class", "launch-mark")
      .attr("data-launch", (l) => l.number);
    const x = (l) => s.x(new Date(l.start));
    marks.append("line").attr("x1", x).attr("x2", x).attr("y1", MARGIN.top).attr("y2", HEIGHT - MARGIN.bottom)
      .attr("stroke", "#868e96").attr("stroke-dasharray", "3 3");
    marks.append("text").attr("x", (l) => x(l) + 3).attr("y", MARGIN.top + 10).attr("class", "launch-label")
      .attr("font-size", 10).attr("fill", "#495057").text((l) => l.label);
    marks.append("title").text((l) => `${l.label} began ${new Date(l.start).toLocaleString()}`);
  }

  function legend(series, s) {
    const entries = series.map((item) => {
      const swatch = el("i", { class: item.kind === "job" ? "job" : "" });
      swatch.style.background = s.colour(item.key);
      const why = item.reason ? el("span", { class: "muted" }, " · " + item.reason) : null;
      return el("span", { class: "trend-entry", "data-key": item.key }, swatch, item.name, why);
    });
    const key = el("span", { class: "trend-key" }, "● manual capture  ◆ scheduled capture  ◯ red ring: sampler lagged");
    return el("div", { class: "trend-legend" }, ...entries, key);
  }

  function latest(series) {
    const last = series.points[series.points.length - 1];
    return last ? ` (${last.percent.toFixed(1)}% latest)` : "";
  }

  // Which series are drawn: every series gets a box, the server's `shown` ticked first.
  function picker(state, redraw) {
    const noun = state.data.series.some((s) => s.kind === "rank") ? "ranks" : "lines";
    const summary = el("summary", {});
    const boxes = state.data.series.map((s) => el("label", { class: "series-choice" },
      el("input", { type: "checkbox", value: s.key, checked: state.shown.has(s.key) }), " ", s.name + latest(s)));
    const set = (keys) => { state.shown = new Set(keys); sync(); redraw(); };
    const sync = () => {
      summary.textContent = `${noun}: ${state.shown.size} of ${state.data.series.length} drawn`;
      for (const box of boxes) box.firstChild.checked = state.shown.has(box.firstChild.value);
    };
    const actions = el("div", { class: "picker-actions" },
      el("button", { type: "button", class: "linklike", onclick: () => set(state.data.series.filter((s) => s.shown).map((s) => s.key)) }, "first choice"),
      el("button", { type: "button", class: "linklike", onclick: () => set(state.data.series.map((s) => s.key)) }, "all"),
      el("button", { type: "button", class: "linklike", onclick: () => set([]) }, "none"));
    const list = el("div", { class: "series-list" }, ...boxes);
    list.addEventListener("change", (event) => {
      if (event.target.checked) state.shown.add(event.target.value); else state.shown.delete(event.target.value);
      sync();
      redraw();
    });
    sync();
    return el("details", { class: "series-picker" }, summary, actions, list);
  }

  // The run chart: one state (or category) with a line per rank, or one rank with a
  // line per state (or category).
  function viewSelect(container, data) {
    const noun = data.measure === "category" ? "category" : "state";
    const options = (label, items, prefix) => el("optgroup", { label },
      ...items.map((item) => el("option", { value: prefix + item.value }, item.text)));
    const select = el("select", { class: "trend-view", "aria-label": "What to plot" },
      options(`A ${noun}, a line per rank:`, data.names.map((c) => ({ value: c, text: c })), "name="),
      options(`A rank, a line per ${noun}:`, data.ranks.map((r) => ({ value: r.key, text: r.name })), "series="));
    select.value = data.view.by === "rank" ? "name=" + data.view.name : "series=" + data.view.series;
    select.addEventListener("change", () => {
      const [param, ...rest] = select.value.split("=");
      reload(container, data.measure, param, rest.join("="));
    });
    return el("label", { class: "trend-view-label" }, "Plot ", select);
  }

  // States, or the keyword lens: a choice the user makes, labelled with the set's name.
  function measureSelect(container, data) {
    const select = el("select", { class: "trend-measure", "aria-label": "Measure" },
      ...data.measures.map((m) => el("option", { value: m.value }, m.label)));
    select.value = data.measure;
    select.addEventListener("change", () => reload(container, select.value));
    return el("label", { class: "trend-view-label" }, "Measure ", select);
  }

  function reload(container, measure, param, value) {
    const url = new URL(container.dataset.trendUrl, window.location.href);
    url.search = "";
    if (measure && measure !== "state") url.searchParams.set("measure", measure);
    if (param) url.searchParams.set(param, value);
    load(container, url.pathname + url.search);
  }

  function drawChart(box, state) {
    box.replaceChildren();
    const series = state.data.series.filter((s) => state.shown.has(s.key) && s.points.length);
    if (!series.length) { box.append(el("p", { class: "muted" }, "No line picked: tick some above.")); return; }
    const width = Math.max(box.clientWidth, 360);
    const s = scales(series, width);
    const svg = d3.select(box).append("svg").attr("width", width).attr("height", HEIGHT)
      .attr("class", "trend-svg").attr("role", "img");
    drawAxes(svg, s, box.parentNode.dataset.xLabel || "");
    drawLaunches(svg, s, state.data.launches || []);
    drawSeries(svg, series, s);
    box.append(legend(series, s));
  }

  function emptyText(data) {
    if (data.unknown) return `Unknown ${data.kind} “${data.name}”: pick one from the list.`;
    if (data.measure === "state" || data.kind === "state") return "No finished captures with step-thread states yet (a capture analysed before they were stored shows them once re-analysed; its keyword lens is in the Measure list).";
    return "No finished captures with samples yet.";
  }

  function draw(container, data) {
    container.replaceChildren();
    const withPoints = (data.series || []).filter((s) => s.points.length);
    const controls = el("div", { class: "trend-controls" });
    if (data.measures) controls.append(measureSelect(container, data));
    if (data.view && (data.names.length || data.ranks.length)) controls.append(viewSelect(container, data));
    container.append(controls);
    if (data.label && data.measures) container.append(el("p", { class: "muted small trend-lens", "data-measure": data.measure }, data.label));
    if (!withPoints.length) {
      container.append(el("p", { class: "muted trend-empty" }, emptyText(data)));
      container.dataset.state = "empty";
      return;
    }
    const state = { data: { ...data, series: withPoints }, shown: new Set(withPoints.filter((s) => s.shown).map((s) => s.key)) };
    const box = el("div", { class: "trend-plot" });
    if (withPoints.some((s) => !s.shown) || withPoints.length > 6) controls.append(picker(state, () => drawChart(box, state)));
    container.append(box);
    drawChart(box, state);
    container.dataset.state = "ready";
  }

  async function load(container, url) {
    container.dataset.state = "loading";
    try {
      draw(container, await flamedeck.fetchJson(url || container.dataset.trendUrl || container.dataset.url));
    } catch (error) {
      container.dataset.state = "error";
      container.replaceChildren(el("p", { class: "error" }, "Could not load the trend: " + error.message));
    }
  }

  // `#run-trends[data-url]` is the run page's own container, before it includes the partial.
  document.querySelectorAll(".trend-chart[data-trend-url], #run-trends[data-url]").forEach((c) => load(c));
})();
