use thiserror::Error;

/// Why a configuration could not be loaded or built. Every variant names the offending entry.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The text is not valid YAML for this schema.
    #[error("invalid config{}: {message}", location(*line, *column))]
    Syntax {
        /// What is wrong.
        message: String,
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// 1-based column of the error, when known.
        column: Option<usize>,
    },
    /// `apiVersion` names a schema this loader does not read.
    #[error("unsupported apiVersion `{found}` (expected one of: {expected})")]
    UnsupportedApiVersion {
        /// The apiVersion given.
        found: String,
        /// Accepted versions, comma-separated.
        expected: String,
    },
    /// `kind` is not `EndpointPickerConfig`.
    #[error("unsupported kind `{0}` (expected `EndpointPickerConfig`)")]
    UnsupportedKind(String),
    /// In strict mode: the config has sections that would be ignored.
    #[error("strict mode: {}", warnings.join("; "))]
    Strict {
        /// One message per ignored section.
        warnings: Vec<String>,
    },
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
        #[source]
        reason: PluginError,
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
    /// A weight is negative, not finite, or above [`MAX_WEIGHT`](super::MAX_WEIGHT).
    #[error(
        "profile `{profile}`: plugin `{plugin}` has invalid weight {weight} (must be within [0, {max}])",
        max = super::MAX_WEIGHT
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
    /// A well-formed value that is not acceptable, found after parsing, at the node it names
    /// (`requestHandler.parsers[0]`, `featureGates[1]`).
    #[error("`{path}`{}: {reason}", location(*line, *column))]
    Invalid {
        /// The node, as a path from the top.
        path: String,
        /// 1-based line of the node, when known.
        line: Option<usize>,
        /// 1-based column of the node, when known.
        column: Option<usize>,
        /// What is wrong.
        reason: String,
    },
    /// A plugin names an upstream type Shepherd does not implement yet.
    #[error(
        "plugin `{name}`: type `{plugin_type}` is an upstream plugin type Shepherd does not implement yet (area: {area}){}",
        if note.is_empty() { String::new() } else { format!("; {note}") }
    )]
    NotImplemented {
        /// Plugin name.
        name: String,
        /// The upstream type.
        plugin_type: String,
        /// The area of work it belongs to.
        area: super::Area,
        /// What else is worth knowing (an older name's replacement, say), or empty.
        note: String,
    },
    /// A plugin of an upstream Alpha type, without `--allow-experimental-plugins`.
    #[error(
        "plugin '{name}' (type: '{plugin_type}') has Alpha stability level, but command line flag --allow-experimental-plugins is not set"
    )]
    ExperimentalPlugin {
        /// Plugin name.
        name: String,
        /// The upstream Alpha type.
        plugin_type: String,
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

impl ConfigError {
    /// The 1-based line the error is at, when known.
    pub fn line(&self) -> Option<usize> {
        match self {
            ConfigError::Syntax { line, .. } | ConfigError::Invalid { line, .. } => *line,
            _ => None,
        }
    }

    /// A [`ConfigError::Invalid`] at `path` in `text`.
    pub(crate) fn invalid_at(
        text: &str,
        path: &super::ConfigPath,
        reason: impl Into<String>,
    ) -> Self {
        let at = super::locate(text, path);
        ConfigError::Invalid {
            path: path.to_string(),
            line: at.map(|(l, _)| l),
            column: at.map(|(_, c)| c),
            reason: reason.into(),
        }
    }
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}

/// Why a plugin factory rejected its arguments.
///
/// ```
/// use shepherd_scheduler_core::config::PluginError;
///
/// let e = PluginError::invalid("blockSize", "must be at least 1");
/// assert_eq!(e.to_string(), "`blockSize`: must be at least 1");
/// ```
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum PluginError {
    /// The parameters do not fit the plugin's schema: an unknown name, a wrong type.
    #[error("{0}")]
    Schema(String),
    /// A parameter has a value outside what the plugin accepts.
    #[error("`{parameter}`: {reason}")]
    InvalidValue {
        /// The parameter, as spelled in YAML.
        parameter: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Anything else the factory could not do.
    #[error("{0}")]
    Other(String),
}

impl PluginError {
    /// An invalid value for `parameter`.
    pub fn invalid(parameter: impl Into<String>, reason: impl Into<String>) -> Self {
        PluginError::InvalidValue {
            parameter: parameter.into(),
            reason: reason.into(),
        }
    }
}

impl From<serde_json::Error> for PluginError {
    fn from(e: serde_json::Error) -> Self {
        PluginError::Schema(e.to_string())
    }
}

impl From<String> for PluginError {
    fn from(message: String) -> Self {
        PluginError::Other(message)
    }
}

impl From<&str> for PluginError {
    fn from(message: &str) -> Self {
        PluginError::Other(message.to_string())
    }
}
