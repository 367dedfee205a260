use super::*;

fn depth(text: &str) -> usize {
    measure(text).depth
}

#[test]
fn strings_and_comments_do_not_count() {
    let text = r#"
a: "[[[[ *x &y {{{{"   # [[[[ *x &y
b: '[[ it''s *x'
c: plain [[[ text *x &y with # a comment [[[
d: |
  [[[[[[ *x &y
  {{{{
e: >-
    *x [[
f: !tag [1, 2]
"#;
    let m = measure(text);
    assert_eq!((m.anchors, m.aliases), (0, 0), "{m:?}");
    assert_eq!(m.depth, 2, "{m:?}");
}

#[test]
fn flow_and_block_nesting_add_up() {
    assert_eq!(depth("a: [[1]]"), 3);
    assert_eq!(depth("a:\n  b:\n    c: {d: [1]}\n"), 5);
    assert_eq!(depth("- - - x"), 3);
    assert_eq!(
        depth("key:\n- a\n- b\n"),
        1,
        "a sequence at its key's indentation"
    );
    assert_eq!(depth("[[[[[[[[[[["), 11);
    assert_eq!(depth(&" ".repeat(0)), 0);
}

#[test]
fn a_plain_scalar_continues_onto_more_indented_lines() {
    // The second line continues `a`'s value: its quote opens nothing.
    let text = "k: a\n  \"b\nx: [[[\n";
    assert_eq!(depth(text), 4);
    // A continuation starting with `[` is text too.
    assert_eq!(depth("k: a\n  [[[[\n"), 1);
}

#[test]
fn a_leading_byte_order_mark_takes_no_column() {
    // With the mark counted as a column, `a` would open a mapping at column 1 and `b`
    // (column 0) would close it instead of nesting one level below `c`.
    assert_eq!(depth("\u{FEFF}a:\n b:\n  c: [1]\n"), 4);
    assert_eq!(depth("\u{FEFF}a: 1\nb:\n c: 1\n"), 2);
}

#[test]
fn carriage_returns_break_lines() {
    assert_eq!(depth("a:\r b:\r  c:\r   d: 1\r"), 4);
    assert_eq!(depth("a:\u{2028} b:\u{85}  c: 1"), 3);
}

#[test]
fn aliases_count_the_node_they_name() {
    let m = measure("a: &a [1, 2, 3]\nb: *a\nc: *a\n");
    assert_eq!((m.anchors, m.aliases), (1, 2));
    assert_eq!(m.alias_expansion, 2 * "&a [1, 2, 3]\n".len());
    // Nested: b stands for its own text plus what its aliases stand for.
    let m = measure("a: &a xy\nb: &b [*a, *a]\nc: *b\n");
    let a = "&a xy\n".len();
    let b = "&b [*a, *a]\n".len() + 2 * a;
    assert_eq!(m.alias_expansion, 2 * a + b);
}

#[test]
fn anchored_block_nodes_end_where_their_indentation_does() {
    let text = "\
list: &l
- one
- two
seq:
- &item
  k: v
- *item
map:
  &m
  x: 1
other: *m
keyed: 1
&k key: v
again: *k
";
    let m = measure(text);
    assert_eq!(m.recursive_alias, None, "{m:?}");
    assert_eq!((m.anchors, m.aliases), (4, 3));
}

#[test]
fn an_alias_inside_its_own_node_is_recursive() {
    let m = measure("a: &a [1, *a]\n");
    assert_eq!(m.recursive_alias.as_deref(), Some("a"));
    let m = measure("&r\nk:\n  v: *r\n");
    assert_eq!(m.recursive_alias.as_deref(), Some("r"));
}

#[test]
fn a_billion_laughs_is_measured_not_expanded() {
    let mut text = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for (prev, name) in ["a", "b", "c", "d", "e", "f", "g", "h"]
        .iter()
        .zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        let refs = vec![format!("*{prev}"); 9].join(",");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    let m = measure(&text);
    assert!(m.alias_expansion > 1_000_000_000, "{m:?}");
    assert!(matches!(
        check(&text),
        Err(ConfigError::LimitExceeded {
            limit: "alias expansion in bytes",
            ..
        })
    ));
}

#[test]
fn each_limit_names_itself() {
    let big = "#".repeat(MAX_BYTES + 1);
    assert_eq!(
        check(&big),
        Err(ConfigError::LimitExceeded {
            limit: "size in bytes",
            max: MAX_BYTES,
            found: MAX_BYTES + 1
        })
    );
    let anchors: String = (0..=MAX_ANCHORS)
        .map(|i| format!("k{i}: &a{i} v\n"))
        .collect();
    assert_eq!(
        check(&anchors),
        Err(ConfigError::LimitExceeded {
            limit: "anchor count",
            max: MAX_ANCHORS,
            found: MAX_ANCHORS + 1
        })
    );
    let aliases = format!("a: &a x\nb: [{}]\n", vec!["*a"; MAX_ALIASES + 1].join(","));
    assert_eq!(
        check(&aliases),
        Err(ConfigError::LimitExceeded {
            limit: "alias count",
            max: MAX_ALIASES,
            found: MAX_ALIASES + 1
        })
    );
    let mut nested = String::new();
    for i in 0..=MAX_DEPTH {
        nested.push_str(&" ".repeat(i));
        nested.push_str("k:\n");
    }
    assert_eq!(
        check(&nested),
        Err(ConfigError::LimitExceeded {
            limit: "nesting depth",
            max: MAX_DEPTH,
            found: MAX_DEPTH + 1
        })
    );
    assert_eq!(
        check("a: &a [*a]"),
        Err(ConfigError::RecursiveAlias { alias: "a".into() })
    );
}

#[test]
fn any_text_is_measured_without_panicking() {
    for text in [
        "",
        "\u{FEFF}",
        "\"",
        "'",
        "|",
        ">2\n",
        "- ",
        "? ",
        ": ",
        "&",
        "*",
        "!<",
        "%",
        "---",
        "...",
        "\r",
        "\u{85}",
        "a:\t- b",
        "[&a x: *a]",
        "{? a: b}",
        "|0\n x",
        "k: >+9\n",
        "\0[[[[",
    ] {
        let _ = measure(text);
    }
}
