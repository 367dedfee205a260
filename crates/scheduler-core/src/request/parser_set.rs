//! The parsers requests go through, and which one reads a given path: upstream's parser
//! registry rules.
//!
//! A [`ParserSet`] is built from a list of parsers in order (`requestHandler.parsers`):
//!
//! - a parser whose type was already registered is skipped (the first of a type wins);
//! - a parser that claims no path (`passthrough-parser`) becomes the **fallback** and ends
//!   registration: the parsers listed after it are skipped;
//! - with no parsers listed, [`ParserSet::upstream_default`] applies: `openai-parser`,
//!   `anthropic-parser`, `vllmhttp-parser`, then `passthrough-parser` as the fallback. A
//!   list that is given is used as it is, with no fallback added.
//!
//! A path goes to the parser with the **longest** claimed suffix it ends with (see
//! [`path`] for the matching), else to the fallback, else it is refused with
//! [`ParseError::UnsupportedPath`] (404).
//!
//! ```
//! use shepherd_scheduler_core::request::{ApiKind, ParseError, ParseLimits, ParserKind, ParserSet, Prompt};
//!
//! let limits = ParseLimits::default();
//! let set = ParserSet::new([("vllm", ParserKind::VllmHttp), ("openai", ParserKind::OpenAi)]);
//! let req = set.parse("/inference/v1/generate", br#"{"token_ids":[1,2,3]}"#, &limits)?;
//! assert_eq!((req.api, req.prompt), (ApiKind::VllmGenerate, Prompt::Tokens(vec![1, 2, 3])));
//! assert!(matches!(set.parse("/v1/audio/speech", b"{}", &limits), Err(ParseError::UnsupportedPath(_))));
//!
//! // The default set forwards what nobody claims, unread.
//! let req = ParserSet::upstream_default().parse("/v1/audio/speech", b"RIFF", &limits)?;
//! assert_eq!((req.api, req.model.as_str()), (ApiKind::Unparsed, ""));
//! # Ok::<(), ParseError>(())
//! ```

pub(crate) mod path;

use std::fmt;

use super::parser_kind::read_as;
use super::{ApiKind, InferenceRequest, ParseError, ParseLimits, ParserKind};
use path::{matches_suffix, normalize_path};

/// One registered parser: its name in the config and its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParserEntry {
    /// The plugin name (`requestHandler.parsers[].pluginRef`).
    pub name: String,
    /// What it parses.
    pub kind: ParserKind,
}

/// Why a listed parser was not registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkipReason {
    /// A parser of the same type came earlier.
    DuplicateType,
    /// It comes after the fallback parser (named here), which ends registration.
    AfterFallback(String),
}

/// A listed parser that was not registered, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedParser {
    /// The parser.
    pub parser: ParserEntry,
    /// Why it was skipped.
    pub reason: SkipReason,
}

impl fmt::Display for SkippedParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ParserEntry { name, kind } = &self.parser;
        match &self.reason {
            SkipReason::DuplicateType => write!(
                f,
                "parser `{name}` is skipped: a `{kind}` parser is already registered"
            ),
            SkipReason::AfterFallback(fallback) => write!(
                f,
                "parser `{name}` is skipped: it comes after the fallback parser `{fallback}`"
            ),
        }
    }
}

/// One claimed suffix: which registered parser claims it, and the API it is read as.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    suffix: &'static str,
    parser: usize,
    api: ApiKind,
}

/// The parsers in force, registered by upstream's rules (longest claimed suffix, a fallback
/// ends the list, duplicate types skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParserSet {
    /// Parsers claiming paths, in registration order.
    claiming: Vec<ParserEntry>,
    fallback: Option<ParserEntry>,
    skipped: Vec<SkippedParser>,
    /// Whether this is upstream's default list (the config named no parser).
    implicit: bool,
    /// Every claimed suffix, longest first (registration order among equal lengths): the
    /// first that matches a path is the longest.
    routes: Vec<Route>,
}

impl Default for ParserSet {
    /// [`ParserSet::upstream_default`].
    fn default() -> Self {
        ParserSet::upstream_default()
    }
}

impl ParserSet {
    /// Registers `parsers` (name, kind) in order, by upstream's rules. An empty list gives
    /// an empty set, which refuses every path; see [`ParserSet::upstream_default`] for what an
    /// empty `requestHandler.parsers` means.
    pub fn new<N: Into<String>>(parsers: impl IntoIterator<Item = (N, ParserKind)>) -> Self {
        let mut set = ParserSet {
            claiming: Vec::new(),
            fallback: None,
            skipped: Vec::new(),
            implicit: false,
            routes: Vec::new(),
        };
        for (name, kind) in parsers {
            let parser = ParserEntry {
                name: name.into(),
                kind,
            };
            if let Some(fallback) = &set.fallback {
                let reason = SkipReason::AfterFallback(fallback.name.clone());
                set.skipped.push(SkippedParser { parser, reason });
            } else if set.contains(kind) {
                let reason = SkipReason::DuplicateType;
                set.skipped.push(SkippedParser { parser, reason });
            } else if kind.is_fallback() {
                set.fallback = Some(parser);
            } else {
                let index = set.claiming.len();
                set.routes
                    .extend(kind.routes().iter().map(|&(suffix, api)| Route {
                        suffix,
                        parser: index,
                        api,
                    }));
                set.claiming.push(parser);
            }
        }
        // Stable: among equal lengths the first registered stays first.
        set.routes
            .sort_by_key(|route| std::cmp::Reverse(route.suffix.len()));
        set
    }

    /// The longest claimed suffix the normalized `path` ends with: its parser and API.
    fn claim(&self, path: &str) -> Option<(&ParserEntry, ApiKind)> {
        let route = self
            .routes
            .iter()
            .find(|route| matches_suffix(path, route.suffix))?;
        Some((&self.claiming[route.parser], route.api))
    }

    /// Upstream's parsers for a config that lists none: `openai-parser`,
    /// `anthropic-parser`, `vllmhttp-parser`, then `passthrough-parser` as the fallback, each
    /// named after its type.
    pub fn upstream_default() -> Self {
        let mut set = ParserSet::new(
            [
                ParserKind::OpenAi,
                ParserKind::Anthropic,
                ParserKind::VllmHttp,
                ParserKind::Passthrough,
            ]
            .map(|kind| (kind.type_name(), kind)),
        );
        set.implicit = true;
        set
    }

    /// Whether this is [`ParserSet::upstream_default`] (the config named no parser), as
    /// opposed to an explicit list: a gateway facing clients directly may treat the default
    /// fallback more carefully than one an operator asked for.
    pub fn is_upstream_default(&self) -> bool {
        self.implicit
    }

    /// The registered parsers, in registration order (the fallback last).
    pub fn parsers(&self) -> impl Iterator<Item = &ParserEntry> {
        self.claiming.iter().chain(self.fallback.as_ref())
    }

    /// The fallback parser, when there is one.
    pub fn fallback(&self) -> Option<&ParserEntry> {
        self.fallback.as_ref()
    }

    /// The listed parsers that were not registered (log them as warnings).
    pub fn skipped(&self) -> &[SkippedParser] {
        &self.skipped
    }

    /// Whether a parser of `kind` is registered.
    pub fn contains(&self, kind: ParserKind) -> bool {
        self.parsers().any(|p| p.kind == kind)
    }

    /// Every path suffix the registered parsers claim, in registration order.
    pub fn claimed_suffixes(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.claiming
            .iter()
            .flat_map(|p| p.kind.claims().iter().copied())
    }

    /// The parser that reads `path`: the longest claimed suffix (the first registered on a
    /// tie), else the fallback; `None` when neither.
    pub fn resolve(&self, path: &str) -> Option<&ParserEntry> {
        match self.claim(normalize_path(path)) {
            Some((parser, _)) => Some(parser),
            None => self.fallback.as_ref(),
        }
    }

    /// The API the request at `path` would be read as ([`ApiKind::Unparsed`] by a
    /// fallback); `None` when it would be refused.
    pub fn api(&self, path: &str) -> Option<ApiKind> {
        let path = normalize_path(path);
        match self.claim(path) {
            Some((parser, api)) => parser.kind.reads_at(path).then_some(api),
            None => self.fallback.as_ref().map(|_| ApiKind::Unparsed),
        }
    }

    /// Parses `body` sent to `path` with the parser [`resolve`](Self::resolve) gives.
    ///
    /// Errors: [`ParseError::BodyTooLarge`] first, then [`ParseError::UnsupportedPath`] when
    /// no parser takes the path (or the one that claims it cannot read it, as SGLang's for a
    /// path other than `/generate`), then the parser's own.
    pub fn parse(
        &self,
        path: &str,
        body: &[u8],
        limits: &ParseLimits,
    ) -> Result<InferenceRequest, ParseError> {
        if body.len() > limits.max_body_bytes {
            return Err(ParseError::BodyTooLarge {
                size: body.len(),
                limit: limits.max_body_bytes,
            });
        }
        let normalized = normalize_path(path);
        let (kind, api) = match self.claim(normalized) {
            Some((parser, api)) if parser.kind.reads_at(normalized) => (parser.kind, api),
            Some(_) => return Err(ParseError::UnsupportedPath(path.into())),
            None => match &self.fallback {
                Some(fallback) => (fallback.kind, ApiKind::Unparsed),
                None => return Err(ParseError::UnsupportedPath(path.into())),
            },
        };
        read_as(kind, api, body, limits)
    }
}
