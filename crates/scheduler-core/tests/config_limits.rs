//! The limits checked before a configuration is parsed: pathological texts are rejected by
//! that check, unparsed, with an error naming the limit; every configuration in the repository
//! still loads. The check's cost: `cargo bench -p shepherd-benches --bench config_parse`.

use std::fs;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use shepherd_scheduler_core::config::limits::{
    self, MAX_ALIAS_EXPANSION, MAX_ALIASES, MAX_BYTES, MAX_DEPTH,
};
use shepherd_scheduler_core::config::{ConfigError, EndpointPickerConfig};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Loads `text`; a load failing on a limit (or a recursive alias) must fail the same way in the
/// check run before the parser: the text was refused unparsed, which keeps it cheap.
fn load_quickly(text: &str) -> Result<EndpointPickerConfig, ConfigError> {
    let result = EndpointPickerConfig::from_yaml(text);
    if let Err(error @ (ConfigError::LimitExceeded { .. } | ConfigError::RecursiveAlias { .. })) =
        &result
    {
        assert_eq!(limits::check(text).as_ref().err(), Some(error));
    }
    result
}

fn limit_of(result: Result<EndpointPickerConfig, ConfigError>) -> (&'static str, usize) {
    match result {
        Err(ConfigError::LimitExceeded { limit, max, found }) => {
            assert!(found > max, "{limit}: {found} ≤ {max}");
            (limit, found)
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
}

const HEAD: &str = "plugins:\n- type: constant-scorer\n  parameters:\n    k: ";

#[test]
fn unclosed_brackets_are_rejected_quickly() {
    let text = format!("{HEAD}{}", "[".repeat(40_000));
    assert_eq!(limit_of(load_quickly(&text)), ("nesting depth", 40_000 + 3));
    let text = format!("{HEAD}{}", "{a: ".repeat(40_000));
    assert_eq!(limit_of(load_quickly(&text)).0, "nesting depth");
}

#[test]
fn deep_block_nesting_is_rejected() {
    let mut text = String::from(HEAD);
    text.push('\n');
    for i in 0..300 {
        text.push_str(&" ".repeat(4 + i));
        text.push_str("k:\n");
    }
    let (limit, found) = limit_of(load_quickly(&text));
    assert_eq!(limit, "nesting depth");
    assert!(found > MAX_DEPTH);
    // Nesting through `- ` entries on one line counts the same.
    let text = format!("{HEAD}\n    {}x\n", "- ".repeat(100));
    assert_eq!(limit_of(load_quickly(&text)).0, "nesting depth");
}

#[test]
fn an_alias_expanded_thousands_of_times_is_rejected() {
    // The issue's case: one list of ~45 KB used 8,000 times (≈ 3 GB once expanded).
    let list = vec!["abcdef"; 6_000].join(",");
    let uses = vec!["*a"; 8_000].join(",");
    let text = format!("{HEAD}[&a [{list}], [{uses}]]\n");
    let (limit, found) = limit_of(load_quickly(&text));
    assert_eq!(limit, "alias count");
    assert_eq!(found, 8_000);
    // Under the alias count, the bytes the aliases stand for are what is limited.
    let uses = vec!["*a"; 100].join(",");
    let text = format!("{HEAD}[&a [{list}], [{uses}]]\n");
    let (limit, found) = limit_of(load_quickly(&text));
    assert_eq!(limit, "alias expansion in bytes");
    assert!(found > MAX_ALIAS_EXPANSION && found >= 100 * list.len());
}

#[test]
fn a_billion_laughs_is_rejected() {
    let text = fs::read_to_string(repo().join("fuzz/regressions/parse_config/alias-bomb")).unwrap();
    assert_eq!(limit_of(load_quickly(&text)).0, "alias expansion in bytes");
}

#[test]
fn a_recursive_alias_is_rejected() {
    let text = format!("{HEAD}&a [x, [*a, *a]]\n");
    assert_eq!(
        load_quickly(&text).unwrap_err(),
        ConfigError::RecursiveAlias { alias: "a".into() }
    );
}

#[test]
fn too_many_bytes_are_rejected_before_anything_else() {
    let text = format!("{HEAD}{}", "[".repeat(MAX_BYTES));
    assert_eq!(
        load_quickly(&text).unwrap_err(),
        ConfigError::LimitExceeded {
            limit: "size in bytes",
            max: MAX_BYTES,
            found: text.len()
        }
    );
    // Just under the size limit, a long flat list still loads.
    let items = (MAX_BYTES - 200) / 4;
    let text = format!("{HEAD}[{}]\n", vec!["abc"; items].join(","));
    assert!(text.len() <= MAX_BYTES);
    let config = load_quickly(&text).unwrap();
    assert_eq!(
        config.plugins[0].parameters["k"].as_array().unwrap().len(),
        items
    );
}

#[test]
fn errors_name_the_limit_and_the_value() {
    let text = format!("{HEAD}{}", "[".repeat(100));
    let message = load_quickly(&text).unwrap_err().to_string();
    assert_eq!(message, "config exceeds the nesting depth limit: 103 > 64");
    let text = format!(
        "{HEAD}&a [x]\nb: [{}]",
        vec!["*a"; MAX_ALIASES + 1].join(",")
    );
    let message = load_quickly(&text).unwrap_err().to_string();
    assert_eq!(message, "config exceeds the alias count limit: 1025 > 1024");
}

#[test]
fn the_committed_fuzz_regressions_are_rejected_quickly() {
    for name in ["deep-nesting", "deep-block-nesting", "alias-bomb"] {
        let path = repo().join("fuzz/regressions/parse_config").join(name);
        let text = fs::read_to_string(&path).unwrap();
        assert!(
            matches!(load_quickly(&text), Err(ConfigError::LimitExceeded { .. })),
            "{name}"
        );
    }
}

#[test]
fn anchors_and_aliases_in_a_real_config_load() {
    let text = r#"
plugins:
- type: queue-scorer
  parameters: &shared {threshold: 5, window: [1, 2]}
- type: kv-cache-utilization-scorer
  name: kv
  parameters: *shared
- type: max-score-picker
schedulingProfiles:
- name: a
  plugins: &common
  - pluginRef: queue-scorer
    weight: 2
  - pluginRef: kv
  - pluginRef: max-score-picker
- name: b
  plugins: *common
adaptive:
  steady: &curve
    midpoint: 0.3    # comment with [brackets and *stars
    steepness: 10
  burst: *curve
"#;
    let m = limits::measure(text);
    assert_eq!((m.anchors, m.aliases, m.recursive_alias), (3, 3, None));
    let config = load_quickly(text).unwrap();
    assert_eq!(config.plugins[1].parameters, config.plugins[0].parameters);
    assert_eq!(
        config.scheduling_profiles[1].plugins,
        config.scheduling_profiles[0].plugins
    );
}

/// Every `.yaml`/`.yml` file under `dir`, skipping build output.
fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == ".git" || name == "corpus" || name == "artifacts" {
            continue;
        }
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|e| e == "yaml" || e == "yml" || e == "rs" || e == "md")
        {
            out.push(path);
        }
    }
}

/// The string literals of Rust `source` (plain ones with their escapes decoded, raw ones as
/// they are), also those inside doc comments.
fn string_literals(source: &str) -> Vec<String> {
    let undoc: String = source
        .lines()
        .map(|line| {
            let trimmed = line.trim_start();
            for prefix in ["//! ", "/// ", "//!", "///"] {
                if let Some(rest) = trimmed.strip_prefix(prefix) {
                    return format!("{rest}\n");
                }
            }
            format!("{line}\n")
        })
        .collect();
    let mut found = Vec::new();
    for text in [source, undoc.as_str()] {
        literals_of(text, &mut found);
    }
    found
}

fn literals_of(text: &str, found: &mut Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1) == Some(&'/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '\'' => {
                // A char literal ('x', '\n', '"') or a lifetime ('a).
                if chars.get(i + 1) == Some(&'\\') {
                    i += 2;
                    while i < chars.len() && chars[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            'r' if matches!(chars.get(i + 1), Some('"' | '#'))
                && (i == 0 || !chars[i - 1].is_alphanumeric()) =>
            {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                let open = i + 1 + hashes;
                if chars.get(open) != Some(&'"') {
                    i += 1;
                    continue;
                }
                let close: String = std::iter::once('"')
                    .chain("#".repeat(hashes).chars())
                    .collect();
                let body: String = chars[open + 1..].iter().collect();
                match body.find(&close) {
                    Some(end) => {
                        found.push(body[..end].to_string());
                        i = open + 1 + body[..end].chars().count() + close.chars().count();
                    }
                    None => break,
                }
            }
            '"' => {
                let mut literal = String::new();
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => literal.push('\n'),
                            Some('t') => literal.push('\t'),
                            Some('r') => literal.push('\r'),
                            Some('0') => literal.push('\0'),
                            Some('\n') => {
                                while chars.get(i + 1).is_some_and(|c| c.is_whitespace()) {
                                    i += 1;
                                }
                            }
                            Some(c) => literal.push(*c),
                            None => {}
                        }
                    } else {
                        literal.push(chars[i]);
                    }
                    i += 1;
                }
                found.push(literal);
                i += 1;
            }
            _ => i += 1,
        }
    }
}

/// The ```yaml blocks of a Markdown file.
fn yaml_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_start().starts_with("```yaml") => current = Some(String::new()),
            Some(block) if line.trim_start().starts_with("```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

fn looks_like_config(text: &str) -> bool {
    [
        "plugins:",
        "schedulingProfiles:",
        "adaptive:",
        "apiVersion:",
    ]
    .iter()
    .any(|key| text.contains(key))
}

#[test]
fn every_config_in_the_repository_is_within_the_limits() {
    let mut files = Vec::new();
    yaml_files(&repo(), &mut files);
    let (mut yaml, mut literals) = (0, 0);
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let extension = file.extension().and_then(|e| e.to_str()).unwrap_or("");
        let texts = match extension {
            "rs" => string_literals(&text),
            "md" => yaml_blocks(&text),
            _ => vec![text.clone()],
        };
        for candidate in texts {
            if extension != "yaml" && extension != "yml" && !looks_like_config(&candidate) {
                continue;
            }
            if extension == "yaml" || extension == "yml" {
                yaml += 1;
            } else {
                literals += 1;
            }
            let m = limits::measure(&candidate);
            assert!(
                limits::check(&candidate).is_ok() && m.depth <= 16,
                "{}: {m:?}\n{candidate}",
                file.display()
            );
        }
    }
    assert!(yaml >= 12, "found only {yaml} YAML files");
    assert!(literals >= 100, "found only {literals} YAML literals");
}

#[test]
fn the_simulator_policies_and_fuzz_seeds_load() {
    let mut loaded = 0;
    for dir in [
        "crates/sim/policies",
        "crates/adaptive/presets",
        "fuzz/seeds/parse_config",
    ] {
        for entry in fs::read_dir(repo().join(dir)).unwrap().flatten() {
            let text = fs::read_to_string(entry.path()).unwrap();
            match EndpointPickerConfig::from_yaml(&text) {
                Ok(_) => {}
                // A fuzz seed may exercise the reader with keys of its own, which the strict
                // schema refuses at their line: past the limits and the YAML parser.
                Err(ConfigError::Syntax {
                    message,
                    line: Some(_),
                    ..
                }) if dir.starts_with("fuzz") && message.starts_with("unknown field") => {}
                Err(e) => panic!("{}: {e}", entry.path().display()),
            }
            loaded += 1;
        }
    }
    assert!(loaded >= 12, "loaded {loaded}");
}

/// Nodes of a parsed document (a mapping entry counts its key and its value).
fn nodes(value: &serde_json::Value) -> usize {
    1 + match value {
        serde_json::Value::Array(items) => items.iter().map(nodes).sum(),
        serde_json::Value::Object(entries) => entries.values().map(|v| 1 + nodes(v)).sum(),
        _ => 0,
    }
}

fn value_depth(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::Array(items) => 1 + items.iter().map(value_depth).max().unwrap_or(0),
        serde_json::Value::Object(entries) => {
            1 + entries.values().map(value_depth).max().unwrap_or(0)
        }
        _ => 0,
    }
}

/// Pieces of YAML syntax, so that random texts hit the scanner's corners.
const PIECES: &[&str] = &[
    "[", "]", "{", "}", ", ", ",", ": ", ":", " ", "  ", "\n", "\n  ", "\n    ", "- ", "? ", "&a ",
    "&b ", "*a", "*b", "x", "yy", "'q'", "\"q\"", "'", "\"", "# c", "|\n", ">-\n", "!t ", "\r",
    "\t", "k: ", "--- ", "\\", "#",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 4096, rng_seed: proptest::test_runner::RngSeed::Fixed(0x1A5), ..ProptestConfig::default() })]

    /// The pass never measures less than the parser builds: a document that passes the check
    /// and parses has at most about two nodes per byte of text and of alias expansion, and
    /// without aliases at most about twice the measured depth.
    #[test]
    fn the_measure_bounds_what_the_parser_builds(
        pieces in prop::collection::vec(prop::sample::select(PIECES), 0..48),
    ) {
        let text: String = pieces.concat();
        let m = limits::measure(&text);
        if limits::check(&text).is_err() {
            return Ok(());
        }
        let Ok(value) = serde_norway::from_str::<serde_json::Value>(&text) else {
            return Ok(());
        };
        prop_assert!(nodes(&value) <= 2 * (m.bytes + m.alias_expansion) + 2, "{m:?} {value}");
        if m.aliases == 0 {
            prop_assert!(value_depth(&value) <= 2 * m.depth + 1, "{m:?} {value}");
        }
    }
}

/// A YAML document as a tree, rendered in block and flow styles with anchors and aliases.
#[derive(Debug, Clone)]
enum Node {
    /// Anchored?, style (0 plain, 1 single-quoted, 2 double-quoted, 3 literal block), text.
    Scalar(bool, u8, String),
    /// An alias to one of the anchors already complete (picked by this number).
    Alias(usize),
    /// Anchored?, flow style?, items.
    Seq(bool, bool, Vec<Node>),
    /// Anchored?, flow style?, values (keys are `k0`, `k1`, …).
    Map(bool, bool, Vec<Node>),
}

#[derive(Default)]
struct Render {
    next: usize,
    closed: Vec<usize>,
}

impl Render {
    fn open(&mut self, anchored: bool) -> (String, Option<usize>) {
        if !anchored {
            return (String::new(), None);
        }
        let id = self.next;
        self.next += 1;
        (format!("&a{id} "), Some(id))
    }

    fn close(&mut self, id: Option<usize>) {
        self.closed.extend(id);
    }

    fn flow(&mut self, node: &Node) -> String {
        match node {
            Node::Scalar(anchored, style, text) => {
                let (anchor, id) = self.open(*anchored);
                let body = match style {
                    0 => text.clone(),
                    1 => format!("'{text}'"),
                    _ => format!("\"{text}\""),
                };
                self.close(id);
                format!("{anchor}{body}")
            }
            Node::Alias(pick) => match self.closed.len() {
                0 => "z".into(),
                n => format!("*a{}", self.closed[pick % n]),
            },
            Node::Seq(anchored, _, items) => {
                let (anchor, id) = self.open(*anchored);
                let items: Vec<String> = items.iter().map(|n| self.flow(n)).collect();
                self.close(id);
                format!("{anchor}[{}]", items.join(", "))
            }
            Node::Map(anchored, _, values) => {
                let (anchor, id) = self.open(*anchored);
                let entries: Vec<String> = values
                    .iter()
                    .enumerate()
                    .map(|(i, n)| format!("k{i}: {}", self.flow(n)))
                    .collect();
                self.close(id);
                format!("{anchor}{{{}}}", entries.join(", "))
            }
        }
    }

    /// The value after `k:` or `- ` at column `at`: the rest of that line, then its lines.
    fn value(&mut self, node: &Node, at: usize, under_key: bool, out: &mut String) {
        let pad = " ".repeat(at + 2);
        match node {
            Node::Scalar(anchored, 3, text) => {
                let (anchor, id) = self.open(*anchored);
                out.push_str(&format!(" {anchor}|\n{pad}{text}\n{pad}[*x &y #\n"));
                self.close(id);
            }
            Node::Seq(anchored, false, items) => {
                let (anchor, id) = self.open(*anchored);
                out.push_str(&format!(" {}\n", anchor.trim_end()));
                // Under a key, a sequence may sit at the key's own column.
                let column = if under_key && items.len() % 2 == 1 {
                    at
                } else {
                    at + 2
                };
                for item in items {
                    out.push_str(&format!("{}-", " ".repeat(column)));
                    self.value(item, column, false, out);
                }
                self.close(id);
            }
            Node::Map(anchored, false, values) => {
                let (anchor, id) = self.open(*anchored);
                out.push_str(&format!(" {}\n", anchor.trim_end()));
                for (i, value) in values.iter().enumerate() {
                    out.push_str(&format!("{pad}k{i}:"));
                    self.value(value, at + 2, true, out);
                }
                self.close(id);
            }
            _ => {
                let text = self.flow(node);
                out.push_str(&format!(" {text}\n"));
            }
        }
    }

    fn document(node: &Node) -> String {
        let mut render = Render::default();
        let mut out = String::from("root:");
        render.value(node, 0, true, &mut out);
        out
    }
}

fn any_node() -> impl Strategy<Value = Node> {
    let leaf = prop_oneof![
        (any::<bool>(), 0u8..4, "[a-z]{1,6}").prop_map(|(a, s, t)| Node::Scalar(a, s, t)),
        any::<usize>().prop_map(Node::Alias),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            (
                any::<bool>(),
                any::<bool>(),
                prop::collection::vec(inner.clone(), 1..4)
            )
                .prop_map(|(a, f, items)| Node::Seq(a, f, items)),
            (
                any::<bool>(),
                any::<bool>(),
                prop::collection::vec(inner, 1..4)
            )
                .prop_map(|(a, f, values)| Node::Map(a, f, values)),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, rng_seed: proptest::test_runner::RngSeed::Fixed(0xA11A5), ..ProptestConfig::default() })]

    /// Valid documents with anchors and aliases in every style pass the check (no alias is
    /// mistaken for recursive), and what the parser builds stays within the measured bound.
    #[test]
    fn documents_with_aliases_pass_and_stay_within_the_measure(node in any_node()) {
        let text = Render::document(&node);
        let value: serde_json::Value = match serde_norway::from_str(&text) {
            Ok(value) => value,
            Err(e) => return Err(TestCaseError::fail(format!("generated invalid YAML ({e}):\n{text}"))),
        };
        let m = limits::measure(&text);
        prop_assert_eq!(limits::check(&text), Ok(()), "{:?}\n{}", m, text);
        prop_assert!(nodes(&value) <= 2 * (m.bytes + m.alias_expansion) + 2, "{:?} {}\n{}", m, value, text);
    }
}
