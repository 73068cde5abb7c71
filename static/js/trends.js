// Share trends: draws every `.trend-chart[data-trend-url]` on the page from its JSON
// ({series: [{name, points: [{at, percent, low, high, url, label, lag, scheduled}]}]}).
// Lines per series, a 95% band, points that link to their capture: a diamond for a
// scheduled capture, a red ring when the sampler lagged. Text goes in via .text() only.
(function () {
  "use strict";
  const HEIGHT = 300;
  const MARGIN = { top: 12, right: 16, bottom: 34, left: 48 };
  const MIN_SPAN_MS = 10 * 60e3;
  const DAY_MS = 24 * 3600e3;

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
      colour: d3.scaleOrdinal(d3.schemeTableau10).domain(series.map((s) => s.name)),
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
      .attr("class", "series").attr("data-series", (d) => d.name);
    // Presentation attributes too, so the chart reads right even where trends.css is absent.
    groups.append("path").attr("class", "band").attr("fill", (d) => s.colour(d.name))
      .attr("fill-opacity", 0.1).attr("d", (d) => band(d.points));
    groups.append("path").attr("class", "line").attr("fill", "none").attr("stroke-width", 1.6)
      .attr("stroke", (d) => s.colour(d.name)).attr("d", (d) => line(d.points));
    const symbol = d3.symbol().size(60).type((p) => (p.scheduled ? d3.symbolDiamond : d3.symbolCircle));
    const links = groups.selectAll("a.point").data((d) => d.points.map((p) => ({ series: d, point: p }))).join("a")
      .attr("class", (d) => "point" + (isLagging(d.point) ? " lagging" : "") + (d.point.scheduled ? " scheduled" : ""))
      .attr("href", (d) => d.point.url)
      .attr("data-capture", (d) => d.point.capture);
    links.append("line").attr("class", "ci").attr("stroke", (d) => s.colour(d.series.name))
      .attr("stroke-opacity", 0.45)
      .attr("x1", (d) => at(d.point)).attr("x2", (d) => at(d.point))
      .attr("y1", (d) => s.y(d.point.low)).attr("y2", (d) => s.y(d.point.high));
    links.append("path")
      .attr("transform", (d) => "translate(" + at(d.point) + "," + s.y(d.point.percent) + ")")
      .attr("d", (d) => symbol(d.point)).attr("fill", (d) => s.colour(d.series.name))
      .attr("stroke", (d) => (isLagging(d.point) ? "#c92a2a" : "#fff"))
      .attr("stroke-width", (d) => (isLagging(d.point) ? 2.5 : 1));
    links.append("title").text((d) => describe(d.series, d.point));
  }

  function drawLegend(container, series, s) {
    const legend = document.createElement("div");
    legend.className = "trend-legend";
    legend.style.cssText = "display:flex;flex-wrap:wrap;gap:.4rem 1rem;font-size:.82rem";
    for (const item of series) {
      const entry = document.createElement("span");
      const swatch = document.createElement("i");
      swatch.style.cssText = "display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem";
      swatch.style.background = s.colour(item.name);
      entry.append(swatch, document.createTextNode(item.name));
      legend.append(entry);
    }
    const key = document.createElement("span");
    key.className = "trend-key";
    key.textContent = "● manual capture  ◆ scheduled capture  ◯ red ring: sampler lagged";
    legend.append(key);
    container.append(legend);
  }

  function draw(container, data) {
    container.textContent = "";
    const series = (data.series || []).filter((s) => s.points.length);
    if (!series.length) {
      container.textContent = data.unknown
        ? `Unknown ${data.kind} “${data.name}”: pick one from the list.`
        : "No finished captures with samples yet.";
      container.dataset.state = "empty";
      return;
    }
    const width = Math.max(container.clientWidth, 360);
    const s = scales(series, width);
    const svg = d3.select(container).append("svg").attr("width", width).attr("height", HEIGHT)
      .attr("class", "trend-svg").attr("role", "img");
    drawAxes(svg, s, container.dataset.xLabel || "");
    drawSeries(svg, series, s);
    drawLegend(container, series, s);
    container.dataset.state = "ready";
  }

  async function load(container) {
    container.dataset.state = "loading";
    try {
      draw(container, await flamedeck.fetchJson(container.dataset.trendUrl || container.dataset.url));
    } catch (error) {
      container.dataset.state = "error";
      container.textContent = "Could not load the trend: " + error.message;
    }
  }

  // `#run-trends[data-url]` is the run page's own container, before it includes the partial.
  document.querySelectorAll(".trend-chart[data-trend-url], #run-trends[data-url]").forEach(load);
})();
