// The dashboard's content security policy, one source for the browser-mode header, the meta tag
// in renderer/index.html (checked by a test) and the Electron window.
// style-src allows inline styles because recharts and the bar widths set style attributes;
// scripts come only from the bundle, and the page may talk only to its own origin.
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "connect-src 'self'",
  "font-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

/** frame-ancestors is ignored in a meta tag, so it rides only on the HTTP header. */
export const DASHBOARD_CSP_HEADER = `${DASHBOARD_CSP}; frame-ancestors 'none'`;
