//! The tonic service for `envoy.service.ext_proc.v3.ExternalProcessor/Process`, written out
//! by hand instead of generated so that answers go through [`ExtProcCodec`] (body chunks
//! written from the body's own buffer) rather than prost's `Vec`-backed messages.
//!
//! It serves exactly the generated server's route and status for anything else
//! (`UNIMPLEMENTED`), takes messages up to a decoding limit, and sends no compressed messages.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use shepherd_adapters_extproc::{ExtProcOptions, ExtProcService};
//! # use shepherd_scheduler_core::prelude::*;
//! # fn scheduler() -> Arc<ReloadableScheduler> { unimplemented!() }
//! let server = ExtProcService::new(scheduler(), ExtProcOptions::default()).into_server();
//! tonic::transport::Server::builder().add_service(server);
//! ```

use std::convert::Infallible;
use std::task::{Context, Poll};

use envoy_types::pb::envoy::service::ext_proc::v3::ProcessingRequest;
use tonic::body::Body as GrpcBody;
use tonic::codegen::{BoxFuture, Service, StdError, http};
use tonic::server::{Grpc, NamedService, StreamingService};
use tonic::{Request, Response, Status, Streaming};

use crate::codec::{ExtProcCodec, Outgoing};
use crate::service::{AnswerStream, ExtProcService};

/// The gRPC service name Envoy calls.
pub const SERVICE_NAME: &str = "envoy.service.ext_proc.v3.ExternalProcessor";

/// The path of its one method.
const PROCESS_PATH: &str = "/envoy.service.ext_proc.v3.ExternalProcessor/Process";

/// The ext_proc picker as a tonic service. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct ExtProcServer {
    service: ExtProcService,
    max_decoding_message_size: usize,
}

impl ExtProcServer {
    /// `service`, taking messages of at most `max_decoding_message_size` bytes.
    pub fn new(service: ExtProcService, max_decoding_message_size: usize) -> Self {
        ExtProcServer {
            service,
            max_decoding_message_size,
        }
    }
}

impl NamedService for ExtProcServer {
    const NAME: &'static str = SERVICE_NAME;
}

/// The `Process` method, as tonic's streaming server drives it.
struct Process(ExtProcService);

impl StreamingService<ProcessingRequest> for Process {
    type Response = Outgoing;
    type ResponseStream = AnswerStream;
    type Future = BoxFuture<Response<AnswerStream>, Status>;

    fn call(&mut self, request: Request<Streaming<ProcessingRequest>>) -> Self::Future {
        let service = self.0.clone();
        Box::pin(async move { Ok(Response::new(service.open(request.into_inner()))) })
    }
}

impl<B> Service<http::Request<B>> for ExtProcServer
where
    B: http_body::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<GrpcBody>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != PROCESS_PATH {
            return Box::pin(async { Ok(unimplemented()) });
        }
        let method = Process(self.service.clone());
        let limit = self.max_decoding_message_size;
        Box::pin(async move {
            let mut grpc = Grpc::new(ExtProcCodec).apply_max_message_size_config(Some(limit), None);
            Ok(grpc.streaming(method, request).await)
        })
    }
}

/// The answer to a method this service does not have.
fn unimplemented() -> http::Response<GrpcBody> {
    let mut response = http::Response::new(GrpcBody::default());
    let headers = response.headers_mut();
    headers.insert(
        Status::GRPC_STATUS,
        http::HeaderValue::from(tonic::Code::Unimplemented as i32),
    );
    headers.insert(
        http::header::CONTENT_TYPE,
        tonic::metadata::GRPC_CONTENT_TYPE,
    );
    response
}
