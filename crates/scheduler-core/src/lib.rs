//! # shepherd-scheduler-core
//!
//! The pure scheduling core of Shepherd: it decides which model server (the *endpoint*) should
//! serve each LLM inference request. No I/O, no async runtime: adapters and the simulator feed
//! it requests, metrics and time, and it answers with a [`Decision`](decision::Decision).
//!
//! - [`request`]: the request model and the OpenAI body parser;
//! - [`endpoint`]: endpoints, their metrics and live counters, and the pool;
//! - [`plugin`]: the `Filter` / `Scorer` / `Picker` traits and hooks;
//! - [`profile`], [`weights`], [`scheduler`], [`decision`]: running a profile;
//! - [`completion`]: the handle an adapter keeps while a response streams, and the hooks that
//!   run when it ends;
//! - [`shared`], [`resources`], [`reload`]: state that outlives one scheduler, and swapping a
//!   rebuilt scheduler in on a config reload;
//! - [`metrics`]: the counters the core keeps and the visitor that exports them;
//! - [`prefix`]: the prefix-cache index;
//! - [`config`]: YAML configuration and the plugin registry;
//! - [`flow`]: flow control: saturation detectors and the priority / fair queue.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = Scheduler::builder(pool).profile(Profile::builder("default").build()).build().unwrap();
//! let request = InferenceRequest::new("r1", "llama", Prompt::Text("hello".into()));
//! assert_eq!(scheduler.schedule(&request).unwrap().primary().address(), "10.0.0.1:8000");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod clock;
pub mod completion;
pub mod config;
pub mod decision;
pub mod disagg;
pub mod echo;
pub mod endpoint;
pub mod flow;
pub mod kv_events;
pub mod metrics;
pub mod plugin;
pub mod prefix;
pub mod profile;
pub mod reload;
pub mod report;
pub mod request;
pub mod resources;
pub mod response_headers;
pub mod rng;
pub mod scheduler;
pub mod shared;
pub mod weights;

/// The types most embedders need.
pub mod prelude {
    pub use crate::clock::{Clock, ManualClock, SystemClock, Timestamp};
    pub use crate::completion::{Completion, Outcome, RequestHandle, Usage};
    pub use crate::config::{ConfigError, EndpointPickerConfig, Registry, build_scheduler};
    pub use crate::decision::{Breakdown, Decision};
    pub use crate::endpoint::{
        Endpoint, EndpointHealth, EndpointId, EndpointMetrics, InFlightGuard, Pool,
    };
    pub use crate::plugin::{Category, CycleState, Filter, Picker, Score, Scorer};
    pub use crate::profile::Profile;
    pub use crate::reload::ReloadableScheduler;
    pub use crate::request::{InferenceRequest, ParseLimits, Prompt, parse_openai_request};
    pub use crate::scheduler::{ScheduleError, ScheduleOptions, Scheduler};
    pub use crate::shared::SharedState;
}
