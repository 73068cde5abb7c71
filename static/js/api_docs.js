// The API reference: Swagger UI (from drf-spectacular-sidecar, served by this origin)
// on /api/schema/. Configured here, not inline, so the Content-Security-Policy holds.
(function () {
  "use strict";
  const root = document.getElementById("swagger-ui");
  if (!root || !window.SwaggerUIBundle) return;
  window.SwaggerUIBundle({
    url: root.dataset.schemaUrl,
    domNode: root,
    presets: [window.SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    // No call to the public validator service (and no image from it).
    validatorUrl: null,
    // "Try it out" with the session: writes need the CSRF token, as from any page.
    requestInterceptor: (request) => {
      if (request.method && request.method !== "GET") {
        request.headers["X-CSRFToken"] = window.flamedeck.cookie("csrftoken");
      }
      return request;
    },
  });
})();
