//! Fetching one metrics page over HTTP.

use std::time::Duration;

use super::ScrapeError;
use crate::prom::MAX_INPUT_BYTES;

/// The HTTP client the scraper uses: HTTP/1.1 without TLS, no proxy (model servers are
/// reached directly), `TCP_NODELAY`, idle connections kept for reuse between scrapes.
pub(crate) fn client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(2)
        .pool_idle_timeout(Duration::from_secs(30))
        .build()
}

/// GETs `url`, within `timeout` for the whole exchange, reading at most
/// [`MAX_INPUT_BYTES`] of body.
pub(crate) async fn fetch(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Result<Vec<u8>, ScrapeError> {
    match tokio::time::timeout(timeout, fetch_unbounded(client, url)).await {
        Ok(result) => result,
        Err(_) => Err(ScrapeError::Timeout(timeout)),
    }
}

async fn fetch_unbounded(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, ScrapeError> {
    let mut response = client.get(url).send().await.map_err(classify)?;
    let status = response.status();
    if !status.is_success() {
        return Err(ScrapeError::Status(status.as_u16()));
    }
    let too_large = ScrapeError::TooLarge {
        limit: MAX_INPUT_BYTES,
    };
    if response
        .content_length()
        .is_some_and(|len| len > MAX_INPUT_BYTES as u64)
    {
        return Err(too_large);
    }
    let mut body = Vec::with_capacity(
        response
            .content_length()
            .map_or(64 * 1024, |len| len as usize),
    );
    while let Some(chunk) = response.chunk().await.map_err(classify)? {
        if body.len() + chunk.len() > MAX_INPUT_BYTES {
            return Err(too_large);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn classify(error: reqwest::Error) -> ScrapeError {
    // The URL is the caller's; keep the message short and free of it.
    let error = error.without_url();
    if error.is_connect() {
        ScrapeError::Connect(root_cause(&error))
    } else {
        ScrapeError::Request(root_cause(&error))
    }
}

/// The innermost cause's message ("Connection refused (os error 111)").
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}
