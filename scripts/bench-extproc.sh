#!/usr/bin/env bash
# Benchmarks the Envoy ext_proc path on loopback, in one run:
#
#   direct    client → Envoy → upstream                        (no ext_proc filter)
#   noop      client → Envoy ⇄ noop_extproc → upstream         (a fixed destination, no work)
#   shepherd  client → Envoy ⇄ shepherd-epp → upstream         (the deployment example)
#   replicas  the same with envoy-replicas.yaml (fail-open past the pick: BUFFERED request,
#             STREAMED response), the same shepherd-epp
#   hold      client → Envoy ⇄ noop_extproc --hold-body → upstream (answers the headers only
#             once the body is whole, as shepherd-epp must; long prompts only)
#   noopbuf   the noop behind the example config with request_body_mode BUFFERED
#             (noop_extproc --buffered: routes at the whole body, sends nothing back)
#   shepherdbuf  the same Envoy config in front of the same shepherd-epp
#
# Three phases (BENCH_PHASES, default "long short rss"):
#
#   long   long prompts: 220 KiB bodies (BENCH_LONG_BODY_BYTES) at 150 concurrent streams
#          (BENCH_LONG_CLIENTS) through BENCH_LONG_PATHS (default: direct noop hold shepherd
#          noopbuf shepherdbuf), alternating for
#          BENCH_LONG_ROUNDS rounds of BENCH_LONG_REQUESTS requests: time to first response
#          byte (TTFT) p50 / p99 and what each path adds over direct, requests per second, the
#          processor's CPU per request (utime + stime from /proc/PID/stat over the run) and its
#          peak memory per in-flight request ((VmHWM - VmRSS before) / clients; VmHWM is reset
#          through /proc/PID/clear_refs before each run).
#   short  p50 / p99 latency and requests per second at 1 and 16 concurrent clients with 16 KB
#          bodies, the four paths.
#   rss    the RSS of shepherd-epp before and after 100k more requests at 16 clients.
#
# Each prompt is unique. The upstream is `bench_upstream`, which answers at once, so Envoy
# and the processor are what is measured. The noop and shepherd runs use the example Envoy
# config (examples/deploy/envoy/envoy.yaml) with only its ports changed, the replicas run
# envoy-replicas.yaml likewise. The Envoys run side by side and the runs alternate; each
# figure is the median over the rounds, so a burst of load from elsewhere on the machine
# lands on one round of one path rather than on one path's only run.
#
#   scripts/bench-extproc.sh                     # Envoy from $SHEPHERD_ENVOY, else installed
#   BENCH_PHASES=long BENCH_LONG_ROUNDS=3 BENCH_LONG_REQUESTS=3000 scripts/bench-extproc.sh
#   BENCH_EPP_BIN=/path/to/another/shepherd-epp BENCH_NO_BUILD=1 scripts/bench-extproc.sh
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
PHASES=" ${BENCH_PHASES:-long short rss} "
LONG_ROUNDS="${BENCH_LONG_ROUNDS:-3}"
LONG_N="${BENCH_LONG_REQUESTS:-3000}"
LONG_WARM="${BENCH_LONG_WARMUP:-300}"
LONG_BODY="${BENCH_LONG_BODY_BYTES:-225280}"
LONG_CLIENTS="${BENCH_LONG_CLIENTS:-150}"
LONG_PATHS="${BENCH_LONG_PATHS:-direct noop hold shepherd noopbuf shepherdbuf}"
ENVOY_CONCURRENCY="${BENCH_ENVOY_CONCURRENCY:-2}"
OUT=target/bench-extproc
mkdir -p "$OUT"
: > "$OUT/results.jsonl"

UP0=$((BASE)); UP1=$((BASE + 1))
NOOP=$((BASE + 2))
EPP=$((BASE + 3)); EPP_HEALTH=$((BASE + 4)); EPP_ADMIN=$((BASE + 5))
HOLD=$((BASE + 6))
NOOPBUF=$((BASE + 7))
declare -A LISTEN=([direct]=$((BASE + 10)) [noop]=$((BASE + 12)) [shepherd]=$((BASE + 14)) [replicas]=$((BASE + 16)) [hold]=$((BASE + 18)) [noopbuf]=$((BASE + 20)) [shepherdbuf]=$((BASE + 22)))
declare -A ENVOY_ADMIN=([direct]=$((BASE + 11)) [noop]=$((BASE + 13)) [shepherd]=$((BASE + 15)) [replicas]=$((BASE + 17)) [hold]=$((BASE + 19)) [noopbuf]=$((BASE + 21)) [shepherdbuf]=$((BASE + 23)))

for port in $UP0 $UP1 $NOOP $HOLD $NOOPBUF $EPP $EPP_HEALTH $EPP_ADMIN "${LISTEN[@]}" "${ENVOY_ADMIN[@]}"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "port $port is in use; set BENCH_PORT_BASE to another base" >&2
    exit 1
  fi
done

ENVOY="${SHEPHERD_ENVOY:-}"
if [ -z "$ENVOY" ]; then
  ENVOY="$(scripts/install-envoy.sh)"
fi

if [ -z "${BENCH_NO_BUILD:-}" ]; then # set it to run the binaries already built
  echo "== building (release)" >&2
  cargo build --release -q -p shepherd-adapters-extproc \
    --bin shepherd-epp --example noop_extproc --example bench_upstream --example extproc_loadgen
fi
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
NOOP_PID=$!
PIDS+=($NOOP_PID)
"$EX/noop_extproc" --port "$HOLD" --destination "127.0.0.1:$UP0" --hold-body 2>"$OUT/noop-hold.log" &
HOLD_PID=$!
PIDS+=($HOLD_PID)
"$EX/noop_extproc" --port "$NOOPBUF" --destination "127.0.0.1:$UP0" --buffered 2>"$OUT/noop-buffered.log" &
NOOPBUF_PID=$!
PIDS+=($NOOPBUF_PID)
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
EPP_BIN="${BENCH_EPP_BIN:-$BIN/shepherd-epp}" # another build of the picker to compare
RUST_LOG=warn "$EPP_BIN" --config "$OUT/shepherd.yaml" 2>"$OUT/shepherd-epp.log" &
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

# The example config with the request body BUFFERED (Envoy holds the whole body and sends it in
# one message; message_timeout then counts the upload, so it is raised for a loaded machine).
buffered_config() { # scenario ext_proc-port
  example_config "$1" "$2" | sed -e 's/request_body_mode: FULL_DUPLEX_STREAMED/request_body_mode: BUFFERED/' \
    -e 's/message_timeout: 10s/message_timeout: 60s/'
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

declare -A ENVOY_PID=()
start_envoy() { # scenario config-text
  printf '%s\n' "$2" > "$OUT/envoy-$1.yaml"
  "$ENVOY" -c "$OUT/envoy-$1.yaml" --disable-hot-restart --concurrency "$ENVOY_CONCURRENCY" \
    -l warning 2>"$OUT/envoy-$1.log" &
  PIDS+=($!)
  ENVOY_PID[$1]=$!
  wait_http "http://127.0.0.1:${ENVOY_ADMIN[$1]}/ready"
}

load() { # scenario label clients requests warmup [body bytes]
  "$EX/extproc_loadgen" --url "http://127.0.0.1:${LISTEN[$1]}/v1/completions" --label "$2" \
    --clients "$3" --requests "$4" --warmup "$5" --body-bytes "${6:-$BODY}" --max-secs 300 \
    | tee -a "$OUT/results.jsonl" >&2
}

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }
# utime + stime of a process, in clock ticks (fields 14 and 15 of /proc/PID/stat, counted
# after the command name, which may hold spaces).
cpu_ticks() { sed -e 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

# A long-prompt run of scenario $1 (label $2), with the CPU and peak memory of process $3
# (the ext_proc server; none for direct) over it.
long_run() { # scenario label pid
  local pid="${3:-}" cpu0=0 rss0=0 envoy0
  envoy0=$(cpu_ticks "${ENVOY_PID[$1]}")
  if [ -n "$pid" ]; then
    echo 5 > "/proc/$pid/clear_refs" # VmHWM back to the current RSS
    cpu0=$(cpu_ticks "$pid"); rss0=$(rss_kb "$pid")
  fi
  load "$1" "$2" "$LONG_CLIENTS" "$LONG_N" "$LONG_WARM" "$LONG_BODY"
  echo "{\"label\":\"envoy-$2\",\"cpu_ticks\":$(( $(cpu_ticks "${ENVOY_PID[$1]}") - envoy0 )),\"ticks_per_sec\":$(getconf CLK_TCK),\"requests\":$((LONG_N + LONG_WARM))}" \
    | tee -a "$OUT/results.jsonl" >&2
  if [ -n "$pid" ]; then
    echo "{\"label\":\"proc-$2\",\"cpu_ticks\":$(( $(cpu_ticks "$pid") - cpu0 )),\"ticks_per_sec\":$(getconf CLK_TCK),\"requests\":$((LONG_N + LONG_WARM)),\"rss_before_kb\":$rss0,\"hwm_kb\":$(hwm_kb "$pid"),\"clients\":$LONG_CLIENTS}" \
      | tee -a "$OUT/results.jsonl" >&2
  fi
}

start_envoy direct "$(direct_config)"
start_envoy noop "$(example_config noop "$NOOP")"
start_envoy shepherd "$(example_config shepherd "$EPP")"
start_envoy replicas "$(example_config replicas "$EPP" envoy-replicas.yaml)"
start_envoy hold "$(example_config hold "$HOLD")"
start_envoy noopbuf "$(buffered_config noopbuf "$NOOPBUF")"
start_envoy shepherdbuf "$(buffered_config shepherdbuf "$EPP")"
RSS_START=$(rss_kb "$EPP_PID")

if [[ "$PHASES" == *" long "* ]]; then
  for round in $(seq 1 "$LONG_ROUNDS"); do
    echo "== long prompts: round $round of $LONG_ROUNDS ($LONG_BODY-byte bodies, $LONG_CLIENTS streams)" >&2
    declare -A LONG_PID=([direct]="" [noop]=$NOOP_PID [hold]=$HOLD_PID [shepherd]=$EPP_PID [noopbuf]=$NOOPBUF_PID [shepherdbuf]=$EPP_PID)
    for path in $LONG_PATHS; do
      long_run "$path" "long-$path" "${LONG_PID[$path]}"
    done
  done
fi

if [[ "$PHASES" == *" short "* ]]; then
  for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round of $ROUNDS" >&2
    for clients in 1 16; do
      if [ "$clients" = 1 ]; then n=$N1; warm=500; else n=$N16; warm=1000; fi
      for scenario in direct noop shepherd replicas; do
        load "$scenario" "$scenario-$clients" "$clients" "$n" "$warm"
      done
    done
  done
fi

if [[ "$PHASES" == *" rss "* ]]; then
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
fi

python3 - "$OUT/results.jsonl" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)" <<'EOF'
import json, sys
from statistics import median
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = {}
for r in rows:
    runs.setdefault(r["label"], []).append(r)
def med(label):
    rs = runs[label]
    keys = ("p50_ms", "p99_ms", "rps", "ttft_p50_ms", "ttft_p99_ms")
    out = {k: median(r[k] for r in rs) for k in keys if k in rs[0]}
    out["errors"] = sum(r["errors"] + r["non_2xx"] for r in rs)
    out["rounds"] = len(rs)
    out["p99_range"] = (min(r["p99_ms"] for r in rs), max(r["p99_ms"] for r in rs))
    return out
def mark(ok): return "ok" if ok else "MISSED"
def envoy_cpu(name):
    rs = runs.get(f"envoy-long-{name}", [])
    return median(p["cpu_ticks"] / p["ticks_per_sec"] / p["requests"] * 1e6 for p in rs) if rs else float("nan")
by = {label: med(label) for label in runs if label != "rss" and not label.startswith(("proc-", "envoy-"))}
print(f"loopback, {sys.argv[2]} cores, load average after the runs: {sys.argv[3]}")

if "long-direct" in by:
    d = by["long-direct"]
    body = runs["long-direct"][0]["body_bytes"]
    clients = runs["long-direct"][0]["clients"]
    print(f"\nlong prompts: {body}-byte bodies, {clients} concurrent streams; medians of {d['rounds']} alternating round(s)")
    print(f"{'path':<12} {'TTFT p50':>9} {'p99':>9} {'added p50':>10} {'p99':>9} {'req/s':>7} {'CPU/req':>9} {'peak/in-flight':>15} {'Envoy CPU/req':>14} {'errors':>7}")
    for name in ("direct", "noop", "hold", "shepherd", "noopbuf", "shepherdbuf"):
        r = by.get(f"long-{name}")
        if r is None:
            continue
        procs = runs.get(f"proc-long-{name}")
        if procs:
            cpu = median(p["cpu_ticks"] / p["ticks_per_sec"] / p["requests"] * 1e6 for p in procs)
            peak = max((p["hwm_kb"] - p["rss_before_kb"]) * 1024 / p["clients"] for p in procs)
            r["cpu_us"], r["peak_bytes"] = cpu, peak
            extra = f"{cpu:>7.0f}us {peak/1024:>12.0f}KiB"
        else:
            extra = f"{'-':>9} {'-':>15}"
        print(f"{name:<12} {r['ttft_p50_ms']:>7.1f}ms {r['ttft_p99_ms']:>7.1f}ms "
              f"{r['ttft_p50_ms'] - d['ttft_p50_ms']:>+8.1f}ms {r['ttft_p99_ms'] - d['ttft_p99_ms']:>+7.1f}ms "
              f"{r['rps']:>7.0f} {extra} {envoy_cpu(name):>12.0f}us {r['errors']:>7}")
    def compare(s_name, n_name, what):
        s, n = by.get(f"long-{s_name}"), by.get(f"long-{n_name}")
        if s is None or n is None:
            return
        rps_ratio = s["rps"] / n["rps"]
        add_n = n["ttft_p50_ms"] - d["ttft_p50_ms"]
        add_s = s["ttft_p50_ms"] - d["ttft_p50_ms"]
        add_ratio = add_s / add_n if add_n > 0 else float("inf")
        print(f"{s_name} / {n_name} ({what}): req/s {rps_ratio:.2f} (target >= 0.9: {mark(rps_ratio >= 0.9)}), "
              f"added TTFT p50 {add_ratio:.2f} (target <= 1.2: {mark(add_ratio <= 1.2)})")
    compare("shepherd", "noop", "FULL_DUPLEX_STREAMED, the no-op echoing as it receives")
    compare("shepherd", "hold", "FULL_DUPLEX_STREAMED, the no-op holding the body as a picker must")
    compare("shepherdbuf", "noopbuf", "BUFFERED request body, both")
    compare("shepherdbuf", "noop", "shepherd-epp BUFFERED against the streamed no-op")
    for name in ("shepherd", "shepherdbuf"):
        s = by.get(f"long-{name}")
        if s is not None and "peak_bytes" in s:
            mem = s["peak_bytes"] / body
            print(f"{name} peak memory per in-flight request / body: {mem:.2f} (target <= 1.5: {mark(mem <= 1.5)})")

if "direct-1" in by:
    rounds = by["direct-1"]["rounds"]
    print(f"\n16 KB bodies; medians of {rounds} alternating round(s)")
    print(f"{'path':<10} {'clients':>7} {'p50 ms':>8} {'p99 ms':>8} {'p99 range':>15} {'req/s':>8} {'errors':>7}")
    for s in ("direct", "noop", "shepherd", "replicas"):
        for c in (1, 16):
            r = by[f"{s}-{c}"]
            lo, hi = r["p99_range"]
            print(f"{s:<10} {c:>7} {r['p50_ms']:>8.3f} {r['p99_ms']:>8.3f} {f'{lo:.2f}-{hi:.2f}':>15} {r['rps']:>8.0f} {r['errors']:>7}")
    d1, s1 = by["direct-1"], by["shepherd-1"]
    n16, s16 = by["noop-16"], by["shepherd-16"]
    add50 = s1["p50_ms"] - d1["p50_ms"]
    add99 = s1["p99_ms"] - d1["p99_ms"]
    ratio = s16["rps"] / n16["rps"]
    print(f"shepherd-epp adds at 1 client: p50 {add50:+.3f} ms (target <= 0.4: {mark(add50 <= 0.4)}), "
          f"p99 {add99:+.3f} ms (target <= 1: {mark(add99 <= 1.0)})")
    print(f"shepherd-epp / noop req/s at 16 clients: {ratio:.2f} (target >= 0.75: {mark(ratio >= 0.75)})")
    r1, r16 = by["replicas-1"], by["replicas-16"]
    print(f"envoy-replicas.yaml vs envoy.yaml: p50 {r1['p50_ms'] - s1['p50_ms']:+.3f} ms, p99 {r1['p99_ms'] - s1['p99_ms']:+.3f} ms "
          f"at 1 client; req/s at 16 clients {r16['rps'] / s16['rps']:.2f}x")

if "rss" in runs:
    rss = runs["rss"][0]
    parts = runs["shepherd-rss"]
    steps = " -> ".join(f"{kb/1024:.1f}" for kb in rss["steps_kb"])
    print(f"shepherd-epp RSS: {rss['start_kb']/1024:.1f} MiB at start, {rss['before_kb']/1024:.1f} MiB before "
          f"{rss['requests']} more requests, then every quarter: {steps} MiB "
          f"({(rss['after_kb'] - rss['before_kb'])/1024:+.1f} MiB; "
          f"{median(r['rps'] for r in parts):.0f} req/s, p99 {median(r['p99_ms'] for r in parts):.3f} ms)")
EOF
