#!/usr/bin/env bash
# The real-proxy tests (internal/gateway: TestRealProxyForgedHeaders,
# TestRealProxyAmbiguousPaths; internal/e2e: TestFrontEndEquivalence)
# against a real Traefik, which Debian does not package: this builds Traefik
# from its Go module (source from the Go module proxy, built with this
# machine's Go), then runs those tests with it, so that docs/gateway.md's Traefik
# block meets a client forging every forwarding and claim header, and every
# spelling of a request the other front ends decide, as the nginx and Caddy
# blocks do in .ci/run.
#
#   scripts/integration-traefik.sh                   # build (cached) and test
#   TRAEFIK_VERSION=v3.6.12 scripts/integration-traefik.sh
#
# Not in .ci/run: on a cold module cache the build downloads some 300
# modules and compiles for well over five minutes on this machine (the
# issue's bound for CI). v3.7.x does not build from the module proxy (its
# module zip lacks a directory its go.mod replaces, and several of its
# dependencies are not served), hence the default below.
#
# Settings (environment):
#   TRAEFIK_VERSION=v3.6.12       the github.com/traefik/traefik/v3 version
#   CACHE_DIR=~/.cache/keygate    where the built binary is kept
#   BUILD_TIMEOUT=2400            seconds the build may take
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TRAEFIK_VERSION=${TRAEFIK_VERSION:-v3.6.12}
CACHE_DIR=${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/keygate}
BUILD_TIMEOUT=${BUILD_TIMEOUT:-2400}
BIN=$CACHE_DIR/traefik-$TRAEFIK_VERSION

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
command -v go >/dev/null || die "go is not installed"

if [[ ! -x $BIN ]]; then
	log "building Traefik $TRAEFIK_VERSION from its Go module (slow on a cold cache)"
	mkdir -p "$CACHE_DIR"
	src=$(mktemp -d "${TMPDIR:-/tmp}/keygate-traefik.XXXXXX")
	trap 'rm -rf "$src"' EXIT
	# The repository's GOFLAGS (-mod=readonly in .ci/run) are not Traefik's.
	dir=$(GOFLAGS= go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	[[ -n $dir && -d $dir ]] || die "could not download github.com/traefik/traefik/v3@$TRAEFIK_VERSION"
	cp -r "$dir/." "$src"
	chmod -R u+w "$src"
	start=$(date +%s)
	(cd "$src" && GOFLAGS= timeout "$BUILD_TIMEOUT" go build -trimpath -o "$BIN.tmp" ./cmd/traefik) ||
		die "building Traefik failed (see above); try another TRAEFIK_VERSION"
	mv "$BIN.tmp" "$BIN"
	log "built $BIN in $(($(date +%s) - start))s"
fi
"$BIN" version | head -n 3 >&2

log "running the real-proxy tests with Traefik"
cd "$ROOT"
# pipefail: the test's exit status is the script's.
KEYGATE_TRAEFIK_BIN=$BIN KEYGATE_REQUIRE_TRAEFIK=1 go test -count=1 -v -run 'TestRealProxy|TestFrontEndEquivalence' \
	./internal/gateway ./internal/e2e |
	grep -E '^(--- |    --- |    [a-z_]+_test\.go:|FAIL|ok)'
