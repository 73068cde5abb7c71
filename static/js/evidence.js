// The evidence a capture or a whole job stored at analysis time, drawn the same way
// on the capture, whole-job capture and compare pages: thread states as stacked bars and tables,
// findings as a ranked list, backticked text as code. Nothing here classifies a
// sample: it arranges stored numbers. Frame names and advice are untrusted text (they
// come from the profiled program): they only reach the page as text nodes and
// attribute values, never as markup.
(function () {
  "use strict";
  const el = window.flamedeck.el;
  const pct = (n, digits = 1) => `${Number(n ?? 0).toFixed(digits)}%`;
  const fmt = (n) => Number(n ?? 0).toLocaleString("en-US");

  // The vocabulary in its order (profiles/pyspy/rules/state_rules.py), with docs/states.md's words.
  const STATES = [
    ["compute", "compute", "running Python or a native op"],
    ["gpu_launch", "GPU launch", "enqueueing GPU work"],
    ["gpu_sync", "GPU sync", "waiting for the GPU explicitly"],
    ["host_sync", "host sync", "reading a device value on the host (.item(), .cpu())"],
    ["allocator", "allocator", "allocating or freeing memory"],
    ["collective", "collective", "in a collective or waiting for one"],
    ["data_wait", "data wait", "waiting for input"],
    ["backpressure", "backpressure", "blocked handing output on (a full queue)"],
    ["gil", "GIL wait", "waiting for the GIL"],
    ["idle", "idle", "sleeping or blocked with nothing more specific"],
    ["unknown", "unknown", "in an unsymbolised address with nothing above it that says more"],
  ];
  const LABEL = Object.fromEntries(STATES.map(([s, label]) => [s, label]));
  const MEANING = Object.fromEntries(STATES.map(([s, , meaning]) => [s, meaning]));
  const label = (state) => LABEL[state] || state;
  const stateClass = (state) => `st-${String(state).replace(/[^a-z_]/g, "")}`;

  // "`train.py:98` (in `all_reduce_grads`)": backticked parts become <code>, as text.
  // An engine sentence with its `backticked` parts as <code>; every part goes in as text
  // (never HTML), and an unpaired backtick stays as it is.
  function richText(text) {
    const parts = String(text ?? "").split("`");
    if (parts.length % 2 === 0) parts.splice(-2, 2, `${parts[parts.length - 2]}\`${parts[parts.length - 1]}`);
    return parts.map((part, i) => (i % 2 ? el("code", {}, part) : part));
  }

  function byOrder(states) {
    const order = Object.fromEntries(STATES.map(([s], i) => [s, i]));
    return [...(states || [])].sort((a, b) => (order[a.state] ?? 99) - (order[b.state] ?? 99));
  }

  // A stacked bar of states (percent of the whole); its title lists the shares.
  function stateBar(states, cls = "") {
    const shown = byOrder(states).filter((s) => s.percent > 0);
    const title = shown.map((s) => `${label(s.state)} ${pct(s.percent)}`).join(" · ") || "no samples";
    const bar = el("div", { class: `statebar ${cls}`, title, role: "img", "aria-label": title });
    for (const s of shown) {
      const seg = el("span", { class: `seg ${stateClass(s.state)}`, "data-state": s.state });
      seg.style.width = `${Math.min(100, s.percent)}%`;
      bar.append(seg);
    }
    return bar;
  }

  // "compute 47.1% · host sync 27.3% · collective 23.6%": the largest states first.
  function topStates(states, count = 4) {
    return [...(states || [])].filter((s) => s.percent > 0).sort((a, b) => b.percent - a.percent).slice(0, count)
      .map((s) => `${label(s.state)} ${pct(s.percent)}`).join(" · ");
  }

  // The headline: the step threads' states (what the findings judge, stored at
  // analysis time) above every thread's; with a thread filter, the chosen threads'.
  function headline(stats, filtered) {
    const step = stats.step_threads;
    const line = (who, title, states, cls) => el("div", { class: `stateline ${cls}` },
      el("span", { class: "statewho", title }, who), stateBar(states, "big"), el("span", { class: "statetop small" }, topStates(states, 3)));
    const lines = [];
    if (step && step.states && step.samples && !filtered && (stats.threads || []).length > 1) {
      const who = `step thread${step.names.length === 1 ? "" : "s"}: ${step.names.join(", ")}`;
      lines.push(line(who, "the threads the findings judge: those making collective calls, else GPU calls, else the busiest (or named on the run)", step.states, "stepline"));
    }
    lines.push(line(filtered ? "chosen threads" : "all threads", "every sample of these threads, in exactly one state", stats.states, "allline"));
    return el("div", { class: "stateheadline" }, ...lines);
  }

  function stateKey(state) {
    return el("span", { class: "statekey", title: MEANING[state] || "" },
      el("span", { class: `key ${stateClass(state)}` }), label(state));
  }

  const stepTids = (stats) => new Set(((stats.step_threads || {}).tids || []).map(String));
  const stepMark = () => el("span", { class: "badge stepmark", title: "a step thread: the findings judge these threads" }, "step");

  // The threads a state's samples come from, most first: "trainer 98%, loader 2%".
  function stateThreads(state, stats, samples) {
    const step = stepTids(stats);
    const rows = (stats.threads || []).map((t) => [t, ((t.states || []).find((s) => s.state === state) || {}).samples || 0])
      .filter(([, n]) => n).sort((a, b) => b[1] - a[1]).slice(0, 3);
    return el("td", { class: "statethreads small" }, ...rows.flatMap(([t, n], i) => [i ? ", " : "",
      el("span", { class: "threadname" }, t.name || String(t.tid)), step.has(String(t.tid)) ? stepMark() : "", ` ${Math.round((100 * n) / samples)}%`]));
  }

  // The capture's states: one row per state with samples (unknown always), its
  // share, the top call site of the user's code (zooms the flamegraph), its threads.
  function statesTable(stats, callerButton, filtered) {
    const stepStates = !filtered && (stats.threads || []).length > 1 && (stats.step_threads || {}).states;
    const stepShare = (state) => ((stepStates || []).find((s) => s.state === state) || { percent: 0 }).percent;
    const rows = byOrder(stats.states).filter((s) => s.samples || s.state === "unknown").map((s) => {
      const top = (s.user_callers || [])[0];
      const from = top && s.samples
        ? el("span", { class: "statefrom" }, el("span", { class: "muted" }, "from "), callerButton(top.frame), el("span", { class: "muted small" }, ` ${Math.round((100 * top.samples) / s.samples)}% of it`))
        : el("span", { class: "muted small" }, s.samples ? "(no frame of your code on these stacks)" : "");
      return el("tr", { "data-state": s.state, class: s.samples ? "" : "zero" },
        el("td", {}, stateKey(s.state)),
        stepStates ? el("td", { class: `num stepshare${stepShare(s.state) ? "" : " muted"}` }, pct(stepShare(s.state))) : null,
        el("td", { class: "num" }, pct(s.percent)),
        el("td", { class: "num muted" }, fmt(s.samples)),
        el("td", { class: "statecallers" }, from),
        s.samples ? stateThreads(s.state, stats, s.samples) : el("td", {}));
    });
    return el("table", { class: "dense states-table" },
      el("thead", {}, el("tr", {}, ...[["State"], ...(stepStates ? [["Step thread", "num"]] : []), ["All threads", "num"], ["Samples", "num"], ["Top call site of your code"], ["Threads"]]
        .map(([h, c]) => el("th", { class: c || "" }, h)))),
      el("tbody", {}, ...rows));
  }

  // Without --idle py-spy drops the samples of blocked threads: say which threads
  // were blocked for how much of the capture (100 - active %), so the absent waits
  // are not read as "no wait".
  function hiddenWaits(stats) {
    if (stats.idle_included !== false) return null;
    const blocked = (stats.threads || []).filter((t) => t.active_percent != null && 100 - t.active_percent >= 5)
      .sort((a, b) => a.active_percent - b.active_percent).slice(0, 6);
    const known = (stats.threads || []).some((t) => t.active_percent != null);
    const who = blocked.map((t, i) => [i ? ", " : "", el("strong", {}, t.name || String(t.tid)), ` ${pct(100 - t.active_percent, 0)}`]).flat();
    return el("p", { class: "note warn", id: "hidden-waits" }, el("strong", {}, "Waits are not visible: "),
      "recorded without --idle, py-spy dropped the samples of threads it found blocked. ",
      ...(blocked.length ? ["Blocked (no sample) for this share of the capture: ", ...who, ". Their waits are not in the states above. "]
        : known ? ["No thread was blocked for more than 5% of the capture. "] : ["How long each thread was blocked is not known (py-spy's log is missing). "]),
      "Record with ", el("code", {}, "--idle"), " to see what they waited for.");
  }

  function findingFigures(f) {
    if (f.severity === "info") return null;
    const [low, high] = f.interval || [f.value, f.value];
    const interval = low !== high ? ` [${low}, ${high}]` : "";
    return el("span", { class: "findingvalue", title: "measured value with its 95% interval; reported only when the whole interval is past the threshold" },
      `${f.value}%${interval}`, el("span", { class: "muted" }, ` · threshold ${f.threshold}%`));
  }

  // findings: the stored list, most important first. links(frame, finding) gives the
  // nodes that open a frame (flamegraph zoom, sandwich), or null.
  function findingsList(findings, links, empty) {
    if (!findings || !findings.length) return el("p", { class: "muted nofindings" }, empty);
    return el("ol", { class: "findings" }, ...findings.map((f) => {
      const frames = (f.frames || []).map((frame) => el("li", {}, el("code", { class: "framename", title: frame }, frame), " ", ...[].concat(links(frame, f) || [])));
      return el("li", { class: `finding sev-${f.severity}`, "data-rule": f.rule },
        el("div", { class: "findinghead" },
          el("span", { class: `badge sev-${f.severity}` }, f.severity), " ",
          el("strong", { class: "findingtitle" }, ...richText(f.title)), " ", findingFigures(f),
          f.ranks && f.ranks.length ? el("span", { class: "muted small findingranks" }, ` · on ${f.ranks.join(", ")}`) : null),
        el("p", { class: "advice" }, ...richText(f.advice)),
        frames.length ? el("ul", { class: "findingframes small" }, ...frames) : null);
    }));
  }

  // Share of the sampling rounds the thread gave a sample in: without --idle the rest
  // is time it was blocked (not in its states); with --idle, time it did not exist.
  function activeCell(thread, idle) {
    const active = thread.active_percent;
    if (active == null) return el("td", { class: "num muted", title: "py-spy's rounds are not known (no log)" }, "—");
    const why = idle === false ? `sampled in ${active}% of py-spy's rounds: blocked (no sample) the other ${(100 - active).toFixed(1)}%`
      : `present in ${active}% of py-spy's rounds`;
    return el("td", { class: `num${idle === false && active < 95 ? " blocked" : ""}`, title: why }, `${Number(active).toFixed(0)}%`);
  }

  // A capture's findings: the rules judged the step threads of the whole capture. Frame
  // links carry the capture page's classes (frame-link zooms, sandwich-link opens it).
  function captureFindings(stats) {
    const links = (frame) => [
      el("button", { type: "button", class: "linklike frame-link small", "data-frame": frame, title: `Zoom the flamegraph to ${frame}` }, "flamegraph"), " · ",
      el("button", { type: "button", class: "linklike sandwich-link small", "data-frame": frame, title: `Callers and callees of ${frame}` }, "sandwich")];
    if (!("findings" in stats)) return el("p", { class: "muted" }, "This capture was analysed before findings existed: re-analyse it to see them.");
    return findingsList(stats.findings, links, "No finding: no rule's whole 95% interval is past its threshold on the step threads.");
  }

  window.flamedeck.evidence = { STATES, label, stateClass, stateBar, stateKey, statesTable, hiddenWaits, findingsList, richText, pct, fmt, stepTids, stepMark, headline, topStates, activeCell, captureFindings };
})();
