//! Envoy header values, read and written the way Envoy uses them.
//!
//! Envoy sends header values in `raw_value` (bytes) and leaves the string `value` empty; when
//! it applies a header mutation it reads `raw_value` too and *ignores* `value`. So every value
//! this crate writes goes into `raw_value`, and a value is read from `raw_value` first, from
//! `value` only when `raw_value` is empty (older data planes, hand-written test clients).
//!
//! ```
//! use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue};
//! use shepherd_adapters_extproc::headers::{header_value, set_header};
//!
//! let map = HeaderMap {
//!     headers: vec![HeaderValue { key: ":path".into(), raw_value: b"/v1/completions".to_vec(), ..Default::default() }],
//! };
//! assert_eq!(header_value(Some(&map), ":path").as_deref(), Some("/v1/completions"));
//!
//! let option = set_header("x-gateway-destination-endpoint", "127.0.0.1:8000");
//! let header = option.header.unwrap();
//! assert_eq!((header.value.as_str(), header.raw_value.as_slice()), ("", &b"127.0.0.1:8000"[..]));
//! ```

use std::borrow::Cow;

use envoy_types::pb::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use envoy_types::pb::envoy::config::core::v3::{HeaderMap, HeaderValue, HeaderValueOption};

/// The value of header `name` (compared case-insensitively), from `raw_value` or else `value`;
/// invalid UTF-8 is replaced.
pub fn header_value<'a>(map: Option<&'a HeaderMap>, name: &str) -> Option<Cow<'a, str>> {
    let header = map?
        .headers
        .iter()
        .find(|h| h.key.eq_ignore_ascii_case(name))?;
    Some(value_of(header))
}

/// The value of one header, from `raw_value` or else `value`.
pub fn value_of(header: &HeaderValue) -> Cow<'_, str> {
    if header.raw_value.is_empty() {
        Cow::Borrowed(header.value.as_str())
    } else {
        String::from_utf8_lossy(&header.raw_value)
    }
}

/// Whether header `name` is present.
pub fn has_header(map: Option<&HeaderMap>, name: &str) -> bool {
    map.is_some_and(|m| m.headers.iter().any(|h| h.key.eq_ignore_ascii_case(name)))
}

/// A header mutation entry that sets `name` to `value` through `raw_value`, replacing any
/// value the request already had (`OVERWRITE_IF_EXISTS_OR_ADD`).
pub fn set_header(name: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_string(),
            value: String::new(),
            raw_value: value.as_bytes().to_vec(),
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..Default::default()
    }
}
