#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The parser registry: which parser reads a path (longest suffix, fallback, duplicates, the
//! default list), and the set built from a config.

use proptest::prelude::*;
use shepherd_scheduler_core::config::EndpointPickerConfig;
use shepherd_scheduler_core::request::{
    ApiKind, ParseError, ParseLimits, ParserKind, ParserSet, Prompt, SkipReason,
};

fn set(kinds: &[ParserKind]) -> ParserSet {
    ParserSet::new(kinds.iter().map(|k| (k.type_name(), *k)))
}

fn resolved(set: &ParserSet, path: &str) -> Option<ParserKind> {
    set.resolve(path).map(|p| p.kind)
}

#[test]
fn the_longest_suffix_wins_whatever_the_order() {
    use ParserKind::*;
    for order in [[SglangHttp, VllmHttp], [VllmHttp, SglangHttp]] {
        let set = set(&order);
        assert_eq!(resolved(&set, "/inference/v1/generate"), Some(VllmHttp));
        assert_eq!(resolved(&set, "/generate"), Some(SglangHttp));
        assert_eq!(resolved(&set, "/v1/completions"), None);
    }
    let both = set(&[OpenAi, Anthropic]);
    assert_eq!(
        resolved(&both, "/v1/messages/count_tokens"),
        Some(Anthropic)
    );
    assert_eq!(resolved(&both, "/v1/chat/completions"), Some(OpenAi));
    assert_eq!(
        resolved(&both, "/openai/v1/chat/completions/render"),
        Some(OpenAi)
    );
    assert_eq!(resolved(&both, "/v1/messages/?beta=true"), Some(Anthropic));
    // A suffix matches at a segment boundary only.
    assert_eq!(resolved(&both, "/v1/xcompletions"), None);
}

#[test]
fn a_fallback_takes_the_rest_and_ends_registration() {
    use ParserKind::*;
    let set = set(&[OpenAi, Passthrough, VllmHttp]);
    assert_eq!(set.fallback().unwrap().kind, Passthrough);
    assert!(!set.contains(VllmHttp));
    assert_eq!(
        set.skipped()[0].reason,
        SkipReason::AfterFallback("passthrough-parser".into())
    );
    assert_eq!(resolved(&set, "/inference/v1/generate"), Some(Passthrough));
    assert_eq!(resolved(&set, "/v1/completions"), Some(OpenAi));
    assert!(set.skipped()[0].to_string().contains("after the fallback"));

    let only = ParserSet::new([("raw", Passthrough)]);
    assert_eq!(only.resolve("/anything").unwrap().name, "raw");
    assert_eq!(only.claimed_suffixes().count(), 0);
}

#[test]
fn a_second_parser_of_a_type_is_skipped() {
    use ParserKind::*;
    let set = ParserSet::new([("a", OpenAi), ("b", OpenAi), ("c", Anthropic)]);
    assert_eq!(set.resolve("/v1/completions").unwrap().name, "a");
    assert_eq!(set.skipped().len(), 1);
    assert_eq!(set.skipped()[0].parser.name, "b");
    assert_eq!(set.skipped()[0].reason, SkipReason::DuplicateType);
    assert_eq!(set.parsers().count(), 2);
}

#[test]
fn the_default_list_is_upstreams() {
    let set = ParserSet::upstream_default();
    let kinds: Vec<_> = set.parsers().map(|p| p.kind).collect();
    use ParserKind::*;
    assert_eq!(kinds, [OpenAi, Anthropic, VllmHttp, Passthrough]);
    assert_eq!(resolved(&set, "/v1/audio/speech"), Some(Passthrough));
    assert_eq!(resolved(&set, "/generate"), Some(Passthrough)); // no SGLang by default
    assert_eq!(ParserSet::default(), set);
    // No parsers at all refuses everything.
    let none = ParserSet::new(Vec::<(String, ParserKind)>::new());
    let error = none.parse("/v1/completions", b"{}", &ParseLimits::default());
    assert!(matches!(error, Err(ParseError::UnsupportedPath(_))));
}

#[test]
fn the_config_list_becomes_the_set() {
    let config = EndpointPickerConfig::from_yaml(
        "
plugins:
- {name: o, type: openai-parser}
- {name: p, type: passthrough-parser}
- {name: s, type: sglanghttp-parser}
requestHandler:
  parsers: [{pluginRef: o}, {pluginRef: p}, {pluginRef: s}]
",
    )
    .unwrap();
    let set = config.parser_set().unwrap();
    assert_eq!(set.fallback().unwrap().name, "p");
    assert!(!set.contains(ParserKind::SglangHttp));
    let warnings = config.warnings();
    assert!(
        warnings
            .iter()
            .any(|w| w.to_string().contains("`s` is skipped")),
        "{warnings:?}"
    );

    // The deprecated top-level `parser` counts as a one-element list.
    let config = EndpointPickerConfig::from_yaml(
        "plugins:\n- {name: v, type: vllmhttp-parser}\nparser: {pluginRef: v}\n",
    )
    .unwrap();
    let set = config.parser_set().unwrap();
    assert_eq!(set.parsers().count(), 1);
    assert!(set.fallback().is_none());

    // The gRPC parsers are built from a config too.
    let config = EndpointPickerConfig::from_yaml(
        "plugins:\n- {name: g, type: vllmgrpc-parser}\nrequestHandler: {parsers: [{pluginRef: g}]}\n",
    )
    .unwrap();
    let set = config.parser_set().unwrap();
    assert!(set.contains(ParserKind::VllmGrpc));

    // Parsers take no parameters.
    let error = EndpointPickerConfig::from_yaml(
        "plugins:\n- {type: anthropic-parser, parameters: {x: 1}}\n",
    )
    .unwrap_err();
    assert!(error.to_string().contains("takes no parameters"), "{error}");
}

#[test]
fn sglang_reads_the_root_generate_path_only() {
    let set = set(&[ParserKind::SglangHttp]);
    let limits = ParseLimits::default();
    let body = br#"{"input_ids":[1,2]}"#;
    assert!(set.parse("/generate/", body, &limits).is_ok());
    let error = set.parse("/v1/generate", body, &limits).unwrap_err();
    assert!(matches!(error, ParseError::UnsupportedPath(_)), "{error}");
}

#[test]
fn size_is_checked_before_the_path() {
    let limits = ParseLimits::default().with_max_body_bytes(4);
    let error = ParserSet::upstream_default()
        .parse("/nowhere", b"12345", &limits)
        .unwrap_err();
    assert_eq!(error.http_status(), 413);
}

#[test]
fn openai_paths_parse_as_before() {
    let set = ParserSet::upstream_default();
    let limits = ParseLimits::default();
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let a = set.parse("/v1/chat/completions", body, &limits).unwrap();
    let b = shepherd_scheduler_core::request::parse_openai_request(
        "/v1/chat/completions",
        body,
        &limits,
    )
    .unwrap();
    assert_eq!(a, b);
    let render = set
        .parse("/v1/chat/completions/render", body, &limits)
        .unwrap();
    assert_eq!(render.prompt, b.prompt);
    assert_eq!(render.api, ApiKind::ChatCompletions);
    let prefixed = set
        .parse("/openai/v1/chat/completions", body, &limits)
        .unwrap();
    assert_eq!(prefixed.prompt, Prompt::Text("<|user|>hi\n".into()));
}

const KINDS: [ParserKind; 7] = ParserKind::ALL;
const PATHS: [&str; 10] = [
    "/v1/completions",
    "/v1/chat/completions",
    "/v1/embeddings",
    "/v1/responses",
    "/v1/messages",
    "/v1/messages/count_tokens",
    "/inference/v1/generate",
    "/generate",
    "/v1/audio/speech",
    "/",
];

/// The registry by its definition: the longest claimed suffix among registered parsers, first
/// registered on a tie, else the fallback.
fn model(list: &[usize], path: &str) -> Option<ParserKind> {
    let mut registered: Vec<ParserKind> = Vec::new();
    let mut fallback = None;
    for &i in list {
        let kind = KINDS[i];
        if registered.contains(&kind) {
            continue;
        }
        if kind.claims().is_empty() {
            fallback = Some(kind);
            break;
        }
        registered.push(kind);
    }
    let trimmed = path.trim_end_matches('/');
    let mut best: Option<(ParserKind, usize)> = None;
    for kind in registered {
        for suffix in kind.claims() {
            let hit = trimmed == *suffix || trimmed.ends_with(&format!("/{suffix}"));
            if hit && best.is_none_or(|(_, len)| suffix.len() > len) {
                best = Some((kind, suffix.len()));
            }
        }
    }
    best.map(|(k, _)| k).or(fallback)
}

proptest! {
    #[test]
    fn resolution_follows_the_rules(list in prop::collection::vec(0usize..5, 0..7), path in 0usize..10) {
        let set = ParserSet::new(list.iter().map(|&i| (format!("p{i}"), KINDS[i])));
        prop_assert_eq!(resolved(&set, PATHS[path]), model(&list, PATHS[path]));
        // Every listed parser is registered or reported as skipped.
        prop_assert_eq!(set.parsers().count() + set.skipped().len(), list.len());
    }

    #[test]
    fn no_body_makes_a_parser_panic(kind in 0usize..5, path in 0usize..10, body in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = KINDS[kind].parse(PATHS[path], &body, &ParseLimits::default());
        let _ = ParserSet::upstream_default().parse(PATHS[path], &body, &ParseLimits::default());
    }
}
