//! How a scheduled request ends: the [`RequestHandle`] an adapter keeps while the response
//! streams, and the [`CompletionHook`]s that learn how it went.
//!
//! A [`Decision`](crate::decision::Decision) carries a handle. The adapter keeps the handle
//! (not the request: a prompt can be megabytes) for as long as the response lasts, tells it
//! when the first token arrives, and finally calls [`RequestHandle::finish`] with the usage
//! the server reported. The completion hooks run exactly once: on `finish`, or — if the
//! handle is dropped unfinished (the client went away, the adapter failed) — as
//! [`Outcome::Cancelled`] when it drops. Either way the in-flight counters it holds on the
//! endpoint are released right after. This is tower's `TrackCompletion` pattern.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = Scheduler::builder(pool).profile(Profile::builder("default").build()).build().unwrap();
//! let request = InferenceRequest::new("req-1", "llama", Prompt::Text("hello".into()));
//! let decision = scheduler.schedule(&request).unwrap();
//! drop(request); // nothing of the request is needed any more
//!
//! let mut handle = decision.into_handle(); // the breakdown is dropped too
//! assert_eq!(handle.id(), "req-1");
//! assert_eq!(handle.endpoint().in_flight_requests(), 1);
//! handle.first_token(); // prefill done: pending-prefill tokens released
//! let usage = Usage { prompt_tokens: 2, completion_tokens: 5, cached_tokens: Some(0) };
//! let endpoint = Arc::clone(handle.endpoint());
//! handle.finish(Completion::success(Some(usage)));
//! assert_eq!(endpoint.in_flight_requests(), 0);
//! ```

mod handle;
mod types;

pub(crate) use handle::Completer;
pub use handle::RequestHandle;
pub use types::{CompletedRequest, Completion, CompletionHook, Outcome, Usage};
