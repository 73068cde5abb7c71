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
  let chart = null;
  let tip = null;

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

  // A tooltip that only ever sets textContent (the library's default can use innerHTML).
  function textTooltip() {
    let node = null;
    function make() {
      node = document.createElement("div");
      node.className = "d3-flame-graph-tip diff-tip";
      node.setAttribute("role", "tooltip");
      node.style.display = "none";
      document.body.appendChild(node);
    }
    make.show = function (event, d) {
      node.textContent = describe(d);
      node.style.display = "block";
      const left = Math.min(event.pageX + 8, window.scrollX + window.innerWidth - node.offsetWidth - 8);
      node.style.left = Math.max(4, left) + "px";
      node.style.top = (event.pageY + 12) + "px";
      return make;
    };
    make.hide = function () { if (node) node.style.display = "none"; return make; };
    make.destroy = function () { if (node) node.remove(); };
    return make;
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

  function pathOf(node) {
    return node.ancestors().reverse().slice(1).map((n) => n.data.name);
  }

  function findPath(root, path) {
    let node = root;
    for (const name of path) {
      const next = (node.children || []).find((c) => c.data.name === name);
      if (!next) break;
      node = next;
    }
    return node;
  }

  function matchText(d, term) {
    return Boolean(term) && d.data.name.toLowerCase().includes(term.toLowerCase());
  }

  // The UMD build exposes a namespace; its chart factory is the default export.
  function makeFlamegraph() {
    const lib = window.flamegraph;
    return (typeof lib === "function" ? lib : lib.default || lib.flamegraph)();
  }

  function build(tree) {
    if (chart) chart.destroy();
    el.chart.textContent = "";
    const limit = Math.max(maxDelta(tree), 0.5);
    const colour = colourScale(limit);
    drawLegend(limit, colour);
    tip = textTooltip();
    chart = makeFlamegraph()
      .width(Math.max(el.chart.clientWidth, 320))
      .cellHeight(18)
      .minFrameSize(1)
      .transitionDuration(150)
      .tooltip(tip)
      .label((d) => describe(d).replace(/\n/g, " · "))
      .setSearchMatch(matchText)
      .setDetailsElement(el.details)
      .setColorMapper((d) => (d.highlight ? "#e600e6" : d.data.delta === null ? "#c8ccd4" : colour(d.data.delta)))
      .onClick((d) => { state.focus = pathOf(d); writeState(); markZoom(); });
    d3.select(el.chart).datum(tree).call(chart);
  }

  function applyState() {
    if (state.search) chart.search(state.search); else chart.clear();
    const root = d3.select(el.chart).datum();
    const target = findPath(root, state.focus);
    if (target !== root) chart.zoomTo(target);
    state.focus = pathOf(target);
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
    if (!chart) return;
    if (state.search) chart.search(state.search); else chart.clear();
  });
  el.reset.addEventListener("click", () => {
    if (!chart) return;
    chart.resetZoom();
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
  load();
})();
