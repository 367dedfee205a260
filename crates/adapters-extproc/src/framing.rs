//! The gRPC messages a stream *declares*, charged to the [`BodyBudget`] before the gRPC
//! library reserves room for them.
//!
//! A gRPC message starts with five bytes: a compression flag and its length. On reading them
//! the gRPC library reserves the whole length at once (up to the server's message limit,
//! [`ExtProcOptions::max_message_bytes`](crate::ExtProcOptions::max_message_bytes)), before
//! a byte of the message has arrived, and a stream's decode buffer keeps that size while the
//! stream lives. So a peer that declares a 20 MiB message on each of a few hundred streams and
//! sends nothing more would make the picker reserve gigabytes. [`DeclaredMessages`] reads
//! each stream's message prefixes as its bytes go by and holds, charged to the budget, the
//! declared length of the message being received until it has arrived whole (its bytes are
//! then the request body's, charged by the [`RequestAssembly`](crate::assembly::RequestAssembly));
//! a declaration the budget cannot take ends the stream with `RESOURCE_EXHAUSTED` before the
//! library sees it (counted in `shepherd_extproc_body_buffer_full_total{buffer="message"}`).
//! The messages' budget is the service's
//! [`message_budget`](crate::ExtProcService::message_budget), of the same size as the bodies'
//! (`--max-buffered-bytes`) but apart from it: a body is charged once as it arrives and once
//! as it is assembled, and neither may starve the other.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_adapters_extproc::budget::BodyBudget;
//! use shepherd_adapters_extproc::framing::Prefixes;
//!
//! let budget = Arc::new(BodyBudget::new(1 << 20));
//! let mut prefixes = Prefixes::new(budget.reservation());
//! // A 3-byte message, half of it arrived: its 3 bytes are held.
//! prefixes.read(&[0, 0, 0, 0, 3, b'a']).unwrap();
//! assert_eq!(budget.used(), 3);
//! // The rest, then the first byte of a prefix declaring 16 MiB.
//! prefixes.read(&[b'b', b'c', 0]).unwrap();
//! assert_eq!(budget.used(), 0);
//! assert!(prefixes.read(&[1, 0, 0, 0]).is_err()); // 16 MiB: over the budget
//! ```

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::Status;
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};
use tonic::codegen::{Body as HttpBody, Bytes, Service};

use crate::budget::{BodyBudget, BodyReservation, BudgetExhausted};

/// Length of a gRPC message prefix: the compression flag and a 4-byte big-endian length.
const PREFIX: usize = 5;

/// Reads gRPC message prefixes from a stream's bytes and charges the message being received.
/// See the [module docs](self).
#[derive(Debug)]
pub struct Prefixes {
    reservation: BodyReservation,
    /// Bytes of the current message still to come.
    remaining: usize,
    /// The prefix being read, and how much of it has arrived.
    prefix: [u8; PREFIX],
    filled: usize,
}

impl Prefixes {
    /// Prefixes charged to `reservation`.
    pub fn new(reservation: BodyReservation) -> Self {
        Prefixes {
            reservation,
            remaining: 0,
            prefix: [0; PREFIX],
            filled: 0,
        }
    }

    /// Reads the next bytes of the stream; refuses a declared message the budget cannot hold.
    pub fn read(&mut self, mut bytes: &[u8]) -> Result<(), BudgetExhausted> {
        while !bytes.is_empty() {
            if self.remaining > 0 {
                let skipped = self.remaining.min(bytes.len());
                self.remaining -= skipped;
                bytes = &bytes[skipped..];
                if self.remaining == 0 {
                    self.reservation.release(); // arrived whole
                }
                continue;
            }
            let taken = (PREFIX - self.filled).min(bytes.len());
            self.prefix[self.filled..self.filled + taken].copy_from_slice(&bytes[..taken]);
            self.filled += taken;
            bytes = &bytes[taken..];
            if self.filled == PREFIX {
                self.filled = 0;
                let [_, a, b, c, d] = self.prefix;
                let declared = u32::from_be_bytes([a, b, c, d]) as usize;
                self.reservation.grow_to(declared)?;
                self.remaining = declared;
                if declared == 0 {
                    self.reservation.release();
                }
            }
        }
        Ok(())
    }
}

/// The tower layer that puts [`DeclaredMessages`] in front of a gRPC service.
#[derive(Debug, Clone)]
pub struct DeclaredMessagesLayer {
    budget: Arc<BodyBudget>,
}

impl DeclaredMessagesLayer {
    /// Charges declared messages to `budget`.
    pub fn new(budget: Arc<BodyBudget>) -> Self {
        DeclaredMessagesLayer { budget }
    }
}

impl<S> tower_layer::Layer<S> for DeclaredMessagesLayer {
    type Service = DeclaredMessages<S>;

    fn layer(&self, inner: S) -> Self::Service {
        DeclaredMessages {
            inner,
            budget: Arc::clone(&self.budget),
        }
    }
}

/// A gRPC service whose request bodies are read through [`Prefixes`].
#[derive(Debug, Clone)]
pub struct DeclaredMessages<S> {
    inner: S,
    budget: Arc<BodyBudget>,
}

impl<S> Service<Request<Body>> for DeclaredMessages<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let prefixes = Prefixes::new(self.budget.reservation());
        self.inner
            .call(request.map(|body| Body::new(Charged { body, prefixes })))
    }
}

/// A request body read through [`Prefixes`].
struct Charged {
    body: Body,
    prefixes: Prefixes,
}

impl HttpBody for Charged {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
            && let Err(exhausted) = this.prefixes.read(data)
        {
            tracing::warn!(%exhausted, "ext_proc stream declared a message the body budget cannot hold; ended");
            return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                "the picker's buffered-body budget cannot hold this stream's message: {exhausted}"
            )))));
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;

    fn message(len: usize) -> Vec<u8> {
        let mut bytes = vec![0];
        bytes.extend_from_slice(&(len as u32).to_be_bytes());
        bytes.extend(std::iter::repeat_n(b'x', len));
        bytes
    }

    #[test]
    fn a_declared_message_is_held_until_it_arrives_or_the_stream_ends() {
        let budget = Arc::new(BodyBudget::new(1 << 20));
        let mut prefixes = Prefixes::new(budget.reservation());
        for len in [10, 0, 300, 20] {
            prefixes.read(&message(len)).unwrap();
            assert_eq!(budget.used(), 0);
        }
        let partial = message(5000);
        prefixes.read(&partial[..100]).unwrap();
        assert_eq!(budget.used(), 5000);
        drop(prefixes); // the stream ended mid-message
        assert_eq!(budget.used(), 0);
    }

    proptest! {
        /// However the bytes are split, the same messages are read and the same bytes held.
        #[test]
        fn prefixes_are_read_across_any_split(
            lens in proptest::collection::vec(0usize..2000, 1..8),
            cuts in proptest::collection::vec(1usize..700, 1..40),
        ) {
            let stream: Vec<u8> = lens.iter().flat_map(|&l| message(l)).collect();
            let budget = Arc::new(BodyBudget::new(1 << 20));
            let mut prefixes = Prefixes::new(budget.reservation());
            let mut rest = &stream[..];
            for cut in cuts.iter().cycle() {
                if rest.is_empty() {
                    break;
                }
                let (now, later) = rest.split_at((*cut).min(rest.len()));
                prefixes.read(now).unwrap();
                rest = later;
            }
            prop_assert_eq!(budget.used(), 0);
            prop_assert_eq!(prefixes.remaining, 0);
            prop_assert_eq!(prefixes.filled, 0);
        }
    }
}
