// The whole-job capture page's evidence: the whole-job report the analysis stored on the group
// (profiles/jobs/report.py): findings first, the straggler explained by what it does
// more, classes of ranks that behave alike, each rank's step-thread states. Until
// every rank has ended there is no verdict, only the reason. Frames link to the
// flamegraph and the sandwich of the rank they were measured on. Untrusted text
// (frame names, rank names, advice) only reaches the page as text.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const el = fd.el;
  const ev = fd.evidence;
  const $ = (id) => document.getElementById(id);
  const RANKS_OPEN = 16; // more ranks than this: the table starts folded (classes say it)
  const REPORT_POLLS = 90; // polls, once every rank has ended, for a report being stored
  const DETECTED = {
    named: "named on the run", collective: "they make collective calls",
    device: "they call the GPU", busiest: "the busiest thread", none: "none found",
  };
  let polls = 0;

  const withQuery = (url, key, frame) => `${url}?${key}=${encodeURIComponent(frame)}`;

  // Links that open `frame` in `rank`'s capture: its flamegraph zoomed there, its sandwich.
  function frameLinks(report, rank, frame) {
    const url = rank && report.urls[rank];
    if (!url) return [];
    return [el("a", { class: "small zoom-link", href: withQuery(url, "frame", frame), title: `${frame} in ${rank}'s flamegraph` }, `flamegraph of ${rank}`), " · ",
      el("a", { class: "small sandwich-link", href: withQuery(url, "sandwich", frame), title: `callers and callees of ${frame} in ${rank}` }, "sandwich")];
  }

  const rankLink = (report, name) => (report.urls[name] ? el("a", { href: report.urls[name] }, name) : el("span", {}, name));

  function findings(report) {
    // A job finding's frames come from the ranks it holds on: open them on the first.
    const links = (frame, f) => frameLinks(report, (f.ranks || [])[0], frame);
    return ev.findingsList(report.findings, links,
      "No finding: no rule's whole 95% interval is past its threshold on the ranks' step threads, and no rank is waited for.");
  }

  function explanationItem(report, straggler, item) {
    const what = item.state ? [ev.label(item.state), " at ", el("code", {}, item.frame)] : ["in ", el("code", {}, item.function || item.frame)];
    return el("li", {}, el("strong", {}, `${straggler.name}: +${item.delta} pts`), ` [${item.interval[0]}, ${item.interval[1]}] `, ...what,
      el("span", { class: "muted small" }, ` — ${item.percent}% of its step, ${item.others_percent}% on the other ranks · `),
      ...frameLinks(report, straggler.name, item.frame),
      // A data_wait item: what the rank's DataLoader workers do meanwhile.
      item.workers ? el("div", { class: "small workers-told" }, ...ev.richText(item.workers.text)) : null);
  }

  function straggler(report) {
    const s = report.straggler;
    if (!s) {
      return el("p", { class: "muted", id: "straggler" }, "No straggler: no rank is waited for beyond noise (every other rank would have to spend more than 10 points more of its step in collectives, over the whole 95% interval).");
    }
    // A hang, not a slow rank: no excess to remove from a step (reports stored before
    // `stuck` was kept on the straggler say so by their finding).
    const stuck = s.stuck || (report.findings || []).some((f) => f.rule === "stuck");
    if (stuck) {
      return el("p", { class: "straggler stuck", id: "straggler" }, el("strong", {}, rankLink(report, s.name), " is where the job is stuck"),
        `: the other ranks wait ${s.others_wait_percent}% of their step in collectives, for it (see the “stuck” finding above). Dump all ranks on the run page to see whether anything moves.`);
    }
    const items = (s.explanation || []).map((item) => explanationItem(report, s, item));
    return el("div", { class: "straggler", id: "straggler" },
      el("p", {}, el("strong", {}, rankLink(report, s.name), " is the straggler"),
        `: the other ranks spend ${s.others_wait_percent}% of their step waiting in collectives, ${s.name} ${s.wait_percent}%. What ${s.name} does more than them:`),
      items.length ? el("ul", { class: "explanation" }, ...items)
        : el("p", { class: "muted" }, "Nothing it does more stands out beyond noise (2 points over the whole 95% interval)."));
  }

  function classes(report) {
    if (!(report.classes || []).length) return el("p", { class: "muted" }, "No rank has samples.");
    return el("ul", { class: "classes", id: "job-classes" }, ...report.classes.map((c) =>
      el("li", { "data-ranks": c.ranks.join(",") }, ev.stateBar(c.states, "small classbar"), el("span", { class: "classlabel" }, ...ev.richText(c.label)))));
  }

  const stateOf = (rank, name) => (rank.states || []).find((s) => s.state === name) || { percent: 0, samples: 0, user_callers: [] };

  function shareCell(rank, name) {
    const s = stateOf(rank, name);
    const top = (s.user_callers || [])[0];
    return el("td", { class: "num", title: top ? `from ${top.frame}` : "" }, ev.pct(s.percent));
  }

  // The largest state other than compute and collective: the rank's other story.
  function otherCell(rank) {
    const other = (rank.states || []).filter((s) => !["compute", "collective"].includes(s.state) && s.samples)
      .sort((a, b) => b.samples - a.samples)[0];
    if (!other) return el("td", { class: "muted" }, "—");
    const top = (other.user_callers || [])[0];
    return el("td", {}, ev.stateKey(other.state), ` ${ev.pct(other.percent)}`, top ? el("span", { class: "muted small" }, " from ", el("code", {}, top.frame)) : null);
  }

  function rankRow(report, rank) {
    const isStraggler = report.straggler && report.straggler.name === rank.name;
    return el("tr", { "data-rank": rank.name, class: isStraggler ? "straggler" : "" },
      el("td", {}, rankLink(report, rank.name), isStraggler ? el("span", { class: "badge verdict-degraded" }, "straggler") : null),
      el("td", { class: "mono small", title: `step threads: ${DETECTED[rank.detected_by] || rank.detected_by}` }, (rank.step_threads || []).join(", ") || "—"),
      el("td", { class: "barcell" }, ev.stateBar(rank.states)),
      shareCell(rank, "compute"), shareCell(rank, "collective"), otherCell(rank),
      samplesCell(rank));
  }

  // Without --idle, the rounds a blocked step thread left no sample in are missing
  // from its bar: "175 of 399 rounds" says how much is not shown.
  function samplesCell(rank) {
    const threads = (rank.step_threads || []).length || 1;
    if (rank.idle_included !== false || !rank.rounds) return el("td", { class: "num muted" }, ev.fmt(rank.samples));
    const rounds = rank.rounds * threads;
    const hidden = Math.max(0, 100 - (100 * rank.samples) / rounds);
    return el("td", { class: "num blocked", title: `recorded without --idle: the step thread${threads > 1 ? "s" : ""} left no sample in ${hidden.toFixed(0)}% of py-spy's rounds (blocked), not in the bar` },
      `${ev.fmt(rank.samples)} of ${ev.fmt(rounds)} rounds`);
  }

  function hiddenNote(report) {
    if (!(report.ranks || []).some((r) => r.idle_included === false)) return null;
    return el("p", { class: "note warn", id: "job-hidden-waits" }, el("strong", {}, "Waits are not visible: "),
      "recorded without --idle, py-spy dropped the samples of blocked threads, so the bars show only the samples it kept (the straggler still counts the rounds without a sample as waiting). Record whole jobs with ",
      el("code", {}, "--idle"), ".");
  }

  function ranks(report) {
    const head = el("tr", {}, ...["rank", "step threads", "states", "compute", "collective", "most of the rest", "samples"].map((h, i) =>
      el("th", { class: [3, 4, 6].includes(i) ? "num" : "" }, h)));
    const table = el("table", { class: "dense ranks-table", id: "job-ranks" }, el("thead", {}, head),
      el("tbody", {}, ...(report.ranks || []).map((rank) => rankRow(report, rank))));
    const more = (report.without_samples_total || 0) - (report.without_samples || []).length;
    const missing = (report.without_samples || []).length
      ? el("p", { class: "muted small" }, "No samples (not in the report): ", ...report.without_samples.flatMap((n, i) => [i ? ", " : "", rankLink(report, n)]), more > 0 ? ` and ${more} more` : "")
      : null;
    // A large job's table holds the ranks of the processes the page shows (its pager).
    const shown = (report.ranks || []).length;
    const total = report.ranks_total == null ? shown : report.ranks_total;
    const title = shown < total ? `Each rank's step threads (${shown} of ${total} ranks with samples: those of the processes shown below)`
      : `Each rank's step threads (${shown} ranks with samples)`;
    return el("details", { class: "rankdetails", open: (report.ranks || []).length <= RANKS_OPEN }, el("summary", {}, title), el("div", { class: "tablewrap" }, table), missing);
  }

  // Each rank's DataLoader workers (its child processes, sampled with --subprocesses):
  // the rank's own, never ranks, and never in its states; their shares are of the
  // workers' own samples (of their time, with --idle).
  function workers(report) {
    const withWorkers = (report.ranks || []).filter((rank) => rank.workers);
    if (!withWorkers.length) return null;
    const plural = (w) => (w.dataloader ? (w.count === 1 ? "DataLoader worker" : "DataLoader workers") : (w.count === 1 ? "child process" : "child processes"));
    const rows = withWorkers.map((rank) => {
      const w = rank.workers;
      const top = (w.functions || []).map((f) => el("li", {}, el("code", {}, f.frame), ` ${ev.pct(f.percent)}`));
      return el("tr", { "data-workers-of": rank.name },
        el("td", {}, rankLink(report, rank.name)),
        el("td", { class: "num", title: `${w.processes_seen} sampled over the window (workers respawned every epoch each count)` }, `${w.count} ${plural(w)}`),
        el("td", {}, top.length ? el("ul", { class: "plain small worker-functions" }, ...top) : el("span", { class: "muted" }, "none of your code")),
        el("td", { class: "num", title: "waiting for work, in torch's worker loop" }, ev.pct(w.outside_percent)),
        el("td", { class: "num", title: "py-spy attaches to a new worker within about a second: workers respawned often are seen less" }, w.sampled_percent == null ? "—" : ev.pct(w.sampled_percent)));
    });
    const head = el("tr", {}, el("th", {}, "rank"), el("th", { class: "num" }, "workers"), el("th", {}, "your functions they are in"), el("th", { class: "num" }, "outside your code"), el("th", { class: "num" }, "of their time sampled"));
    return el("div", { id: "job-workers" }, el("h3", {}, "DataLoader workers of the ranks"),
      el("p", { class: "muted small" }, "Each rank's child processes, sampled with it: shares of the workers' own samples; the rank's states above count the rank alone."),
      el("div", { class: "tablewrap" }, el("table", { class: "dense workers-table" }, el("thead", {}, head), el("tbody", {}, ...rows))));
  }

  function windowNote(report) {
    if (report.same_window) return null;
    const skew = report.start_skew_s == null ? "" : ` (start skew ${report.start_skew_s} s)`;
    return el("p", { class: "note warn", id: "window-note" }, `The ranks did not start sampling within a second of each other${skew}: they sampled different moments, so read the comparison between ranks with care.`);
  }

  function render(report) {
    const box = $("job-report");
    if (!box || !report) return;
    if (!report.ready) {
      const said = report.failed ? `No verdict: ${report.reason}.` : `No verdict yet: ${report.reason}.`;
      box.replaceChildren(el("p", { class: report.failed ? "error" : "muted", id: "report-reason" }, said));
      return;
    }
    if (report.kind === "dump") { fd.groupStacks.render(box, report); return; }
    const key = JSON.stringify(report);
    if (box.dataset.key === key) return; // the live poll redraws only what changed
    box.dataset.key = key;
    box.replaceChildren(...[windowNote(report), hiddenNote(report), el("h3", {}, "Findings"), findings(report), el("h3", {}, "Straggler"), straggler(report),
      el("h3", {}, "Ranks that behave alike"), classes(report), ranks(report), workers(report)].filter(Boolean));
    box.dataset.ready = "1";
  }

  // Once every rank has ended, the report may still be being stored: keep asking a while.
  function awaited(report) {
    return Boolean(report && !report.ready && report.ended && !report.failed && ++polls <= REPORT_POLLS);
  }

  fd.groupEvidence = { render, awaited };
})();
