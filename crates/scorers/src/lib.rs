//! Shepherd built-in plugins.
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod prefix_cache;
