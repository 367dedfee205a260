//! The format's corners, one test each.

use std::borrow::Cow;

use super::*;

fn one(line: &str) -> (String, Vec<(String, String)>, f64, Option<i64>) {
    let scrape = parse(line.as_bytes()).unwrap();
    assert_eq!(scrape.errors(), [], "{line:?}");
    assert_eq!(scrape.len(), 1, "{line:?}");
    let sample = scrape.get(0).unwrap();
    let labels = sample
        .labels
        .iter()
        .map(|l| (l.name.to_owned(), l.value.to_string()))
        .collect();
    (
        sample.name.to_owned(),
        labels,
        sample.value,
        sample.timestamp_ms,
    )
}

fn error(line: &str) -> LineError {
    let scrape = parse(line.as_bytes()).unwrap();
    assert_eq!(scrape.len(), 0, "{line:?} gave a sample");
    assert_eq!(scrape.bad_lines(), 1, "{line:?}");
    scrape.errors()[0]
}

fn kind(line: &str) -> LineErrorKind {
    error(line).kind
}

#[test]
fn names_may_hold_colons() {
    let (name, labels, value, ts) = one("vllm:num_requests_waiting 3");
    assert_eq!(name, "vllm:num_requests_waiting");
    assert!(labels.is_empty());
    assert_eq!(value, 3.0);
    assert_eq!(ts, None);
    assert_eq!(one(":leading_colon 1").0, ":leading_colon");
    assert_eq!(one("_x:y:z_9 1").0, "_x:y:z_9");
}

#[test]
fn labels_are_read_in_order_with_blanks_and_a_trailing_comma() {
    let (_, labels, _, _) = one("m{ a = \"1\" ,\tb=\"two\", } 5");
    assert_eq!(
        labels,
        [("a".into(), "1".into()), ("b".into(), "two".into())]
    );
    assert!(one("m{} 5").1.is_empty());
    assert_eq!(one("m{a=\"\"} 5").1, [("a".into(), String::new())]);
}

#[test]
fn label_values_unescape_backslash_quote_and_newline() {
    let (_, labels, _, _) = one(r#"m{path="C:\\dir",quote="say \"hi\"",text="a\nb"} 1"#);
    assert_eq!(labels[0].1, r"C:\dir");
    assert_eq!(labels[1].1, r#"say "hi""#);
    assert_eq!(labels[2].1, "a\nb");
    assert_eq!(kind(r#"m{a="\t"} 1"#), LineErrorKind::InvalidEscape);
    assert_eq!(
        kind(r#"m{a="x\"} 1"#),
        LineErrorKind::UnterminatedLabelValue
    );
}

#[test]
fn label_values_borrow_unless_escaped() {
    let page = "m{a=\"plain\",b=\"esc\\\\aped\"} 1";
    let scrape = parse(page.as_bytes()).unwrap();
    let sample = scrape.get(0).unwrap();
    assert!(matches!(sample.labels[0].value, Cow::Borrowed("plain")));
    assert!(matches!(&sample.labels[1].value, Cow::Owned(v) if v == "esc\\aped"));
}

#[test]
fn label_values_may_hold_anything_but_raw_quotes() {
    let (_, labels, _, _) = one("m{a=\"}{,= #ü漢 \"} 1");
    assert_eq!(labels[0].1, "}{,= #ü漢 ");
}

#[test]
fn special_values_and_exponents() {
    assert!(one("m NaN").2.is_nan());
    assert_eq!(one("m +Inf").2, f64::INFINITY);
    assert_eq!(one("m -Inf").2, f64::NEG_INFINITY);
    assert_eq!(one("m Inf").2, f64::INFINITY);
    assert_eq!(one("m 1.5e-3").2, 1.5e-3);
    assert_eq!(one("m 1.0823421952e+011").2, 1.0823421952e11);
    assert_eq!(one("m -2E5").2, -2e5);
    assert_eq!(one("m .5").2, 0.5);
    assert_eq!(one("m 1e400").2, f64::INFINITY);
    assert_eq!(kind("m 1.2.3"), LineErrorKind::InvalidValue);
    assert_eq!(kind("m 0x10"), LineErrorKind::InvalidValue);
    assert_eq!(kind("m"), LineErrorKind::MissingValue);
    assert_eq!(kind("m{a=\"b\"}"), LineErrorKind::MissingValue);
    assert_eq!(kind("m   "), LineErrorKind::MissingValue);
}

#[test]
fn timestamps_are_optional_integer_milliseconds() {
    assert_eq!(one("m 1 1700000000000").3, Some(1_700_000_000_000));
    assert_eq!(one("m 1 -5").3, Some(-5));
    assert_eq!(one("m{a=\"b\"} 1\t42 ").3, Some(42));
    assert_eq!(kind("m 1 1.5"), LineErrorKind::InvalidTimestamp);
    assert_eq!(
        kind("m 1 99999999999999999999"),
        LineErrorKind::InvalidTimestamp
    );
    assert_eq!(kind("m 1 2 3"), LineErrorKind::TrailingText);
}

#[test]
fn exemplars_are_ignored() {
    assert_eq!(one("m_bucket{le=\"1\"} 3 # {trace_id=\"x\"} 0.5").2, 3.0);
    assert_eq!(one("m 3 17 # {trace_id=\"x\"} 0.5").3, Some(17));
}

#[test]
fn help_and_type_lines_become_metadata() {
    let page = "# HELP vllm:x Help with \\\\ and \\n escapes.\n# TYPE vllm:x gauge\n#  TYPE  y   COUNTER  \n# a comment\n#\n";
    let scrape = parse(page.as_bytes()).unwrap();
    assert_eq!(scrape.errors(), []);
    assert_eq!(
        scrape.metadata(),
        [
            Metadata::Help {
                name: "vllm:x",
                text: "Help with \\ and \n escapes.".into()
            },
            Metadata::Type {
                name: "vllm:x",
                kind: MetricType::Gauge
            },
            Metadata::Type {
                name: "y",
                kind: MetricType::Counter
            },
        ]
    );
    let help = parse(b"# HELP m\n# HELP n \\t kept\n").unwrap();
    assert_eq!(
        help.metadata()[0],
        Metadata::Help {
            name: "m",
            text: "".into()
        }
    );
    assert_eq!(
        help.metadata()[1],
        Metadata::Help {
            name: "n",
            text: "\\t kept".into()
        }
    );
    assert_eq!(kind("# TYPE m gaugeish"), LineErrorKind::UnknownType);
    assert_eq!(kind("# TYPE m gauge extra"), LineErrorKind::TrailingText);
    assert_eq!(kind("# TYPE 1m gauge"), LineErrorKind::InvalidMetricName);
    assert_eq!(kind("# HELP"), LineErrorKind::InvalidMetricName);
    assert_eq!(kind("# HELP m{a} x"), LineErrorKind::InvalidMetricName);
}

#[test]
fn histogram_and_summary_samples_keep_their_suffixes() {
    let page = "\
# TYPE lat histogram
lat_bucket{le=\"0.5\"} 1
lat_bucket{le=\"+Inf\"} 2
lat_count 2
lat_sum 1.25
# TYPE q summary
q{quantile=\"0.9\"} 4
q_count 10
q_sum 20
q_bucket 1
";
    let scrape = parse(page.as_bytes()).unwrap();
    assert_eq!(scrape.len(), 8);
    let names: Vec<_> = scrape.samples().map(|s| s.name).collect();
    assert_eq!(
        names[..4],
        ["lat_bucket", "lat_bucket", "lat_count", "lat_sum"]
    );
    assert_eq!(scrape.get(1).unwrap().label("le"), Some("+Inf"));
    assert_eq!(
        scrape.family_of("lat_bucket"),
        Some(("lat", MetricType::Histogram))
    );
    assert_eq!(
        scrape.family_of("lat_count"),
        Some(("lat", MetricType::Histogram))
    );
    assert_eq!(scrape.family_of("q"), Some(("q", MetricType::Summary)));
    assert_eq!(scrape.family_of("q_sum"), Some(("q", MetricType::Summary)));
    // A summary has no buckets.
    assert_eq!(scrape.family_of("q_bucket"), None);
    assert_eq!(scrape.samples_named("lat_bucket").count(), 2);
}

#[test]
fn blank_lines_crlf_and_leading_blanks() {
    let page = "\r\n  \n\tm 1\r\n\r\n# TYPE m gauge\r\nn{a=\"x\"} 2\r\n";
    let scrape = parse(page.as_bytes()).unwrap();
    assert_eq!(scrape.errors(), []);
    assert_eq!(scrape.lines(), 6);
    assert_eq!(scrape.len(), 2);
    assert_eq!(scrape.get(1).unwrap().label("a"), Some("x"));
    assert_eq!(scrape.metric_type("m"), Some(MetricType::Gauge));
    // No final line break.
    let scrape = parse(b"m 1\nn 2").unwrap();
    assert_eq!((scrape.lines(), scrape.len()), (2, 2));
    assert_eq!(parse(b"").unwrap().lines(), 0);
    assert_eq!(parse(b"\n").unwrap().lines(), 1);
}

#[test]
fn a_bad_line_is_skipped_counted_and_located() {
    let page = "a 1\nb{x=\"1\" 2\nc 3\nd{1x=\"1\"} 4\ne 5\n";
    let scrape = parse(page.as_bytes()).unwrap();
    let names: Vec<_> = scrape.samples().map(|s| s.name).collect();
    assert_eq!(names, ["a", "c", "e"]);
    assert_eq!(scrape.bad_lines(), 2);
    assert_eq!(
        scrape.errors(),
        [
            LineError {
                line: 2,
                column: 9,
                kind: LineErrorKind::ExpectedCommaOrBrace
            },
            LineError {
                line: 4,
                column: 3,
                kind: LineErrorKind::InvalidLabelName
            },
        ]
    );
    assert_eq!(
        scrape.errors()[0].to_string(),
        "line 2, column 9: expected `,` or `}` after a label"
    );
    // The failed line's labels are not left behind for the next sample.
    assert!(scrape.get(1).unwrap().labels.is_empty());
}

#[test]
fn malformed_sample_lines() {
    assert_eq!(kind("1m 1"), LineErrorKind::InvalidMetricName);
    assert_eq!(kind("m-x 1"), LineErrorKind::InvalidMetricName);
    assert_eq!(kind("m{a:b=\"1\"} 1"), LineErrorKind::InvalidLabelName);
    assert_eq!(kind("m{=\"1\"} 1"), LineErrorKind::InvalidLabelName);
    assert_eq!(kind("m{a \"1\"} 1"), LineErrorKind::ExpectedEquals);
    assert_eq!(kind("m{a=1} 1"), LineErrorKind::ExpectedLabelValue);
    assert_eq!(kind("m{a=\"1\""), LineErrorKind::UnterminatedLabels);
    assert_eq!(kind("m{a=\"1\","), LineErrorKind::UnterminatedLabels);
    assert_eq!(kind("m{a=\"1\",a=\"2\"} 1"), LineErrorKind::DuplicateLabel);
    assert_eq!(
        kind("m{a=\"1\" b=\"2\"} 1"),
        LineErrorKind::ExpectedCommaOrBrace
    );
}

#[test]
fn limits_are_enforced_per_line() {
    let labels: Vec<String> = (0..=MAX_LABELS).map(|i| format!("l{i}=\"v\"")).collect();
    let too_many = format!("m{{{}}} 1", labels.join(","));
    assert_eq!(kind(&too_many), LineErrorKind::TooManyLabels);
    let most = format!("m{{{}}} 1", labels[..MAX_LABELS].join(","));
    assert_eq!(one(&most).1.len(), MAX_LABELS);

    let long = format!("m{{a=\"{}\"}} 1", "x".repeat(MAX_LINE_BYTES));
    assert!(matches!(kind(&long), LineErrorKind::TooLong { len } if len == long.len()));
    let fits = format!("m{{a=\"{}\"}} 1", "x".repeat(MAX_LINE_BYTES - 9));
    assert_eq!(fits.len(), MAX_LINE_BYTES);
    assert_eq!(one(&fits).2, 1.0);
}

#[test]
fn pages_over_the_size_limit_are_refused() {
    let page = vec![b'\n'; MAX_INPUT_BYTES + 1];
    assert_eq!(
        parse(&page).unwrap_err(),
        Error::InputTooLarge {
            size: MAX_INPUT_BYTES + 1,
            limit: MAX_INPUT_BYTES
        }
    );
    assert!(parse(&page[1..]).is_ok());
}

#[test]
fn samples_past_the_limit_are_skipped_and_counted() {
    let page = "m{a=\"1\"} 1\n".repeat(MAX_SAMPLES + 3);
    let scrape = parse(page.as_bytes()).unwrap();
    assert_eq!(scrape.len(), MAX_SAMPLES);
    assert_eq!(scrape.bad_lines(), 3);
    assert_eq!(scrape.errors()[0].kind, LineErrorKind::TooManySamples);
    assert_eq!(scrape.errors()[0].line, MAX_SAMPLES + 1);
}

#[test]
fn only_the_first_errors_are_described() {
    let page = "garbage!\n".repeat(MAX_REPORTED_ERRORS * 2);
    let scrape = parse(page.as_bytes()).unwrap();
    assert_eq!(scrape.bad_lines(), MAX_REPORTED_ERRORS * 2);
    assert_eq!(scrape.errors().len(), MAX_REPORTED_ERRORS);
}

#[test]
fn lines_that_are_not_utf8_are_skipped_alone() {
    let page = b"a 1\nb{x=\"\xff\xfe\"} 2\nc{y=\"\xc3\xa9\"} 3\n";
    let scrape = parse(page).unwrap();
    assert_eq!(
        scrape.samples().map(|s| s.name).collect::<Vec<_>>(),
        ["a", "c"]
    );
    assert_eq!(scrape.get(1).unwrap().label("y"), Some("é"));
    assert_eq!(
        scrape.errors(),
        [LineError {
            line: 2,
            column: 1,
            kind: LineErrorKind::NotUtf8
        }]
    );
}

#[test]
fn display_renders_a_line_that_parses_back() {
    let page = "m{a=\"q\\\"\\\\\\n\",b=\"\"} -Inf 12\nn +Inf\no NaN\np 1e300\nq -0.0\nr 0.1\n";
    let scrape = parse(page.as_bytes()).unwrap();
    let rendered: Vec<String> = scrape.samples().map(|s| s.to_string()).collect();
    assert_eq!(
        rendered,
        [
            "m{a=\"q\\\"\\\\\\n\",b=\"\"} -Inf 12",
            "n +Inf",
            "o NaN",
            "p 1e300",
            "q -0.0",
            "r 0.1"
        ]
    );
}

#[test]
fn metric_types_read_case_insensitively() {
    assert_eq!(
        MetricType::from_name("HISTOGRAM"),
        Some(MetricType::Histogram)
    );
    assert_eq!(MetricType::from_name("unknown"), Some(MetricType::Untyped));
    assert_eq!(
        MetricType::from_name("gaugehistogram"),
        Some(MetricType::GaugeHistogram)
    );
    assert_eq!(MetricType::from_name("nope"), None);
    for kind in [
        MetricType::Counter,
        MetricType::Gauge,
        MetricType::Histogram,
        MetricType::Summary,
        MetricType::Untyped,
        MetricType::Info,
        MetricType::StateSet,
        MetricType::GaugeHistogram,
    ] {
        assert_eq!(MetricType::from_name(kind.as_str()), Some(kind));
    }
}
