use thiserror::Error;

/// Why no endpoint could be picked.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The pool has no endpoints.
    #[error("no endpoints in the pool")]
    NoEndpoints,
    /// The gateway's subset hint matched no pool member.
    #[error("the endpoint subset hint matches no endpoint in the pool")]
    EmptySubset,
    /// Every candidate is draining or disabled.
    #[error("every candidate endpoint is draining or disabled")]
    NoHealthyEndpoint,
    /// Filters removed every candidate.
    #[error(
        "no endpoint can serve model `{model}` (filter `{filter}` removed the last candidates)"
    )]
    NoCandidates {
        /// Requested model.
        model: String,
        /// Filter that removed the last candidates.
        filter: String,
    },
    /// The named profile does not exist.
    #[error("unknown scheduling profile `{0}`")]
    UnknownProfile(String),
    /// The request names no configured profile (a `header-profile-handler`'s header).
    #[error("no scheduling profile selected: {0}")]
    ProfileNotSelected(String),
    /// The picker returned nothing usable (a plugin bug).
    #[error("picker `{0}` returned no valid endpoint")]
    PickerReturnedNothing(String),
    /// An admitter refused the request (for example, no endpoint is predicted to meet its
    /// latency objective); the client may retry later.
    #[error("request refused by `{plugin}`: {reason}")]
    Rejected {
        /// The admitter's plugin name.
        plugin: String,
        /// Why.
        reason: String,
    },
}

impl ScheduleError {
    /// The HTTP status an adapter should answer with.
    pub fn http_status(&self) -> u16 {
        match self {
            ScheduleError::UnknownProfile(_) | ScheduleError::PickerReturnedNothing(_) => 500,
            ScheduleError::Rejected { .. } => 429,
            ScheduleError::ProfileNotSelected(_) => 400,
            _ => 503,
        }
    }

    /// A short machine-readable reason (`no_endpoints`, `no_candidates`, ...), as used in the
    /// `reason` label of `shepherd_schedule_errors_total` and in rejection headers.
    pub fn reason(&self) -> &'static str {
        match self {
            ScheduleError::NoEndpoints => "no_endpoints",
            ScheduleError::EmptySubset => "empty_subset",
            ScheduleError::NoHealthyEndpoint => "no_healthy_endpoint",
            ScheduleError::NoCandidates { .. } => "no_candidates",
            ScheduleError::UnknownProfile(_) => "unknown_profile",
            ScheduleError::ProfileNotSelected(_) => "profile_not_selected",
            ScheduleError::PickerReturnedNothing(_) => "picker_returned_nothing",
            ScheduleError::Rejected { .. } => "rejected",
        }
    }
}
