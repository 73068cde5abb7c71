// Renders a host check (ssh, py-spy, ptrace, processes) with DOM nodes, never HTML
// strings: command lines and errors come from the profiled machine.
(function () {
  "use strict";
  const el = window.flamedeck.el;
  const badge = (ok, yes, no) => el("span", { class: `badge ${ok ? "verdict-ok" : "verdict-unreliable"}` }, ok ? yes : no);

  function renderCheck(check) {
    if (!check || !Object.keys(check).length) return el("p", { class: "muted" }, "Not checked yet.");
    const rows = [
      ["SSH / reach", badge(check.ssh_ok, "ok", "failed")],
      ["py-spy", check.py_spy_version ? el("span", { class: "mono" }, `${check.py_spy_version}${check.py_spy_path ? " · " + check.py_spy_path : ""}`) : el("span", { class: "error" }, check.install_hint || "not found")],
      ["Can attach (ptrace)", el("span", {}, badge(check.can_attach, "yes", "no"), " ", el("span", { class: "muted small" },
        [check.uid === 0 ? "root" : check.uid != null ? `uid ${check.uid}` : "", check.ptrace_scope != null ? `ptrace_scope ${check.ptrace_scope}` : "", check.reason || ""].filter(Boolean).join(" · ")))],
    ];
    const table = el("table", { class: "kv" }, ...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))));
    const parts = [el("p", {}, badge(check.ok, "ready to profile", "not ready")), table];
    if (check.error) parts.push(el("div", { class: "checkerror" }, el("strong", {}, `Error${check.cause ? " (" + check.cause + ")" : ""}: `), check.error));
    return el("div", {}, ...parts);
  }

  // processes: [{pid,user,cpu_percent,threads,command}]; action(proc) builds the last cell.
  function renderProcesses(processes, action) {
    if (!processes || !processes.length) return el("p", { class: "muted" }, "No Python processes seen (run a check).");
    const sorted = [...processes].sort((a, b) => (b.cpu_percent || 0) - (a.cpu_percent || 0));
    return el("table", { class: "dense processes" },
      el("thead", {}, el("tr", {}, ...["PID", "User", "CPU %", "Threads", "Command", ""].map((h, i) => el("th", { class: i && i < 4 && i !== 1 ? "num" : "" }, h)))),
      el("tbody", {}, ...sorted.map((p) => el("tr", {},
        el("td", { class: "mono" }, String(p.pid)), el("td", {}, p.user || ""),
        el("td", { class: "num" }, p.cpu_percent != null ? p.cpu_percent.toFixed(1) : ""),
        el("td", { class: "num" }, p.threads != null ? String(p.threads) : ""),
        el("td", { class: "mono command", title: p.command }, p.command || ""),
        el("td", { class: "capcol" }, action(p))))));
  }

  window.flamedeck.hostChecks = { renderCheck, renderProcesses, el };
})();
