// Shared helpers for every page: CSRF-aware fetch and HTML escaping.
(function () {
  "use strict";
  function cookie(name) {
    const match = document.cookie.match(new RegExp("(?:^|; )" + name + "=([^;]*)"));
    return match ? decodeURIComponent(match[1]) : null;
  }
  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
  }
  async function fetchJson(url, options = {}) {
    const headers = Object.assign({ Accept: "application/json" }, options.headers || {});
    if (options.method && options.method !== "GET") headers["X-CSRFToken"] = cookie("csrftoken");
    const response = await fetch(url, Object.assign({ credentials: "same-origin" }, options, { headers }));
    const body = response.headers.get("content-type")?.includes("json") ? await response.json() : null;
    if (!response.ok) throw Object.assign(new Error((body && body.detail) || response.statusText), { status: response.status, body });
    return body;
  }
  // Build a DOM node; text children become text nodes, so untrusted text stays text.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else if (key === "style") node.style.cssText = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children) if (child !== null && child !== undefined) node.append(child);
    return node;
  }
  // Bars drawn by width: the CSP forbids style="" attributes in the HTML, so templates
  // give data-width (a percentage) and the width is set here through the CSSOM.
  function applyWidths(root) {
    for (const node of (root || document).querySelectorAll("[data-width]")) {
      const width = Number.parseFloat(node.dataset.width);
      if (Number.isFinite(width)) node.style.width = `${Math.min(100, Math.max(0, width))}%`;
    }
  }
  document.addEventListener("DOMContentLoaded", () => applyWidths(document));
  // A running capture's clock: seconds sampled of the asked duration, counted from
  // py-spy's first sample; before it (SSH connect, py-spy attaching) say so instead.
  function sampledText(progress) {
    if (progress.sampling === false) return "starting py-spy…";
    return `${Number(progress.elapsed_s || 0).toFixed(1)} / ${progress.duration_s} s`;
  }
  window.flamedeck = { cookie, escapeHtml, fetchJson, el, applyWidths, sampledText };
})();
