// Run page: pick a process to attach from a host's live process list.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const { renderProcesses, el } = fd.hostChecks;
  const data = document.getElementById("run-data").dataset;
  const button = document.getElementById("list-processes");
  const form = document.getElementById("attach-form");
  const out = document.getElementById("host-processes");

  function useCell(p) {
    return el("button", { type: "button", onclick: () => {
      form.elements.pid.value = p.pid;
      form.elements.role.focus();
    } }, "Use");
  }

  button?.addEventListener("click", async () => {
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
  // Liveness: ask the hosts (one bounded `ps` each) and mark exited processes.
  function aliveMark(p) {
    const when = p.checked_at ? ` (checked ${new Date(p.checked_at).toLocaleTimeString()})` : "";
    if (p.alive === true) return el("span", { class: "badge verdict-ok", title: `running${when}` }, "running");
    if (p.alive === false) return el("span", { class: "badge status-failed", title: `gone${when}; Capture all skips it` }, "exited");
    return el("span", { class: "muted small", title: "not checked yet, or the host could not be asked" }, "unknown");
  }

  async function refreshAlive() {
    const note = document.getElementById("alive-note");
    const body = await fd.fetchJson(data.aliveUrl, { method: "POST" });
    for (const p of body.processes) {
      const row = document.querySelector(`tr[data-process="${p.id}"]`);
      if (!row || p.replaced_at) continue; // replaced by a later launch: the page says so
      row.classList.toggle("exited", p.alive === false);
      row.querySelector("[data-cell=alive]").replaceChildren(aliveMark(p));
      // An exited process offers no capture: py-spy would only find no such PID.
      if (p.alive === false) row.querySelector("[data-cell=capture]").replaceChildren(el("span", { class: "muted small" }, "exited: nothing to capture"));
    }
    const badge = document.getElementById("run-status");
    if (body.run_status && badge && !badge.classList.contains(`run-${body.run_status}`)) {
      badge.className = `badge run-${body.run_status}`;
      badge.textContent = body.run_status.charAt(0).toUpperCase() + body.run_status.slice(1);
    }
    const errors = body.errors.map((e) => `${e.host}: ${e.error}`);
    note.textContent = errors.length ? `Could not check every host — ${errors.join("; ")}` : "";
    return body;
  }

  const aliveRefresh = document.querySelector("tr[data-process]") ? refreshAlive() : Promise.resolve(null);
  aliveRefresh.catch((err) => { document.getElementById("alive-note").textContent = `Could not check the processes: ${err.message}`; });

  // "Capture all" asks first: the same controls as one capture, remembered per run,
  // and what it will touch.
  const captureAll = document.getElementById("capture-all");
  const dataNode = document.getElementById("capture-all-data");
  if (!captureAll || !dataNode) return;
  const ctx = JSON.parse(dataNode.textContent);

  // "Dump all ranks": the first button to press when a job hangs, so it asks nothing.
  const dumpAll = document.getElementById("dump-all");
  if (dumpAll) {
    dumpAll.addEventListener("click", async () => {
      dumpAll.disabled = true;
      const note = document.getElementById("alive-note");
      try {
        const body = JSON.stringify({ kind: "dump", repeat: 3, interval: 1 });
        const group = await fd.fetchJson(ctx.captureUrl, { method: "POST", headers: { "Content-Type": "application/json" }, body });
        window.location.assign(`/groups/${group.id}/`);
      } catch (err) {
        note.textContent = `Could not dump the ranks: ${err.message}`;
        dumpAll.disabled = false;
      }
    });
  }
  const dialog = document.getElementById("capture-all-dialog");
  const dialogForm = document.getElementById("capture-all-form");
  const problem = document.getElementById("capture-all-error");
  let lastPlan = ctx.plan;

  function showPlan(plan) {
    const hosts = `${plan.hosts} host${plan.hosts === 1 ? "" : "s"}`;
    document.getElementById("capture-all-plan").textContent = plan.processes
      ? `Will capture ${plan.processes} process${plan.processes === 1 ? "" : "es"} on ${hosts}.`
      : "No running process to capture: every process of this run has exited.";
    document.getElementById("capture-all-skipped").replaceChildren(...plan.skipped.map((p) =>
      el("li", {}, `Skipped: ${p.host}:${p.pid}${p.role ? " " + p.role : ""} — exited`)));
    lastPlan = plan;
    refresh();
  }

  // The same controls as a capture button's panel, built from the page's settings
  // schema: a whole-job capture is a record, and opens with the run's remembered settings.
  const fields = fd.launcher.settingsControls(fd.launcher.context.schema, ctx.settings, ["record"]);
  document.getElementById("capture-all-settings").replaceChildren(fields.root);
  const refresh = () => { document.getElementById("capture-all-start").disabled = !lastPlan.processes || Boolean(fields.refused("record")); };
  dialogForm.addEventListener("input", refresh);
  dialogForm.addEventListener("change", refresh);

  captureAll.addEventListener("click", () => {
    fields.fill(ctx.settings);
    showPlan(ctx.plan);
    problem.hidden = true;
    dialog.showModal();
    aliveRefresh.then(() => fd.fetchJson(ctx.checkUrl, { method: "POST" })).then((body) => showPlan(body.plan)).catch(() => {});
  });

  async function start(settings) {
    const json = { "Content-Type": "application/json" };
    await fd.fetchJson(ctx.runUrl, { method: "PATCH", headers: json, body: JSON.stringify({ capture_settings: settings }) });
    ctx.settings = settings;
    fd.launcher.useDefaults(settings);  // the run's capture buttons follow what it remembered
    return fd.fetchJson(ctx.captureUrl, { method: "POST", headers: json, body: JSON.stringify(settings) });
  }

  dialogForm.addEventListener("submit", async (event) => {
    if (event.submitter && event.submitter.value === "cancel") return;
    event.preventDefault();
    const button = document.getElementById("capture-all-start");
    button.disabled = true;
    try {
      const group = await start(fields.read("record"));
      window.location.assign(`/groups/${group.id}/`);
    } catch (err) {
      const body = err.body;
      const detail = body && typeof body.detail === "string" ? body.detail : body ? Object.entries(body).map(([k, v]) => `${k}: ${[].concat(v).join(" ")}`).join("; ") : err.message;
      problem.textContent = `Could not start: ${detail}`;
      problem.hidden = false;
      button.disabled = false;
    }
  });
})();
