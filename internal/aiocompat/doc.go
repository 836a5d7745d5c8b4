// Package aiocompat holds the cross-cutting tests of sandhold's
// AIO-compatible surface: a conformance test that calls every implemented
// AIO Sandbox 1.9.4 route on the real server and validates each answer
// against AIO's OpenAPI schemas (kin-openapi, via aiotest), and a test
// that drives the server with a TypeScript client generated from AIO's
// spec by openapi-typescript + openapi-fetch (test/aio-ts).
//
// It has no code of its own: the routes live in internal/api, the
// capabilities in their packages. What it stops: a route drifting from
// the shapes an unchanged AIO SDK expects.
package aiocompat
