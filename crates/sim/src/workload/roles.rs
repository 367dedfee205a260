//! Server roles for prefill/decode disaggregation: the `roles` section of a scenario, and the
//! endpoint label the runner sets from it ([`ROLE_LABEL`], which the `decode-filter` and
//! `prefill-filter` read).
//!
//! A scenario gives roles as counts, assigned in the order `decode`, `prefill`, `both` (then
//! the other roles in [`KNOWN_ROLES`]' order) from server 0 on, or as one role per server.
//! Decode servers come first because the runner staggers the first scrapes from server 0 on,
//! and a server never scraped is no candidate: a request arriving before any decode server's
//! first scrape would find no destination, while one finding no prefill server is merely
//! served aggregated.
//! Without the section no server is labelled: every existing policy sees the pool as before,
//! and a P/D policy finds no prefill server (the `prefill-filter` drops unlabelled endpoints)
//! and serves every request aggregated.
//!
//! ```
//! use shepherd_sim::workload::Scenario;
//!
//! let yaml = "
//! name: pd
//! servers: 4
//! roles: { decode: 3, prefill: 1 }
//! streams:
//!   - kind: shared-prefix
//!     load: { closed: 1 }
//!     endS: 1
//! ";
//! let scenario = Scenario::from_yaml(yaml, "pd.yaml").unwrap();
//! assert_eq!(scenario.roles, ["decode", "decode", "decode", "prefill"]);
//! let listed = Scenario::from_yaml(&yaml.replace("{ decode: 3, prefill: 1 }", "[both, both, prefill, decode]"), "pd.yaml").unwrap();
//! assert_eq!(listed.roles[2], "prefill");
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The endpoint label naming a server's role (llm-d's).
pub const ROLE_LABEL: &str = "llm-d.ai/role";

/// The role values the role filters know, in the order counts are assigned.
pub const KNOWN_ROLES: &[&str] = &[
    "decode",
    "prefill",
    "both",
    "prefill-decode",
    "encode",
    "encode-prefill",
    "encode-prefill-decode",
];

/// The `roles` section as written: counts by role, or one role per server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RolesSpec {
    /// How many servers have each role.
    Counts(BTreeMap<String, u32>),
    /// Server `i`'s role.
    List(Vec<String>),
}

impl RolesSpec {
    /// One role per server for a pool of `servers`; `Err(reason)` when a role is unknown or
    /// the roles do not cover the pool exactly.
    pub fn resolve(&self, servers: u32) -> Result<Vec<String>, String> {
        let unknown = |r: &str| format!("unknown role `{r}` (known: {})", KNOWN_ROLES.join(", "));
        let roles: Vec<String> = match self {
            RolesSpec::List(list) => {
                if let Some(r) = list.iter().find(|r| !KNOWN_ROLES.contains(&r.as_str())) {
                    return Err(unknown(r));
                }
                list.clone()
            }
            RolesSpec::Counts(counts) => {
                if let Some(r) = counts.keys().find(|r| !KNOWN_ROLES.contains(&r.as_str())) {
                    return Err(unknown(r));
                }
                KNOWN_ROLES
                    .iter()
                    .flat_map(|&role| {
                        let n = counts.get(role).copied().unwrap_or(0);
                        std::iter::repeat_n(role.to_string(), n as usize)
                    })
                    .collect()
            }
        };
        if roles.len() != servers as usize {
            return Err(format!(
                "{} roles for {servers} servers: give every server exactly one",
                roles.len()
            ));
        }
        Ok(roles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_assigned_decode_first_and_must_cover_the_pool() {
        let spec = RolesSpec::Counts([("prefill".into(), 2), ("decode".into(), 2)].into());
        assert_eq!(
            spec.resolve(4).unwrap(),
            ["decode", "decode", "prefill", "prefill"]
        );
        assert!(
            spec.resolve(5)
                .unwrap_err()
                .contains("4 roles for 5 servers")
        );
        let bad = RolesSpec::List(vec!["prefil".into()]);
        assert!(
            bad.resolve(1)
                .unwrap_err()
                .contains("unknown role `prefil`")
        );
    }
}
