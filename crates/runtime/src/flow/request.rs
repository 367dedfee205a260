//! What the flow controller needs to know about a request.

use std::time::Duration;

use shepherd_scheduler_core::flow::ordering::{OLD_SLO_TTFT_HEADER, SLO_TTFT_HEADER, slo_ttft_of};
use shepherd_scheduler_core::request::InferenceRequest;

/// A request as flow control sees it: its band, its flow, its size.
///
/// ```
/// use shepherd_runtime::flow::FlowRequest;
/// use shepherd_scheduler_core::request::{InferenceRequest, Prompt};
///
/// let mut request = InferenceRequest::new("", "llama", Prompt::Text("hello there".into()));
/// request.priority = -1;
/// request.fairness_id = Some("tenant-a".into());
/// request.headers.push(("x-llm-d-slo-ttft-ms".into(), "250".into()));
/// let flow = FlowRequest::of(&request);
/// assert_eq!((flow.priority, flow.flow_id, flow.bytes), (-1, "tenant-a", 11));
/// assert_eq!(flow.slo_ttft, Some(std::time::Duration::from_millis(250)));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowRequest<'a> {
    /// Its request id (the program-aware ledger charges its completion by it).
    pub id: &'a str,
    /// Its priority band: higher first; negative is sheddable.
    pub priority: i32,
    /// Its fairness id (`""`: the default flow).
    pub flow_id: &'a str,
    /// Its size in bytes, counted against the bands' `maxBytes`.
    pub bytes: u64,
    /// Its prompt tokens (estimated), counted as pending load once admitted.
    pub prompt_tokens: u64,
    /// Its time-to-first-token objective (`x-llm-d-slo-ttft-ms`, or the deprecated
    /// `x-slo-ttft-ms`), which the `slo-deadline-ordering-policy` orders by.
    pub slo_ttft: Option<Duration>,
}

impl<'a> FlowRequest<'a> {
    /// The flow-control view of a parsed request (its body size, priority, fairness id).
    pub fn of(request: &'a InferenceRequest) -> Self {
        FlowRequest {
            id: &request.id,
            priority: request.priority,
            flow_id: request.fairness_id.as_deref().unwrap_or(""),
            bytes: request.body_size as u64,
            prompt_tokens: request.prompt.estimated_tokens() as u64,
            slo_ttft: slo_ttft_of([
                request.header(SLO_TTFT_HEADER),
                request.header(OLD_SLO_TTFT_HEADER),
            ]),
        }
    }
}
