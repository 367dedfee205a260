//! Reading a request body whole: within its size limit, within its deadline, and within the
//! bytes all bodies may hold at once.
//!
//! The scheduler needs the whole body (the prompt decides the pick), so the gateway reads it
//! before anything else happens — before the request takes a place under
//! `gateway.maxConcurrentRequests`, so a slow client cannot hold a place it does not use. It
//! refuses the body as soon as it is known to be too large: a `Content-Length` over
//! `gateway.maxBodyBytes` is answered 413 before a byte of the body is read, and a body that
//! grows over it is answered 413 at the chunk that crosses it. A body still arriving
//! `gateway.bodyReadTimeoutMs` after the head gets 408. And every byte read is counted in a
//! [`BodyBudget`] shared by all requests (`gateway.maxBufferedBodyBytes`): a chunk that would
//! take the total over it ends its request with 503 (`body_buffer_full`). The bytes are given
//! back when the [`ReadBody`] is dropped — once the model server has answered, or the request
//! failed.
//!
//! ```
//! use std::time::Duration;
//! use axum::body::Body;
//! use axum::http::HeaderMap;
//! use shepherd_adapters_http::body::{BodyBudget, BodyLimits, read_body};
//!
//! # tokio_test_block_on(async {
//! let budget = BodyBudget::new(64);
//! let limits = BodyLimits { max_bytes: 32, timeout: Duration::from_secs(1) };
//! let body = read_body(Body::from("hello"), &HeaderMap::new(), &limits, &budget).await.unwrap();
//! assert_eq!((&body.bytes()[..], budget.held()), (&b"hello"[..], 5));
//! drop(body);
//! assert_eq!(budget.held(), 0);
//! # });
//! # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
//! #     tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::ApiError;

/// What one body may cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    /// Largest body, in bytes (`gateway.maxBodyBytes`).
    pub max_bytes: usize,
    /// Time to read it whole, from when the reading starts (`gateway.bodyReadTimeoutMs`).
    pub timeout: Duration,
}

/// The bytes all request bodies may hold at once (`gateway.maxBufferedBodyBytes`).
#[derive(Debug, Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    max: usize,
}

impl BodyBudget {
    /// A budget of `max` bytes.
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, Semaphore::MAX_PERMITS);
        BodyBudget {
            bytes: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// The budget, in bytes.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Bytes held now.
    pub fn held(&self) -> usize {
        self.max - self.bytes.available_permits()
    }

    /// Takes `n` more bytes into `held`, or says the budget is spent.
    fn take(&self, held: &mut Option<OwnedSemaphorePermit>, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let Ok(n) = u32::try_from(n) else {
            return false;
        };
        match Arc::clone(&self.bytes).try_acquire_many_owned(n) {
            Ok(permit) => {
                match held {
                    Some(held) => held.merge(permit),
                    None => *held = Some(permit),
                }
                true
            }
            Err(_) => false,
        }
    }
}

/// A body read whole, holding its bytes in the [`BodyBudget`] until dropped.
#[derive(Debug)]
pub struct ReadBody {
    bytes: Bytes,
    _held: Option<OwnedSemaphorePermit>,
}

impl ReadBody {
    /// The body.
    pub fn bytes(&self) -> &Bytes {
        &self.bytes
    }
}

/// Reads `body` (whose request had `headers`) within `limits` and `budget`. See the
/// [module docs](self).
///
/// # Errors
///
/// 413 over the size limit, 408 past the deadline, 503 when the budget is spent, 400 when
/// the client broke the body off.
pub async fn read_body(
    body: Body,
    headers: &HeaderMap,
    limits: &BodyLimits,
    budget: &BodyBudget,
) -> Result<ReadBody, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(size) = declared
        && size > limits.max_bytes as u64
    {
        return Err(ApiError::body_too_large(
            Some(usize::try_from(size).unwrap_or(usize::MAX)),
            limits.max_bytes,
        ));
    }
    let waited_ms = u64::try_from(limits.timeout.as_millis()).unwrap_or(u64::MAX);
    match tokio::time::timeout(limits.timeout, collect(body, limits.max_bytes, budget)).await {
        Ok(read) => read,
        Err(_) => Err(ApiError::body_timeout(waited_ms)),
    }
}

async fn collect(mut body: Body, max: usize, budget: &BodyBudget) -> Result<ReadBody, ApiError> {
    let mut held = None;
    let mut chunks: Vec<Bytes> = Vec::new();
    let mut size = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ApiError::unreadable_body)?;
        let Ok(chunk) = frame.into_data() else {
            continue; // trailers
        };
        size = size.saturating_add(chunk.len());
        if size > max {
            return Err(ApiError::body_too_large(None, max));
        }
        if !budget.take(&mut held, chunk.len()) {
            return Err(ApiError::body_buffer_full(1));
        }
        chunks.push(chunk);
    }
    let bytes = match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            // The chunks are joined into one buffer, counted once: the copy is made while
            // the chunks are still held, and they go as soon as it is whole.
            let mut whole = BytesMut::with_capacity(size);
            for chunk in chunks.drain(..) {
                whole.extend_from_slice(&chunk);
            }
            whole.freeze()
        }
    };
    Ok(ReadBody { bytes, _held: held })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use futures_util::{StreamExt, stream};

    use super::*;

    fn limits(max: usize) -> BodyLimits {
        BodyLimits {
            max_bytes: max,
            timeout: Duration::from_secs(5),
        }
    }

    #[tokio::test]
    async fn the_budget_is_shared_and_given_back() {
        let budget = BodyBudget::new(10);
        let first = read_body(Body::from("123456"), &HeaderMap::new(), &limits(8), &budget)
            .await
            .unwrap();
        let refused = read_body(Body::from("12345"), &HeaderMap::new(), &limits(8), &budget)
            .await
            .unwrap_err();
        assert_eq!(refused.status().as_u16(), 503);
        assert_eq!(refused.dropped_reason(), Some("body_buffer_full"));
        assert_eq!(budget.held(), 6, "a refused body gives its bytes back");
        drop(first);
        assert_eq!(budget.held(), 0);
        let chunks =
            stream::iter(["ab", "cd", "e"].map(|c| Ok::<_, std::io::Error>(Bytes::from(c))));
        let joined = read_body(
            Body::from_stream(chunks),
            &HeaderMap::new(),
            &limits(8),
            &budget,
        )
        .await
        .unwrap();
        assert_eq!((&joined.bytes()[..], budget.held()), (&b"abcde"[..], 5));
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_never_ends_gets_408_at_its_deadline() {
        let budget = BodyBudget::new(1 << 20);
        let stalled = stream::once(async { Ok::<_, std::io::Error>(Bytes::from("{\"mo")) })
            .chain(stream::pending());
        let error = read_body(
            Body::from_stream(stalled),
            &HeaderMap::new(),
            &limits(1024),
            &budget,
        )
        .await
        .unwrap_err();
        assert_eq!(error.status().as_u16(), 408);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn oversized_bodies_are_refused_at_the_header_or_the_crossing_chunk() {
        let budget = BodyBudget::new(1 << 20);
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_LENGTH, "9".parse().unwrap());
        let error = read_body(Body::from("x"), &headers, &limits(8), &budget)
            .await
            .unwrap_err();
        assert_eq!(error.status().as_u16(), 413);
        let error = read_body(
            Body::from("123456789"),
            &HeaderMap::new(),
            &limits(8),
            &budget,
        )
        .await
        .unwrap_err();
        assert_eq!(error.status().as_u16(), 413);
    }
}
