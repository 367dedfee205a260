//! What the flow controller needs to know about a request.

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
/// let flow = FlowRequest::of(&request);
/// assert_eq!((flow.priority, flow.flow_id, flow.bytes), (-1, "tenant-a", 11));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowRequest<'a> {
    /// Its priority band: higher first; negative is sheddable.
    pub priority: i32,
    /// Its fairness id (`""`: the default flow).
    pub flow_id: &'a str,
    /// Its size in bytes, counted against the bands' `maxBytes`.
    pub bytes: u64,
    /// Its prompt tokens (estimated), counted as pending load once admitted.
    pub prompt_tokens: u64,
}

impl<'a> FlowRequest<'a> {
    /// The flow-control view of a parsed request (its body size, priority, fairness id).
    pub fn of(request: &'a InferenceRequest) -> Self {
        FlowRequest {
            priority: request.priority,
            flow_id: request.fairness_id.as_deref().unwrap_or(""),
            bytes: request.body_size as u64,
            prompt_tokens: request.prompt.estimated_tokens() as u64,
        }
    }
}
