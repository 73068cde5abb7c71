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

  function show(check) {
    document.getElementById("check-result").replaceChildren(renderCheck(check));
    document.getElementById("process-list").replaceChildren(renderProcesses(check.processes, captureCell));
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
