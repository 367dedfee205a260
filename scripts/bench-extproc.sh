#!/usr/bin/env bash
# Benchmarks the Envoy ext_proc path on loopback, in one run:
#
#   direct    client → Envoy → upstream                        (no ext_proc filter)
#   noop      client → Envoy ⇄ noop_extproc → upstream         (a fixed destination, no work)
#   shepherd  client → Envoy ⇄ shepherd-epp → upstream         (the deployment example)
#   replicas  the same with envoy-replicas.yaml (fail-open past the pick: BUFFERED request,
#             STREAMED response), the same shepherd-epp
#
# For each: p50 / p99 latency and requests per second at 1 and 16 concurrent clients with
# 16 KB bodies (each prompt unique); then the RSS of shepherd-epp before and after 100k more
# requests at 16 clients. The upstream is `bench_upstream`, which answers at once, so Envoy
# and the processor are what is measured. The noop and shepherd runs use the example Envoy
# config (examples/deploy/envoy/envoy.yaml) with only its ports changed, the replicas run
# envoy-replicas.yaml likewise. The four Envoys run side by side and the runs alternate
# (direct, noop, shepherd, replicas; BENCH_ROUNDS rounds); each
# figure is the median over the rounds, so a burst of load from elsewhere on the machine
# lands on one round of one path rather than on one path's only run.
#
#   scripts/bench-extproc.sh                     # Envoy from $SHEPHERD_ENVOY, else installed
#   BENCH_ROUNDS=1 BENCH_REQUESTS_1=1000 BENCH_REQUESTS_16=4000 BENCH_RSS_REQUESTS=5000 scripts/bench-extproc.sh
#
# Results: a table on stdout, JSON lines in target/bench-extproc/results.jsonl.
set -euo pipefail
cd "$(dirname "$0")/.."

BASE="${BENCH_PORT_BASE:-18000}"
ROUNDS="${BENCH_ROUNDS:-5}"
N1="${BENCH_REQUESTS_1:-3000}"
N16="${BENCH_REQUESTS_16:-15000}"
NRSS="${BENCH_RSS_REQUESTS:-100000}"
BODY="${BENCH_BODY_BYTES:-16384}"
ENVOY_CONCURRENCY="${BENCH_ENVOY_CONCURRENCY:-2}"
OUT=target/bench-extproc
mkdir -p "$OUT"
: > "$OUT/results.jsonl"

UP0=$((BASE)); UP1=$((BASE + 1))
NOOP=$((BASE + 2))
EPP=$((BASE + 3)); EPP_HEALTH=$((BASE + 4)); EPP_ADMIN=$((BASE + 5))
declare -A LISTEN=([direct]=$((BASE + 10)) [noop]=$((BASE + 12)) [shepherd]=$((BASE + 14)) [replicas]=$((BASE + 16)))
declare -A ENVOY_ADMIN=([direct]=$((BASE + 11)) [noop]=$((BASE + 13)) [shepherd]=$((BASE + 15)) [replicas]=$((BASE + 17)))

for port in $UP0 $UP1 $NOOP $EPP $EPP_HEALTH $EPP_ADMIN "${LISTEN[@]}" "${ENVOY_ADMIN[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is in use; set BENCH_PORT_BASE to another base" >&2
    exit 1
  fi
done

ENVOY="${SHEPHERD_ENVOY:-}"
if [ -z "$ENVOY" ]; then
  ENVOY="$(scripts/install-envoy.sh)"
fi

echo "== building (release)" >&2
cargo build --release -q -p shepherd-adapters-extproc \
  --bin shepherd-epp --example noop_extproc --example bench_upstream --example extproc_loadgen
BIN=target/release
EX=target/release/examples

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_http() { # url
  for _ in $(seq 1 200); do
    if curl -fs -o /dev/null "$1"; then return 0; fi
    sleep 0.05
  done
  echo "no answer from $1" >&2
  return 1
}

"$EX/bench_upstream" --ports "$UP0,$UP1" 2>"$OUT/upstream.log" &
PIDS+=($!)
"$EX/noop_extproc" --port "$NOOP" --destination "127.0.0.1:$UP0" 2>"$OUT/noop.log" &
PIDS+=($!)
cat > "$OUT/shepherd.yaml" <<EOF
apiVersion: llm-d.ai/v1alpha1
kind: EndpointPickerConfig
scheduler:
  maxEndpoints: 1
endpoints:
  - 127.0.0.1:$UP0
  - 127.0.0.1:$UP1
server:
  bindAddress: 127.0.0.1
  extprocPort: $EPP
  healthPort: $EPP_HEALTH
  metricsPort: $EPP_ADMIN
EOF
RUST_LOG=warn "$BIN/shepherd-epp" --config "$OUT/shepherd.yaml" 2>"$OUT/shepherd-epp.log" &
EPP_PID=$!
PIDS+=($EPP_PID)
wait_http "http://127.0.0.1:$UP0/metrics"
wait_http "http://127.0.0.1:$EPP_ADMIN/readyz"

# An example config with its ports changed: scenario $1, ext_proc port $2, example file $3
# (envoy.yaml by default).
example_config() {
  sed -e "s/port_value: 9901/port_value: ${ENVOY_ADMIN[$1]}/" \
      -e "s/port_value: 8081/port_value: ${LISTEN[$1]}/" \
      -e "s/port_value: 9002/port_value: $2/" \
      "examples/deploy/envoy/${3:-envoy.yaml}"
}

# The same listener without the ext_proc filter, straight to one upstream.
direct_config() {
  cat <<EOF
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: ${ENVOY_ADMIN[direct]} } }
static_resources:
  listeners:
  - name: inference
    address: { socket_address: { address: 127.0.0.1, port_value: ${LISTEN[direct]} } }
    per_connection_buffer_limit_bytes: 16777216
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: inference
          route_config:
            virtual_hosts:
            - name: inference
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: upstream, timeout: 0s }
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
  - name: upstream
    type: STATIC
    connect_timeout: 1s
    load_assignment:
      cluster_name: upstream
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $UP0 } } }
EOF
}

start_envoy() { # scenario config-text
  printf '%s\n' "$2" > "$OUT/envoy-$1.yaml"
  "$ENVOY" -c "$OUT/envoy-$1.yaml" --disable-hot-restart --concurrency "$ENVOY_CONCURRENCY" \
    -l warning 2>"$OUT/envoy-$1.log" &
  PIDS+=($!)
  wait_http "http://127.0.0.1:${ENVOY_ADMIN[$1]}/ready"
}

load() { # scenario label clients requests warmup
  "$EX/extproc_loadgen" --url "http://127.0.0.1:${LISTEN[$1]}/v1/completions" --label "$2" \
    --clients "$3" --requests "$4" --warmup "$5" --body-bytes "$BODY" --max-secs 300 \
    | tee -a "$OUT/results.jsonl" >&2
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }

start_envoy direct "$(direct_config)"
start_envoy noop "$(example_config noop "$NOOP")"
start_envoy shepherd "$(example_config shepherd "$EPP")"
start_envoy replicas "$(example_config replicas "$EPP" envoy-replicas.yaml)"
RSS_START=$(rss_kb "$EPP_PID")

for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  for clients in 1 16; do
    if [ "$clients" = 1 ]; then n=$N1; warm=500; else n=$N16; warm=1000; fi
    for scenario in direct noop shepherd replicas; do
      load "$scenario" "$scenario-$clients" "$clients" "$n" "$warm"
    done
  done
done

echo "== shepherd-epp RSS over $NRSS requests, in four parts" >&2
RSS_BEFORE=$(rss_kb "$EPP_PID")
RSS_STEPS=()
for part in 1 2 3 4; do
  load shepherd shepherd-rss 16 "$((NRSS / 4))" 0
  RSS_STEPS+=("$(rss_kb "$EPP_PID")")
done
STEPS=$(IFS=,; echo "${RSS_STEPS[*]}")
echo "{\"label\":\"rss\",\"start_kb\":$RSS_START,\"before_kb\":$RSS_BEFORE,\"steps_kb\":[$STEPS],\"after_kb\":${RSS_STEPS[3]},\"requests\":$NRSS}" \
  | tee -a "$OUT/results.jsonl" >&2

python3 - "$OUT/results.jsonl" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = {}
for r in rows:
    runs.setdefault(r["label"], []).append(r)
def med(label):
    rs = runs[label]
    out = {k: median(r[k] for r in rs) for k in ("p50_ms", "p99_ms", "rps")}
    out["errors"] = sum(r["errors"] + r["non_2xx"] for r in rs)
    out["rounds"] = len(rs)
    out["p99_range"] = (min(r["p99_ms"] for r in rs), max(r["p99_ms"] for r in rs))
    return out
by = {label: med(label) for label in runs if label != "rss"}
by["rss"] = runs["rss"][0]
rounds = by["direct-1"]["rounds"]
print(f"loopback, {sys.argv[2]} cores, load average after the runs: {sys.argv[3]}; medians of {rounds} alternating round(s)")
print(f"{'path':<10} {'clients':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99 range':>15} {'req/s':>8} {'errors':>7}")
for s in ("direct", "noop", "shepherd", "replicas"):
    for c in (1, 16):
        r = by[f"{s}-{c}"]
        lo, hi = r["p99_range"]
        print(f"{s:<10} {c:>7} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {f'{lo:.2f}-{hi:.2f}':>15} {r['rps']:>8.0f} {r['errors']:>7}")
d1, s1 = by["direct-1"], by["shepherd-1"]
n16, s16 = by["noop-16"], by["shepherd-16"]
rss = by["rss"]
add50 = s1["p50_ms"] - d1["p50_ms"]
add99 = s1["p99_ms"] - d1["p99_ms"]
ratio = s16["rps"] / n16["rps"]
def mark(ok): return "ok" if ok else "MISSED"
print(f"shepherd-epp adds at 1 client: p50 {add50:+.3f} ms (target <= 0.4: {mark(add50 <= 0.4)}), "
      f"p99 {add99:+.3f} ms (target <= 1: {mark(add99 <= 1.0)})")
print(f"shepherd-epp / noop req/s at 16 clients: {ratio:.2f} (target >= 0.75: {mark(ratio >= 0.75)})")
r1, r16 = by["replicas-1"], by["replicas-16"]
print(f"envoy-replicas.yaml vs envoy.yaml: p50 {r1['p50_ms'] - s1['p50_ms']:+.3f} ms, p99 {r1['p99_ms'] - s1['p99_ms']:+.3f} ms "
      f"at 1 client; req/s at 16 clients {r16['rps'] / s16['rps']:.2f}x")
parts = runs["shepherd-rss"]
steps = " -> ".join(f"{kb/1024:.1f}" for kb in rss["steps_kb"])
print(f"shepherd-epp RSS: {rss['start_kb']/1024:.1f} MiB at start, {rss['before_kb']/1024:.1f} MiB before "
      f"{rss['requests']} more requests, then every quarter: {steps} MiB "
      f"({(rss['after_kb'] - rss['before_kb'])/1024:+.1f} MiB; "
      f"{median(r['rps'] for r in parts):.0f} req/s, p99 {median(r['p99_ms'] for r in parts):.3f} ms)")
EOF
