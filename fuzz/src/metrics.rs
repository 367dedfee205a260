//! The `parse_metrics` target's body: the input is a model server's `/metrics` page.
//!
//! It is parsed by `shepherd_runtime::prom::parse`, checked (counts add up, every error names
//! a line of the page, every sample renders to a line that parses back to the same sample),
//! and mapped with the `vllm` and `sglang` presets, with and without a model filter (the
//! endpoint metrics must be sane: KV utilization in `[0, 1]`, no zero cache geometry). Each
//! short line is also tried as a metric spec, which must print back to itself.

use shepherd_runtime::mapping::{EngineMapping, MetricSpec};
use shepherd_runtime::prom::{MAX_INPUT_BYTES, MAX_REPORTED_ERRORS, Sample, parse};

fn same(a: &Sample<'_>, b: &Sample<'_>) -> bool {
    a.name == b.name
        && a.labels == b.labels
        && a.timestamp_ms == b.timestamp_ms
        && (a.value.to_bits() == b.value.to_bits() || (a.value.is_nan() && b.value.is_nan()))
}

/// Runs one page through the parser and the mappings and checks what comes out. Panics only
/// on a broken invariant.
pub fn parse_metrics(data: &[u8]) {
    let scrape = match parse(data) {
        Ok(scrape) => scrape,
        Err(error) => {
            assert!(data.len() > MAX_INPUT_BYTES);
            assert!(!error.to_string().is_empty());
            return;
        }
    };
    assert!(scrape.len() + scrape.bad_lines() + scrape.metadata().len() <= scrape.lines());
    assert!(scrape.errors().len() <= MAX_REPORTED_ERRORS.min(scrape.bad_lines()));
    for error in scrape.errors() {
        assert!((1..=scrape.lines()).contains(&error.line));
        assert!(error.column >= 1);
    }
    for sample in scrape.samples() {
        let line = sample.to_string();
        let again = parse(line.as_bytes()).expect("one line is under the size limit");
        assert_eq!(again.bad_lines(), 0, "{line:?}");
        let parsed = again.get(0).expect("a rendered sample parses");
        assert!(same(&parsed, &sample), "{line:?}");
    }

    for preset in [EngineMapping::vllm(), EngineMapping::sglang()] {
        for model in [None, Some("meta-llama/Llama-3.1-8B-Instruct")] {
            let mapping = EngineMapping {
                model_name: model.map(str::to_owned),
                ..preset.clone()
            };
            let out = mapping.extract(&scrape);
            let kv = out.metrics.kv_utilization;
            assert!((0.0..=1.0).contains(&kv), "{kv}");
            assert_ne!(out.metrics.block_size, Some(0));
            assert_ne!(out.metrics.num_gpu_blocks, Some(0));
            assert!(out.issues.iter().all(|issue| issue.count > 0));
            for (i, signal) in out.missing.iter().enumerate() {
                assert!(!out.missing[..i].contains(signal));
            }
        }
    }

    if let Ok(text) = std::str::from_utf8(data) {
        for line in text.lines().filter(|line| line.len() <= 256) {
            if let Ok(spec) = line.parse::<MetricSpec>() {
                let printed = spec.to_string();
                assert_eq!(
                    printed.parse::<MetricSpec>().ok(),
                    Some(spec),
                    "{printed:?}"
                );
            }
        }
    }
}
