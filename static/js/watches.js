// Watches: a sparkline per watch on the list (#watch-sparklines), and one small chart
// per tracked share on a watch's page (#watch-series). Data: [{key, label, points:
// [{capture, percent, verdict}], shift: {index, ...} | null}]; the first point is the
// baseline. A dashed line marks a shift the change-point test found. Names are
// untrusted text: they go in through .text() only.
(function () {
  "use strict";

  function data(id) {
    const node = document.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  }

  // The baseline is point 0 of the series; judged captures follow.
  function draw(node, series, width, height, margin) {
    const points = series.points;
    const x = d3.scaleLinear().domain([0, Math.max(1, points.length - 1)]).range([margin, width - margin]);
    const values = points.map((p) => p.percent);
    const y = d3.scaleLinear().domain([Math.min(...values), Math.max(...values)]).nice().range([height - margin, margin]);
    if (y.domain()[0] === y.domain()[1]) y.domain([y.domain()[0] - 1, y.domain()[0] + 1]);
    const svg = d3.select(node).append("svg").attr("width", width).attr("height", height);
    svg.append("path").attr("class", "line").attr("d", d3.line().x((_, i) => x(i)).y((p) => y(p.percent))(points));
    if (series.shift && series.shift.significant && series.shift.index < points.length) {
      const at = x(series.shift.index - 0.5);
      svg.append("line").attr("class", "shift").attr("x1", at).attr("x2", at).attr("y1", margin / 2).attr("y2", height - margin / 2)
        .append("title").text(`shift at capture #${series.shift.capture}: ${series.shift.before_mean}% → ${series.shift.after_mean}%`);
    }
    return { svg, x, y };
  }

  function sparklines() {
    const all = data("watch-sparklines");
    if (!all) return;
    for (const node of document.querySelectorAll(".sparkline[data-watch]")) {
      const series = all[node.dataset.watch];
      if (!series || series.points.length < 2) continue;
      const { svg } = draw(node, series, 120, 26, 3);
      svg.append("title").text(`${series.label}: ${series.points.map((p) => p.percent.toFixed(1)).join(" → ")}%`);
    }
  }

  function seriesCharts() {
    const all = data("watch-series");
    const root = document.getElementById("series-charts");
    if (!all || !root) return;
    // Shifted shares first, then the rest in the order the server gave.
    const ordered = all.slice().sort((a, b) => Number(Boolean(b.shift && b.shift.significant)) - Number(Boolean(a.shift && a.shift.significant)));
    for (const series of ordered) {
      if (series.points.length < 2) continue;
      const box = d3.select(root).append("div").attr("class", "chart");
      box.append("h3").text(series.label).attr("title", series.key);
      const { svg, x, y } = draw(box.node(), series, 300, 120, 22);
      svg.append("g").attr("class", "axis").attr("transform", "translate(22,0)").call(d3.axisLeft(y).ticks(4).tickFormat((v) => `${v}%`));
      svg.selectAll("circle").data(series.points).join("circle")
        .attr("class", (p, i) => (i === 0 ? "baseline-dot" : `dot ${p.verdict === "changed" ? "changed" : ""}`))
        .attr("r", 2.5).attr("cx", (_, i) => x(i)).attr("cy", (p) => y(p.percent))
        .append("title").text((p, i) => `${i === 0 ? "baseline" : "capture"} #${p.capture}: ${p.percent.toFixed(2)}%`);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    sparklines();
    seriesCharts();
  });
})();
