// A whole-job dump ("Dump all ranks") on the group page: the verdict in one sentence,
// the classes of ranks drawn as one merged prefix tree of their step threads' call
// paths (rank counts on the nodes, the odd ranks' path marked), the classes, the ranks
// with no dump and why, and each rank's raw dumps one click away. Every text from the
// server (frame names, errors) goes in as text.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const TITLES = { stuck: "Stuck", progressing: "Progressing", unclear: "Unclear" };
  const SHOWN_LINKS = 32;

  function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

  // Classes share their outer frames: merge their paths into one tree, counting ranks.
  function prefixTree(classes, odd) {
    // A node is marked odd when only odd ranks pass through it: the path where the
    // odd ranks part from the others.
    const fresh = (name) => ({ name, ranks: 0, oddRanks: 0, children: new Map() });
    const root = fresh("all ranks");
    for (const cls of classes) {
      const oddHere = cls.ranks.filter((r) => odd.has(r)).length;
      let node = root;
      for (const frame of [null, ...cls.frames]) {
        if (frame !== null) {
          if (!node.children.has(frame)) node.children.set(frame, fresh(frame));
          node = node.children.get(frame);
        }
        node.ranks += cls.ranks.length;
        node.oddRanks += oddHere;
        node.odd = node.oddRanks > 0 && node.oddRanks === node.ranks;
      }
      node.leaf = cls;
    }
    return root;
  }

  // A chain of frames that every rank below shares is drawn as one node (its frames
  // listed), so a 40-frame path with one branch reads as three lines, not forty.
  function drawNode(node) {
    const frames = [node.name];
    while (node.children.size === 1 && !node.leaf) {
      const [only] = node.children.values();
      if (only.ranks !== node.ranks) break;
      node = only;
      frames.push(node.name);
    }
    const head = el("div", { class: `stack-node${node.odd ? " odd" : ""}`, "data-ranks": String(node.ranks) },
      el("span", { class: "badge stack-count" }, plural(node.ranks, "rank")), " ",
      el("span", { class: "mono stack-frames" }, frames.length > 3 ? `${frames[0]} → … ${frames.length - 2} frames … → ${frames[frames.length - 1]}` : frames.join(" → ")),
      node.leaf ? el("span", { class: "muted small" }, ` (${node.leaf.state}${node.leaf.moving ? ", moving" : ", not moving"})`) : null);
    if (frames.length > 3) head.title = frames.join("\n");
    const kids = [...node.children.values()].sort((a, b) => b.ranks - a.ranks);
    return el("li", {}, head, kids.length ? el("ul", {}, ...kids.map(drawNode)) : null);
  }

  function rankLinks(names, urls) {
    const links = names.slice(0, SHOWN_LINKS).flatMap((name, i) => [i ? ", " : "", urls[name] ? el("a", { href: urls[name] }, name) : name]);
    if (names.length > SHOWN_LINKS) links.push(` and ${names.length - SHOWN_LINKS} more`);
    return links;
  }

  function classRows(stacks, urls, odd) {
    return el("table", { class: "dense stack-classes", id: "stack-classes" },
      el("thead", {}, el("tr", {}, el("th", {}, "ranks"), el("th", {}, "stands in"), el("th", {}, "state"), el("th", {}, "moving"), el("th", {}, "thread"))),
      el("tbody", {}, ...stacks.classes.map((cls) => el("tr", { class: cls.ranks.some((r) => odd.has(r)) ? "outlier" : "" },
        el("td", {}, ...rankLinks(cls.ranks, urls)),
        el("td", { class: "mono" }, cls.user_frame || (cls.frames[cls.frames.length - 1] || "—"), ...frameworkNote(cls.framework_frame)),
        el("td", {}, cls.state), el("td", {}, cls.moving ? "yes" : "no"), el("td", {}, cls.thread)))));
  }

  // The framework's step the class waits or works in (`framework_frame`), beside the
  // user's frame: "in Tensor.backward (DDP backward)". Untrusted text: nodes, never HTML.
  function frameworkNote(frame) {
    if (!frame || !frame.function) return [];
    const where = frame.user_inside ? "called from " : "in ";
    return [el("br"), el("span", { class: "stack-framework muted" }, where, el("code", {}, frame.function), frame.phase ? ` (${frame.phase})` : "")];
  }

  function failedList(stacks) {
    if (!stacks.failed || !stacks.failed.length) return null;
    return el("ul", { class: "stack-failed", id: "stack-failed" }, ...stacks.failed.map((f) =>
      el("li", {}, el("strong", {}, `${f.rank}: no dump`), f.cause ? ` (${f.cause})` : "", `: ${f.error || "no reason was recorded"}`)));
  }

  function render(box, report) {
    const key = JSON.stringify(report);
    if (box.dataset.key === key) return;
    box.dataset.key = key;
    const stacks = report.stacks || {};
    const verdict = stacks.verdict || { kind: "unclear", odd: [], explanation: "no rank could be dumped" };
    const odd = new Set(verdict.odd || []);
    const classes = stacks.classes || [];
    const parts = [
      el("p", { class: `stack-verdict stack-${verdict.kind}`, id: "stacks-verdict", "data-kind": verdict.kind },
        el("strong", {}, `${TITLES[verdict.kind] || verdict.kind}: `), ...fd.evidence.richText(verdict.explanation)),
      el("p", { class: "muted small" }, `${plural(report.repeat, "dump")} of every rank, ${report.interval} s apart, with py-spy dump; a class is the ranks whose step thread stands at the same call path.`),
      failedList(stacks),
      el("h3", {}, "Where the ranks stand"),
      classes.length ? el("ul", { class: "stack-tree", id: "stack-tree" }, drawNode(prefixTree(classes, odd))) : el("p", { class: "muted" }, "No rank's stacks could be read."),
      el("h3", {}, "Classes of ranks"),
      classes.length ? classRows(stacks, report.urls || {}, odd) : null,
      el("details", { class: "stack-dumps" }, el("summary", {}, "Each rank's raw dumps"),
        el("p", {}, ...rankLinks(Object.keys(report.urls || {}), report.urls || {}))),
    ];
    box.replaceChildren(...parts.filter(Boolean));
    box.dataset.ready = "1";
  }

  fd.groupStacks = { render, prefixTree };
})();
