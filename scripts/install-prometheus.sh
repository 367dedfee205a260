#!/usr/bin/env bash
# Installs Debian's `prometheus` package (the Prometheus server and `promtool`) for the
# observability tests, and prints the two binaries' paths on stdout, one a line:
#
#   { read -r SHEPHERD_PROMETHEUS; read -r SHEPHERD_PROMTOOL; } < <(scripts/install-prometheus.sh)
#   export SHEPHERD_PROMETHEUS SHEPHERD_PROMTOOL
#   cargo test -p shepherd-observability-tests
#
# Idempotent and quick when the package is there already. The package may start a system
# service; the tests never use it: they start their own `prometheus` on a loopback port with a
# temporary config and storage directory.
set -euo pipefail

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-prometheus.sh: prometheus is not installed and this is not root; run: apt-get install -y --no-install-recommends prometheus" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    # Do not let the package's maintainer scripts start the system service.
    policy=/usr/sbin/policy-rc.d
    created_policy=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy"
        chmod +x "$policy"
        created_policy=1
    fi
    if ! apt-get install -y --no-install-recommends prometheus >&2; then
        apt-get update >&2
        apt-get install -y --no-install-recommends prometheus >&2
    fi
    if [ "$created_policy" = 1 ]; then
        rm -f "$policy"
    fi
fi
prometheus --version 2>&1 | head -1 >&2
command -v prometheus
command -v promtool
