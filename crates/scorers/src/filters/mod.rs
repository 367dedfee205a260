//! The built-in filters.
//!
//! | type name | keeps |
//! |---|---|
//! | `lora-affinity-filter` | endpoints running the request's adapter, else with room for it |
//! | `label-selector-filter` (`by-label-selector`) | endpoints whose labels match a Kubernetes label selector |
//! | `by-label` | endpoints whose label has an accepted value |
//! | `decode-filter`, `prefill-filter`, `encode-filter` | endpoints of that `llm-d.ai/role` |
//! | `endpoint-attribute-filter` | endpoints whose custom-metric attribute passes a threshold |
//! | `session-affinity-filter` | the endpoint that served the request's session before, when it is a candidate (else all) |
//! | `utilization-filter` | endpoints under every load cap configured |
//! | `prefix-cache-affinity-filter` | endpoints holding enough of the prompt's prefix, unless that would overload them |

pub mod by_label;
pub mod endpoint_attribute;
pub mod label_selector;
pub mod lora_affinity;
pub mod prefix_affinity;
pub mod session_affinity;
pub mod slo_headroom_tier;
pub mod utilization;

pub use by_label::ByLabelFilter;
pub use endpoint_attribute::{EndpointAttributeFilter, EndpointAttributeFilterParameters};
pub use label_selector::{LabelSelector, LabelSelectorFilter};
pub use lora_affinity::{LoraAffinityFilter, LoraAffinityFilterParameters};
pub use prefix_affinity::PrefixAffinityFilter;
pub use session_affinity::SessionAffinityFilter;
pub use slo_headroom_tier::{SloHeadroomTierFilter, SloHeadroomTierParameters};
pub use utilization::{UtilizationFilter, UtilizationFilterParameters};
