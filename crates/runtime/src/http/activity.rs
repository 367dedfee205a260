//! What a connection is doing, as its watchdog sees it: whether a request is open, when the
//! client last sent a byte, and when the head of its next request began.
//!
//! The socket is read through [`Watched`], which notes every read; the service marks a
//! request open when hyper hands it over (its head is complete) and closed when its response
//! body ends ([`OpenRequest`]). From that, [`Activity::verdict`] says whether the connection
//! may live on, and until when.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use super::limits::ConnectionLimits;
use super::stats::Closed;

/// No head in progress.
const NONE: u64 = u64::MAX;

/// One connection's activity; times are milliseconds since the connection began.
#[derive(Debug)]
pub(crate) struct Activity {
    start: Instant,
    /// The last byte read, or the last response's end.
    last: AtomicU64,
    /// When the head now being read began ([`NONE`]: no head in progress).
    head_began: AtomicU64,
    /// Requests handed to the service whose responses have not ended.
    open: AtomicU64,
}

/// What the watchdog should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Look again at this time.
    Until(Instant),
    /// Close the connection.
    Close(Closed),
}

impl Activity {
    /// A connection that began now: its first head is due within the header timeout.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Activity {
            start: Instant::now(),
            last: AtomicU64::new(0),
            head_began: AtomicU64::new(0),
            open: AtomicU64::new(0),
        })
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    fn at(&self, ms: u64) -> Instant {
        self.start + std::time::Duration::from_millis(ms)
    }

    /// The client sent bytes.
    fn read(&self) {
        let now = self.now_ms();
        self.last.store(now, Ordering::Relaxed);
        if self.open.load(Ordering::Relaxed) == 0 {
            // The first byte of the next request's head starts its clock (once).
            let _ =
                self.head_began
                    .compare_exchange(NONE, now, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// A request's head is complete and its response is being made.
    pub(crate) fn request(self: &Arc<Self>) -> OpenRequest {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.head_began.store(NONE, Ordering::Relaxed);
        OpenRequest {
            activity: Arc::clone(self),
        }
    }

    /// Whether the connection may live on under `limits`, at `now`.
    pub(crate) fn verdict(&self, limits: &ConnectionLimits, now: Instant) -> Verdict {
        if self.open.load(Ordering::Relaxed) > 0 {
            // A request in progress: the gateway bounds its body read; look again later.
            return Verdict::Until(now + limits.header_read_timeout.min(limits.idle_timeout));
        }
        let head_began = self.head_began.load(Ordering::Relaxed);
        let (due, why) = if head_began == NONE {
            (
                self.at(self.last.load(Ordering::Relaxed)) + limits.idle_timeout,
                Closed::Idle,
            )
        } else {
            (
                self.at(head_began) + limits.header_read_timeout,
                Closed::HeaderTimeout,
            )
        };
        if now >= due {
            Verdict::Close(why)
        } else {
            Verdict::Until(due)
        }
    }
}

/// A request whose response has not ended; dropping it (with the response body) closes it.
#[derive(Debug)]
pub(crate) struct OpenRequest {
    activity: Arc<Activity>,
}

impl Drop for OpenRequest {
    fn drop(&mut self) {
        let activity = &self.activity;
        activity.last.store(activity.now_ms(), Ordering::Relaxed);
        activity.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A socket whose reads are noted in its [`Activity`].
#[derive(Debug)]
pub(crate) struct Watched<T> {
    inner: T,
    activity: Arc<Activity>,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T, activity: Arc<Activity>) -> Self {
        Watched { inner, activity }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_owes_its_head_within_the_header_timeout() {
        let activity = Activity::new();
        let start = Instant::now();
        assert_eq!(
            activity.verdict(&limits(), start),
            Verdict::Until(start + Duration::from_secs(10))
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        activity.read(); // a slow head trickles in: its clock does not restart
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(
            activity.verdict(&limits(), Instant::now()),
            Verdict::Close(Closed::HeaderTimeout)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn after_a_response_the_idle_timeout_applies_until_the_next_byte() {
        let activity = Activity::new();
        let request = activity.request();
        tokio::time::advance(Duration::from_secs(30)).await;
        assert!(matches!(
            activity.verdict(&limits(), Instant::now()),
            Verdict::Until(_)
        ));
        drop(request); // the response ended
        let ended = Instant::now();
        tokio::time::advance(Duration::from_secs(59)).await;
        assert_eq!(
            activity.verdict(&limits(), Instant::now()),
            Verdict::Until(ended + Duration::from_secs(60))
        );
        activity.read(); // the next request begins: its head is due in 10 s
        let began = Instant::now();
        assert_eq!(
            activity.verdict(&limits(), began),
            Verdict::Until(began + Duration::from_secs(10))
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(
            activity.verdict(&limits(), Instant::now()),
            Verdict::Close(Closed::HeaderTimeout)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_connection_after_its_response_is_closed_as_idle() {
        let activity = Activity::new();
        drop(activity.request());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            activity.verdict(&limits(), Instant::now()),
            Verdict::Close(Closed::Idle)
        );
    }
}
