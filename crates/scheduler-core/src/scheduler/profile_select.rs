//! Choosing each request's profile from a request header: upstream's `header-profile-handler`,
//! for a coordinator that makes one scheduling call per stage and names the stage in a
//! header (`EPP-Profile: prefill`).
//!
//! - With one profile, it always runs.
//! - A header naming a profile runs that profile alone.
//! - A missing or blank header runs the default profile (`decode` unless configured).
//! - A header naming no profile, or a default that is no profile, is an error
//!   ([`ScheduleError::ProfileNotSelected`], HTTP 400).
//!
//! A request that names its profile in [`ScheduleOptions`](super::ScheduleOptions) runs that
//! one; the header is not read.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::scheduler::HeaderProfileSelector;
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000"]);
//! let scheduler = Scheduler::builder(pool)
//!     .profile(Profile::builder("prefill").build())
//!     .profile(Profile::builder("decode").build())
//!     .profile_selector(HeaderProfileSelector::new("EPP-Profile", ""))
//!     .build()
//!     .unwrap();
//! let mut request = InferenceRequest::new("r1", "m", Prompt::Text("hi".into()));
//! assert_eq!(scheduler.schedule(&request).unwrap().profile(), "decode");
//! request.headers.push(("epp-profile".into(), "prefill".into()));
//! assert_eq!(scheduler.schedule(&request).unwrap().profile(), "prefill");
//! request.headers[0].1 = "encode".into();
//! assert_eq!(scheduler.schedule(&request).unwrap_err().http_status(), 400);
//! ```

use std::sync::Arc;

use super::ScheduleError;
use crate::profile::Profile;
use crate::request::InferenceRequest;

/// Upstream's default header.
pub const DEFAULT_PROFILE_HEADER: &str = "epp-profile";

/// Upstream's default profile when the header is missing.
pub const DEFAULT_SELECTED_PROFILE: &str = "decode";

/// Chooses the profile a request names in a header (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderProfileSelector {
    header: String,
    default_profile: String,
}

impl HeaderProfileSelector {
    /// A selector reading `header` (any case; blank: [`DEFAULT_PROFILE_HEADER`]) that runs
    /// `default_profile` (blank: [`DEFAULT_SELECTED_PROFILE`]) when the header is missing.
    pub fn new(header: &str, default_profile: &str) -> Self {
        let header = header.trim().to_ascii_lowercase();
        let default_profile = default_profile.trim();
        HeaderProfileSelector {
            header: if header.is_empty() {
                DEFAULT_PROFILE_HEADER.to_string()
            } else {
                header
            },
            default_profile: if default_profile.is_empty() {
                DEFAULT_SELECTED_PROFILE
            } else {
                default_profile
            }
            .to_string(),
        }
    }

    /// The header read (lower case).
    pub fn header(&self) -> &str {
        &self.header
    }

    /// The profile run when the header is missing or blank.
    pub fn default_profile(&self) -> &str {
        &self.default_profile
    }

    /// The index in `profiles` of the profile `request` runs.
    ///
    /// # Errors
    ///
    /// [`ScheduleError::ProfileNotSelected`] when the header (or, without it, the default)
    /// names no profile.
    pub fn select(
        &self,
        request: &InferenceRequest,
        profiles: &[Arc<Profile>],
    ) -> Result<usize, ScheduleError> {
        if profiles.len() == 1 {
            return Ok(0);
        }
        let named = request
            .header(&self.header)
            .map(str::trim)
            .filter(|v| !v.is_empty());
        let wanted = named.unwrap_or(&self.default_profile);
        profiles
            .iter()
            .position(|p| p.name() == wanted)
            .ok_or_else(|| {
                ScheduleError::ProfileNotSelected(match named {
                    Some(value) => format!(
                        "no scheduling profile configured for `{}` header value `{value}`",
                        self.header
                    ),
                    None => format!(
                        "missing `{}` header, and defaultProfile `{}` is not a configured scheduling profile",
                        self.header, self.default_profile
                    ),
                })
            })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::request::Prompt;

    fn profiles(names: &[&str]) -> Vec<Arc<Profile>> {
        names
            .iter()
            .map(|n| Arc::new(Profile::builder(*n).build()))
            .collect()
    }

    fn request(header: Option<(&str, &str)>) -> InferenceRequest {
        let mut r = InferenceRequest::new("r", "m", Prompt::Text("hi".into()));
        if let Some((k, v)) = header {
            r.headers.push((k.into(), v.into()));
        }
        r
    }

    // The cases of upstream's header_profile_handler_test.go.
    #[test]
    fn upstream_cases() {
        let three = profiles(&["encode", "prefill", "decode"]);
        let s = HeaderProfileSelector::new("", "");
        assert_eq!(s.header(), "epp-profile");
        assert_eq!(s.default_profile(), "decode");
        assert_eq!(
            s.select(&request(Some(("epp-profile", "prefill"))), &three),
            Ok(1)
        );
        assert_eq!(
            s.select(&request(Some(("EPP-Profile", " encode "))), &three),
            Ok(0)
        );
        assert_eq!(s.select(&request(None), &three), Ok(2));
        assert_eq!(
            s.select(&request(Some(("epp-profile", "  "))), &three),
            Ok(2)
        );
        let unknown = s
            .select(&request(Some(("epp-profile", "Decode"))), &three)
            .unwrap_err();
        assert!(
            unknown.to_string().contains("header value `Decode`"),
            "{unknown}"
        );
        // One profile always runs, whatever the header says.
        let one = profiles(&["only"]);
        assert_eq!(s.select(&request(Some(("epp-profile", "x"))), &one), Ok(0));
        assert_eq!(s.select(&request(None), &one), Ok(0));
        // A default that is not configured.
        let s = HeaderProfileSelector::new(" X-Stage ", "prefill ");
        assert_eq!(s.header(), "x-stage");
        let two = profiles(&["a", "b"]);
        let missing = s.select(&request(None), &two).unwrap_err();
        assert!(
            missing.to_string().contains("defaultProfile `prefill`"),
            "{missing}"
        );
        assert_eq!(missing.http_status(), 400);
        assert_eq!(s.select(&request(Some(("x-stage", "b"))), &two), Ok(1));
    }
}
