// Capture buttons with sensible defaults, an advanced panel, a warning from earlier
// captures of the same process that fell behind, and a dock with live progress.
// Mounts on every `.capture-launch[data-host][data-pid]`; context from #launch-context.
(function () {
  "use strict";
  const fd = window.flamedeck;
  const ctxNode = document.getElementById("launch-context");
  if (!ctxNode) return;
  const ctx = JSON.parse(ctxNode.textContent);
  const watching = new Map();
  const mounted = [];
  let panels = 0;
  let tips = 0;

  const el = window.flamedeck.el;

  // --- the py-spy settings, as the page's schema describes them ------------------
  // ctx.schema is runs/capture_settings.py as JSON: each setting's name, label, help,
  // type, bounds, defaults and the captures it applies to, and the pairs py-spy refuses.
  const settingsOf = (schema, kind) => schema.settings.filter((s) => s.kinds.includes(kind));

  function forKind(schema, values, kind) {
    const picked = {};
    for (const s of settingsOf(schema, kind)) if (s.name in values) picked[s.name] = values[s.name];
    return picked;
  }

  // "30 s at 20 Hz, native, threads": what a capture button asks for.
  function summary(schema, values) {
    const on = settingsOf(schema, "record").filter((s) => s.type === "bool" && values[s.name]).map((s) => s.label);
    return [`${values.duration} s at ${values.rate} Hz`, ...on].join(", ");
  }

  // The help of a setting as a tooltip that keyboards and screen readers get too: the
  // input names it with aria-describedby, focus or hover shows it, Escape hides it.
  function withTip(setting, input, ...label) {
    const id = `setting-tip-${++tips}`;
    input.setAttribute("aria-describedby", id);
    const node = el("label", { class: "setting", "data-setting": setting.name }, ...label,
      el("span", { class: "setting-mark", "aria-hidden": "true" }, "?"),
      // A click on the tip must not toggle the checkbox its label holds.
      el("span", { class: "setting-tip", role: "tooltip", id, onclick: (e) => e.preventDefault() }, setting.help));
    node.addEventListener("keydown", (event) => {
      if (event.key !== "Escape" || node.classList.contains("tip-hidden")) return;
      node.classList.add("tip-hidden");
      event.preventDefault();
      event.stopPropagation();  // a dialog stays open: the first Escape hides the tip
    });
    const reset = () => node.classList.remove("tip-hidden");
    node.addEventListener("mouseleave", reset);
    node.addEventListener("focusout", reset);
    return node;
  }

  function settingControl(setting, value) {
    const common = { name: setting.name, "data-kinds": setting.kinds.join(" ") };
    if (setting.type === "bool") {
      const box = el("input", { type: "checkbox", ...common, checked: Boolean(value) });
      return withTip(setting, box, box, " " + setting.label);
    }
    const number = el("input", { type: "number", ...common, min: setting.minimum, max: setting.maximum, value, required: true });
    return withTip(setting, number, setting.label + " ", number, setting.unit ? " " + setting.unit : "");
  }

  // Every setting of `kinds` as a control, in two rows (numbers, switches), with a line
  // that says when the switches ask for a pair py-spy refuses. read(kind) gives the
  // values of that kind's settings; fill(values) sets them; refused(kind) is the
  // refusal's message, or "".
  function settingsControls(schema, values, kinds) {
    const shown = schema.settings.filter((s) => s.kinds.some((k) => kinds.includes(k)));
    const controls = shown.map((s) => settingControl(s, values[s.name]));
    const conflict = el("p", { class: "setting-conflict", role: "status", hidden: true });
    const root = el("div", { class: "capture-settings" },
      el("div", { class: "row numbers" }, ...controls.filter((_, i) => shown[i].type === "int")),
      el("div", { class: "row bools" }, ...controls.filter((_, i) => shown[i].type === "bool")),
      conflict);
    const input = (name) => root.querySelector(`[name="${name}"]`);
    const read = (kind) => Object.fromEntries(settingsOf(schema, kind).filter((s) => input(s.name)).map((s) =>
      [s.name, s.type === "bool" ? input(s.name).checked : parseInt(input(s.name).value, 10)]));
    function refused(kind) {
      const on = read(kind);
      const hit = schema.conflicts.find((c) => c.kinds.includes(kind) && c.settings.every((n) => on[n] === true));
      conflict.hidden = !hit;
      conflict.textContent = hit ? `py-spy refuses this: ${hit.message}.` : "";
      return hit ? hit.message : "";
    }
    function fill(next) {
      for (const s of shown) {
        if (!(s.name in next)) continue;
        if (s.type === "bool") input(s.name).checked = Boolean(next[s.name]);
        else input(s.name).value = next[s.name];
      }
    }
    // Settings of another kind than the one asked for are greyed out.
    function useKind(kind) {
      for (const node of root.querySelectorAll("[data-kinds]")) node.disabled = !node.dataset.kinds.split(" ").includes(kind);
    }
    return { root, read, fill, refused, useKind };
  }

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

  // A setting left at the table's default is not sent: the server fills it in, and
  // on flamedeck's own processes its defaults differ (non-blocking; docs/security.md).
  const changedOnly = (settings) => Object.fromEntries(Object.entries(settings).filter(([name, value]) => {
    const s = ctx.schema.settings.find((x) => x.name === name);
    return !s || s.default !== value;
  }));

  async function launch(target, settings) {
    const where = target.process ? { process: target.process } : { host: String(target.host), pid: target.pid, run: ctx.run };
    const body = Object.assign(where, changedOnly(settings));
    const created = await fd.fetchJson("/api/captures/", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body),
    });
    watch(created.id, target.label || `${target.host}:${target.pid}`, settings);
    return created;
  }

  function advancedPanel(target, onStart) {
    const d = ctx.defaults;
    const warn = el("p", { class: "lagwarn", role: "status", hidden: true });
    const kindName = `capture-kind-${++panels}`;  // radio groups are document-wide
    const fields = settingsControls(ctx.schema, d, ["record", "dump"]);
    const rateInput = fields.root.querySelector("[name=rate]");
    const kind = () => panel.querySelector("[data-field=kind]:checked").value;
    const startButton = el("button", { type: "button", class: "primary", onclick: () => onStart({ kind: kind(), ...fields.read(kind()) }) }, "Start capture");
    const panel = el("div", { class: "capture-panel", hidden: true },
      el("div", { class: "row" },
        el("label", {}, el("input", { type: "radio", name: kindName, "data-field": "kind", value: "record", checked: true }), " record"),
        el("label", {}, el("input", { type: "radio", name: kindName, "data-field": "kind", value: "dump" }), " dump (stacks now)")),
      fields.root,
      warn,
      el("div", { class: "row" },
        startButton,
        el("button", { type: "button", onclick: () => { panel.hidden = true; } }, "Close")));
    function refresh() {
      fields.useKind(kind());
      startButton.disabled = Boolean(fields.refused(kind()));
      const w = kind() === "record" && lagWarning(target, parseInt(rateInput.value, 10) || 0);
      warn.hidden = !w;
      warn.replaceChildren();
      if (w) warn.append("⚠ " + w.text + " ", el("button", { type: "button", class: "linklike", onclick: () => { rateInput.value = w.recommended; refresh(); } }, `use ${w.recommended} Hz`));
    }
    panel.addEventListener("input", refresh);
    panel.addEventListener("change", refresh);
    refresh();
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
    const main = el("button", { type: "button", class: "primary capture-btn", title: summary(ctx.schema, d) }, `Capture ${d.duration} s`);
    main.addEventListener("click", () => {
      // A known-bad default rate opens the panel so the user sees the warning first.
      if (warning) { panel.hidden = false; keepInWindow(panel); return; }
      start({ kind: "record", ...forKind(ctx.schema, d, "record") }, main);
    });
    const more = el("button", { type: "button", class: "capture-more", title: "Advanced settings", "aria-label": "Advanced capture settings", onclick: () => { panel.hidden = !panel.hidden; keepInWindow(panel); } }, "▾");
    node.replaceChildren(main, more);
    if (warning) node.append(el("span", { class: "lagwarn-inline", title: warning.text }, `⚠ fell behind before; try ${warning.recommended} Hz`));
    node.append(panel);
    if (!mounted.includes(node)) mounted.push(node);
  }

  // The buttons start with what "Capture all" last asked for on this run (the page
  // came with it in ctx.defaults; the run page calls this when the dialog saves new ones).
  function useDefaults(values) {
    ctx.defaults = Object.assign({}, ctx.defaults, values);
    for (const node of mounted) if (node.isConnected && node.querySelector(".capture-btn")) mount(node);
    showSummary();
  }

  function showSummary() {
    for (const node of document.querySelectorAll("[data-capture-summary]")) node.textContent = summary(ctx.schema, ctx.defaults);
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

  if (ctx.schema) {
    document.querySelectorAll(".capture-launch").forEach(mount);
    showSummary();
  }
  fd.launcher = { mount, launch, watch, lagWarning, useDefaults, settingsControls, summary, context: ctx };
})();
