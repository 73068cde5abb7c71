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
  window.flamedeck = { cookie, escapeHtml, fetchJson };
})();
