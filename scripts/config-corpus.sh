#!/usr/bin/env bash
# Measures how many real upstream EndpointPickerConfig texts Shepherd loads: fetches the three
# upstream trees at pinned commits into target/config-corpus/ (once; reused after), then runs
# the config_corpus example over them (crates/runtime/examples/config_corpus/), which finds
# every picker config in YAML, Helm values, ConfigMaps, Markdown and Go raw strings and checks
# each unique text as `shepherd-epp --check-config` would. Needs network access to GitHub the
# first time; with SHEPHERD_CORPUS_DIR set, the checkouts there are used instead.
#
# Usage: scripts/config-corpus.sh [--list]
set -euo pipefail
cd "$(dirname "$0")/.."

# name, repository, commit (the versions docs/compatibility.md checks against).
sources=(
    "llm-d-router https://github.com/llm-d/llm-d-router ebab687927f5331c1b39defcb579a07951bce56c"
    "llm-d-inference-scheduler https://github.com/llm-d/llm-d-inference-scheduler 520af47896e5f06e43d09aca281a1149187b0ffd"
    "gateway-api-inference-extension-v1.5.0 https://github.com/kubernetes-sigs/gateway-api-inference-extension df9f8909fe06fe2dfd4a6fc0bd0c01a0acabf849"
)

corpus="${SHEPHERD_CORPUS_DIR:-target/config-corpus}"
if [ -z "${SHEPHERD_CORPUS_DIR:-}" ]; then
    mkdir -p "${corpus}"
    for source in "${sources[@]}"; do
        read -r name url commit <<<"${source}"
        dir="${corpus}/${name}"
        if [ "$(git -C "${dir}" rev-parse HEAD 2>/dev/null || true)" = "${commit}" ]; then
            continue
        fi
        echo "== fetching ${name} @ ${commit:0:9}" >&2
        rm -rf "${dir}"
        git init -q "${dir}"
        if ! git -C "${dir}" fetch -q --depth 1 "${url}" "${commit}"; then
            echo "config-corpus.sh: cannot fetch ${url} @ ${commit}; set SHEPHERD_CORPUS_DIR to checkouts made elsewhere" >&2
            rm -rf "${dir}"
            exit 1
        fi
        git -C "${dir}" checkout -q FETCH_HEAD
    done
fi

cargo run -q -p shepherd-runtime --example config_corpus -- "$@" "${corpus}"/*
