//! Request ids: the caller's `x-request-id` when it is usable, else a generated one.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use super::InferenceRequest;

/// Longest caller-supplied id kept; a longer one is replaced by a generated id.
pub const MAX_REQUEST_ID_LEN: usize = 128;

static COUNTER: AtomicU64 = AtomicU64::new(0);
static PROCESS_SEED: OnceLock<u64> = OnceLock::new();

/// A fresh request id, unique within the process and (with overwhelming probability) across
/// processes: 32 hex digits, a per-process random half and a counter half.
///
/// ```
/// let a = shepherd_scheduler_core::request::generate_request_id();
/// let b = shepherd_scheduler_core::request::generate_request_id();
/// assert_ne!(a, b);
/// assert_eq!(a.len(), 32);
/// ```
pub fn generate_request_id() -> String {
    let seed = *PROCESS_SEED.get_or_init(|| ahash::RandomState::new().hash_one(0x5EED_u64));
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{seed:016x}{n:016x}")
}

/// Whether `id` is usable as a request id: 1 to [`MAX_REQUEST_ID_LEN`] visible ASCII
/// characters.
pub fn is_valid_request_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_REQUEST_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

impl InferenceRequest {
    /// Gives the request its id: `header` (the caller's `x-request-id`) when it is a valid id,
    /// else a generated one. Returns the id.
    ///
    /// ```
    /// use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
    ///
    /// let mut r = InferenceRequest::new("", "llama", Prompt::Text("hi".into()));
    /// assert_eq!(r.assign_id(Some("abc-123")), "abc-123");
    /// assert_ne!(r.assign_id(Some("bad id with spaces")), "bad id with spaces");
    /// ```
    pub fn assign_id(&mut self, header: Option<&str>) -> &str {
        self.id = match header.map(str::trim) {
            Some(h) if is_valid_request_id(h) => h.to_string(),
            _ => generate_request_id(),
        };
        &self.id
    }
}
