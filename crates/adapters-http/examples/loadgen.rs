//! Load generator for `shepherd-gateway`: simulated vLLM servers in this process, the gateway
//! binary as a child process in front of them, and three measurements printed in one run.
//!
//! 1. **Overhead at one client**: requests one at a time, alternating between a simulated
//!    server directly and the gateway in front of the same servers: latency (send to last
//!    byte) of non-streaming requests, time to first byte and latency of streaming ones,
//!    p50 and p99 side by side, and what the gateway adds.
//! 2. **Concurrency**: N streaming requests at once (1,000 by default) through the gateway,
//!    then directly, twice (the first round opens the connections, the second is reported);
//!    every one must end with `data: [DONE]`; errors are counted over both rounds.
//! 3. **Memory**: M requests (100,000 by default) through the gateway at a fixed
//!    concurrency, sampling the gateway's resident memory (`VmRSS`) as they go: it must stay
//!    flat once warm.
//!
//! ```sh
//! scripts/bench-gateway.sh              # builds in release and runs this with the defaults
//! cargo run --release -p shepherd-adapters-http --example loadgen -- --help
//! ```
//!
//! The simulated servers run at `--speed` (100: an H100 step of ~6 ms takes ~60 µs), so what
//! is measured is mostly HTTP and the gateway. Everything shares this machine's cores:
//! compare the columns of one run, not figures across machines.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::error::Error;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Uri, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use shepherd_sim::serve::{self, DEFAULT_MODEL, ServeConfig};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::task::JoinSet;
use tokio::time::Instant;

type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// Load generator for shepherd-gateway (see the file's docs).
#[derive(Debug, Parser)]
struct Args {
    /// The shepherd-gateway binary (default: next to this example's directory).
    #[arg(long)]
    gateway: Option<PathBuf>,
    /// Simulated servers.
    #[arg(long, default_value_t = 4)]
    servers: usize,
    /// Simulated seconds per wall second.
    #[arg(long, default_value_t = 100.0)]
    speed: f64,
    /// Requests of each kind, each way, in the one-client overhead phase.
    #[arg(long, default_value_t = 2000)]
    overhead_requests: usize,
    /// Streaming requests at once in the concurrency phase.
    #[arg(long, default_value_t = 1000)]
    concurrent: usize,
    /// Output tokens of each request in the concurrency phase.
    #[arg(long, default_value_t = 32)]
    concurrent_tokens: u32,
    /// Requests through the gateway in the memory phase (0 skips it).
    #[arg(long, default_value_t = 100_000)]
    memory_requests: usize,
    /// Requests in flight at once in the memory phase.
    #[arg(long, default_value_t = 64)]
    memory_concurrency: usize,
}

/// Timings of one request.
#[derive(Debug, Clone, Copy)]
struct Sample {
    ttfb: Duration,
    total: Duration,
}

fn client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(connector)
}

fn body(prompt: &str, tokens: u32, stream: bool) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "model": DEFAULT_MODEL, "prompt": prompt, "max_tokens": tokens, "stream": stream,
        })
        .to_string(),
    )
}

/// Sends one completion request and reads the whole answer.
async fn one(client: &HttpClient, uri: &Uri, body: Bytes, stream: bool) -> Result<Sample, String> {
    let started = Instant::now();
    let request = Request::post(uri.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let mut body = response.into_body();
    let mut ttfb = None;
    let mut tail: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| e.to_string())?;
        if let Some(data) = frame.data_ref()
            && !data.is_empty()
        {
            ttfb.get_or_insert_with(|| started.elapsed());
            tail.extend_from_slice(data);
            if tail.len() > 64 {
                tail.drain(..tail.len() - 64);
            }
        }
    }
    let total = started.elapsed();
    if stream && !tail.ends_with(b"data: [DONE]\n\n") {
        return Err("the stream did not end with [DONE]".into());
    }
    Ok(Sample {
        ttfb: ttfb.unwrap_or(total),
        total,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn row(name: &str, direct: &mut [Duration], gateway: &mut [Duration]) {
    direct.sort_unstable();
    gateway.sort_unstable();
    for (label, p) in [("p50", 0.5), ("p99", 0.99)] {
        let d = percentile(direct, p);
        let g = percentile(gateway, p);
        let added = g.as_secs_f64() - d.as_secs_f64();
        println!(
            "  {:<34} {:>12} {:>12} {:>+11.3} ms",
            format!("{name} {label}"),
            ms(d),
            ms(g),
            added * 1e3
        );
    }
}

/// `12k` for 12,000, `1500` for 1,500.
fn count(n: usize) -> String {
    if n >= 10_000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU time the process has used (user + system, all threads), from `/proc/PID/stat` at
/// Linux's usual 100 ticks per second.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

fn cpu_line(pid: u32, before: Option<f64>, requests: usize) -> String {
    match (before, cpu_seconds(pid)) {
        (Some(before), Some(after)) => {
            let used = after - before;
            format!(
                "gateway CPU {:.0} ms, {:.0} µs per request",
                used * 1e3,
                used * 1e6 / requests.max(1) as f64
            )
        }
        _ => "gateway CPU unknown".into(),
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

/// `n` streaming requests at once to `uris` (round robin); returns samples and errors.
async fn burst(
    client: &HttpClient,
    uris: &[Uri],
    n: usize,
    tokens: u32,
) -> (Vec<Sample>, Vec<String>, Duration) {
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for i in 0..n {
        let client = client.clone();
        let uri = uris[i % uris.len()].clone();
        tasks.spawn(async move {
            let body = body(
                &format!("Concurrent request {i}: tell me a story"),
                tokens,
                true,
            );
            tokio::time::timeout(Duration::from_secs(120), one(&client, &uri, body, true))
                .await
                .unwrap_or_else(|_| Err("timed out".into()))
        });
    }
    let mut samples = Vec::with_capacity(n);
    let mut errors = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(Ok(sample)) => samples.push(sample),
            Ok(Err(error)) => errors.push(error),
            Err(error) => errors.push(error.to_string()),
        }
    }
    (samples, errors, started.elapsed())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let gateway_bin = match &args.gateway {
        Some(path) => path.clone(),
        None => std::env::current_exe()?
            .parent()
            .and_then(|examples| examples.parent())
            .map(|dir| dir.join("shepherd-gateway"))
            .ok_or("cannot find the shepherd-gateway binary; pass --gateway")?,
    };
    println!("load average at start: {}", load_average());

    let mut config = ServeConfig::ephemeral(args.servers);
    config.speed = args.speed;
    config.max_pending = 4096;
    let pool = serve::spawn(config).await?;
    let direct: Vec<Uri> = pool
        .addrs()
        .iter()
        .map(|a| format!("http://{a}/v1/completions").parse())
        .collect::<Result<_, _>>()?;

    let dir = tempfile::tempdir()?;
    let config_path = dir.path().join("shepherd.yaml");
    let endpoints: Vec<String> = pool.addrs().iter().map(|a| format!("\"{a}\"")).collect();
    std::fs::write(
        &config_path,
        format!(
            "endpoints: [{}]\nserver: {{httpPort: 0, metricsPort: 0}}\n",
            endpoints.join(", ")
        ),
    )?;
    let mut child = Command::new(&gateway_bin)
        .arg("--config")
        .arg(&config_path)
        .env("SHEPHERD_LOG", "error")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", gateway_bin.display()))?;
    let pid = child.id().ok_or("the gateway exited")?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    let mut base = None;
    while let Some(line) = lines.next_line().await? {
        if let Some(url) = line.strip_prefix("shepherd-gateway: listening on ") {
            base = Some(url.to_owned());
            break;
        }
    }
    let base = base.ok_or("the gateway exited before listening")?;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let through: Uri = format!("{base}/v1/completions").parse()?;
    println!(
        "gateway {} (pid {pid}) in front of {} simulated servers at speed {}",
        base, args.servers, args.speed
    );
    // Let the scraper see every server once.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let client = client();
    // Warm both paths (connections, caches).
    for i in 0..200 {
        let uri = &direct[i % direct.len()];
        one(&client, uri, body("warm up", 2, i % 2 == 0), i % 2 == 0).await?;
        one(
            &client,
            &through,
            body("warm up", 2, i % 2 == 0),
            i % 2 == 0,
        )
        .await?;
    }

    // 1. Overhead at one client.
    let n = args.overhead_requests;
    let (mut dj, mut gj) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut ds_ttfb, mut gs_ttfb) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut ds_total, mut gs_total) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let uri = &direct[i % direct.len()];
        let prompt = format!("One client, request {i}: a short question");
        // Alternate which path goes first, so neither always meets a warmer server.
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for via_gateway in order {
            let target = if via_gateway { &through } else { uri };
            let json = one(&client, target, body(&prompt, 4, false), false).await?;
            let stream = one(&client, target, body(&prompt, 4, true), true).await?;
            if via_gateway {
                gj.push(json.total);
                gs_ttfb.push(stream.ttfb);
                gs_total.push(stream.total);
            } else {
                dj.push(json.total);
                ds_ttfb.push(stream.ttfb);
                ds_total.push(stream.total);
            }
        }
    }
    println!(
        "\n1. one client, {n} requests of each kind each way (4 output tokens)\n  {:<34} {:>12} {:>12} {:>14}",
        "", "direct", "gateway", "added"
    );
    row("non-streaming latency", &mut dj, &mut gj);
    row("streaming time to first byte", &mut ds_ttfb, &mut gs_ttfb);
    row("streaming latency", &mut ds_total, &mut gs_total);

    // 2. Concurrency: a first round opens the connections, the second is reported; errors
    //    are counted over both.
    let rss_before_burst = rss_kib(pid);
    let mut g_errors = Vec::new();
    let mut d_errors = Vec::new();
    let mut g_round = (Vec::new(), Duration::ZERO);
    let mut d_round = (Vec::new(), Duration::ZERO);
    let mut burst_cpu = String::new();
    for _round in 0..2 {
        let cpu_before = cpu_seconds(pid);
        let (samples, errors, wall) = burst(
            &client,
            std::slice::from_ref(&through),
            args.concurrent,
            args.concurrent_tokens,
        )
        .await;
        burst_cpu = cpu_line(pid, cpu_before, args.concurrent);
        g_errors.extend(errors);
        g_round = (samples, wall);
        let (samples, errors, wall) =
            burst(&client, &direct, args.concurrent, args.concurrent_tokens).await;
        d_errors.extend(errors);
        d_round = (samples, wall);
    }
    let ((g_samples, g_wall), (d_samples, d_wall)) = (g_round, d_round);
    println!(
        "\n2. {} streaming requests at once ({} output tokens each), second of two rounds\n  {:<34} {:>12} {:>12}",
        args.concurrent, args.concurrent_tokens, "", "direct", "gateway"
    );
    println!(
        "  {:<34} {:>12} {:>12}",
        "completed",
        d_samples.len(),
        g_samples.len()
    );
    println!(
        "  {:<34} {:>12} {:>12}",
        "errors (both rounds)",
        d_errors.len(),
        g_errors.len()
    );
    println!(
        "  {:<34} {:>12} {:>12}",
        "wall time",
        ms(d_wall),
        ms(g_wall)
    );
    let mut d_ttfb: Vec<Duration> = d_samples.iter().map(|s| s.ttfb).collect();
    let mut g_ttfb: Vec<Duration> = g_samples.iter().map(|s| s.ttfb).collect();
    let mut d_total: Vec<Duration> = d_samples.iter().map(|s| s.total).collect();
    let mut g_total: Vec<Duration> = g_samples.iter().map(|s| s.total).collect();
    row("time to first byte", &mut d_ttfb, &mut g_ttfb);
    row("latency", &mut d_total, &mut g_total);
    for error in g_errors.iter().take(5) {
        println!("  gateway error: {error}");
    }
    println!("  {burst_cpu}");
    println!(
        "  gateway RSS before / after the bursts: {} / {} KiB",
        rss_before_burst.unwrap_or(0),
        rss_kib(pid).unwrap_or(0)
    );

    // 3. Memory over many requests.
    let mut memory_ok = true;
    if args.memory_requests > 0 {
        let total = args.memory_requests;
        let next = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let cpu_before = cpu_seconds(pid);
        let mut samples: Vec<(usize, u64)> = vec![(0, rss_kib(pid).unwrap_or(0))];
        let mut workers = JoinSet::new();
        for _ in 0..args.memory_concurrency {
            let client = client.clone();
            let uri = through.clone();
            let next = Arc::clone(&next);
            let failed = Arc::clone(&failed);
            workers.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return;
                    }
                    let stream = i.is_multiple_of(2);
                    let prompt = format!("Memory run, request {i}, prefix group {}", i % 97);
                    if one(&client, &uri, body(&prompt, 4, stream), stream)
                        .await
                        .is_err()
                    {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
        let step = (total / 10).max(1);
        let mut mark = step;
        while mark <= total {
            while next.load(Ordering::Relaxed) < mark {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            samples.push((mark, rss_kib(pid).unwrap_or(0)));
            mark += step;
        }
        while workers.join_next().await.is_some() {}
        let elapsed = started.elapsed();
        let final_rss = rss_kib(pid).unwrap_or(0);
        println!(
            "\n3. {total} requests through the gateway, {} at a time: {:.0} requests/s, {} failed",
            args.memory_concurrency,
            total as f64 / elapsed.as_secs_f64(),
            failed.load(Ordering::Relaxed)
        );
        println!("  {}", cpu_line(pid, cpu_before, total));
        let line: Vec<String> = samples
            .iter()
            .map(|(at, rss)| format!("{}: {:.1} MiB", count(*at), *rss as f64 / 1024.0))
            .collect();
        println!("  gateway RSS: {}", line.join(", "));
        let warm = samples.get(2).map_or(0, |s| s.1).max(1);
        let growth = final_rss as f64 / warm as f64 - 1.0;
        println!(
            "  after warm-up ({} requests) {:.1} MiB, at the end {:.1} MiB: {:+.1} %",
            count(samples.get(2).map_or(0, |s| s.0)),
            warm as f64 / 1024.0,
            final_rss as f64 / 1024.0,
            growth * 100.0
        );
        memory_ok = failed.load(Ordering::Relaxed) == 0 && growth < 0.10;
    }
    println!("\nload average at the end: {}", load_average());

    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    if !g_errors.is_empty() || !memory_ok {
        return Err("errors, or memory growth over 10 %".into());
    }
    Ok(())
}
