// The whole-job page's timeline (drawn by timeline.js): one strip per rank, its step
// thread (the first thread named MainThread, else its first) or the thread name picked,
// on the server's clock from /api/groups/<id>/timeline/; ranks without time listed with
// the reason. A window dragged over the strips is the same stretch of time on every
// rank, kept in the URL (`?from=&to=`, seconds since the timeline's start); each rank's
// link opens it on that rank's capture page, in that capture's own seconds.
// A job of more ranks than one answer holds comes a page at a time (`page`): the
// straggler and one rank of each class first, then the others, or one class's ranks
// (`?class=`); the pager asks for the next. Thread and rank names are untrusted: text only.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const tl = fd.timeline;
  const $ = (id) => document.getElementById(id);
  const box = $("group-timeline");
  if (!box || !tl) return;
  const groupData = $("group-data") ? JSON.parse($("group-data").textContent) : {};
  const PENDING = new Set(["queued", "running", "parsing"]);
  const round2 = (s) => Math.round(s * 100) / 100;
  let line = null, chart = null, tries = 0;
  let picked = new URLSearchParams(location.search).get("thread") || "";
  let ranksOffset = 0, ranksClass = "";

  function threadOf(rank) {
    const threads = rank.threads || [];
    if (picked) return threads.find((t) => t.name === picked) || null;
    return threads.find((t) => t.name === "MainThread") || threads[0] || null;
  }

  // The window [from, to) counts seconds from `line.start` on the server's clock. A
  // rank's host clock reads the server's less its offset_s, and its capture page counts
  // seconds from its first sample (stats.time.start, on that host's clock), so there the
  // window starts at line.start + from − offset_s − that first sample. Clipped to the
  // capture; null when nothing of it is left.
  function rankWindow(rank, from, to) {
    const clock = rank.clock;
    if (!clock) return null;
    const shift = line.start - rank.offset_s - clock[0];
    const begin = Math.max(0, round2(from + shift));
    const end = Math.min(round2(clock[1] - clock[0]), round2(to + shift));
    return end - begin >= tl.MIN_WINDOW_S ? [begin, end] : null;
  }

  function rankUrl(rank, window) {
    return `/captures/${rank.capture}/` + (window ? `?from=${window[0]}&to=${window[1]}` : "");
  }

  function rows() {
    return line.ranks.map((rank) => {
      const t = threadOf(rank);
      const thread = t ? `${t.name || "(unnamed)"} (${t.tid})` : `no thread named ${picked}`;
      return {
        label: `${rank.name} · ${t ? t.name || t.tid : "—"}`,
        title: `${rank.name}: ${thread} · its host's clock moved ${rank.offset_s} s`,
        href: rankUrl(rank, chart && chart.selection ? rankWindow(rank, ...chart.selection) : null),
        dominant: t ? t.dominant : [],
        states: t ? t.states : {},
        device: rank.device && rank.device.source !== "host" ? rank.device.util : null,
      };
    });
  }

  // Seconds the timeline covers: to the last rank's last sample, on the server's clock
  // (its buckets, without the ranks' clocks).
  // A page of a larger job spans the job's buckets, the same on every page.
  function span() {
    const ends = line.ranks.filter((r) => r.clock).map((r) => r.clock[1] + r.offset_s - line.start);
    const buckets = ((((line.ranks[0] || {}).threads || [])[0] || {}).dominant || []).length;
    const whole = line.bucket_s * Math.max(1, buckets);
    if (paged()) return Math.max(whole, ...ends);
    return ends.length ? Math.max(...ends) : whole;
  }

  const paged = () => Boolean(line.page && (line.page.total > line.page.limit || ranksClass !== ""));

  function renderPaging() {
    const box = $("group-timeline-paging");
    box.hidden = !paged();
    if (box.hidden) return;
    const at = line.page;
    const select = $("group-timeline-ranks");
    select.replaceChildren(el("option", { value: "" }, "every rank (the straggler and one of each class first)"),
      ...(line.classes || []).map((c, i) => el("option", { value: String(i) }, `class ${i + 1}: ${c.label.replaceAll("\u0060", "")} (${c.ranks} rank${c.ranks === 1 ? "" : "s"})`)));
    select.value = ranksClass;
    const step = (to, text) => el("button", { type: "button", "data-offset": String(to) }, text);
    $("group-timeline-pager").replaceChildren(...[`${at.offset + 1}–${Math.min(at.total, at.offset + at.limit)} of ${at.total}`,
      at.offset > 0 ? step(Math.max(0, at.offset - at.limit), "‹ previous") : null,
      at.next != null ? step(at.next, "next ›") : null].filter(Boolean));
  }

  function timelineUrl() {
    const params = new URLSearchParams();
    if (ranksClass !== "") params.set("class", ranksClass);
    if (ranksOffset) params.set("offset", String(ranksOffset));
    const query = params.toString();
    return `/api/groups/${box.dataset.group}/timeline/` + (query ? `?${query}` : "");
  }

  function renderPicker() {
    const select = $("group-timeline-thread");
    const names = [...new Set(line.ranks.flatMap((r) => (r.threads || []).map((t) => t.name)).filter(Boolean))];
    select.replaceChildren(el("option", { value: "" }, "step thread (MainThread, else its first)"),
      ...names.map((name) => el("option", { value: name }, name)));
    select.value = names.includes(picked) ? picked : "";
    picked = select.value;
  }

  function renderMissing() {
    const list = $("group-timeline-missing");
    list.replaceChildren(...(line.missing || []).map((m) => el("li", {},
      el("a", { href: `/captures/${m.capture}/` }, m.name), `: no timeline (${m.reason})`)));
    list.hidden = !(line.missing || []).length;
  }

  function renderLinks(from, to) {
    const panel = $("group-timeline-window");
    panel.hidden = from === null;
    if (from === null) return;
    $("group-window-title").textContent = `Window ${from.toFixed(2)} s – ${to.toFixed(2)} s (${(to - from).toFixed(2)} s) · ${tl.clock(line.start + from)}–${tl.clock(line.start + to)} on the server's clock. Open it on a rank:`;
    $("group-window-links").replaceChildren(...line.ranks.map((rank) => {
      const window = rankWindow(rank, from, to);
      return el("li", {}, window
        ? el("a", { class: "rank-window-link", href: rankUrl(rank, window), "data-capture": String(rank.capture) },
          `${rank.name}: ${window[0]}–${window[1]} s of its capture`)
        : el("span", { class: "muted" }, `${rank.name}: outside its capture`));
    }));
  }

  function setParam(name, value) {
    const next = new URLSearchParams(location.search);
    if (value) next.set(name, value); else next.delete(name);
    const query = next.toString();
    history.replaceState(null, "", location.pathname + (query ? "?" + query : "") + location.hash);
  }

  function selected(from, to) {
    tl.windowToUrl(from, to);
    chart.update(rows());
    renderLinks(from, to);
  }

  function draw() {
    renderPicker();
    renderPaging();
    renderMissing();
    const options = {
      start: line.start, bucketS: line.bucket_s, span: span(), clockName: "the server's clock",
      onSelect: selected, ariaLabel: "Each rank's state over the whole-job capture; drag to select a window",
    };
    $("group-timeline-toolbar").hidden = !line.ranks.length && !paged();
    if (!line.ranks.length) {
      chart = null; // a page of ranks without time: the next page draws afresh
      box.replaceChildren(el("p", { class: "muted" }, paged() ? "No rank of these has a timeline." : "No rank has a timeline."));
      return;
    }
    if (chart) { chart.update(rows(), options); return; }
    box.replaceChildren();
    chart = new tl.StripChart(box, rows(), options);
    const wanted = tl.windowFromUrl(options.span);
    if (wanted) { chart.select(...wanted); selected(...wanted); }
  }

  // While ranks still sample or are analysed, ask again: their strips arrive as they end.
  function again(pending) {
    if (pending && !groupData.final && tries < 120) { tries += 1; setTimeout(load, 5000); }
  }

  async function load() {
    try { line = await fd.fetchJson(timelineUrl()); }
    catch (err) {
      if (!chart) box.replaceChildren(el("p", { class: err.status === 409 ? "muted" : "error", id: "group-timeline-none" }, `No timeline: ${err.message}.`));
      again(err.status === 409);
      return;
    }
    draw();
    again((line.missing || []).some((m) => PENDING.has(m.reason)));
  }

  $("group-timeline-ranks").addEventListener("change", (event) => {
    ranksClass = event.target.value;
    ranksOffset = 0;
    load();
  });
  $("group-timeline-pager").addEventListener("click", (event) => {
    const to = event.target.dataset.offset;
    if (to == null) return;
    ranksOffset = Number(to);
    load();
  });
  $("group-timeline-thread").addEventListener("change", (event) => {
    picked = event.target.value;
    setParam("thread", picked);
    if (chart) chart.update(rows());
  });
  load();
})();
