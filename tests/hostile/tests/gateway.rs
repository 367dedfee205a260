//! `shepherd-gateway`'s public port against slow, stalled, idle, flooding, unauthenticated and
//! self-promoting clients, with a legitimate client beside them that must still be served.
//!
//! Every test starts its own gateway (a child process, so its memory and open files are its
//! own) in front of simulated vLLM servers, with timeouts shortened so each test ends in
//! seconds; the defaults are the same mechanisms with longer clocks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::time::Duration;

use shepherd_hostile_tests::{Process, backends, config_file, endpoint_lines, metrics_page};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};

const MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";

/// A gateway over `servers` simulated servers with `more` YAML (its own `gateway:` and
/// `server:` keys go in `gateway` and `server`).
async fn gateway(
    servers: &shepherd_sim::serve::ServeHandle,
    gateway: &str,
    server: &str,
    more: &str,
) -> (Process, tempfile::NamedTempFile) {
    let config = config_file(&format!(
        "endpoints:\n{}scraping: {{intervalMs: 50}}\ngateway:\n  retryAfterSeconds: 1\n{gateway}server:\n  metricsPort: 0\n{server}{more}",
        endpoint_lines(servers)
    ));
    let process = Process::gateway(&config, &[]).await;
    (process, config)
}

fn completion(prompt: &str) -> String {
    serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2}).to_string()
}

/// One legitimate completion; its status.
async fn legit(client: &reqwest::Client, addr: SocketAddr) -> u16 {
    client
        .post(format!("http://{addr}/v1/completions"))
        .header("content-type", "application/json")
        .body(completion("Hello from a real client"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// Whether the server closed `stream` (EOF or reset) within `within`.
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + within;
    loop {
        match timeout_at_read(stream, &mut buf, deadline).await {
            Some(Ok(0)) | Some(Err(_)) => return true,
            Some(Ok(_)) => continue, // an answer (a 408, say); the close follows
            None => return false,
        }
    }
}

async fn timeout_at_read(
    stream: &mut TcpStream,
    buf: &mut [u8],
    deadline: Instant,
) -> Option<std::io::Result<usize>> {
    tokio::time::timeout_at(deadline, stream.read(buf))
        .await
        .ok()
}

/// 2. 512 clients that send their bodies one byte a second do not take the 512 places of
/// `maxConcurrentRequests` from a legitimate client: places are taken once a body is read.
#[tokio::test]
async fn slow_bodies_do_not_take_the_concurrency_places() {
    let servers = backends(2).await;
    let (gateway, _config) = gateway(&servers, "  maxConcurrentRequests: 512\n", "", "").await;
    let addr = gateway.addr("http");
    let body = completion("slow");
    let mut slow = Vec::new();
    for _ in 0..512 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        slow.push(stream);
    }
    let dribble = tokio::spawn(async move {
        for i in 0..5 {
            for stream in &mut slow {
                let _ = stream.write_all(&body.as_bytes()[i..=i]).await;
            }
            sleep(Duration::from_secs(1)).await;
        }
        slow
    });
    sleep(Duration::from_millis(500)).await;
    let client = reqwest::Client::new();
    let mut statuses = Vec::new();
    for _ in 0..20 {
        statuses.push(legit(&client, addr).await);
    }
    assert!(
        statuses.iter().all(|&s| s == 200),
        "legitimate requests beside 512 slow bodies: {statuses:?}"
    );
    drop(dribble.await.unwrap());
}

/// 3. 64 clients that stall 15 MiB bodies hold no more than `maxBufferedBodyBytes` (those
/// over it get 503 `body_buffer_full`), and `bodyReadTimeoutMs` frees what they held.
#[tokio::test]
async fn stalled_bodies_hold_bounded_memory_until_their_deadline() {
    let servers = backends(2).await;
    let (gateway, _config) = gateway(
        &servers,
        "  maxBufferedBodyBytes: 67108864\n  bodyReadTimeoutMs: 4000\n",
        "",
        "",
    )
    .await;
    let addr = gateway.addr("http");
    let before = gateway.rss_kib();
    const BODY: usize = 15 << 20;
    let chunk = vec![b' '; 1 << 20];
    let mut stalled = Vec::new();
    for _ in 0..64 {
        let chunk = chunk.clone();
        stalled.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            let head = format!(
                "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                BODY + 1
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            // All but the last byte, then nothing: the server must not keep it all.
            for _ in 0..15 {
                if timeout(Duration::from_secs(5), stream.write_all(&chunk))
                    .await
                    .map_or(true, |w| w.is_err())
                {
                    break;
                }
            }
            let mut answer = Vec::new();
            let _ = timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
            String::from_utf8_lossy(&answer).into_owned()
        }));
    }
    sleep(Duration::from_secs(2)).await;
    let during = gateway.rss_kib();
    let client = reqwest::Client::new();
    let mut answers = Vec::new();
    for task in stalled {
        answers.push(task.await.unwrap());
    }
    let full = answers
        .iter()
        .filter(|a| a.contains("body_buffer_full"))
        .count();
    let timed_out = answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 408"))
        .count();
    let peak = gateway.peak_rss_kib();
    eprintln!(
        "stalled bodies: RSS {before} KiB before, {during} KiB while stalled, peak {peak} KiB; \
         {full} answered 503 body_buffer_full, {timed_out} answered 408"
    );
    assert!(
        full >= 50,
        "most stalled bodies over the budget are refused: {full}"
    );
    assert!(timed_out >= 1, "the rest time out: {timed_out}");
    // 64 MiB of budget, plus the allocator's and hyper's slack: far below 64 × 15 MiB.
    assert!(
        peak.saturating_sub(before) < 200 * 1024,
        "peak RSS grew by {} KiB",
        peak - before
    );
    assert_eq!(legit(&client, addr).await, 200);
}

/// 4a. 2,000 connections that send their request head one byte at a time are closed at
/// `headerReadTimeoutMs`, and a legitimate client is served meanwhile.
#[tokio::test]
async fn slow_headers_are_closed_at_the_header_deadline() {
    let servers = backends(1).await;
    let (gateway, _config) = gateway(&servers, "", "  headerReadTimeoutMs: 2000\n", "").await;
    let addr = gateway.addr("http");
    let mut slow = Vec::new();
    for _ in 0..2000 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(b"P").await.unwrap();
        slow.push(stream);
    }
    let started = Instant::now();
    let client = reqwest::Client::new();
    assert_eq!(legit(&client, addr).await, 200);
    for (i, byte) in b"OST /v1/".iter().enumerate() {
        if started.elapsed() > Duration::from_millis(1500) {
            break;
        }
        for stream in &mut slow {
            let _ = stream.write_all(&[*byte]).await;
        }
        sleep(Duration::from_millis(100 * (i as u64 + 1))).await;
    }
    let mut closed = 0;
    for stream in &mut slow {
        if closed_within(
            stream,
            Duration::from_secs(8).saturating_sub(started.elapsed()),
        )
        .await
        {
            closed += 1;
        }
    }
    eprintln!(
        "slow headers: {closed} of 2000 closed within {:?}",
        started.elapsed()
    );
    assert_eq!(closed, 2000);
    assert_eq!(legit(&client, addr).await, 200);
    let metrics = metrics_page(gateway.addr("admin")).await;
    assert!(
        metrics.contains(
            "shepherd_http_connections_closed_total{port=\"http\",reason=\"header_timeout\"} 2000"
        ),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("connections"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// 4b. 10,000 keep-alive connections left idle after a request are closed at
/// `idleTimeoutMs`; meanwhile a legitimate client is served, and afterwards the gateway holds
/// no more open files than before.
#[tokio::test]
async fn idle_connections_are_closed_at_the_idle_timeout() {
    const IDLE: usize = 10_000;
    let limit = shepherd_hostile_tests::open_files_limit();
    assert!(
        limit > IDLE as u64 + 500,
        "open-file limit {limit} too low for the test"
    );
    let servers = backends(1).await;
    let (gateway, _config) = gateway(
        &servers,
        "",
        "  idleTimeoutMs: 3000\n  maxConnections: 12000\n",
        "",
    )
    .await;
    let addr = gateway.addr("http");
    let files_before = gateway.open_files();
    let mut idle = Vec::with_capacity(IDLE);
    let mut buf = vec![0u8; 1024];
    for _ in 0..IDLE {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let n = stream.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        idle.push(stream);
    }
    let opened = Instant::now();
    let client = reqwest::Client::new();
    assert_eq!(legit(&client, addr).await, 200);
    let mut closed = 0;
    for stream in &mut idle {
        if closed_within(
            stream,
            Duration::from_secs(15).saturating_sub(opened.elapsed()),
        )
        .await
        {
            closed += 1;
        }
    }
    eprintln!(
        "idle: {closed} of {IDLE} closed within {:?}",
        opened.elapsed()
    );
    assert_eq!(closed, IDLE);
    drop(idle);
    sleep(Duration::from_millis(500)).await;
    let files_after = gateway.open_files();
    assert!(
        files_after <= files_before + 8,
        "open files {files_before} before, {files_after} after"
    );
}

/// 4c. Over `maxConnections`, a connection is refused at once with a 503 that says why.
#[tokio::test]
async fn connections_over_the_cap_are_refused_with_503() {
    let servers = backends(1).await;
    let (gateway, _config) = gateway(&servers, "", "  maxConnections: 100\n", "").await;
    let addr = gateway.addr("http");
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(TcpStream::connect(addr).await.unwrap());
    }
    sleep(Duration::from_millis(300)).await;
    let mut refused = 0;
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut answer = Vec::new();
        let read = timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        if answer.starts_with("HTTP/1.1 503") && answer.contains("connection_limit") {
            refused += 1;
        } else {
            eprintln!("not refused: {read:?} {answer:?}");
        }
    }
    assert_eq!(refused, 20);
    drop(held);
    sleep(Duration::from_millis(300)).await;
    assert_eq!(legit(&reqwest::Client::new(), addr).await, 200);
}

/// 7. With `apiKeys`, the admin routes on the traffic port take the key too (the probes
/// excepted); the debug views are rendered at most 10 times a second.
#[tokio::test]
async fn admin_routes_on_the_traffic_port_take_the_client_key() {
    let servers = backends(1).await;
    let (gateway, _config) = gateway(&servers, "  apiKeys: [sk-hostile-test]\n", "", "").await;
    let addr = gateway.addr("http");
    let client = reqwest::Client::new();
    let get = |path: &'static str, key: Option<&'static str>| {
        let mut request = client.get(format!("http://{addr}{path}"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    for path in ["/metrics", "/debug/config", "/debug/adaptive"] {
        assert_eq!(get(path, None).await, 401, "{path} without a key");
        assert_eq!(
            get(path, Some("sk-wrong")).await,
            401,
            "{path} with a wrong key"
        );
        assert_eq!(
            get(path, Some("sk-hostile-test")).await,
            200,
            "{path} with the key"
        );
    }
    for path in ["/healthz", "/readyz"] {
        assert_ne!(get(path, None).await, 401, "{path} is a probe");
    }
    let mut statuses = Vec::new();
    for _ in 0..40 {
        statuses.push(get("/debug/config", Some("sk-hostile-test")).await);
    }
    let limited = statuses.iter().filter(|&&s| s == 429).count();
    assert!(limited >= 20, "a flood of debug views is cut: {statuses:?}");
}

/// 8. A client's own `x-shepherd-priority` is ignored unless `gateway.trustedHeaders` names
/// it: under saturation a request that calls itself sheddable is not shed (it waits as
/// priority 0) — and with the header trusted, it is.
#[tokio::test]
async fn a_client_set_priority_is_ignored_unless_trusted() {
    const FLOW: &str = "plugins:\n  - name: one-at-a-time\n    type: concurrency-detector\n    parameters: {maxConcurrency: 1}\nflowControl:\n  defaultRequestTTL: 30s\n  saturationDetector: {pluginRef: one-at-a-time}\n";
    for trusted in [false, true] {
        // Real-time servers: the long request lasts seconds.
        let servers = shepherd_hostile_tests::backends_at(1, 1.0).await;
        let gateway_yaml = if trusted {
            "  trustedHeaders: [x-shepherd-priority]\n"
        } else {
            ""
        };
        let (gateway, _config) = gateway(&servers, gateway_yaml, "", FLOW).await;
        let addr = gateway.addr("http");
        let client = reqwest::Client::new();
        // A long streaming request fills the pool.
        let long = client
            .post(format!("http://{addr}/v1/completions"))
            .body(
                serde_json::json!({"model": MODEL, "prompt": "long", "max_tokens": 2000, "stream": true})
                    .to_string(),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(long.status().as_u16(), 200);
        let sheddable = client
            .post(format!("http://{addr}/v1/completions"))
            .header("x-shepherd-priority", "-1")
            .body(completion("I say I am sheddable"))
            .timeout(Duration::from_millis(1500))
            .send()
            .await;
        match (trusted, sheddable) {
            (true, Ok(answer)) => assert_eq!(answer.status().as_u16(), 429, "trusted: shed"),
            (true, Err(error)) => panic!("trusted: expected 429, got {error}"),
            (false, Ok(answer)) => panic!(
                "untrusted: the request should wait as priority 0, got {}",
                answer.status()
            ),
            (false, Err(error)) => assert!(error.is_timeout(), "untrusted: waits ({error})"),
        }
        drop(long);
    }
}

/// 9. A 15 MB model name is not echoed back: the error answer stays small.
#[tokio::test]
async fn error_answers_echo_client_text_bounded() {
    let servers = backends(1).await;
    let (gateway, _config) = gateway(&servers, "", "", "").await;
    let addr = gateway.addr("http");
    // The pool's model list, known (a request before it is known goes to a server, whose own
    // answer is passed through as it is).
    let listed = reqwest::get(format!("http://{addr}/v1/models"))
        .await
        .unwrap();
    assert_eq!(listed.status().as_u16(), 200);
    let model = "m".repeat(15 << 20);
    let body = serde_json::json!({"model": model, "prompt": "hi"}).to_string();
    let answer = reqwest::Client::new()
        .post(format!("http://{addr}/v1/completions"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 404);
    let text = answer.text().await.unwrap();
    assert!(text.len() < 2048, "a {} byte answer", text.len());
    assert!(text.contains("model_not_found"), "{text}");
}

/// 4d. The admin port (here `shepherd-epp`'s) has the same limits: slow heads are closed at
/// the deadline, and connections over `maxAdminConnections` are refused while `/metrics`
/// still answers on a connection kept open.
#[tokio::test]
async fn the_admin_port_has_the_same_limits() {
    let servers = backends(1).await;
    let config = config_file(&format!(
        "endpoints:\n{}server:\n  headerReadTimeoutMs: 2000\n  maxAdminConnections: 50\n",
        endpoint_lines(&servers)
    ));
    let epp = Process::epp(&config, &[]).await;
    let admin = epp.addr("admin");
    // A client of the admin port that keeps its connection.
    let prometheus = reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let scrape = |client: &reqwest::Client| {
        let request = client.get(format!("http://{admin}/metrics"));
        async move {
            // The whole page is read, as Prometheus reads it: a response dropped before its
            // body's end cannot give its connection back for the next scrape.
            match request.send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    r.bytes().await.map_or(0, |_| status)
                }
                Err(_) => 0,
            }
        }
    };
    assert_eq!(scrape(&prometheus).await, 200);
    let mut slow = Vec::new();
    for _ in 0..49 {
        let mut stream = TcpStream::connect(admin).await.unwrap();
        stream.write_all(b"GET /met").await.unwrap();
        slow.push(stream);
    }
    sleep(Duration::from_millis(200)).await;
    let mut over = TcpStream::connect(admin).await.unwrap();
    let mut answer = Vec::new();
    let _ = timeout(Duration::from_secs(5), over.read_to_end(&mut answer)).await;
    assert!(
        answer.starts_with(b"HTTP/1.1 503"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert_eq!(
        scrape(&prometheus).await,
        200,
        "the kept connection still answers"
    );
    let started = Instant::now();
    let mut closed = 0;
    for stream in &mut slow {
        if closed_within(stream, Duration::from_secs(6)).await {
            closed += 1;
        }
    }
    assert_eq!(closed, 49, "within {:?}", started.elapsed());
    assert_eq!(scrape(&reqwest::Client::new()).await, 200);
}

/// A dead server fails every request the pick sends it: each moves to a fallback and is
/// counted, but the log gets one line per period, not one per request.
#[tokio::test]
async fn a_dead_server_does_not_flood_the_log() {
    let mut servers = backends(2).await;
    let (gateway, _config) = gateway(&servers, "", "", "").await;
    let addr = gateway.addr("http");
    let client = reqwest::Client::new();
    assert_eq!(legit(&client, addr).await, 200);
    assert!(servers.stop(0).await);
    let mut statuses = Vec::new();
    for i in 0..60 {
        let answer = client
            .post(format!("http://{addr}/v1/completions"))
            .body(completion(&format!("request {i} after a server died")))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .unwrap();
        statuses.push(answer.status().as_u16());
    }
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let failed = shepherd_hostile_tests::metric(
        gateway.addr("admin"),
        "shepherd_gateway_upstream_errors_total",
    )
    .await;
    let lines = gateway.log_lines("model server failed before answering");
    eprintln!(
        "{failed} exchanges failed before a response; {} log lines",
        lines.len()
    );
    assert!(failed >= 1.0);
    assert!(lines.len() <= 2, "{lines:#?}");
}
