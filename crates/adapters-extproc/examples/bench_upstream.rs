//! A trivial, fast stand-in for model servers: the upstream of `scripts/bench-extproc.sh`.
//!
//! Every port answers any `POST` at once with a small OpenAI-style completion (with `usage`),
//! after reading the whole body, and `GET /metrics` with a fixed, idle vLLM metrics page (so
//! `shepherd-epp` scrapes fresh metrics and routes as it would in production). It does no
//! work, so a benchmark through it measures the proxy path, not the server.
//!
//! ```sh
//! cargo run --release -p shepherd-adapters-extproc --example bench_upstream -- --ports 18000,18001
//! ```
#![forbid(unsafe_code)]

use std::convert::Infallible;
use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};

use bytes::Bytes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Fast fake model servers for benchmarks.
#[derive(Debug, Parser)]
struct Args {
    /// Ports to listen on (127.0.0.1), comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    ports: Vec<u16>,
}

const METRICS: &str = "\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name=\"bench\",engine=\"0\"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name=\"bench\",engine=\"0\"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name=\"bench\",engine=\"0\"} 0.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"24000\",engine=\"0\"} 1.0
";

async fn answer(
    port: u16,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let is_metrics = request.method() == Method::GET && request.uri().path() == "/metrics";
    // Read the whole body, as a model server does before it answers.
    let size = match request.into_body().collect().await {
        Ok(body) => body.to_bytes().len(),
        Err(_) => 0,
    };
    let (status, body) = if is_metrics {
        (StatusCode::OK, Bytes::from_static(METRICS.as_bytes()))
    } else {
        let prompt_tokens = size / 4;
        let text = format!(
            "{{\"id\":\"bench\",\"object\":\"text_completion\",\"model\":\"bench\",\
             \"choices\":[{{\"index\":0,\"text\":\" ok\",\"finish_reason\":\"length\"}}],\
             \"usage\":{{\"prompt_tokens\":{prompt_tokens},\"completion_tokens\":1,\
             \"total_tokens\":{}}}}}",
            prompt_tokens + 1
        );
        (StatusCode::OK, Bytes::from(text))
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
        .headers_mut()
        .insert("x-bench-upstream", hyper::header::HeaderValue::from(port));
    Ok(response)
}

async fn serve(listener: TcpListener, port: u16) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(port, request));
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    for port in args.ports {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).await?;
        eprintln!("bench_upstream listening on {}", listener.local_addr()?);
        tokio::spawn(serve(listener, port));
    }
    tokio::signal::ctrl_c().await?;
    Ok(())
}
