#!/usr/bin/env bash
# Installs Debian's `redis-server` package (the Redis server and `redis-cli`) for the replica
# tests that share state through Redis, and prints the server's path on stdout:
#
#   export SHEPHERD_REDIS="$(scripts/install-redis.sh)"
#   cargo test -p shepherd-runtime --test replicas_redis
#
# Idempotent and quick when the package is there already. The package's own system service is
# never started (nor used): the tests start their own `redis-server` on a free loopback port
# with a temporary directory.
set -euo pipefail

if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-redis.sh: redis-server is not installed and this is not root; run: apt-get install -y --no-install-recommends redis-server" >&2
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
    if ! apt-get install -y --no-install-recommends redis-server >&2; then
        apt-get update >&2
        apt-get install -y --no-install-recommends redis-server >&2
    fi
    if [ "$created_policy" = 1 ]; then
        rm -f "$policy"
    fi
fi
redis-server --version >&2
command -v redis-server
