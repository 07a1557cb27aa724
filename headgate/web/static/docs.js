"use strict";
// Swagger UI's start, from a file rather than inline so that /docs runs under a
// CSP with no 'unsafe-inline'. Logged in to the console, "Try it out" writes carry
// the session's CSRF token, as the console's own do.
const root = document.getElementById("swagger-ui");
const csrf = document.querySelector('meta[name="csrf-token"]');
window.ui = SwaggerUIBundle({
  url: root.dataset.openapiUrl,
  dom_id: "#swagger-ui",
  layout: "BaseLayout",
  deepLinking: true,
  showExtensions: true,
  showCommonExtensions: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  requestInterceptor: (request) => {
    if (csrf) request.headers["X-CSRF-Token"] = csrf.content;
    return request;
  },
});
