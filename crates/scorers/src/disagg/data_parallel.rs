//! `data-parallel-profile-handler`: upstream's deprecated handler for data-parallel ranks
//! behind one pod address. It runs the config's one scheduling profile (a config with more is
//! refused, where upstream loads it and fails every request).
//!
//! Upstream sends the picked rank's `ip:port` in `x-data-parallel-host-port` and rewrites the
//! target to `primaryPort`, for Istio before 1.28.1. Shepherd sends the picked rank's own
//! `ip:port` as the destination, which is what upstream's replacement, the
//! `single-profile-handler` with Istio ≥ 1.28.1, does; `primaryPort` is checked (1–65535, or
//! 0) and not applied, and loading says so in a warning.
//!
//! ```
//! use shepherd_scorers::disagg::data_parallel::DataParallelParameters;
//!
//! let p: DataParallelParameters = serde_json::from_value(serde_json::json!({})).unwrap();
//! assert_eq!(p.primary_port, 8000);
//! assert!(p.check().is_ok());
//! let bad: DataParallelParameters =
//!     serde_json::from_value(serde_json::json!({"primaryPort": 70000})).unwrap();
//! assert!(bad.check().is_err());
//! ```

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;

/// Registry type name.
pub const TYPE_NAME: &str = "data-parallel-profile-handler";

/// The warning loading a config with this handler gives.
pub const WARNING: &str = "`data-parallel-profile-handler` is deprecated upstream (use \
    `single-profile-handler`); it runs the one scheduling profile, and the destination is the \
    picked rank's own `ip:port`: `primaryPort` is not applied";

/// `data-parallel-profile-handler` parameters.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct DataParallelParameters {
    /// The primary port (upstream's default 8000; 0: none).
    pub primary_port: i64,
}

impl Default for DataParallelParameters {
    fn default() -> Self {
        DataParallelParameters { primary_port: 8000 }
    }
}

impl DataParallelParameters {
    /// Upstream's check: a port in 1–65535, or 0.
    ///
    /// # Errors
    ///
    /// The port, in upstream's words.
    pub fn check(&self) -> Result<(), PluginError> {
        let port = self.primary_port;
        if port != 0 && !(1..=65_535).contains(&port) {
            return Err(PluginError::Other(format!(
                "invalid primaryPort: must be between 1 and 65535, got {port}"
            )));
        }
        Ok(())
    }
}

/// Builds a `data-parallel-profile-handler` (nothing to wire: the scheduler runs one profile).
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let p: DataParallelParameters = args.parse()?;
    p.check()?;
    Ok(PluginInstance::default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    // The cases of upstream's dp_profile_handler_test.go factory table.
    #[test]
    fn upstream_parameter_cases() {
        for (json, ok) in [
            (serde_json::json!({}), true),
            (serde_json::json!({"primaryPort": 8000}), true),
            (serde_json::json!({"primaryPort": 0}), true),
            (serde_json::json!({"primaryPort": 65535}), true),
            (serde_json::json!({"primaryPort": 65536}), false),
            (serde_json::json!({"primaryPort": -1}), false),
        ] {
            let p: DataParallelParameters = serde_json::from_value(json.clone()).unwrap();
            assert_eq!(p.check().is_ok(), ok, "{json}");
        }
        assert!(
            serde_json::from_value::<DataParallelParameters>(serde_json::json!({"port": 1}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<DataParallelParameters>(
                serde_json::json!({"primaryPort": "8000"})
            )
            .is_err()
        );
    }
}
