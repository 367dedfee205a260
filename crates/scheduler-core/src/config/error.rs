use thiserror::Error;

/// Why a configuration could not be loaded or built. Every variant names the offending entry.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not valid YAML for this schema.
    #[error("invalid config: {0}")]
    Syntax(String),
    /// A plugin names a type no factory is registered for.
    #[error("plugin `{name}`: unknown plugin type `{plugin_type}` (known: {known})")]
    UnknownPluginType {
        /// Plugin name.
        name: String,
        /// The unknown type.
        plugin_type: String,
        /// Registered types, comma-separated.
        known: String,
    },
    /// Two plugins share a name.
    #[error("plugin name `{0}` is used twice")]
    DuplicatePluginName(String),
    /// A plugin's parameters were rejected.
    #[error("plugin `{name}` (type `{plugin_type}`): bad parameters: {reason}")]
    BadParameters {
        /// Plugin name.
        name: String,
        /// Plugin type.
        plugin_type: String,
        /// What is wrong.
        reason: String,
    },
    /// A profile refers to a plugin that is not defined.
    #[error("profile `{profile}`: pluginRef `{plugin_ref}` names no plugin")]
    DanglingReference {
        /// Profile name.
        profile: String,
        /// The missing plugin name.
        plugin_ref: String,
    },
    /// A referenced plugin cannot be used where it is referenced.
    #[error("profile `{profile}`: plugin `{plugin}` is not a filter, scorer or picker")]
    NotUsable {
        /// Profile name.
        profile: String,
        /// Plugin name.
        plugin: String,
    },
    /// A profile has more than one picker.
    #[error("profile `{profile}`: more than one picker (`{first}` and `{second}`)")]
    TwoPickers {
        /// Profile name.
        profile: String,
        /// First picker.
        first: String,
        /// Second picker.
        second: String,
    },
    /// A weight is negative or not finite.
    #[error(
        "profile `{profile}`: plugin `{plugin}` has invalid weight {weight} (must be finite and ≥ 0)"
    )]
    InvalidWeight {
        /// Profile name.
        profile: String,
        /// Plugin name.
        plugin: String,
        /// The weight.
        weight: f64,
    },
    /// Two profiles share a name.
    #[error("profile name `{0}` is used twice")]
    DuplicateProfileName(String),
    /// The text exceeds one of the limits checked before it is parsed (see
    /// [`limits`](crate::config::limits)): its size, nesting depth, number of anchors or
    /// aliases, or the text its aliases stand for.
    #[error("config exceeds the {limit} limit: {found} > {max}")]
    LimitExceeded {
        /// Which limit: `size in bytes`, `nesting depth`, `anchor count`, `alias count` or
        /// `alias expansion in bytes`.
        limit: &'static str,
        /// The limit's value.
        max: usize,
        /// What the text has.
        found: usize,
    },
    /// An alias stands inside the very node it names, so it would expand without end.
    #[error("alias `*{alias}` is inside the node it names (recursive aliases are not allowed)")]
    RecursiveAlias {
        /// The alias's name (without `*`).
        alias: String,
    },
    /// A value outside the schema's own settings is invalid.
    #[error("`{field}`: {reason}")]
    InvalidSetting {
        /// The setting.
        field: String,
        /// What is wrong.
        reason: String,
    },
}
