// Renders a host check (ssh, py-spy, ptrace, processes) with DOM nodes, never HTML
// strings: command lines and errors come from the profiled machine.
(function () {
  "use strict";
  const el = window.flamedeck.el;
  const badge = (ok, yes, no) => el("span", { class: `badge ${ok ? "verdict-ok" : "verdict-unreliable"}` }, ok ? yes : no);

  function renderCheck(check) {
    if (!check || !Object.keys(check).length) return el("p", { class: "muted" }, "Not checked yet.");
    // A check that stopped early (host not reached, bad host settings) looked at
    // neither py-spy nor ptrace: say "not checked", never "not found".
    const stopped = Boolean(check.cause);
    const unknown = () => el("span", { class: "muted" }, "not checked (the check stopped at the error below)");
    const rows = [
      ["SSH / reach", badge(check.ssh_ok, "ok", "failed")],
      ["py-spy", check.py_spy_version ? el("span", { class: "mono" }, `${check.py_spy_version}${check.py_spy_path ? " · " + check.py_spy_path : ""}`) : stopped ? unknown() : el("span", { class: "error" }, check.install_hint || "not found")],
      ["Native unwinding (--native)", check.py_spy_native == null ? (stopped || !check.py_spy_version ? unknown() : el("span", { class: "muted" }, "not known")) : check.py_spy_native ? badge(true, "yes", "no") : el("span", {}, badge(false, "yes", "no"), " ", el("span", { class: "muted small" }, "this py-spy was built without it: captures drop --native and say so"))],
      ["Can attach (ptrace)", stopped ? unknown() : el("span", {}, badge(check.can_attach, "yes", "no"), " ", el("span", { class: "muted small" },
        [check.uid === 0 ? "root" : check.uid != null ? `uid ${check.uid}` : "", check.ptrace_scope != null ? `ptrace_scope ${check.ptrace_scope}` : "", check.reason || ""].filter(Boolean).join(" · ")))],
    ];
    const table = el("table", { class: "kv" }, ...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, v))));
    const parts = [el("p", {}, badge(check.ok, "ready to profile", "not ready")), table];
    if (check.error) parts.push(errorBox(check.cause, check.error, check.error_detail));
    return el("div", {}, ...parts);
  }

  // The friendly line, with the command's own words (ssh's stderr) collapsed under it.
  function errorBox(cause, message, detail) {
    const box = el("div", { class: "checkerror" }, el("strong", {}, `Error${cause ? " (" + cause + ")" : ""}: `), message);
    if (detail && detail.trim() && detail.trim() !== message.trim()) {
      box.append(el("details", { class: "errordetail" }, el("summary", {}, "what the command said"), el("pre", { class: "mono" }, detail)));
    }
    return box;
  }

  // Processes as trees: a launcher (torchrun) above its ranks, found by parent PID
  // among the listed processes. Returns [{p, depth, children}] depth-first, roots by CPU.
  function processTree(processes) {
    const byPid = new Map(processes.map((p) => [p.pid, { p, children: [] }]));
    const roots = [];
    for (const node of byPid.values()) {
      const parent = byPid.get(node.p.ppid);
      if (parent && parent !== node) parent.children.push(node); else roots.push(node);
    }
    const order = (a, b) => (a.p.rank ?? Infinity) - (b.p.rank ?? Infinity) || (b.p.cpu_percent || 0) - (a.p.cpu_percent || 0) || a.p.pid - b.p.pid;
    const flat = [];
    const walk = (node, depth) => {
      flat.push({ p: node.p, depth, node });
      node.children.sort(order).forEach((child) => walk(child, depth + 1));
    };
    roots.sort(order).forEach((root) => walk(root, 0));
    return flat;
  }

  // Every process of the tree under `node`, the node first.
  function treeMembers(node) {
    return [node.p, ...node.children.flatMap(treeMembers)];
  }

  const num = (value) => (value == null ? "–" : String(value));

  // processes: [{pid,ppid,user,cpu_percent,threads,command,rank,local_rank}];
  // action(proc) builds the last cell; treeAction(members, proc) (optional) adds a
  // button to a process that has children.
  function renderProcesses(processes, action, treeAction) {
    if (!processes || !processes.length) return el("p", { class: "muted" }, "No Python processes seen (run a check).");
    const heads = ["PID", "Rank", "Local", "User", "CPU %", "Threads", "Command", ""];
    return el("table", { class: "dense processes" },
      el("thead", {}, el("tr", {}, ...heads.map((h, i) => el("th", { class: [1, 2, 4, 5].includes(i) ? "num" : "" }, h)))),
      el("tbody", {}, ...processTree(processes).map(({ p, depth, node }) => el("tr", { class: `depth-${Math.min(depth, 4)}${node.children.length ? " has-children" : ""}`, "data-pid": String(p.pid) },
        el("td", { class: "mono pid" }, depth ? "└ " : "", String(p.pid)),
        el("td", { class: "num" }, num(p.rank)), el("td", { class: "num" }, num(p.local_rank)),
        el("td", {}, p.user || ""),
        el("td", { class: "num" }, p.cpu_percent != null ? p.cpu_percent.toFixed(1) : ""),
        el("td", { class: "num" }, p.threads != null ? String(p.threads) : ""),
        el("td", { class: "mono command", title: p.command }, p.command || ""),
        el("td", { class: "capcol" }, action(p), node.children.length && treeAction ? treeAction(treeMembers(node), p) : null)))));
  }

  window.flamedeck.hostChecks = { renderCheck, renderProcesses, processTree, errorBox, el };
})();
