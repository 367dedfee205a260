//! The cost of sharing in-flight load and index deltas between picker replicas through Redis
//! (`replicas.backend: redis`, issue 31): picks per second of one replica with the exchange off
//! and on, in one run, and the Redis traffic of one replica at about 1,000 picks per second
//! (what it writes, what it reads of the others').
//!
//! A real `redis-server` (Debian's, `scripts/install-redis.sh`; the bench says so and stops
//! without one) on a loopback port, and three runtimes with the adaptive preset over the same
//! 64 endpoints, as `replica_sync` does for the direct exchange: replica A picks in a tight loop
//! on one thread, holding each request for a while so that every endpoint has requests in
//! flight; every prompt is unique (4 new keys a pick: the index deltas' worst case). "Off" is
//! the same runtime without a `replicas` section.
//!
//! It first measures what the medium adds to an exchange: the time from one connection's
//! `XADD` to another's blocking `XREAD` returning the entry (the simulator's Redis delay
//! model, `REDIS_DELIVERY_US` in `crates/sim/src/replicas/coordination.rs`).
//!
//! ```text
//! cargo bench -p shepherd-benches --bench replica_redis
//! ```

#[path = "common/replica_picks.rs"]
mod replica_picks;
use replica_picks::*;

use std::time::{Duration, Instant};

use shepherd_runtime::RuntimeHandle;
use shepherd_test_util::redis::{RedisAuth, RedisServer};

async fn start(redis: Option<(&str, &str)>) -> RuntimeHandle {
    let extra = match redis {
        Some((url, name)) => {
            format!("replicas: {{backend: redis, redis: {{url: \"{url}\", name: {name}}}}}\n")
        }
        None => String::new(),
    };
    start_with(&extra).await
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio");
    let Some(binary) = RedisServer::binary("replica_redis bench") else {
        return;
    };
    let server = RedisServer::start(&binary, RedisAuth::Open);
    let url = server.url();
    let (median_us, p99_us) = runtime.block_on(delivery(&url));
    println!(
        "Redis stream delivery on loopback (XADD to a blocking XREAD's answer, 500 entries): median {median_us:.0} µs, p99 {p99_us:.0} µs"
    );
    let (on, peers, off) = runtime.block_on(async {
        let on = start(Some((&url, "a"))).await;
        let b = start(Some((&url, "b"))).await;
        let c = start(Some((&url, "c"))).await;
        let off = start(None).await;
        (on, (b, c), off)
    });
    // Peers with requests in flight everywhere, so that A's reports and its peer loads are full.
    let _peer_load: Vec<_> = [&peers.0, &peers.1]
        .iter()
        .flat_map(|h| {
            h.pool()
                .snapshot()
                .endpoints()
                .iter()
                .map(|e| e.start_request(2_000))
                .collect::<Vec<_>>()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));

    // Alternate off and on, 5 rounds of 1 s each; the picking thread's CPU time, this
    // process's (the picking thread plus the three runtimes' tasks) and redis-server's too.
    let (mut off_rates, mut on_rates) = (Vec::new(), Vec::new());
    let redis_pid = server.pid();
    let (mut on_wall, mut on_process, mut on_redis) = (0.0, 0.0, 0.0);
    for _ in 0..5 {
        off_rates.push(picks_per_second_and_cpu(
            &off,
            Duration::from_secs(1),
            4_096,
        ));
        let process_before = process_cpu(std::process::id());
        let redis_before = redis_pid.and_then(process_cpu);
        let started = Instant::now();
        on_rates.push(picks_per_second_and_cpu(&on, Duration::from_secs(1), 4_096));
        on_wall += started.elapsed().as_secs_f64();
        if let (Some(b), Some(a)) = (process_before, process_cpu(std::process::id())) {
            on_process += (a - b).as_secs_f64();
        }
        if let (Some(b), Some(a)) = (redis_before, redis_pid.and_then(process_cpu)) {
            on_redis += (a - b).as_secs_f64();
        }
    }
    let pick = |rates: &[PickRate], f: fn(&PickRate) -> f64| median(rates.iter().map(f).collect());
    let (off_rate, on_rate) = (pick(&off_rates, |r| r.wall), pick(&on_rates, |r| r.wall));
    let (off_cpu, on_cpu) = (pick(&off_rates, |r| r.cpu), pick(&on_rates, |r| r.cpu));
    let (off_share, on_share) = (pick(&off_rates, |r| r.share), pick(&on_rates, |r| r.share));
    println!(
        "picks/s on one thread, 64 endpoints, adaptive preset (median of 5 alternating 1 s rounds):\n  \
         Redis exchange off {off_rate:.0}\n  Redis exchange on  {on_rate:.0} ({:.3}× off)\n\
         per second of the picking thread's own CPU time (what a pick costs, whatever the machine's share):\n  \
         Redis exchange off {off_cpu:.0}\n  Redis exchange on  {on_cpu:.0} ({:.3}× off)\n\
         the picking thread's share of a core: off {off_share:.2}, on {on_share:.2}; while on, this process used {:.2} cores (the picking thread and the three runtimes' exchanges) and redis-server {:.2}, of the machine's {}; load average {}",
        on_rate / off_rate,
        on_cpu / off_cpu,
        on_process / on_wall,
        on_redis / on_wall,
        std::thread::available_parallelism().map_or(0, usize::from),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    );

    // About 1,000 picks per second on A, each held 1 s (about 1,000 in flight).
    let series = [
        "shepherd_replicas_sent_bytes_total",
        "shepherd_replicas_index_delta_bytes_sent_total",
        "shepherd_replicas_redis_read_bytes_total",
        "shepherd_replicas_redis_entries_written_total",
        "shepherd_replicas_redis_entries_read_total",
    ];
    let before: Vec<f64> = series.iter().map(|s| counter(&on, s)).collect();
    let paced = paced_picks(&on);
    let seconds = paced.seconds;
    let rate: Vec<f64> = series
        .iter()
        .zip(&before)
        .map(|(s, b)| (counter(&on, s) - b) / seconds)
        .collect();
    println!(
        "at {:.0} picks/s with {} in flight, one replica of three: writes {:.0} bytes/s to Redis (load reports {:.0}, index deltas {:.0}; {:.0} entries/s), reads {:.0} bytes/s of the two others' ({:.0} entries/s); payload bytes, without the protocol's framing",
        paced.picks as f64 / seconds,
        paced.held.len(),
        rate[0] + rate[1],
        rate[0],
        rate[1],
        rate[3],
        rate[2],
        rate[4],
    );
    drop(paced);
    runtime.block_on(async {
        on.shutdown(Duration::from_millis(100)).await;
        peers.0.shutdown(Duration::from_millis(100)).await;
        peers.1.shutdown(Duration::from_millis(100)).await;
        off.shutdown(Duration::from_millis(100)).await;
    });
}

/// The time from an `XADD` on one connection to a blocking `XREAD` on another returning it:
/// (median, p99) in microseconds over 500 entries, one every 2 ms.
async fn delivery(url: &str) -> (f64, f64) {
    let client = redis::Client::open(url).expect("a Redis URL");
    let mut writer = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers");
    let mut reader = client
        .get_multiplexed_async_connection()
        .await
        .expect("Redis answers");
    let start = Instant::now();
    let key = "bench:delivery";
    let reading = tokio::spawn(async move {
        let mut last = "0-0".to_string();
        let mut delays = Vec::new();
        while delays.len() < 500 {
            let reply: Option<redis::streams::StreamReadReply> = redis::cmd("XREAD")
                .arg("BLOCK")
                .arg(100)
                .arg("STREAMS")
                .arg(key)
                .arg(&last)
                .query_async(&mut reader)
                .await
                .expect("XREAD");
            let now = start.elapsed().as_nanos() as f64;
            for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
                if let Some(redis::Value::BulkString(sent)) = entry.map.get("t") {
                    let sent: f64 = String::from_utf8_lossy(sent).parse().unwrap_or(now);
                    delays.push((now - sent) / 1e3);
                }
                last = entry.id;
            }
        }
        delays
    });
    for _ in 0..500 {
        let sent = start.elapsed().as_nanos().to_string();
        let _: redis::Value = redis::cmd("XADD")
            .arg(key)
            .arg("*")
            .arg("t")
            .arg(sent)
            .query_async(&mut writer)
            .await
            .expect("XADD");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut delays = reading.await.expect("the reader");
    delays.sort_by(f64::total_cmp);
    (delays[delays.len() / 2], delays[delays.len() * 99 / 100])
}

fn counter(handle: &RuntimeHandle, series: &str) -> f64 {
    handle
        .render_metrics()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}
