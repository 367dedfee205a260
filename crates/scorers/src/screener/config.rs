//! The `disaggregatedset-rollout-screener` parameters and upstream's checks of them
//! (`config.go`, llm-d router at `ebab68792`).
//!
//! ```
//! use shepherd_scorers::screener::config::{GatingMode, RolloutParameters};
//!
//! let mut p: RolloutParameters = serde_json::from_str(r#"{
//!     "scope": {"labelSelector": "disaggregatedset.x-k8s.io/name=my-set"},
//!     "headerSelectors": [{"name": "revision", "headerName": "X-Disagg-Revision",
//!         "labelKey": "disaggregatedset.x-k8s.io/revision", "mode": "strict"}],
//!     "revisionGating": {"mode": "max-role", "requireRoles": {"values": ["prefill", "decode"]}}
//! }"#).unwrap();
//! p.validate().unwrap();
//! assert_eq!(p.header_selectors[0].header_name, "x-disagg-revision");
//! let gating = p.revision_gating.as_ref().unwrap();
//! assert_eq!(gating.mode, Some(GatingMode::MaxRole));
//! assert_eq!(gating.role_label_key, "disaggregatedset.x-k8s.io/role"); // the default
//! ```

use std::collections::BTreeSet;

use serde::Deserialize;

use super::selector::Selector;

/// The revision label a `DisaggregatedSet` puts on its pods (the default `revisionLabelKey`).
pub const DEFAULT_REVISION_LABEL: &str = "disaggregatedset.x-k8s.io/revision";

/// The role label a `DisaggregatedSet` puts on its pods (the default `roleLabelKey`).
pub const DEFAULT_ROLE_LABEL: &str = "disaggregatedset.x-k8s.io/role";

/// Most header selectors.
pub const MAX_HEADER_SELECTORS: usize = 16;

/// Most required roles.
pub const MAX_ROLES: usize = 16;

/// `scope`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Scope {
    /// The pods observed for revision coverage (required).
    pub label_selector: String,
}

/// `headerSelectors[].mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SelectorMode {
    /// Keeps only endpoints whose label equals the request header; none fails closed.
    Strict,
    /// Leaves matching to a `header-label-affinity-scorer`.
    Prefer,
}

/// One `headerSelectors` entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderSelector {
    /// A stable identifier.
    #[serde(default)]
    pub name: String,
    /// The request (and response) header, lower-cased when read.
    #[serde(default)]
    pub header_name: String,
    /// The endpoint label compared with the header.
    #[serde(default)]
    pub label_key: String,
    /// `strict` or `prefer`.
    pub mode: Option<SelectorMode>,
}

/// `revisionGating.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum GatingMode {
    /// Weight: a revision's ready pods summed over the required roles.
    #[serde(rename = "sum")]
    Sum,
    /// Weight: a revision's ready pods of the role with the most ready pods overall.
    #[serde(rename = "max-role")]
    MaxRole,
    /// No coverage check and no revision choice (header selectors still apply).
    #[serde(rename = "disabled")]
    Disabled,
}

/// `revisionGating.requireRoles`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RequireRoles {
    /// Roles that must each have a ready pod.
    pub values: Vec<String>,
}

/// `revisionGating`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RevisionGating {
    /// The revision label (default [`DEFAULT_REVISION_LABEL`]).
    #[serde(default)]
    pub revision_label_key: String,
    /// The role label (default [`DEFAULT_ROLE_LABEL`]).
    #[serde(default)]
    pub role_label_key: String,
    /// The mode (required).
    pub mode: Option<GatingMode>,
    /// Required for `sum` and `max-role`.
    #[serde(default)]
    pub require_roles: Option<RequireRoles>,
}

impl RevisionGating {
    /// Whether revisions are gated (`sum` or `max-role` with roles).
    pub fn active(&self) -> bool {
        matches!(self.mode, Some(GatingMode::Sum | GatingMode::MaxRole))
            && self.require_roles.is_some()
    }

    /// The required roles.
    pub fn roles(&self) -> &[String] {
        self.require_roles.as_ref().map_or(&[], |r| &r.values)
    }
}

/// The parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct RolloutParameters {
    /// Which pods count.
    pub scope: Scope,
    /// Header-to-label mappings.
    pub header_selectors: Vec<HeaderSelector>,
    /// Revision gating (required).
    pub revision_gating: Option<RevisionGating>,
}

impl RolloutParameters {
    /// Upstream's `Validate`: required fields, known modes, no duplicate names, headers or
    /// roles; fills the label-key defaults and lower-cases header names. Returns the scope.
    pub fn validate(&mut self) -> Result<Selector, String> {
        if self.scope.label_selector.is_empty() {
            return Err("scope.labelSelector is required".into());
        }
        let scope: Selector = self
            .scope
            .label_selector
            .parse()
            .map_err(|e| format!("scope.labelSelector is not a valid label selector: {e}"))?;
        if self.header_selectors.len() > MAX_HEADER_SELECTORS {
            return Err(format!("headerSelectors: at most {MAX_HEADER_SELECTORS}"));
        }
        let mut names = BTreeSet::new();
        let mut headers = BTreeSet::new();
        for (i, s) in self.header_selectors.iter_mut().enumerate() {
            s.header_name = s.header_name.to_ascii_lowercase();
            if s.name.is_empty() {
                return Err(format!("headerSelectors[{i}].name is required"));
            }
            if s.header_name.is_empty() {
                return Err(format!("headerSelectors[{i}].headerName is required"));
            }
            if s.label_key.is_empty() {
                return Err(format!("headerSelectors[{i}].labelKey is required"));
            }
            if s.mode.is_none() {
                return Err(format!(
                    "headerSelectors[{i}].mode \"\" must be one of strict|prefer"
                ));
            }
            if !names.insert(s.name.clone()) {
                return Err(format!("headerSelectors: duplicate name {:?}", s.name));
            }
            if !headers.insert(s.header_name.clone()) {
                return Err(format!(
                    "headerSelectors: duplicate headerName {:?}",
                    s.header_name
                ));
            }
        }
        let Some(gating) = self.revision_gating.as_mut() else {
            return Err("revisionGating is required".into());
        };
        if gating.revision_label_key.is_empty() {
            gating.revision_label_key = DEFAULT_REVISION_LABEL.into();
        }
        if gating.role_label_key.is_empty() {
            gating.role_label_key = DEFAULT_ROLE_LABEL.into();
        }
        match gating.mode {
            Some(GatingMode::Disabled) => {}
            Some(mode @ (GatingMode::Sum | GatingMode::MaxRole)) => {
                let name = if mode == GatingMode::Sum {
                    "sum"
                } else {
                    "max-role"
                };
                let Some(roles) = &gating.require_roles else {
                    return Err(format!(
                        "revisionGating.requireRoles is required when revisionGating.mode={name}"
                    ));
                };
                if roles.values.is_empty() {
                    return Err(
                        "revisionGating.requireRoles.values must contain at least one role".into(),
                    );
                }
                if roles.values.len() > MAX_ROLES {
                    return Err(format!(
                        "revisionGating.requireRoles.values: at most {MAX_ROLES}"
                    ));
                }
                let mut seen = BTreeSet::new();
                for (i, role) in roles.values.iter().enumerate() {
                    if role.is_empty() {
                        return Err(format!(
                            "revisionGating.requireRoles.values[{i}] must not be empty"
                        ));
                    }
                    if !seen.insert(role) {
                        return Err(format!(
                            "revisionGating.requireRoles.values contains duplicate role {role:?}"
                        ));
                    }
                }
            }
            None => {
                return Err("revisionGating.mode \"\" must be one of sum|max-role|disabled".into());
            }
        }
        Ok(scope)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn check(json: serde_json::Value) -> Result<RolloutParameters, String> {
        let mut p: RolloutParameters = serde_json::from_value(json).map_err(|e| e.to_string())?;
        p.validate()?;
        Ok(p)
    }

    fn base() -> serde_json::Value {
        serde_json::json!({
            "scope": {"labelSelector": "app=x"},
            "revisionGating": {"mode": "sum", "requireRoles": {"values": ["prefill", "decode"]}}
        })
    }

    // config_test.go: the cases of Validate.
    #[test]
    fn upstreams_validation_cases() {
        assert!(check(base()).is_ok());
        let mut no_scope = base();
        no_scope["scope"]["labelSelector"] = "".into();
        assert!(
            check(no_scope)
                .unwrap_err()
                .contains("scope.labelSelector is required")
        );
        let mut bad_scope = base();
        bad_scope["scope"]["labelSelector"] = "a in b".into();
        assert!(
            check(bad_scope)
                .unwrap_err()
                .contains("not a valid label selector")
        );
        let mut no_gating = base();
        no_gating.as_object_mut().unwrap().remove("revisionGating");
        assert!(
            check(no_gating)
                .unwrap_err()
                .contains("revisionGating is required")
        );
        let mut no_roles = base();
        no_roles["revisionGating"] = serde_json::json!({"mode": "max-role"});
        assert!(
            check(no_roles)
                .unwrap_err()
                .contains("requireRoles is required")
        );
        let mut empty_roles = base();
        empty_roles["revisionGating"]["requireRoles"]["values"] = serde_json::json!([]);
        assert!(
            check(empty_roles)
                .unwrap_err()
                .contains("at least one role")
        );
        let mut dup_roles = base();
        dup_roles["revisionGating"]["requireRoles"]["values"] = serde_json::json!(["a", "a"]);
        assert!(check(dup_roles).unwrap_err().contains("duplicate role"));
        let mut disabled = base();
        disabled["revisionGating"] = serde_json::json!({"mode": "disabled"});
        assert!(check(disabled).is_ok());
        let mut bad_mode = base();
        bad_mode["revisionGating"]["mode"] = "random".into();
        assert!(check(bad_mode).is_err());
        let mut selectors = base();
        selectors["headerSelectors"] = serde_json::json!([
            {"name": "a", "headerName": "X-A", "labelKey": "k", "mode": "strict"},
            {"name": "b", "headerName": "x-a", "labelKey": "k", "mode": "prefer"}
        ]);
        assert!(
            check(selectors.clone())
                .unwrap_err()
                .contains("duplicate headerName")
        );
        selectors["headerSelectors"][1]["name"] = "a".into();
        assert!(
            check(selectors.clone())
                .unwrap_err()
                .contains("duplicate name")
        );
        selectors["headerSelectors"][1] =
            serde_json::json!({"name": "b", "headerName": "x-b", "labelKey": "k", "mode": "loose"});
        assert!(check(selectors.clone()).is_err());
        selectors["headerSelectors"][1] = serde_json::json!({"name": "b", "headerName": "x-b", "labelKey": "k", "mode": "prefer", "weight": 3});
        assert!(check(selectors).is_err(), "unknown keys are refused");
    }
}
