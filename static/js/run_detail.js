// Run page: pick a process to attach from a host's live process list.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const { renderProcesses, el } = fd.hostChecks;
  const data = document.getElementById("run-data").dataset;
  const button = document.getElementById("list-processes");
  if (!button) return;
  const form = document.getElementById("attach-form");
  const out = document.getElementById("host-processes");

  function useCell(p) {
    return el("button", { type: "button", onclick: () => {
      form.elements.pid.value = p.pid;
      form.elements.role.focus();
    } }, "Use");
  }

  button.addEventListener("click", async () => {
    const host = form.elements.host.value;
    if (!host) { out.replaceChildren(el("p", { class: "error" }, "Pick a host first.")); return; }
    button.disabled = true;
    out.replaceChildren(el("p", { class: "muted" }, "Asking the host for its Python processes…"));
    try {
      const check = await fd.fetchJson(data.checkUrl.replace("/0/", `/${host}/`), { method: "POST" });
      const parts = [renderProcesses(check.processes, useCell)];
      if (check.error) parts.unshift(el("p", { class: "error" }, check.error));
      out.replaceChildren(...parts);
    } catch (err) {
      out.replaceChildren(el("p", { class: "error" }, `Could not list processes: ${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
  // Captures finishing on this page show up in the table on the next load.
  document.addEventListener("flamedeck:capture-final", () => {
    document.getElementById("captures")?.classList.add("stale");
  });

  // One click captures every process of the run with the same settings (a group).
  const captureAll = document.getElementById("capture-all");
  captureAll?.addEventListener("click", async () => {
    captureAll.disabled = true;
    try {
      const group = await fd.fetchJson(captureAll.dataset.url, {
        method: "POST", headers: { "Content-Type": "application/json" }, body: "{}",
      });
      window.location.assign(`/groups/${group.id}/`);
    } catch (err) {
      captureAll.disabled = false;
      captureAll.after(el("span", { class: "error" }, ` Could not start: ${err.message}`));
    }
  });
})();
