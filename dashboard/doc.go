// Package dashboard owns the hub's web dashboard: the single-page application built from web/ (Svelte, bundled by
// Vite into dist/, embedded into the hub binary) and the HTTP handler the hub mounts at /dashboard/ on its main port.
//
// The handler serves the assets under a strict Content-Security-Policy and keeps the user's bearer token out of
// every script's reach: POST /dashboard/session checks a token and stores it in an HttpOnly, Secure,
// SameSite=Strict cookie scoped to /dashboard/; the page then calls the hub's REST API (watches included) through
// /dashboard/api/<path>, which turns the cookie back into the Authorization header and hands the request to the
// hub's own REST handler in-process. Authorization stays the hub's: the dashboard adds no rights of its own.
//
// `make generate` writes web/src/api from the OpenAPI documents in docs/openapi (openapi-typescript) and
// `make build` rebuilds dist/ from web/ (npm ci + vite build); dist/ is committed so that a fresh clone compiles
// and `bin/trellis-hub` serves the dashboard with no Node.js on the machine.
package dashboard
