//! What a dispatched request holds while it is served, when eviction is on.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Weak;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

/// Ends a tracked request's lease (its response is over).
pub(crate) trait Untrack: Send + Sync {
    /// Request `id` is no longer in flight.
    fn untrack(&self, id: u64);
}

/// A dispatched request as in-flight eviction sees it (`flowControl.enableEviction`): the
/// adapter holds it until the response is over and answers the client 429 `request evicted
/// by flow control` (ending the response) when [`EvictionLease::evicted`] completes. Dropping
/// it tells the flow controller the request is no longer in flight (for an evicted one: that
/// the eviction took effect).
pub struct EvictionLease {
    owner: Weak<dyn Untrack>,
    id: u64,
    signal: Option<oneshot::Receiver<()>>,
    evicted: bool,
}

impl EvictionLease {
    pub(crate) fn new(owner: Weak<dyn Untrack>, id: u64, signal: oneshot::Receiver<()>) -> Self {
        EvictionLease {
            owner,
            id,
            signal: Some(signal),
            evicted: false,
        }
    }

    /// Completes when flow control evicts the request (at once if it already has); never if
    /// it is not evicted. Cancel-safe.
    pub async fn evicted(&mut self) {
        std::future::poll_fn(|cx| self.poll_evicted(cx)).await;
    }

    /// [`EvictionLease::evicted`] for a hand-written future (a response body's
    /// `poll_frame`): ready once the request is evicted.
    pub fn poll_evicted(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.evicted {
            return Poll::Ready(());
        }
        let Some(signal) = self.signal.as_mut() else {
            return Poll::Pending;
        };
        match Pin::new(signal).poll(cx) {
            Poll::Ready(Ok(())) => {
                self.evicted = true;
                self.signal = None;
                Poll::Ready(())
            }
            Poll::Ready(Err(_)) => {
                // The controller went away: nothing will evict the request any more.
                self.signal = None;
                Poll::Pending
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Whether the request was evicted (as seen by [`EvictionLease::evicted`]).
    pub fn is_evicted(&self) -> bool {
        self.evicted
    }
}

impl Drop for EvictionLease {
    fn drop(&mut self) {
        if let Some(owner) = self.owner.upgrade() {
            owner.untrack(self.id);
        }
    }
}

impl fmt::Debug for EvictionLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvictionLease")
            .field("id", &self.id)
            .field("evicted", &self.evicted)
            .finish()
    }
}
