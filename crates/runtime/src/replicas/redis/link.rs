//! One connection to Redis that mends itself: opened on demand, dropped when it breaks, opened
//! again after a growing pause (100 ms, doubling to 2 s), every failure and recovery reported
//! to [`RedisStats`] (which logs an outage once). A caller never waits longer than the
//! configured timeout for a command, nor at all while the pause runs.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, FromRedisValue, RedisError};
use tokio::time::Instant;

use super::stats::RedisStats;

const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LONGEST_PAUSE: Duration = Duration::from_secs(2);

/// A self-mending connection.
pub(crate) struct Link {
    client: Client,
    connect_timeout: Duration,
    response_timeout: Duration,
    conn: Option<MultiplexedConnection>,
    retry_at: Option<Instant>,
    pause: Duration,
    stats: Arc<RedisStats>,
    what: &'static str,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("what", &self.what)
            .field("connected", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

impl Link {
    /// A link for `what` (named in the log), whose commands may take `response_timeout`.
    pub(crate) fn new(
        client: Client,
        connect_timeout: Duration,
        response_timeout: Duration,
        stats: Arc<RedisStats>,
        what: &'static str,
    ) -> Self {
        Link {
            client,
            connect_timeout,
            response_timeout,
            conn: None,
            retry_at: None,
            pause: FIRST_PAUSE,
            stats,
            what,
        }
    }

    /// Whether a connection is open or may be tried now.
    pub(crate) fn ready(&self) -> bool {
        self.conn.is_some() || self.retry_at.is_none_or(|at| Instant::now() >= at)
    }

    async fn connection(&mut self) -> Option<&mut MultiplexedConnection> {
        if self.conn.is_none() {
            if self.retry_at.is_some_and(|at| Instant::now() < at) {
                return None;
            }
            let attempted = Instant::now();
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(self.connect_timeout))
                .set_response_timeout(Some(self.response_timeout));
            let opened = tokio::time::timeout(
                self.connect_timeout + Duration::from_millis(100),
                self.client
                    .get_multiplexed_async_connection_with_config(&config),
            )
            .await;
            match opened {
                Ok(Ok(conn)) => {
                    self.conn = Some(conn);
                    self.retry_at = None;
                    self.pause = FIRST_PAUSE;
                }
                Ok(Err(error)) => {
                    self.pause_after(&error, attempted);
                    return None;
                }
                Err(_) => {
                    self.pause_after(&"connection attempt timed out", attempted);
                    return None;
                }
            }
        }
        self.conn.as_mut()
    }

    /// Drops the connection after a failure of something begun at `sent`, and waits before
    /// the next attempt.
    fn pause_after(&mut self, error: &dyn std::fmt::Display, sent: Instant) {
        self.conn = None;
        self.stats.failed(self.what, error, sent);
        self.retry_at = Some(Instant::now() + self.pause);
        self.pause = (self.pause * 2).min(LONGEST_PAUSE);
    }

    /// Runs `cmd` (a command or a pipeline); `None` when Redis cannot be reached now, the
    /// command failed or timed out (counted; a broken connection is dropped).
    pub(crate) async fn run<T: FromRedisValue>(
        &mut self,
        cmd: &(impl RedisRunnable + ?Sized),
    ) -> Option<T> {
        let timeout = self.response_timeout + Duration::from_millis(100);
        let sent = Instant::now();
        let conn = self.connection().await?;
        let outcome = match tokio::time::timeout(timeout, cmd.run_on(conn)).await {
            // A pipeline answers each command's error as a value.
            Ok(Ok(value)) => match server_error(&value) {
                Some(error) => Ok(Err(error)),
                None => Ok(Ok(value)),
            },
            other => other,
        };
        match outcome {
            Ok(Ok(value)) => match T::from_redis_value(value) {
                Ok(value) => {
                    self.stats.succeeded(sent);
                    Some(value)
                }
                Err(error) => {
                    self.stats.failed(self.what, &error, sent);
                    None
                }
            },
            Ok(Err(error)) => {
                if breaks_connection(&error) {
                    self.pause_after(&error, sent);
                } else {
                    self.stats.failed(self.what, &error, sent);
                }
                None
            }
            Err(_) => {
                self.pause_after(&"command timed out", sent);
                None
            }
        }
    }
}

/// The first error in a reply (a pipeline's replies are an array of values).
pub(crate) fn server_error(value: &redis::Value) -> Option<RedisError> {
    match value {
        redis::Value::ServerError(error) => Some(error.clone().into()),
        redis::Value::Array(items) => items.iter().find_map(server_error),
        _ => None,
    }
}

/// Whether `error` means the connection is gone (rather than one command refused).
fn breaks_connection(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_timeout()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error()
}

/// A command or a pipeline.
pub(crate) trait RedisRunnable {
    /// Sends it on `conn`.
    fn run_on<'a>(
        &'a self,
        conn: &'a mut MultiplexedConnection,
    ) -> redis::RedisFuture<'a, redis::Value>;
}

impl RedisRunnable for redis::Cmd {
    fn run_on<'a>(
        &'a self,
        conn: &'a mut MultiplexedConnection,
    ) -> redis::RedisFuture<'a, redis::Value> {
        conn.req_packed_command(self)
    }
}

impl RedisRunnable for redis::Pipeline {
    fn run_on<'a>(
        &'a self,
        conn: &'a mut MultiplexedConnection,
    ) -> redis::RedisFuture<'a, redis::Value> {
        Box::pin(async move { self.query_async::<redis::Value>(conn).await })
    }
}
