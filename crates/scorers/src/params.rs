//! Parameter types shared by several built-in plugins.

use serde::Deserialize;

/// The parameters of a plugin that takes none: any key given is an error, so a typo in YAML is
/// reported instead of silently ignored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParameters {}
