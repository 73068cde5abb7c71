// Host page: last check, "Test connection", and the live process list with a
// capture button per process.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const { renderCheck, renderProcesses, el } = fd.hostChecks;
  const data = document.getElementById("host-data").dataset;
  const canLaunch = fd.launcher && fd.launcher.context.canLaunch;

  function captureCell(p) {
    if (!canLaunch) return el("span", { class: "muted small" }, "");
    const span = el("span", { class: "capture-launch", "data-host": data.host, "data-pid": String(p.pid), "data-label": `pid ${p.pid}` });
    fd.launcher.mount(span);
    return span;
  }

  // "Attach tree…": the launcher's ranks (those with a RANK; all of the tree when
  // none has one) preselected, each with a role, to a new or existing run.
  const dialog = document.getElementById("attach-dialog");

  function roleFor(p) {
    if (p.rank != null) return `rank-${p.rank}`;
    return "";
  }

  function openAttach(members, root) {
    const ranked = members.some((p) => p.rank != null);
    const rows = members.map((p) => el("tr", {},
      el("td", {}, el("input", { type: "checkbox", value: String(p.pid), "aria-label": `attach ${p.pid}`, checked: ranked ? p.rank != null : true })),
      el("td", { class: "num mono" }, String(p.pid)),
      el("td", {}, el("input", { type: "text", name: `role_${p.pid}`, value: roleFor(p) || (p === root ? "launcher" : ""), maxlength: 100 })),
      el("td", { class: "mono command", title: p.command }, p.command || "")));
    document.getElementById("attach-rows").replaceChildren(...rows);
    const script = (root.command || "").split(/\s+/).find((w) => /\.py$/.test(w)) || "job";
    document.getElementById("attach-new-run").value = `${script.split("/").pop()} on ${data.hostName}`;
    dialog.showModal();
  }

  function treeCell(members, root) {
    if (!dialog) return null;
    return el("button", { type: "button", class: "attach-tree", title: "Attach this launcher's processes to a run", onclick: () => openAttach(members, root) }, `Attach tree (${members.length})…`);
  }

  if (dialog) {
    document.getElementById("attach-cancel").addEventListener("click", () => dialog.close());
    document.getElementById("attach-tree-form").addEventListener("submit", () => {
      const picked = [...document.querySelectorAll("#attach-rows input[type=checkbox]:checked")].map((box) => box.value);
      document.getElementById("attach-pids").value = picked.join(" ");
    });
  }

  function show(check) {
    document.getElementById("check-result").replaceChildren(renderCheck(check));
    document.getElementById("process-list").replaceChildren(renderProcesses(check.processes, captureCell, treeCell));
  }

  async function runCheck(button) {
    button.disabled = true;
    button.textContent = "Testing…";
    try {
      show(await fd.fetchJson(data.checkUrl, { method: "POST" }));
      document.getElementById("check-when").textContent = "just now";
    } catch (err) {
      document.getElementById("check-result").replaceChildren(el("p", { class: "error" }, `Check failed: ${err.message}`));
    } finally {
      button.disabled = false;
      button.textContent = "Test connection";
    }
  }

  show(JSON.parse(document.getElementById("host-check").textContent));
  const button = document.getElementById("check-button");
  if (button) button.addEventListener("click", () => runCheck(button));
})();
