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
    // Written digit by digit: a pick without a caller's id makes one, and `format!` costs
    // several times as much.
    let mut id = String::with_capacity(32);
    for half in [seed, n] {
        for shift in (0..16).rev() {
            id.push(char::from(
                HEX_DIGITS[((half >> (shift * 4)) & 0xf) as usize],
            ));
        }
    }
    id
}

/// The lowercase hexadecimal digits.
const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_id_is_the_process_seed_and_a_counter_in_lowercase_hex() {
        let a = generate_request_id();
        let b = generate_request_id();
        let halves = |id: &str| {
            assert!(
                id.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
                "{id}"
            );
            let seed = u64::from_str_radix(&id[..16], 16).expect("hex");
            let n = u64::from_str_radix(&id[16..], 16).expect("hex");
            assert_eq!(id, format!("{seed:016x}{n:016x}"));
            (seed, n)
        };
        let ((seed_a, n_a), (seed_b, n_b)) = (halves(&a), halves(&b));
        assert_eq!(seed_a, seed_b);
        // Other tests may take ids in between.
        assert!(n_b > n_a);
        assert!(is_valid_request_id(&a));
    }
}
