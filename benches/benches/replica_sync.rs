//! The cost of exchanging in-flight load and index deltas between picker replicas (issue 16):
//! picks per second of one replica with the exchange off and on, in one run, and the bytes the
//! exchange sends per second at about 1,000 picks per second (load reports and index deltas
//! apart).
//!
//! Three runtimes on loopback, each with the adaptive preset over the same 64 endpoints (no
//! scraping: metrics are set once); replica A picks in a tight loop on one thread, holding
//! each request for a while so that every endpoint has requests in flight (what the reports
//! carry). Every prompt is unique (4 blocks of 64 pseudo tokens, none shared), so every pick
//! journals 4 new keys: the index deltas' worst case per pick (shared prefixes travel once per
//! interval). "Off" is the same runtime without a `replicas` section. The rate figure paces A
//! at 1,000 picks per second, each request held 1 s, and reads how many bytes A sent its two
//! peers over 3 s.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench replica_sync
//! ```

#[path = "common/replica_picks.rs"]
mod replica_picks;
use replica_picks::*;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use shepherd_runtime::RuntimeHandle;

fn free_ports(n: usize) -> Vec<SocketAddr> {
    let sockets: Vec<UdpSocket> = (0..n)
        .map(|_| UdpSocket::bind("127.0.0.1:0").expect("a loopback port"))
        .collect();
    sockets
        .iter()
        .map(|s| s.local_addr().expect("bound"))
        .collect()
}

async fn start(replicas: Option<(SocketAddr, Vec<SocketAddr>)>) -> RuntimeHandle {
    let extra = match replicas {
        Some((listen, peers)) => {
            let peers: Vec<String> = peers.iter().map(ToString::to_string).collect();
            format!(
                "replicas: {{listen: {listen}, peers: [{}], key: bench-replicas-shared-secret-0123}}\n",
                peers.join(", ")
            )
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
    let addrs = free_ports(3);
    let (on, peers, off) = runtime.block_on(async {
        let on = start(Some((addrs[0], vec![addrs[1], addrs[2]]))).await;
        let b = start(Some((addrs[1], vec![addrs[0], addrs[2]]))).await;
        let c = start(Some((addrs[2], vec![addrs[0], addrs[1]]))).await;
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

    // Alternate off and on, 5 rounds of 1 s each.
    let (mut off_rates, mut on_rates) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        off_rates.push(picks_per_second_and_cpu(
            &off,
            Duration::from_secs(1),
            4_096,
        ));
        on_rates.push(picks_per_second_and_cpu(&on, Duration::from_secs(1), 4_096));
    }
    let pick = |rates: &[PickRate], f: fn(&PickRate) -> f64| median(rates.iter().map(f).collect());
    let (off_rate, on_rate) = (pick(&off_rates, |r| r.wall), pick(&on_rates, |r| r.wall));
    let (off_cpu, on_cpu) = (pick(&off_rates, |r| r.cpu), pick(&on_rates, |r| r.cpu));
    let (off_share, on_share) = (pick(&off_rates, |r| r.share), pick(&on_rates, |r| r.share));
    println!(
        "picks/s on one thread, 64 endpoints, adaptive preset (median of 5 alternating 1 s rounds):\n  \
         exchange off {off_rate:.0}\n  exchange on  {on_rate:.0} ({:.3}× off)\n\
         per second of the picking thread's own CPU time: off {off_cpu:.0}, on {on_cpu:.0} ({:.3}× off); its share of a core: off {off_share:.2}, on {on_share:.2}",
        on_rate / off_rate,
        on_cpu / off_cpu
    );

    // About 1,000 picks per second on A, each held 1 s (about 1,000 in flight).
    let stats_before = (
        counter(&on, "shepherd_replicas_sent_bytes_total"),
        counter(&on, "shepherd_replicas_index_delta_bytes_sent_total"),
    );
    let paced = paced_picks(&on);
    let seconds = paced.seconds;
    let load = counter(&on, "shepherd_replicas_sent_bytes_total") - stats_before.0;
    let deltas = counter(&on, "shepherd_replicas_index_delta_bytes_sent_total") - stats_before.1;
    println!(
        "at {:.0} picks/s with {} in flight, to each of 2 peers: load reports {:.0} bytes/s, index deltas {:.0} bytes/s ({:.0} in all)",
        paced.picks as f64 / seconds,
        paced.held.len(),
        load / seconds / 2.0,
        deltas / seconds / 2.0,
        (load + deltas) / seconds / 2.0
    );
    drop(paced);
    runtime.block_on(async {
        on.shutdown(Duration::from_millis(100)).await;
        peers.0.shutdown(Duration::from_millis(100)).await;
        peers.1.shutdown(Duration::from_millis(100)).await;
        off.shutdown(Duration::from_millis(100)).await;
    });
}

fn counter(handle: &RuntimeHandle, series: &str) -> f64 {
    handle
        .render_metrics()
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}
