//! Usage-limit policies: how full the pool may get before each priority's traffic is held
//! back, so that capacity stays in reserve for the higher priorities.
//!
//! Under upstream's plugin type names and parameters (the llm-d router's
//! `pkg/epp/framework/plugins/flowcontrol/usagelimits/`):
//!
//! - `static-usage-limit-policy` (the default): one `threshold` for every priority (default
//!   1.0, no gating beyond saturation);
//! - `priority-holdback-policy`: a ceiling per active priority level, from `maxCeiling`
//!   (default 1.0) for the highest to `minCeiling` (required) for the lowest, spread linearly
//!   by rank (`domain: rank`, the default: equal steps whatever the numbers) or by value
//!   (`domain: value`: in proportion to the priority values). `shape` is `linear`, the only
//!   one.
//! - `soft-reflective-ceiling-policy`: no parameters; a ceiling per rank that falls with the
//!   saturation itself, and past it the band dispatches on one call in a period
//!   ([`soft_ceiling`](super::soft_ceiling)). Its ceilings depend on the saturation, so read
//!   them with [`UsageLimitPolicy::ceiling_at`].
//!
//! The queue dispatches from its highest non-empty band only while the saturation level is
//! below that band's ceiling (and stops there: lower bands never overtake it), and a request
//! goes straight through at admission only while the saturation is below its own ceiling.
//!
//! ```
//! use shepherd_scheduler_core::flow::UsageLimitPolicy;
//!
//! let policy = UsageLimitPolicy::from_plugin(
//!     "priority-holdback-policy",
//!     &serde_json::json!({"minCeiling": 0.4, "maxCeiling": 0.9}),
//! ).unwrap();
//! // Three active levels, highest first: 0.9, 0.65, 0.4.
//! let levels = [10, 0, -1];
//! assert_eq!(policy.ceiling(&levels, 10), 0.9);
//! assert!((policy.ceiling(&levels, 0) - 0.65).abs() < 1e-12);
//! assert_eq!(policy.ceiling(&levels, -1), 0.4);
//! ```

use serde::Deserialize;

use super::config::FlowConfigError;
use super::saturation::plugin_parameters;
use super::soft_ceiling::soft_reflective_ceiling;

/// How priority levels map onto the ceiling range (upstream `domain`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HoldbackDomain {
    /// Equal steps by rank among the active levels.
    #[default]
    Rank,
    /// In proportion to the priority values within the active range.
    Value,
}

/// A usage-limit policy: see the [module docs](self).
#[derive(Debug, Clone, PartialEq)]
pub enum UsageLimitPolicy {
    /// `static-usage-limit-policy`: one ceiling for all.
    Static {
        /// The ceiling (saturation level at which traffic is held back).
        threshold: f64,
    },
    /// `priority-holdback-policy`.
    PriorityHoldback {
        /// How levels map to ceilings.
        domain: HoldbackDomain,
        /// The lowest level's ceiling.
        min_ceiling: f64,
        /// The highest level's ceiling.
        max_ceiling: f64,
    },
    /// `soft-reflective-ceiling-policy`.
    SoftReflectiveCeiling,
}

impl Default for UsageLimitPolicy {
    fn default() -> Self {
        UsageLimitPolicy::Static { threshold: 1.0 }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StaticParams {
    threshold: Option<f64>,
}

/// The soft-reflective policy takes no parameters: any key is refused.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HoldbackParams {
    shape: Option<String>,
    domain: Option<String>,
    min_ceiling: Option<f64>,
    max_ceiling: Option<f64>,
}

impl UsageLimitPolicy {
    /// Upstream type of the static policy.
    pub const STATIC_TYPE: &'static str = "static-usage-limit-policy";
    /// Upstream type of the priority-holdback policy.
    pub const HOLDBACK_TYPE: &'static str = "priority-holdback-policy";
    /// Upstream type of the soft-reflective ceiling policy.
    pub const SOFT_REFLECTIVE_TYPE: &'static str = "soft-reflective-ceiling-policy";

    /// Builds the policy of upstream type `plugin_type` from its `parameters` (`null`: none).
    pub fn from_plugin(
        plugin_type: &str,
        parameters: &serde_json::Value,
    ) -> Result<Self, FlowConfigError> {
        match plugin_type {
            Self::STATIC_TYPE => {
                let p: StaticParams = plugin_parameters(Self::STATIC_TYPE, parameters)?;
                let threshold = p.threshold.unwrap_or(1.0);
                if !threshold.is_finite() || threshold < 0.0 {
                    return Err(invalid(
                        Self::STATIC_TYPE,
                        "threshold",
                        "must be a finite number >= 0",
                    ));
                }
                Ok(UsageLimitPolicy::Static { threshold })
            }
            Self::HOLDBACK_TYPE => {
                let p: HoldbackParams = plugin_parameters(Self::HOLDBACK_TYPE, parameters)?;
                if let Some(shape) = p.shape.as_deref()
                    && shape != "linear"
                {
                    return Err(invalid(
                        Self::HOLDBACK_TYPE,
                        "shape",
                        "must be \"linear\" (the only shape)",
                    ));
                }
                let Some(min_ceiling) = p.min_ceiling else {
                    return Err(invalid(Self::HOLDBACK_TYPE, "minCeiling", "is required"));
                };
                if !(0.0..1.0).contains(&min_ceiling) {
                    return Err(invalid(
                        Self::HOLDBACK_TYPE,
                        "minCeiling",
                        "must be in [0, 1)",
                    ));
                }
                let max_ceiling = p.max_ceiling.unwrap_or(1.0);
                if !(max_ceiling > 0.0 && max_ceiling <= 1.0) {
                    return Err(invalid(
                        Self::HOLDBACK_TYPE,
                        "maxCeiling",
                        "must be in (0, 1]",
                    ));
                }
                if min_ceiling > max_ceiling {
                    return Err(invalid(
                        Self::HOLDBACK_TYPE,
                        "minCeiling",
                        "must not exceed maxCeiling",
                    ));
                }
                let domain = match p.domain.as_deref() {
                    None | Some("rank") => HoldbackDomain::Rank,
                    Some("value") => HoldbackDomain::Value,
                    Some(_) => {
                        return Err(invalid(
                            Self::HOLDBACK_TYPE,
                            "domain",
                            "must be \"rank\" or \"value\"",
                        ));
                    }
                };
                Ok(UsageLimitPolicy::PriorityHoldback {
                    domain,
                    min_ceiling,
                    max_ceiling,
                })
            }
            Self::SOFT_REFLECTIVE_TYPE => {
                let NoParams {} = plugin_parameters(Self::SOFT_REFLECTIVE_TYPE, parameters)?;
                Ok(UsageLimitPolicy::SoftReflectiveCeiling)
            }
            other => Err(FlowConfigError::Invalid {
                field: "flowControl.usageLimitPolicyPluginRef".into(),
                message: crate::config::not_implemented_message(other).unwrap_or_else(|| {
                    format!(
                        "`{other}` is not a usage-limit policy (expected {}, {} or {})",
                        Self::STATIC_TYPE,
                        Self::HOLDBACK_TYPE,
                        Self::SOFT_REFLECTIVE_TYPE
                    )
                }),
            }),
        }
    }

    /// Whether every priority has the same ceiling (so the active levels do not matter).
    pub fn is_uniform(&self) -> bool {
        matches!(self, UsageLimitPolicy::Static { .. })
    }

    /// The ceiling of `priority` among the active `levels` at pool `saturation`, on a call
    /// where the soft-reflective policy's alternating bands are `open` (the other policies
    /// ignore both).
    pub fn ceiling_at(&self, levels: &[i32], priority: i32, saturation: f64, open: bool) -> f64 {
        match self {
            UsageLimitPolicy::SoftReflectiveCeiling => {
                soft_reflective_ceiling(rank_of(levels, priority), levels.len(), saturation, open)
            }
            _ => self.ceiling(levels, priority),
        }
    }

    /// The ceiling of `priority` among the active `levels` (distinct, highest first; it should
    /// contain `priority`, else the nearest rank below is used). The soft-reflective policy's
    /// ceilings depend on the saturation: this gives 1 for it; use
    /// [`ceiling_at`](Self::ceiling_at).
    pub fn ceiling(&self, levels: &[i32], priority: i32) -> f64 {
        match *self {
            UsageLimitPolicy::SoftReflectiveCeiling => 1.0,
            UsageLimitPolicy::Static { threshold } => threshold,
            UsageLimitPolicy::PriorityHoldback {
                domain,
                min_ceiling,
                max_ceiling,
            } => {
                if levels.len() <= 1 {
                    return max_ceiling;
                }
                let spread = max_ceiling - min_ceiling;
                match domain {
                    HoldbackDomain::Rank => {
                        let rank = rank_of(levels, priority).min(levels.len() - 1) as f64;
                        max_ceiling - rank * spread / (levels.len() - 1) as f64
                    }
                    HoldbackDomain::Value => {
                        let high = f64::from(levels[0]);
                        let low = f64::from(levels[levels.len() - 1]);
                        if high == low {
                            return max_ceiling;
                        }
                        let r = ((f64::from(priority) - low) / (high - low)).clamp(0.0, 1.0);
                        min_ceiling + r * spread
                    }
                }
            }
        }
    }
}

/// The rank of `priority` among `levels` (highest first): how many levels are above it.
fn rank_of(levels: &[i32], priority: i32) -> usize {
    levels.iter().take_while(|&&p| p > priority).count()
}

fn invalid(plugin: &str, field: &str, message: &str) -> FlowConfigError {
    FlowConfigError::Invalid {
        field: format!("{plugin}.parameters.{field}"),
        message: message.to_owned(),
    }
}
