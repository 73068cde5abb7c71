// Compare page: the differential flamegraph, with its view kept in the URL so a pasted
// link opens the same view. Parameters follow the capture page: search=term,
// focus=JSON root-to-frame path, thread=a,b; plus diff=before for the reverse tree.
// Frame names are untrusted: they only reach the page through textContent/.text().
(function () {
  "use strict";
  const configNode = document.getElementById("compare-page");
  if (!configNode) return;
  const config = JSON.parse(configNode.textContent);
  const $ = (id) => document.getElementById(id);
  const el = {
    chart: $("diff-chart"), search: $("diff-search"), reset: $("diff-reset"),
    copy: $("diff-copy"), legend: $("diff-legend"), details: $("diff-details"),
    views: document.querySelectorAll("[data-view]"),
  };
  const state = readState();
  let view = null;

  function readState() {
    const params = new URLSearchParams(window.location.search);
    return {
      view: params.get("diff") === "before" ? "before" : "after",
      search: params.get("search") || "",
      focus: parseFocus(params.get("focus")),
    };
  }

  function parseFocus(text) {
    try {
      const path = JSON.parse(text || "[]");
      return Array.isArray(path) ? path.map(String) : [];
    } catch (error) {
      return [];
    }
  }

  function writeState() {
    const params = new URLSearchParams(window.location.search);
    const set = (key, value) => (value ? params.set(key, value) : params.delete(key));
    set("diff", state.view === "before" ? "before" : "");
    set("search", state.search);
    set("focus", state.focus.length ? JSON.stringify(state.focus) : "");
    window.history.replaceState(null, "", window.location.pathname + "?" + params.toString());
  }

  function signed(points) {
    return (points > 0 ? "+" : "") + points.toFixed(2);
  }

  function describe(d) {
    const data = d.data;
    const sides = state.view === "after" ? ["after", "before"] : ["before", "after"];
    const shownPct = (100 * d.value / d3.select(el.chart).datum().value);
    let text = data.name + "\n" + sides[0] + ": " + data.value + " samples (" + data.share.toFixed(2) + "% of all)";
    text += "\n" + sides[1] + ": " + data.other_value + " samples";
    text += data.delta === null ? "\nchange: unknown (pruned mass)" : "\nchange: " + signed(data.delta) + " points";
    if (Math.abs(shownPct - data.share) > 0.005) text += "\n(" + shownPct.toFixed(2) + "% of the zoomed view)";
    return text;
  }

  function maxDelta(tree) {
    let max = 0;
    const stack = [tree];
    while (stack.length) {
      const node = stack.pop();
      if (node.delta !== null) max = Math.max(max, Math.abs(node.delta));
      for (const child of node.children) stack.push(child);
    }
    return max;
  }

  function colourScale(limit) {
    // A visible neutral (not RdBu's near-white), so unchanged frames still read as frames.
    const ramp = d3.piecewise(d3.interpolateRgb, ["#1f5fa8", "#9cc0e6", "#e3ddd2", "#f2a07b", "#b2182b"]);
    return d3.scaleDiverging(ramp).domain([-limit, 0, limit]).clamp(true);
  }

  function drawLegend(limit, colour) {
    el.legend.textContent = "";
    const label = (text) => Object.assign(document.createElement("span"), { textContent: text });
    const bar = document.createElement("span");
    bar.className = "legend-bar";
    const stops = [0, 0.25, 0.5, 0.75, 1].map((t) => colour(-limit + 2 * limit * t));
    bar.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
    el.legend.append(label("shrank " + signed(-limit) + " pts"), bar, label(signed(limit) + " pts grew"));
    const grey = document.createElement("span");
    grey.className = "legend-pruned";
    el.legend.append(grey, label("pruned"));
  }

  function build(tree) {
    const limit = Math.max(maxDelta(tree), 0.5);
    const colour = colourScale(limit);
    drawLegend(limit, colour);
    view = new flamedeck.FlameView(el.chart, {
      describe: (d) => describe(d).split("\n").slice(1).join(" · "),
      label: (d) => describe(d).replace(/\n/g, " · "),
      colorMapper: (d) => (d.highlight ? "#e600e6" : d.data.delta === null ? "#c8ccd4" : colour(d.data.delta)),
      onZoom: (path) => { state.focus = path || []; writeState(); markZoom(); },
    });
    view.render(tree);
  }

  function applyState() {
    view.search(state.search);
    const target = view.focusPath(state.focus);
    state.focus = target ? flamedeck.FlameView.pathOf(target) : [];
    writeState();
    markZoom();
  }

  function markZoom() {
    el.chart.dataset.focus = state.focus.join(" > ");
    el.reset.disabled = !state.focus.length;
  }

  async function load() {
    el.views.forEach((b) => b.setAttribute("aria-pressed", String(b.dataset.view === state.view)));
    el.chart.dataset.state = "loading";
    const params = new URLSearchParams({ a: config.a, b: config.b, view: state.view });
    config.threads.forEach((t) => params.append("thread", t));
    try {
      const data = await flamedeck.fetchJson(config.diffUrl + "?" + params.toString());
      build(data.tree);
      applyState();
      el.chart.dataset.state = "ready";
      el.chart.dataset.view = state.view;
    } catch (error) {
      el.chart.dataset.state = "error";
      el.chart.textContent = "Could not load the differential flamegraph: " + error.message;
    }
  }

  el.views.forEach((button) => button.addEventListener("click", () => {
    if (button.dataset.view === state.view) return;
    state.view = button.dataset.view;
    writeState();
    load();
  }));
  el.search.value = state.search;
  el.search.addEventListener("input", () => {
    state.search = el.search.value.trim();
    writeState();
    if (view) view.search(state.search);
  });
  el.reset.addEventListener("click", () => {
    if (!view) return;
    view.reset();
    state.focus = [];
    writeState();
    markZoom();
  });
  el.copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(window.location.href);
      el.copy.textContent = "Link copied";
    } catch (error) {
      window.prompt("Copy this link", window.location.href);
    }
  });
  document.querySelectorAll(".frames .show-all").forEach((button) => button.addEventListener("click", () => {
    const body = button.parentElement.querySelector("tbody");
    const collapsed = body.classList.toggle("collapsed");
    button.textContent = collapsed ? `Show all ${button.dataset.total} frames` : `Show the top ${button.dataset.shown}`;
  }));
  load();
})();
