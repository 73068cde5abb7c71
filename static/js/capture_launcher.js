// Capture buttons with sensible defaults, an advanced panel, a warning from earlier
// captures of the same process that fell behind, and a dock with live progress.
// Mounts on every `.capture-launch[data-host][data-pid]`; context from #launch-context.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const ctxNode = document.getElementById("launch-context");
  if (!ctxNode) return;
  const ctx = JSON.parse(ctxNode.textContent);
  const BOOLS = ["native", "threads", "idle", "gil", "nonblocking", "subprocesses"];
  const watching = new Map();
  let panels = 0;

  const el = window.flamedeck.el;

  // Earlier captures of this process (same RunProcess, or same host and pid) that
  // fell behind at a rate at or below the one asked for.
  function lagWarning(target, rate) {
    const failed = (ctx.lagHistory || []).filter((h) =>
      ((target.process && h.process === target.process) || (h.host === target.host && h.pid === target.pid)) && rate >= h.rate);
    if (!failed.length) return null;
    const worst = failed.reduce((a, b) => (b.rate < a.rate ? b : a));
    const recommended = Math.min(...failed.map((h) => h.recommended_rate || Math.max(1, Math.floor(h.rate / 2))));
    return {
      recommended,
      text: `Capture #${worst.id} of this process fell behind at ${worst.rate} Hz (${worst.verdict}` +
        (worst.max_behind_s ? `, ${worst.max_behind_s} s behind` : "") + `). Try ${recommended} Hz.`,
    };
  }

  async function launch(target, settings) {
    const where = target.process ? { process: target.process } : { host: String(target.host), pid: target.pid, run: ctx.run };
    const body = Object.assign(where, settings);
    const created = await fd.fetchJson("/api/captures/", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    watch(created.id, target.label || `${target.host}:${target.pid}`, settings);
    return created;
  }

  function readSettings(panel) {
    const settings = { kind: panel.querySelector("[data-field=kind]:checked").value };
    settings.duration = parseInt(panel.querySelector("[name=duration]").value, 10);
    settings.rate = parseInt(panel.querySelector("[name=rate]").value, 10);
    for (const name of BOOLS) settings[name] = panel.querySelector(`[name=${name}]`).checked;
    if (settings.kind === "dump") settings.dump_locals = panel.querySelector("[name=dump_locals]").checked;
    return settings;
  }

  function advancedPanel(target, onStart) {
    const d = ctx.defaults;
    const warn = el("p", { class: "lagwarn", role: "status", hidden: true });
    const rateInput = el("input", { type: "number", name: "rate", min: 1, max: 2000, value: d.rate });
    const kindName = `capture-kind-${++panels}`;  // radio groups are document-wide
    const panel = el("div", { class: "capture-panel", hidden: true },
      el("div", { class: "row" },
        el("label", {}, el("input", { type: "radio", name: kindName, "data-field": "kind", value: "record", checked: true }), " record"),
        el("label", {}, el("input", { type: "radio", name: kindName, "data-field": "kind", value: "dump" }), " dump (stacks now)"),
        el("label", { title: "py-spy dump --locals: each frame's local variables" }, el("input", { type: "checkbox", name: "dump_locals" }), " with locals (dump)")),
      el("div", { class: "row" },
        el("label", {}, "Duration ", el("input", { type: "number", name: "duration", min: 1, max: ctx.maxDuration, value: d.duration }), " s"),
        el("label", {}, "Rate ", rateInput, " Hz")),
      el("div", { class: "row bools" }, ...BOOLS.map((name) =>
        el("label", {}, el("input", { type: "checkbox", name, checked: d[name] }), " " + name))),
      warn,
      el("div", { class: "row" },
        el("button", { type: "button", class: "primary", onclick: () => onStart(readSettings(panel)) }, "Start capture"),
        el("button", { type: "button", onclick: () => { panel.hidden = true; } }, "Close")));
    function refreshWarning() {
      const w = lagWarning(target, parseInt(rateInput.value, 10) || 0);
      warn.hidden = !w;
      warn.replaceChildren();
      if (w) warn.append("⚠ " + w.text + " ", el("button", { type: "button", class: "linklike", onclick: () => { rateInput.value = w.recommended; refreshWarning(); } }, `use ${w.recommended} Hz`));
    }
    rateInput.addEventListener("input", refreshWarning);
    refreshWarning();
    return panel;
  }

  // Open the panel leftwards when it would run past the window's right edge.
  function keepInWindow(panel) {
    panel.classList.remove("align-right");
    if (panel.hidden) return;
    if (panel.getBoundingClientRect().right > document.documentElement.clientWidth - 8) panel.classList.add("align-right");
  }

  function mount(node) {
    const target = {
      host: parseInt(node.dataset.host, 10), pid: parseInt(node.dataset.pid, 10),
      process: node.dataset.process ? parseInt(node.dataset.process, 10) : null,
      label: node.dataset.label || `${node.dataset.host}:${node.dataset.pid}`,
    };
    const d = ctx.defaults;
    const warning = lagWarning(target, d.rate);
    const start = async (settings, button) => {
      if (button) button.disabled = true;
      try { await launch(target, settings); panel.hidden = true; }
      catch (err) { alert(`Could not start the capture: ${err.message}`); }
      finally { if (button) button.disabled = false; }
    };
    const panel = advancedPanel(target, (settings) => start(settings));
    const main = el("button", { type: "button", class: "primary capture-btn", title: `${d.duration} s at ${d.rate} Hz, native, threads` }, `Capture ${d.duration} s`);
    main.addEventListener("click", () => {
      // A known-bad default rate opens the panel so the user sees the warning first.
      if (warning) { panel.hidden = false; keepInWindow(panel); return; }
      start(Object.assign({}, d), main);
    });
    const more = el("button", { type: "button", class: "capture-more", title: "Advanced settings", "aria-label": "Advanced capture settings", onclick: () => { panel.hidden = !panel.hidden; keepInWindow(panel); } }, "▾");
    node.replaceChildren(main, more);
    if (warning) node.append(el("span", { class: "lagwarn-inline", title: warning.text }, `⚠ fell behind before; try ${warning.recommended} Hz`));
    node.append(panel);
  }

  // --- the dock: live progress of captures started from this page ---------------
  function dock() {
    let node = document.getElementById("capture-dock");
    if (!node) {
      node = el("aside", { id: "capture-dock", "aria-live": "polite", "aria-label": "Captures in progress" });
      document.body.append(node);
    }
    return node;
  }

  function watch(id, label, settings) {
    if (watching.has(id)) return;
    const bar = el("div", { class: "fill" });
    const card = el("div", { class: "dockcard", "data-capture": id },
      el("div", { class: "dockhead" }, el("a", { href: `/captures/${id}/` }, `#${id}`), " ", el("span", { class: "mono" }, label),
        el("span", { class: "badge status-queued", "data-role": "status" }, "queued")),
      el("div", { class: "progress" }, bar),
      el("div", { class: "dockline", "data-role": "line" }, settings && settings.kind === "dump" ? "waiting for py-spy dump…" : "waiting for a worker…"),
      el("div", { class: "dockactions" },
        el("button", { type: "button", "data-role": "cancel", onclick: () => cancel(id, card) }, "Cancel"),
        el("button", { type: "button", class: "linklike", onclick: () => { card.remove(); watching.delete(id); } }, "hide")));
    dock().append(card);
    watching.set(id, card);
    poll(id, card, bar);
  }

  async function cancel(id, card) {
    card.querySelector("[data-role=cancel]").disabled = true;
    try { await fd.fetchJson(`/api/captures/${id}/cancel/`, { method: "POST" }); }
    catch (err) { card.querySelector("[data-role=line]").textContent = `cancel refused: ${err.message}`; }
  }

  function describe(capture) {
    const p = capture.progress || {};
    if (capture.status === "running" && p.duration_s) {
      const behind = p.behind_s ? ` · ${p.behind_s} s behind` : " · keeping up";
      return `${fd.sampledText(p)} · ≈ ${p.expected_samples} sampling rounds${behind}`;
    }
    if (capture.status === "parsing") return "analysing samples…";
    if (capture.status === "done" || capture.status === "cancelled") {
      const stats = capture.stats || {};
      const verdict = stats.lag ? ` · lag ${stats.lag.verdict}` : "";
      return stats.format === "dump" ? `${(stats.dump_threads || []).length} threads` : `${stats.total_samples ?? 0} samples${verdict}`;
    }
    if (capture.status === "failed") return capture.error || "failed";
    return p.retry ? p.retry.message : "queued";
  }

  async function poll(id, card, bar) {
    let capture;
    try { capture = await fd.fetchJson(`/api/captures/${id}/`); }
    catch (err) { card.querySelector("[data-role=line]").textContent = `lost track: ${err.message}`; setTimeout(() => poll(id, card, bar), 3000); return; }
    const status = card.querySelector("[data-role=status]");
    status.textContent = capture.status;
    status.className = `badge status-${capture.status}`;
    const p = capture.progress || {};
    const final = ["done", "failed", "cancelled"].includes(capture.status);
    bar.style.width = final ? "100%" : `${Math.min(100, p.duration_s ? (100 * p.elapsed_s) / p.duration_s : 2)}%`;
    bar.classList.toggle("behind", (p.behind_s || 0) >= 1);
    card.querySelector("[data-role=line]").textContent = describe(capture);
    card.dataset.status = capture.status;
    if (final) {
      card.querySelector("[data-role=cancel]").replaceWith(el("a", { class: "button primary", href: `/captures/${id}/` }, "Open result →"));
      document.dispatchEvent(new CustomEvent("flamedeck:capture-final", { detail: capture }));
      return;
    }
    setTimeout(() => poll(id, card, bar), 1000);
  }

  document.querySelectorAll(".capture-launch").forEach(mount);
  fd.launcher = { mount, launch, watch, lagWarning, context: ctx };
})();
