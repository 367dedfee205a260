#!/usr/bin/env bash
# Fuzzing run of every target, one after another: installs cargo-fuzz when missing, then runs
# each target for SECONDS (first argument, default 30) or until RUNS inputs (second argument,
# default unlimited), whichever comes first, starting from the committed seeds (and the local
# corpus of earlier runs). Fails when a target crashes; libFuzzer then leaves the input in
# fuzz/artifacts/<target>/. Prints how many inputs each target executed. The committed
# regression inputs are replayed by `cargo test --manifest-path fuzz/Cargo.toml` instead: they
# are large, and starting from them would make every mutation large too.
#
# Usage: fuzz/smoke.sh [SECONDS] [RUNS]
#   fuzz/smoke.sh                         # the CI smoke run: 30 s per target
#   nice -n 10 fuzz/smoke.sh 7200 10000000   # the long run: 10M inputs per target (see README)
# Runs on stable Rust: sanitizers need nightly, so the targets are built with --sanitizer none
# (libFuzzer's coverage guidance still works; memory errors are moot under forbid(unsafe_code)).
set -euo pipefail

seconds="${1:-30}"
runs="${2:--1}"
cd "$(dirname "$0")/.."

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

targets=(parse_body parse_config parse_metrics ext_proc_sequence decode_kv_events zmtp_subscriber replica_datagram)
summary=()
for target in "${targets[@]}"; do
    corpus="fuzz/corpus/${target}"
    mkdir -p "${corpus}" "fuzz/artifacts"
    log="fuzz/artifacts/${target}.log"
    echo "== fuzzing ${target} for ${seconds}s (runs: ${runs})" >&2
    # One process (no -jobs/-workers): the machine is shared. New inputs go to the first
    # directory only; the seeds are read, never written.
    cargo fuzz run --sanitizer none "${target}" "${corpus}" "fuzz/seeds/${target}" -- \
        -max_total_time="${seconds}" -runs="${runs}" -max_len=65536 -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 2>&1 | tee "${log}" >&2
    executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "${log}" | tail -n 1)
    summary+=("${target}: ${executed:-?} inputs executed")
done
echo "fuzz run passed (${seconds}s or ${runs} runs per target):" >&2
printf '  %s\n' "${summary[@]}" >&2
