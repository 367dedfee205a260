//! Adaptive scorer weights.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
