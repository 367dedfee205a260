//! Properties of the text-format parser: it never panics, what it reads is well-formed, and
//! rendering samples then parsing them gives the same samples back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::borrow::Cow;

use proptest::collection::vec;
use proptest::prelude::*;
use shepherd_runtime::prom::{Label, MAX_REPORTED_ERRORS, Sample, parse};

fn is_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

/// Parses `bytes` and checks the invariants every result must hold.
fn check(bytes: &[u8]) {
    let Ok(scrape) = parse(bytes) else {
        return;
    };
    assert!(scrape.len() + scrape.bad_lines() + scrape.metadata().len() <= scrape.lines());
    assert!(scrape.errors().len() <= MAX_REPORTED_ERRORS.min(scrape.bad_lines()));
    for error in scrape.errors() {
        assert!(error.line >= 1 && error.line <= scrape.lines());
        assert!(error.column >= 1);
        assert!(!error.to_string().is_empty());
    }
    for sample in scrape.samples() {
        assert!(is_metric_name(sample.name), "{:?}", sample.name);
        // What was read renders to a line that reads back the same.
        let line = sample.to_string();
        let again = parse(line.as_bytes()).unwrap();
        assert_eq!(again.errors(), [], "{line:?}");
        assert!(same(&again.get(0).unwrap(), &sample), "{line:?}");
    }
}

fn same(a: &Sample<'_>, b: &Sample<'_>) -> bool {
    a.name == b.name
        && a.labels == b.labels
        && a.timestamp_ms == b.timestamp_ms
        && (a.value.to_bits() == b.value.to_bits() || (a.value.is_nan() && b.value.is_nan()))
}

/// Fragments that make up lines close to the format, so random lines reach deep into it.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "vllm:num_requests_waiting",
        "m",
        "_bucket",
        "{",
        "}",
        "\"",
        "\\",
        "\\\"",
        "\\n",
        "\\\\",
        "=",
        ",",
        " ",
        "\t",
        "\r",
        "\n",
        "#",
        "# HELP ",
        "# TYPE ",
        "gauge",
        "histogram",
        "le",
        "model_name",
        "1",
        "-2.5e3",
        "NaN",
        "+Inf",
        "-Inf",
        "1700000000000",
        "é",
        "\u{0}",
        ".",
        "e",
        "+",
    ])
}

fn metric_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_:][a-zA-Z0-9_:]{0,30}"
}

fn label_name() -> impl Strategy<Value = String> {
    "[a-zA-Z_][a-zA-Z0-9_]{0,15}"
}

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>(),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        Just(f64::MIN_POSITIVE),
        Just(f64::MAX),
        (0u32..1000).prop_map(f64::from),
    ]
}

type Generated = (String, Vec<(String, String)>, f64, Option<i64>);

fn generated_sample() -> impl Strategy<Value = Generated> {
    (
        metric_name(),
        vec((label_name(), any::<String>()), 0..6),
        value(),
        prop::option::of(any::<i64>()),
    )
        .prop_map(|(name, mut labels, value, ts)| {
            // Label names must be unique within a sample.
            let mut seen = Vec::new();
            labels.retain(|(n, _)| {
                let fresh = !seen.contains(n);
                seen.push(n.clone());
                fresh
            });
            (name, labels, value, ts)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn any_bytes_never_panic(bytes in vec(any::<u8>(), 0..2048)) {
        check(&bytes);
    }

    #[test]
    fn near_miss_lines_never_panic(parts in vec(fragment(), 0..60)) {
        check(parts.concat().as_bytes());
    }

    #[test]
    fn rendered_samples_parse_back(samples in vec(generated_sample(), 0..20), crlf in any::<bool>()) {
        let labels: Vec<Vec<Label<'_>>> = samples
            .iter()
            .map(|(_, labels, _, _)| {
                labels
                    .iter()
                    .map(|(name, value)| Label { name, value: Cow::Borrowed(value) })
                    .collect()
            })
            .collect();
        let originals: Vec<Sample<'_>> = samples
            .iter()
            .zip(&labels)
            .map(|((name, _, value, ts), labels)| Sample {
                name,
                labels,
                value: *value,
                timestamp_ms: *ts,
            })
            .collect();
        let eol = if crlf { "\r\n" } else { "\n" };
        let page: String = originals.iter().map(|s| format!("{s}{eol}")).collect();
        let scrape = parse(page.as_bytes()).unwrap();
        prop_assert_eq!(scrape.errors(), []);
        prop_assert_eq!(scrape.len(), originals.len());
        for (parsed, original) in scrape.samples().zip(&originals) {
            prop_assert!(same(&parsed, original), "{:?} != {:?}", parsed, original);
        }
    }
}
