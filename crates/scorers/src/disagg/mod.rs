//! Prefill/decode (and encode) disaggregation plugins, with upstream's names: the `disagg-profile-handler`
//! that runs the decode profile, then the prefill profile when its decider says so, and the
//! deprecated alias `pd-profile-handler` (flat parameters), and the
//! deciders `prefix-based-pd-decider`, `always-disagg-pd-decider` and Shepherd's
//! `prefill-load-pd-decider`, the encode decider `always-disagg-multimodal-decider`; the
//! `header-profile-handler` (one profile per request, named in a header) and the deprecated
//! `data-parallel-profile-handler` (see [`shepherd_scheduler_core::disagg`] for how a request
//! is scheduled with several profiles).

pub mod data_parallel;
pub mod deciders;
pub mod header_profile_handler;
pub mod load_decider;
pub mod pd_profile_handler;
pub mod profile_handler;

pub use deciders::{
    AlwaysDisaggDecider, AlwaysDisaggMultimodalDecider, PrefixBasedDecider,
    PrefixBasedDeciderParameters,
};
pub use load_decider::{PrefillLoadDecider, PrefillLoadDeciderParameters};
pub use profile_handler::DisaggProfileHandlerParameters;
