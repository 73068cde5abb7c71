// A d3-flame-graph wrapper: click to zoom, substring search with the matches' share,
// reset, flame/icicle, focus by frame name or root-to-frame path, and a tooltip
// built with textContent (frame names and a node's recorded `path` are untrusted: they
// come from the profiled program). d3-flame-graph's own labels use .text(); its default tooltip can use
// innerHTML, so it is replaced here.
(function () {
  "use strict";
  const fmt = (n) => Number(n).toLocaleString("en-US");
  const pct = (part, whole) => (whole ? (100 * part) / whole : 0);

  function samplesLine(d) {
    const root = d.ancestors().pop();
    const total = root.originalValue || root.value || 1;
    const value = d.data.value;
    const parent = d.parent ? d.parent.data.value : value;
    return `${fmt(value)} samples · ${pct(value, total).toFixed(2)}% of all · ${pct(value, parent).toFixed(1)}% of caller`;
  }

  // describe(d) gives the figures under the frame name (plain text, may hold newlines).
  function safeTooltip(describe) {
    let box = null;
    function tip() {
      box = document.createElement("div");
      box.className = "fg-tip";
      box.setAttribute("role", "tooltip");
      box.hidden = true;
      document.body.append(box);
    }
    tip.show = function (event, d) {
      const frame = document.createElement("div");
      frame.className = "fg-tip-frame";
      frame.textContent = d.data.name;
      const figures = document.createElement("div");
      figures.className = "fg-tip-figures";
      figures.textContent = describe(d);
      // The file the capture recorded, where the name shows py-spy's short one.
      const path = typeof d.data.path === "string" && d.data.path ? document.createElement("div") : null;
      if (path) {
        path.className = "fg-tip-path";
        path.textContent = d.data.path;
      }
      box.replaceChildren(...[frame, path, figures].filter(Boolean));
      box.hidden = false;
      const left = Math.min(event.pageX + 12, window.scrollX + window.innerWidth - box.offsetWidth - 8);
      box.style.left = `${Math.max(4, left)}px`;
      box.style.top = `${event.pageY + 14}px`;
      return tip;
    };
    tip.hide = function () { if (box) box.hidden = true; return tip; };
    tip.destroy = function () { if (box) box.remove(); };
    return tip;
  }

  function pathOf(node) {
    return node.ancestors().reverse().slice(1).map((n) => n.data.name);
  }

  // options: onSearch(result), onZoom(path, node), inverted, describe(d) for the
  // tooltip's figures, colorMapper(d, defaultColour) for frame colours, label(d) for
  // the library's title text.
  function FlameView(container, options = {}) {
    this.container = container;
    this.options = options;
    this.chart = null;
    this.inverted = !!options.inverted;
    this.zoomed = null;
  }

  FlameView.prototype.render = function (tree) {
    if (this.chart) this.chart.destroy();
    this.container.replaceChildren();
    const self = this;
    const chart = flamegraph.default()
      .width(Math.max(320, this.container.clientWidth))
      .cellHeight(18)
      .transitionDuration(250)
      .minFrameSize(1)
      .inverted(this.inverted)
      .selfValue(false)
      .tooltip(safeTooltip(this.options.describe || samplesLine))
      .setSearchMatch((d, term) => !!term && typeof d.data.name === "string" &&
        d.data.name.toLowerCase().includes(term.toLowerCase()))
      .setSearchHandler((results, sum, total) => {
        self.lastSearch = { matches: results.length, samples: sum, percent: pct(sum, total) };
        if (self.options.onSearch) self.options.onSearch(self.lastSearch);
      })
      .setDetailsHandler(() => {})
      .onClick((d) => {
        self.zoomed = d.depth ? d : null;
        if (self.options.onZoom) self.options.onZoom(self.zoomed ? pathOf(self.zoomed) : null, self.zoomed);
      });
    if (this.options.colorMapper) chart.setColorMapper(this.options.colorMapper);
    if (this.options.label) chart.label(this.options.label);
    this.chart = chart;
    d3.select(this.container).datum(tree).call(chart);
    this.root = d3.select(this.container).datum();
  };

  FlameView.prototype.search = function (term) {
    if (!this.chart) return null;
    if (!term) { this.chart.clear(); this.lastSearch = null; if (this.options.onSearch) this.options.onSearch(null); return null; }
    this.chart.search(term);
    return this.lastSearch;
  };

  FlameView.prototype.reset = function () {
    if (this.chart) this.chart.resetZoom();
  };

  FlameView.prototype.setInverted = function (inverted) {
    this.inverted = inverted;
    if (this.chart) this.chart.inverted(inverted).update();
  };

  FlameView.prototype.resize = function () {
    if (this.chart) this.chart.width(Math.max(320, this.container.clientWidth)).update();
  };

  FlameView.prototype.zoomTo = function (node) {
    if (node) this.chart.zoomTo(node);
    return node;
  };

  // The node at a root-to-frame path of names (as kept in the URL), or null.
  FlameView.prototype.focusPath = function (path) {
    let node = this.root;
    for (const name of path || []) {
      node = (node.children || []).find((c) => c.data.name === name);
      if (!node) return null;
    }
    return node === this.root ? null : this.zoomTo(node);
  };

  // The heaviest node with exactly this frame name (tables list frames, not paths).
  FlameView.prototype.focusFrame = function (name) {
    let best = null;
    this.root.each((n) => {
      if (n.data.name === name && (!best || n.data.value > best.data.value)) best = n;
    });
    return this.zoomTo(best);
  };

  FlameView.pathOf = pathOf;
  window.flamedeck.FlameView = FlameView;
})();
