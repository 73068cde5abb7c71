// GPU timeline: utilisation (solid) and memory in use (dashed, % of total) per GPU over
// the capture window, from nvidia-smi samples taken beside py-spy. Labels are set
// with textContent: host names and process labels are untrusted text.
(function () {
  "use strict";
  const WIDTH = 760, HEIGHT = 120, M = { top: 8, right: 12, bottom: 22, left: 36 };

  function series(timeline) {
    return (timeline.gpus || []).map((gpu) => ({
      index: gpu.index,
      util: gpu.points.filter((p) => p.util !== null).map((p) => [p.t, p.util]),
      mem: gpu.points.filter((p) => p.mem_used_mib !== null && p.mem_total_mib)
        .map((p) => [p.t, (100 * p.mem_used_mib) / p.mem_total_mib]),
    }));
  }

  function chart(timeline, title) {
    const figure = document.createElement("figure");
    figure.className = "gpu-chart";
    const caption = document.createElement("figcaption");
    caption.textContent = title;
    figure.append(caption);
    const lines = series(timeline);
    const tMax = d3.max(lines.flatMap((s) => s.util.concat(s.mem)), (d) => d[0]) || 1;
    const x = d3.scaleLinear([0, tMax], [M.left, WIDTH - M.right]);
    const y = d3.scaleLinear([0, 100], [HEIGHT - M.bottom, M.top]);
    const colour = d3.scaleOrdinal(d3.schemeTableau10);
    const svg = d3.select(figure).append("svg").attr("viewBox", `0 0 ${WIDTH} ${HEIGHT}`)
      .attr("class", "gpu-svg").attr("role", "img").attr("aria-label", "GPU utilisation and memory over the capture");
    svg.append("g").attr("transform", `translate(0,${HEIGHT - M.bottom})`).call(d3.axisBottom(x).ticks(8).tickFormat((t) => `${t}s`));
    svg.append("g").attr("transform", `translate(${M.left},0)`).call(d3.axisLeft(y).ticks(4).tickFormat((v) => `${v}%`));
    const line = d3.line().x((d) => x(d[0])).y((d) => y(d[1]));
    for (const s of lines) {
      svg.append("path").attr("class", "gpu-util").attr("d", line(s.util)).attr("stroke", colour(s.index)).attr("fill", "none");
      svg.append("path").attr("class", "gpu-mem").attr("d", line(s.mem)).attr("stroke", colour(s.index)).attr("fill", "none").attr("stroke-dasharray", "4 3");
    }
    const legend = document.createElement("div");
    legend.className = "gpu-legend muted small";
    legend.textContent = lines.map((s) => `GPU ${s.index}`).join(" · ") + " — solid: utilisation, dashed: memory in use";
    figure.append(legend);
    return figure;
  }

  // entries: [{label, gpu}] where gpu is a stored timeline or null.
  function drawGpuTimeline(container, entries) {
    if (!container) return;
    const withData = entries.filter((e) => e.gpu && e.gpu.gpus && e.gpu.gpus.length);
    container.replaceChildren(...withData.map((e) => chart(e.gpu, e.label)));
    container.hidden = withData.length === 0;
  }

  window.flamedeck.drawGpuTimeline = drawGpuTimeline;
  const single = document.getElementById("gpu-data");
  if (single) {
    drawGpuTimeline(document.getElementById("gpu-timeline"), [
      { label: "GPUs during this capture", gpu: JSON.parse(single.textContent) },
    ]);
  }
})();
