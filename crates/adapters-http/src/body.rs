//! Reading a request body whole, within the limit.
//!
//! The scheduler needs the whole body (the prompt decides the pick), so the gateway reads it
//! before anything else happens, and refuses it as soon as it is known to be too large: a
//! `Content-Length` over the limit is answered 413 before a byte of the body is read, and a
//! body that grows over the limit while it streams in is answered 413 at the chunk that
//! crosses it. The gateway never holds more than `gateway.maxBodyBytes` of one request.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::ApiError;

/// Reads `body` (whose request had `headers`), refusing more than `limit` bytes.
pub(crate) async fn read_limited(
    body: Body,
    headers: &HeaderMap,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(size) = declared
        && size > limit as u64
    {
        return Err(ApiError::body_too_large(
            Some(usize::try_from(size).unwrap_or(usize::MAX)),
            limit,
        ));
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<LengthLimitError>() => Err(ApiError::body_too_large(None, limit)),
        Err(error) => Err(ApiError::unreadable_body(error)),
    }
}
