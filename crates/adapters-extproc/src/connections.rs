//! The connections of a gRPC port: a cap on how many are open, and a deadline for each one's
//! first bytes.
//!
//! The gRPC server would keep every connection a peer opens, including one that never sends
//! the HTTP/2 preface (its keepalive PINGs only start after the handshake): a client that can
//! reach the port could hold as many file descriptors as it liked. So the accepted connections
//! pass through a guard first: past `max` open at once a new one is closed as it arrives,
//! and one that has sent nothing [`PREFACE_TIMEOUT`] after it was accepted is closed. Envoy
//! opens a few connections per worker thread and speaks at once, so neither touches it. Both
//! are counted ([`ConnectionCounts`], on `/metrics` as `shepherd_extproc_connections_*`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::Stream;
use tonic::transport::server::Connected;

/// Time a new connection has to send its first bytes (the HTTP/2 preface).
pub const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

const OPEN: MetricDesc<'static> = MetricDesc::new(
    "shepherd_extproc_connections_open",
    "Connections open on a gRPC port of the picker, by port.",
);
const CLOSED: MetricDesc<'static> = MetricDesc::new(
    "shepherd_extproc_connections_closed_total",
    "Connections the picker closed at a limit, by port and reason: connection_limit (over the cap, as they arrived), preface_timeout (nothing sent in time).",
);

/// One gRPC port's connection counters. See the [module docs](self).
#[derive(Debug)]
pub struct ConnectionCounts {
    port: &'static str,
    open: AtomicU64,
    refused: AtomicU64,
    silent: AtomicU64,
}

impl ConnectionCounts {
    /// Counters for the port named `port` (`extproc`, `health`).
    pub fn new(port: &'static str) -> Self {
        ConnectionCounts {
            port,
            open: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            silent: AtomicU64::new(0),
        }
    }

    /// Connections open now.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections closed as they arrived, over the cap.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Connections closed for sending nothing within [`PREFACE_TIMEOUT`].
    pub fn silent(&self) -> u64 {
        self.silent.load(Ordering::Relaxed)
    }
}

impl MetricsSource for ConnectionCounts {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        v.gauge(OPEN, &[("port", self.port)], self.open() as f64);
        v.counter(
            CLOSED,
            &[("port", self.port), ("reason", "connection_limit")],
            self.refused(),
        );
        v.counter(
            CLOSED,
            &[("port", self.port), ("reason", "preface_timeout")],
            self.silent(),
        );
    }
}

/// Accepted connections under a cap: a stream of [`Guarded`] connections out of a stream of
/// accepted ones.
pub(crate) struct Capped<S> {
    inner: S,
    places: Arc<Semaphore>,
    counts: Arc<ConnectionCounts>,
}

impl<S> Capped<S> {
    pub(crate) fn new(inner: S, max: usize, counts: Arc<ConnectionCounts>) -> Self {
        Capped {
            inner,
            places: Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS))),
            counts,
        }
    }
}

impl<S, T> Stream for Capped<S>
where
    S: Stream<Item = io::Result<T>> + Unpin,
{
    type Item = io::Result<Guarded<T>>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            let accepted = match std::task::ready!(Pin::new(&mut self.inner).poll_next(cx)) {
                Some(Ok(io)) => io,
                Some(Err(error)) => return Poll::Ready(Some(Err(error))),
                None => return Poll::Ready(None),
            };
            match Arc::clone(&self.places).try_acquire_owned() {
                Ok(place) => {
                    self.counts.open.fetch_add(1, Ordering::Relaxed);
                    return Poll::Ready(Some(Ok(Guarded {
                        inner: accepted,
                        _place: place,
                        preface: Some(Box::pin(tokio::time::sleep(PREFACE_TIMEOUT))),
                        counts: Arc::clone(&self.counts),
                    })));
                }
                Err(_) => {
                    // Over the cap: closed as it arrived (dropped), and the next one is read.
                    self.counts.refused.fetch_add(1, Ordering::Relaxed);
                    drop(accepted);
                }
            }
        }
    }
}

/// One connection: its place under the cap, and the deadline for its first bytes.
pub(crate) struct Guarded<T> {
    inner: T,
    _place: OwnedSemaphorePermit,
    /// Until the first bytes arrive.
    preface: Option<Pin<Box<tokio::time::Sleep>>>,
    counts: Arc<ConnectionCounts>,
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        self.counts.open.fetch_sub(1, Ordering::Relaxed);
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Guarded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if self.preface.is_some() {
            if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                self.preface = None;
            } else if polled.is_pending()
                && let Some(deadline) = self.preface.as_mut()
                && deadline.as_mut().poll(cx).is_ready()
            {
                self.preface = None;
                self.counts.silent.fetch_add(1, Ordering::Relaxed);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no HTTP/2 preface within the deadline",
                )));
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Guarded<T> {
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

impl<T: Connected> Connected for Guarded<T> {
    type ConnectInfo = T::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use tokio::io::{AsyncReadExt, AsyncWriteExt, duplex};
    use tokio_stream::StreamExt;

    use super::*;

    fn accepted(n: usize) -> Vec<io::Result<tokio::io::DuplexStream>> {
        (0..n).map(|_| Ok(duplex(64).0)).collect()
    }

    #[tokio::test]
    async fn connections_over_the_cap_are_closed_as_they_arrive() {
        let counts = Arc::new(ConnectionCounts::new("extproc"));
        let capped = Capped::new(tokio_stream::iter(accepted(5)), 3, Arc::clone(&counts));
        let kept: Vec<_> = capped.collect().await;
        assert_eq!(kept.len(), 3);
        assert_eq!((counts.open(), counts.refused()), (3, 2));
        drop(kept);
        assert_eq!(counts.open(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_nothing_is_closed_at_the_deadline() {
        let counts = Arc::new(ConnectionCounts::new("extproc"));
        let (silent, _peer) = duplex(64);
        let (talking, mut talker) = duplex(64);
        let mut capped = Capped::new(
            tokio_stream::iter([Ok(silent), Ok(talking)]),
            8,
            Arc::clone(&counts),
        );
        let mut silent = capped.next().await.unwrap().unwrap();
        let mut talking = capped.next().await.unwrap().unwrap();
        talker.write_all(b"PRI * HTTP/2.0").await.unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(talking.read(&mut buf).await.unwrap(), 14);
        let error = silent.read(&mut buf).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(counts.silent(), 1);
        // The talking one owes nothing more: silence after its preface is the keepalive's.
        tokio::time::advance(PREFACE_TIMEOUT * 2).await;
        talker.write_all(b"x").await.unwrap();
        assert_eq!(talking.read(&mut buf).await.unwrap(), 1);
    }
}
