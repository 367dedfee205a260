//! A no-op ext_proc server: the baseline of `scripts/bench-extproc.sh`.
//!
//! It speaks the same protocol shape as `shepherd-epp` under the example Envoy config
//! (`FULL_DUPLEX_STREAMED` request and response bodies), but decides nothing: it answers the
//! request headers at once with a fixed destination (header and `envoy.lb` metadata, like the
//! picker), echoes every body chunk as it arrives, and passes the response through. What it
//! costs is what any ext_proc endpoint picker costs in Envoy; what `shepherd-epp` adds on top
//! is parsing, scheduling and the response bookkeeping.
//!
//! With `--hold-body` it answers as `shepherd-epp` does in `FULL_DUPLEX_STREAMED` mode: nothing
//! until the request body is complete, then the headers' answer and the body's chunks (as
//! received, no copy). That is the least any picker that reads the body pays: the body is
//! not forwarded before it has arrived whole.
//!
//! With `--buffered` it answers as `shepherd-epp` does under a `BUFFERED` request body: the
//! headers at once with nothing changed, then the whole body (one message) with the
//! destination, and no body back. Run it behind an Envoy whose `request_body_mode` is
//! `BUFFERED`.
//!
//! ```sh
//! cargo run --release -p shepherd-adapters-extproc --example noop_extproc -- \
//!     --port 19102 --destination 127.0.0.1:18000
//! ```
#![forbid(unsafe_code)]

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;

use clap::Parser;
use shepherd_adapters_extproc::answer::{
    Route, pass_headers, pass_response_headers, request_trailers, response_trailers, route_body,
    route_headers, streamed_chunk,
};
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::processing_request::Request as Phase;
use shepherd_adapters_extproc::envoy_types::pb::envoy::service::ext_proc::v3::{
    ProcessingRequest, ProcessingResponse,
};
use shepherd_adapters_extproc::options::DEFAULT_CHUNK_SIZE;
use shepherd_adapters_extproc::ExtProcOptions;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// A no-op ext_proc server answering a fixed destination.
#[derive(Debug, Parser)]
struct Args {
    /// Port to listen on (127.0.0.1).
    #[arg(long, default_value_t = 9002)]
    port: u16,
    /// The destination every request is sent to, `ip:port`.
    #[arg(long)]
    destination: SocketAddr,
    /// Answer the request headers only once the whole body arrived, then stream the body back.
    #[arg(long, conflicts_with = "buffered")]
    hold_body: bool,
    /// Envoy buffers the request body (`BUFFERED`): route at the body, send nothing back.
    #[arg(long)]
    buffered: bool,
}

#[derive(Debug, Clone)]
struct Noop {
    destination: String,
    options: ExtProcOptions,
    hold_body: bool,
    buffered: bool,
}

/// A stream's request body held until its end (`--hold-body`).
#[derive(Default)]
struct Held {
    chunks: Vec<Vec<u8>>,
    headers_sent: bool,
}

type Answers = Pin<Box<dyn Stream<Item = Result<ProcessingResponse, Status>> + Send>>;

impl Noop {
    /// The headers' answer: the destination, and the body's length once it is known (Envoy
    /// drops `content-length` in `FULL_DUPLEX_STREAMED` mode; the picker sets it back).
    fn route(&self, content_length: Option<usize>) -> ProcessingResponse {
        route_headers(&self.destination(content_length), &self.options)
    }

    /// The fixed destination as a route, nothing else changed.
    fn destination(&self, content_length: Option<usize>) -> Route<'_> {
        Route {
            destination: &self.destination,
            content_length,
            remove: &[],
            prefill: None,
            encode: None,
            kv_source: None,
            trace: None,
            body: None,
        }
    }

    fn answer(
        &self,
        message: ProcessingRequest,
        held: &mut Held,
        out: &mut Vec<ProcessingResponse>,
    ) {
        match message.request {
            Some(Phase::RequestHeaders(headers)) if self.buffered && !headers.end_of_stream => {
                out.push(pass_headers(&[]));
            }
            Some(Phase::RequestBody(_)) if self.buffered => {
                out.push(route_body(&self.destination(None), &self.options));
            }
            Some(Phase::RequestHeaders(headers)) if self.hold_body && !headers.end_of_stream => {}
            Some(Phase::RequestBody(body)) if self.hold_body && !held.headers_sent => {
                held.chunks.push(body.body);
                if body.end_of_stream {
                    held.headers_sent = true;
                    out.push(self.route(Some(held.chunks.iter().map(Vec::len).sum())));
                    let chunks = std::mem::take(&mut held.chunks);
                    let last = chunks.len() - 1;
                    for (i, chunk) in chunks.into_iter().enumerate() {
                        echo(chunk, i == last, true, out);
                    }
                }
            }
            Some(Phase::RequestTrailers(_)) if self.hold_body && !held.headers_sent => {
                held.headers_sent = true;
                out.push(self.route(Some(held.chunks.iter().map(Vec::len).sum())));
                for chunk in std::mem::take(&mut held.chunks) {
                    echo(chunk, false, true, out);
                }
                out.push(request_trailers());
            }
            Some(Phase::RequestHeaders(_)) => out.push(self.route(None)),
            Some(Phase::RequestBody(body)) => echo(body.body, body.end_of_stream, true, out),
            Some(Phase::RequestTrailers(_)) => out.push(request_trailers()),
            Some(Phase::ResponseHeaders(_)) => out.push(pass_response_headers()),
            Some(Phase::ResponseBody(body)) => echo(body.body, body.end_of_stream, false, out),
            Some(Phase::ResponseTrailers(_)) => out.push(response_trailers()),
            None => {}
        }
    }
}

/// The chunk back, unchanged, cut to Envoy's streamed chunk limit.
fn echo(body: Vec<u8>, end_of_stream: bool, request: bool, out: &mut Vec<ProcessingResponse>) {
    if body.len() <= DEFAULT_CHUNK_SIZE {
        out.push(streamed_chunk(body, end_of_stream, request));
        return;
    }
    let pieces: Vec<&[u8]> = body.chunks(DEFAULT_CHUNK_SIZE).collect();
    let last = pieces.len() - 1;
    for (i, piece) in pieces.into_iter().enumerate() {
        out.push(streamed_chunk(
            piece.to_vec(),
            end_of_stream && i == last,
            request,
        ));
    }
}

#[tonic::async_trait]
impl ExternalProcessor for Noop {
    type ProcessStream = Answers;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Self::ProcessStream>, Status> {
        let mut inbound = request.into_inner();
        let (tx, rx) = mpsc::channel(16);
        let noop = self.clone();
        tokio::spawn(async move {
            let mut answers = Vec::with_capacity(2);
            let mut held = Held::default();
            // Envoy resets the stream after each request: an error here is the normal end.
            while let Ok(Some(message)) = inbound.message().await {
                noop.answer(message, &mut held, &mut answers);
                for answer in answers.drain(..) {
                    if tx.send(Ok(answer)).await.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn Error>> {
    let args = Args::parse();
    let noop = Noop {
        destination: args.destination.to_string(),
        options: ExtProcOptions::default(),
        hold_body: args.hold_body,
        buffered: args.buffered,
    };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, args.port));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(
        "noop_extproc listening on {} (destination {})",
        listener.local_addr()?,
        noop.destination
    );
    let incoming = TcpListenerStream::new(listener).map(|stream| {
        let stream = stream?;
        stream.set_nodelay(true)?;
        Ok::<_, std::io::Error>(stream)
    });
    tonic::transport::Server::builder()
        .add_service(ExternalProcessorServer::new(noop).max_decoding_message_size(32 << 20))
        .serve_with_incoming_shutdown(incoming, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
