#!/usr/bin/env bash
# Short fuzzing run of every target: installs cargo-fuzz when missing, then runs each target
# for N seconds (first argument, default 30) starting from the committed seeds. Fails when a
# target crashes; libFuzzer then leaves the input in fuzz/artifacts/<target>/.
#
# Usage: fuzz/smoke.sh [SECONDS]
# Runs on stable Rust: sanitizers need nightly, so the targets are built with --sanitizer none
# (libFuzzer's coverage guidance still works; memory errors are moot under forbid(unsafe_code)).
set -euo pipefail

seconds="${1:-30}"
cd "$(dirname "$0")/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

targets=(parse_body parse_config parse_metrics ext_proc_sequence)
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/${target}"
    mkdir -p "${corpus}"
    echo "== fuzzing ${target} for ${seconds}s" >&2
    # -jobs/-workers stay at 1: the machine is shared.
    cargo fuzz run --sanitizer none "${target}" "${corpus}" "fuzz/seeds/${target}" -- \
        -max_total_time="${seconds}" -max_len=65536 -timeout=10 -rss_limit_mb=2048
done
echo "fuzz smoke run passed: ${targets[*]} (${seconds}s each)" >&2
