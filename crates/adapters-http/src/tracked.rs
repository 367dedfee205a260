//! The response body on its way to the client, carrying the request's handle.
//!
//! [`TrackedBody`] wraps the model server's body and hands each frame on as soon as it
//! arrives — no buffering, so an SSE event reaches the client when the server sends it. On
//! the way it:
//!
//! - reports the first token to the scheduler ([`RequestHandle::first_token`]) at the first
//!   non-empty data frame, which releases the request's pending-prefill count;
//! - keeps the body's last bytes in a [`UsageScanner`] (bounded: 16 KiB whatever the
//!   response's length) for a 2xx response;
//! - when the body ends (its last byte, for a body of known length), finishes the handle with the `usage` found there
//!   ([`Completion::success`]; [`Completion::failed`] for a non-2xx status), and when the
//!   server's stream breaks off, with a failure;
//! - evaluates the config's `request-attribute-reporter`s on that usage and logs each value
//!   at debug level (the gateway has no dynamic metadata to send them in, as `shepherd-epp`
//!   does);
//! - when the client goes away first, is dropped by the HTTP server, and the unfinished
//!   handle ends as *cancelled*;
//! - with `flowControl.enableEviction`, holds the request's [`EvictionLease`]: when flow
//!   control evicts the (sheddable) request mid-response, the body ends there with an error
//!   (`request evicted by flow control`: the status line is already sent, so the HTTP server
//!   cuts the response short), the handle ends as *cancelled*, and the lease is released.
//!
//! Either way the request's in-flight counts on its endpoint and its place under the
//! gateway's concurrency cap are released at that moment, not later.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use shepherd_runtime::telemetry::{RequestTrace, names};
use shepherd_runtime::upstream::RequestObservation;
use shepherd_runtime::usage::UsageScanner;
use shepherd_scheduler_core::completion::{Completion, Outcome, RequestHandle};
use shepherd_scheduler_core::report::AttributeReporter;

use shepherd_runtime::flow::EvictionLease;

use crate::GatewayStats;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
use crate::limit::Admitted;

/// A model server's response body, tracked until it ends. See the [module docs](self).
#[derive(Debug)]
pub struct TrackedBody {
    inner: Incoming,
    /// `None` once the request has been finished.
    tracking: Option<Tracking>,
}

#[derive(Debug)]
struct Tracking {
    handle: RequestHandle,
    /// `None` for a non-2xx response: its completion is a failure, usage or not.
    scanner: Option<UsageScanner>,
    first_seen: bool,
    stats: Arc<GatewayStats>,
    /// The request's upstream figures, when recorded.
    observation: Option<RequestObservation>,
    _admitted: Admitted,
    /// The request's span: ends with the body.
    trace: RequestTrace,
    /// The config's `request-attribute-reporter`s.
    reporters: Arc<[AttributeReporter]>,
    /// The request's eviction lease, with `enableEviction`.
    lease: Option<EvictionLease>,
}

impl TrackedBody {
    /// Tracks `inner`, the body of a response with status `status`, for `handle`.
    pub(crate) fn new(
        inner: Incoming,
        status: u16,
        handle: RequestHandle,
        stats: Arc<GatewayStats>,
        admitted: Admitted,
        usage_scan_bytes: usize,
        trace: RequestTrace,
    ) -> Self {
        let success = (200..300).contains(&status);
        let mut body = TrackedBody {
            inner,
            tracking: Some(Tracking {
                handle,
                scanner: success.then(|| UsageScanner::new(usage_scan_bytes)),
                first_seen: false,
                observation: None,
                stats,
                _admitted: admitted,
                trace,
                reporters: Arc::new([]),
                lease: None,
            }),
        };
        if body.inner.is_end_stream() {
            // An empty body is never polled.
            body.finish(false);
        }
        body
    }

    /// Records the response in `observation` too (first byte, sizes, usage).
    pub(crate) fn observed(mut self, observation: Option<RequestObservation>) -> Self {
        match &mut self.tracking {
            Some(tracking) => tracking.observation = observation,
            // An empty body, finished already.
            None => {
                if let Some(observation) = observation {
                    observation.finish(None);
                }
            }
        }
        self
    }

    /// Evaluates `reporters` when the response ends (see the [module docs](self)).
    pub(crate) fn reporting(mut self, reporters: Arc<[AttributeReporter]>) -> Self {
        if let Some(tracking) = &mut self.tracking {
            tracking.reporters = reporters;
        }
        self
    }

    /// Ends the body when flow control evicts the request (see the [module docs](self)).
    pub(crate) fn evictable(mut self, lease: Option<EvictionLease>) -> Self {
        if let Some(tracking) = &mut self.tracking {
            tracking.lease = lease;
        }
        self
    }

    /// Whether flow control evicted the request now (it is then over: cancelled).
    fn evicted(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(tracking) = &mut self.tracking else {
            return false;
        };
        let Some(lease) = &mut tracking.lease else {
            return false;
        };
        if lease.poll_evicted(cx).is_pending() {
            return false;
        }
        tracing::info!(request_id = %tracking.handle.id(), "flow control evicted a request mid-response");
        tracking
            .trace
            .set_error("evicted", "request evicted by flow control");
        if let Some(observation) = tracking.observation.take() {
            observation.finish(None);
        }
        // Dropping the unfinished handle ends it as cancelled; the lease goes with it.
        self.tracking = None;
        true
    }

    fn finish(&mut self, broken: bool) {
        let Some(mut tracking) = self.tracking.take() else {
            return;
        };
        let completion = match (&tracking.scanner, broken) {
            (Some(scanner), false) => {
                let usage = scanner.usage();
                if let Some(usage) = &usage {
                    tracking.stats.usage(usage);
                }
                Completion::success(usage)
            }
            _ => Completion::failed(),
        };
        if broken {
            tracking.stats.upstream_error_mid_stream();
            tracking
                .trace
                .set_error("response_broken", "the response body broke off");
        }
        if let Some(usage) = &completion.usage {
            let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
            let trace = &tracking.trace;
            trace.set_i64(names::INPUT_TOKENS, count(usage.prompt_tokens));
            trace.set_i64(names::OUTPUT_TOKENS, count(usage.completion_tokens));
            if let Some(cached) = usage.cached_tokens {
                trace.set_i64(names::USAGE_CACHED_TOKENS, count(cached));
            }
        }
        if completion.outcome == Outcome::Success {
            for reporter in tracking.reporters.iter() {
                match reporter.report(completion.usage.as_ref()) {
                    Ok(Some(value)) => tracing::debug!(
                        reporter = reporter.plugin(),
                        namespace = reporter.namespace(),
                        key = reporter.key(),
                        value,
                        "request-attribute-reporter"
                    ),
                    Ok(None) => {}
                    Err(error) => tracing::debug!(
                        reporter = reporter.plugin(),
                        %error,
                        "request-attribute-reporter reported nothing"
                    ),
                }
            }
        }
        if let Some(mut observation) = tracking.observation.take() {
            if broken {
                observation.error("ModelServerError");
            }
            observation.finish(completion.usage.as_ref());
        }
        tracking.handle.finish(completion);
    }
}

impl Body for TrackedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if this.evicted(cx) {
            return Poll::Ready(Some(Err("request evicted by flow control".into())));
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(tracking)) = (frame.data_ref(), &mut this.tracking)
                    && !data.is_empty()
                {
                    if !tracking.first_seen {
                        tracking.first_seen = true;
                        tracking.handle.first_token();
                    }
                    if let Some(observation) = &mut tracking.observation {
                        observation.first_byte();
                        observation.response_bytes(data.len());
                    }
                    if let Some(scanner) = &mut tracking.scanner {
                        scanner.push(data);
                    }
                }
                // A body of known length is over at its last byte: the HTTP server will not
                // poll again to see the end, so finish now.
                if this.inner.is_end_stream() {
                    this.finish(false);
                }
            }
            Poll::Ready(Some(Err(_))) => this.finish(true),
            Poll::Ready(None) => this.finish(false),
            Poll::Pending => {}
        }
        polled.map_err(BoxError::from)
    }

    fn is_end_stream(&self) -> bool {
        // While tracking, say "not yet" so the server polls once more and sees the end.
        self.tracking.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for TrackedBody {
    fn drop(&mut self) {
        if let Some(tracking) = self.tracking.take() {
            // The client went away (or the server shut down) before the end: dropping the
            // unfinished handle ends the request as cancelled.
            tracking.stats.client_disconnect();
            drop(tracking);
        }
    }
}
