// Package e2e holds keygate's end-to-end scenarios: each test starts whole
// servers (server.New on real loopback listeners, with the node, store,
// audit log and key sources behind them) and drives them over HTTP or gRPC
// as clients, proxies and operators do, across subsystems: the token
// service, transit, sealing, reloads, TLS, tracing, audit floods, fleets
// on PostgreSQL and Redis, and the front ends' equivalence matrix. It
// holds no code of its own, only tests, and uses nothing but the server's
// exported API.
//
// A test belongs here when it exercises the assembled product; one that
// checks a package's own behaviour, or needs its unexported code, stays
// beside that package (internal/server keeps its in-process handler tests).
//
// Run it with the services the scenarios need, as .ci/run does:
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/test?sslmode=disable \
//	REDIS_URL=redis://127.0.0.1:6379/0 go test -race ./internal/e2e
//
// Without DATABASE_URL or REDIS_URL the tests that need them skip, and
// without nginx or caddy on PATH so do the real-proxy rows (unless
// KEYGATE_REQUIRE_NGINX or KEYGATE_REQUIRE_CADDY is set). Under -short,
// the contributors' inner loop, the scenarios that take a second or more,
// need PostgreSQL or Redis, or start a real proxy skip, each saying why;
// .ci/run never passes -short.
package e2e
