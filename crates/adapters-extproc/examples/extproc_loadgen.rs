//! A small closed-loop HTTP/1.1 load generator for `scripts/bench-extproc.sh`.
//!
//! `--clients` connections each send one request, wait for the whole answer, and send the
//! next, until `--requests` requests (after `--warmup` more) have been sent or `--max-secs`
//! have passed. Each request is an OpenAI completion of `--body-bytes` bytes whose prompt
//! starts with the request's number, so no two share a prefix (the picker's prefix index
//! keeps growing until it reaches its capacity). Prints one JSON line: requests, errors,
//! requests per second, p50 / p99 / mean latency (request sent to response read whole) and
//! p50 / p99 time to first byte (`ttft`: request sent to the response's head, which a server
//! that answers at once sends right after reading the body), in milliseconds.
//!
//! `--clients 150 --body-bytes 225280` is the long-prompt run of the benchmark: 150 streams
//! in flight through Envoy at once, each carrying a 220 KiB prompt.
//!
//! ```sh
//! cargo run --release -p shepherd-adapters-extproc --example extproc_loadgen -- \
//!     --url http://127.0.0.1:8081/v1/completions --clients 16 --requests 20000
//! ```
#![forbid(unsafe_code)]

use std::error::Error;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// Closed-loop HTTP/1.1 load generator.
#[derive(Debug, Parser)]
struct Args {
    /// `http://ip:port/path` to POST to.
    #[arg(long)]
    url: String,
    /// Concurrent clients (one connection each).
    #[arg(long, default_value_t = 1)]
    clients: usize,
    /// Requests measured.
    #[arg(long, default_value_t = 10_000)]
    requests: u64,
    /// Requests sent first and not measured.
    #[arg(long, default_value_t = 500)]
    warmup: u64,
    /// Size of each request body.
    #[arg(long, default_value_t = 16 * 1024)]
    body_bytes: usize,
    /// Stop after this many seconds even if requests are left.
    #[arg(long, default_value_t = 120)]
    max_secs: u64,
    /// A name for this run, copied into the output.
    #[arg(long, default_value = "run")]
    label: String,
}

struct Target {
    host: String,
    authority: String,
    path: String,
}

fn parse_url(url: &str) -> Result<Target, Box<dyn Error>> {
    let rest = url
        .strip_prefix("http://")
        .ok_or("only http:// URLs are supported")?;
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority.to_string();
    if !(host.starts_with("127.") || host.starts_with("localhost") || host.starts_with("[::1]")) {
        return Err("loopback targets only".into());
    }
    Ok(Target {
        host,
        authority: authority.to_string(),
        path: if path.is_empty() {
            "/".into()
        } else {
            path.into()
        },
    })
}

/// The start of every body, up to the ticket's 16 hex digits.
const HEAD: &str = "{\"model\":\"bench\",\"max_tokens\":1,\"prompt\":\"request ";

/// A body of `size` bytes (at least the head, the ticket and the closing): the head, a
/// placeholder ticket, filler words, `"}`. Built once; [`body`] copies it and writes the ticket.
fn template(size: usize) -> Vec<u8> {
    let tail = b"\"}";
    let mut text = Vec::with_capacity(size.max(HEAD.len() + 17 + tail.len()));
    text.extend_from_slice(HEAD.as_bytes());
    text.extend_from_slice(b"0000000000000000 ");
    let filler = b"the quick brown fox jumps over the lazy dog ";
    let mut i = 0;
    while text.len() + tail.len() < size {
        text.push(filler[i % filler.len()]);
        i += 1;
    }
    text.extend_from_slice(tail);
    text
}

/// The body of request `ticket`: the template with the ticket written in, so that no two
/// prompts share a prefix past the head.
fn body(ticket: u64, template: &[u8]) -> Bytes {
    let mut text = template.to_vec();
    let digits = format!("{ticket:016x}");
    text[HEAD.len()..HEAD.len() + 16].copy_from_slice(digits.as_bytes());
    Bytes::from(text)
}

#[derive(Default)]
struct Results {
    latencies_us: Vec<u64>,
    ttft_us: Vec<u64>,
    errors: u64,
    non_2xx: u64,
}

struct Shared {
    target: Target,
    args: Args,
    template: Vec<u8>,
    next: AtomicU64,
    warm_at: Mutex<Option<Instant>>,
    deadline: Instant,
    results: Mutex<Results>,
}

async fn client(shared: Arc<Shared>) {
    let total = shared.args.warmup + shared.args.requests;
    'connect: loop {
        if Instant::now() >= shared.deadline || shared.next.load(Ordering::Relaxed) >= total {
            return;
        }
        let stream = match TcpStream::connect(&shared.target.host).await {
            Ok(stream) => stream,
            Err(_) => {
                shared.results.lock().errors += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok((mut sender, connection)) = http1::handshake(TokioIo::new(stream)).await else {
            shared.results.lock().errors += 1;
            continue;
        };
        tokio::spawn(connection);
        let mut local = Vec::with_capacity(1024);
        let mut local_ttft = Vec::with_capacity(1024);
        loop {
            let ticket = shared.next.fetch_add(1, Ordering::Relaxed);
            if ticket >= total || Instant::now() >= shared.deadline {
                let mut results = shared.results.lock();
                results.latencies_us.append(&mut local);
                results.ttft_us.append(&mut local_ttft);
                return;
            }
            if ticket == shared.args.warmup {
                *shared.warm_at.lock() = Some(Instant::now());
            }
            let request = Request::post(shared.target.path.as_str())
                .header("host", shared.target.authority.as_str())
                .header("content-type", "application/json")
                .body(Full::new(body(ticket, &shared.template)));
            let Ok(request) = request else {
                shared.results.lock().errors += 1;
                return;
            };
            let started = Instant::now();
            let outcome = async {
                let response = sender.send_request(request).await?;
                let first_byte = started.elapsed();
                let status = response.status();
                response.into_body().collect().await?;
                Ok::<_, hyper::Error>((status, first_byte))
            }
            .await;
            let elapsed = started.elapsed();
            match outcome {
                Ok((status, first_byte)) => {
                    if !status.is_success() {
                        shared.results.lock().non_2xx += 1;
                    }
                    if ticket >= shared.args.warmup {
                        local.push(elapsed.as_micros() as u64);
                        local_ttft.push(first_byte.as_micros() as u64);
                    }
                }
                Err(_) => {
                    let mut results = shared.results.lock();
                    results.errors += 1;
                    results.latencies_us.append(&mut local);
                    results.ttft_us.append(&mut local_ttft);
                    continue 'connect;
                }
            }
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let target = parse_url(&args.url)?;
    let started = Instant::now();
    let shared = Arc::new(Shared {
        target,
        deadline: started + Duration::from_secs(args.max_secs),
        next: AtomicU64::new(0),
        warm_at: Mutex::new(if args.warmup == 0 {
            Some(started)
        } else {
            None
        }),
        results: Mutex::new(Results::default()),
        template: template(args.body_bytes),
        args,
    });
    let tasks: Vec<_> = (0..shared.args.clients)
        .map(|_| tokio::spawn(client(Arc::clone(&shared))))
        .collect();
    for task in tasks {
        task.await?;
    }
    let ended = Instant::now();
    let warm_at = shared.warm_at.lock().unwrap_or(started);
    let mut results = std::mem::take(&mut *shared.results.lock());
    results.latencies_us.sort_unstable();
    results.ttft_us.sort_unstable();
    let n = results.latencies_us.len();
    let seconds = ended.duration_since(warm_at).as_secs_f64();
    let mean = if n == 0 {
        f64::NAN
    } else {
        results.latencies_us.iter().sum::<u64>() as f64 / n as f64 / 1000.0
    };
    println!(
        "{{\"label\":\"{}\",\"clients\":{},\"body_bytes\":{},\"requests\":{},\"errors\":{},\"non_2xx\":{},\"seconds\":{:.3},\"rps\":{:.0},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"mean_ms\":{:.3},\"ttft_p50_ms\":{:.3},\"ttft_p99_ms\":{:.3}}}",
        shared.args.label,
        shared.args.clients,
        shared.args.body_bytes,
        n,
        results.errors,
        results.non_2xx,
        seconds,
        n as f64 / seconds,
        percentile(&results.latencies_us, 50.0),
        percentile(&results.latencies_us, 99.0),
        mean,
        percentile(&results.ttft_us, 50.0),
        percentile(&results.ttft_us, 99.0),
    );
    Ok(())
}
