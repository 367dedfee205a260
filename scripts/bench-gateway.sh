#!/usr/bin/env bash
# Load test of shepherd-gateway: builds the gateway and the load generator in release, then
# runs crates/adapters-http/examples/loadgen.rs (simulated vLLM servers in its process, the
# gateway as a child process): one-client overhead and time to first byte against calling a
# server directly, 1,000 concurrent streaming requests, and the gateway's memory over
# 100,000 requests, printed side by side in one run. Extra arguments go to the load
# generator (`--help` lists them).
#
# Usage: scripts/bench-gateway.sh [--concurrent 1000] [--memory-requests 100000] ...
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release -p shepherd-adapters-http --bin shepherd-gateway --example loadgen
exec target/release/examples/loadgen --gateway target/release/shepherd-gateway "$@"
