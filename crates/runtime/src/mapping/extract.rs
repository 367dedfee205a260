//! Applying an [`EngineMapping`] to a parsed page: [`EngineMapping::extract`].

use std::fmt;

use shepherd_scheduler_core::endpoint::{EndpointMetrics, LoraState};

use super::engine::{
    EngineMapping, LORA_MAX_LABEL, LORA_RUNNING_LABEL, LORA_WAITING_LABEL, MODEL_NAME_LABEL,
};
use super::spec::{MetricSpec, Specs};
use crate::prom::{Sample, Scrape};

/// A signal the mapping reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Waiting requests ([`EngineMapping::queued_requests_spec`]).
    Waiting,
    /// Running requests ([`EngineMapping::running_requests_spec`]).
    Running,
    /// KV-cache utilization ([`EngineMapping::kv_usage_spec`]).
    KvUtilization,
    /// LoRA adapters ([`EngineMapping::lora_spec`]).
    Lora,
    /// Block size (the cache info series, or [`EngineMapping::cache_block_size_spec`]).
    BlockSize,
    /// Number of GPU blocks (the cache info series, or
    /// [`EngineMapping::cache_num_blocks_spec`]).
    NumGpuBlocks,
}

impl Signal {
    /// A short lower-case name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Waiting => "waiting",
            Signal::Running => "running",
            Signal::KvUtilization => "kv_utilization",
            Signal::Lora => "lora",
            Signal::BlockSize => "block_size",
            Signal::NumGpuBlocks => "num_gpu_blocks",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a value read from the page was not taken as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The value was `NaN`: a count ignores the series; KV utilization counts it as full
    /// (1.0), like the core's `kv_utilization_clamped`; a LoRA series cannot be the newest.
    NaN,
    /// The value was negative (or `-Inf`): clamped to 0.
    Negative,
    /// The value was too large (or `+Inf`): a count is clamped to `u32::MAX`, KV utilization to
    /// 1.0; a geometry or `max_lora` figure out of range (or zero) is dropped.
    OutOfRange,
    /// A label that should hold a whole number did not (for example `num_gpu_blocks="None"`):
    /// the figure is dropped.
    Unparsable,
}

impl Reason {
    /// A short lower-case name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::NaN => "nan",
            Reason::Negative => "negative",
            Reason::OutOfRange => "out_of_range",
            Reason::Unparsable => "unparsable",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many series of one signal had a value that was sanitized, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Issue {
    /// The signal.
    pub signal: Signal,
    /// What was wrong.
    pub reason: Reason,
    /// How many series (or labels) it happened to.
    pub count: u32,
}

/// What [`EngineMapping::extract`] read from one page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extraction {
    /// The endpoint metrics. A signal with no series keeps its default (0, empty, `None`).
    /// `scraped_at` is left for the caller, which knows when the scrape happened.
    pub metrics: EndpointMetrics,
    /// Signals the mapping reads (non-empty specs) for which the page had no series. vLLM
    /// serves `vllm:lora_requests_info` only when LoRA is enabled, so [`Signal::Lora`] here is
    /// normal for most vLLM servers.
    pub missing: Vec<Signal>,
    /// Sanitized values, one entry per (signal, reason).
    pub issues: Vec<Issue>,
    /// The mapping's custom metrics found on the page (attribute key, value): the last series
    /// of each spec on the page (upstream takes the newest by timestamp; a page seldom has
    /// one), NaN series left out.
    pub attributes: Vec<(String, f64)>,
}

impl Extraction {
    /// Total number of sanitized values.
    pub fn issue_count(&self) -> u32 {
        self.issues
            .iter()
            .fold(0, |total, issue| total.saturating_add(issue.count))
    }

    fn note(&mut self, signal: Signal, reason: Reason) {
        match self
            .issues
            .iter_mut()
            .find(|issue| issue.signal == signal && issue.reason == reason)
        {
            Some(issue) => issue.count = issue.count.saturating_add(1),
            None => self.issues.push(Issue {
                signal,
                reason,
                count: 1,
            }),
        }
    }
}

impl EngineMapping {
    /// Reads the endpoint metrics from a parsed page.
    ///
    /// For each signal the first spec with a matching series is used (so
    /// `vllm:gpu_cache_usage_perc` is read only when `vllm:kv_cache_usage_perc` is absent).
    /// When several series match (one per `model_name`, or per data-parallel `engine` in
    /// vLLM), counts are **summed** and KV utilization is the **maximum**, so the endpoint
    /// looks as loaded as its busiest part; the cache geometry comes from the first series;
    /// LoRA state from the newest one (largest value). Set
    /// [`model_name`](EngineMapping::model_name) to read one model's series only.
    ///
    /// Garbage never gets through: counts are clamped into `0..=u32::MAX` (NaN series
    /// ignored), KV utilization into `[0, 1]` (NaN counts as full), geometry must be a
    /// positive whole number; each correction is counted in [`Extraction::issues`].
    pub fn extract(&self, scrape: &Scrape<'_>) -> Extraction {
        let mut out = Extraction::default();
        let select = Selector {
            scrape,
            model: self.model_name.as_deref(),
        };

        let waiting = self.count(
            &select,
            &self.queued_requests_spec,
            Signal::Waiting,
            &mut out,
        );
        let running = self.count(
            &select,
            &self.running_requests_spec,
            Signal::Running,
            &mut out,
        );
        let kv_utilization = self.kv_utilization(&select, &mut out);
        let lora = self.lora(&select, &mut out);
        let (block_size, num_gpu_blocks) = self.geometry(&select, &mut out);

        // The pool stamps the scrape time when the metrics are stored.
        let metrics = EndpointMetrics {
            waiting: waiting.unwrap_or(0),
            running: running.unwrap_or(0),
            kv_utilization: kv_utilization.unwrap_or(0.0),
            lora: lora.unwrap_or_default(),
            block_size,
            num_gpu_blocks,
        };
        out.metrics = metrics;
        for custom in &self.custom_metrics {
            let value = select
                .series(&custom.metric_spec)
                .map(|sample| sample.value)
                .filter(|v| !v.is_nan())
                .last();
            if let Some(value) = value {
                out.attributes.push((custom.attribute_key.clone(), value));
            }
        }
        out
    }

    /// A count signal: the sum over series.
    fn count(
        &self,
        select: &Selector<'_, '_>,
        specs: &Specs,
        signal: Signal,
        out: &mut Extraction,
    ) -> Option<u32> {
        let spec = select.first_matching(specs, signal, out)?;
        let mut total = 0u32;
        for sample in select.series(spec) {
            let value = sample.value;
            let count = if value.is_nan() {
                out.note(signal, Reason::NaN);
                continue;
            } else if value < 0.0 {
                out.note(signal, Reason::Negative);
                0
            } else if value > f64::from(u32::MAX) {
                out.note(signal, Reason::OutOfRange);
                u32::MAX
            } else {
                // In range, so the cast is exact after rounding.
                value.round() as u32
            };
            total = total.saturating_add(count);
        }
        Some(total)
    }

    /// KV utilization: the maximum over series, each clamped into `[0, 1]`.
    fn kv_utilization(&self, select: &Selector<'_, '_>, out: &mut Extraction) -> Option<f64> {
        let signal = Signal::KvUtilization;
        let spec = select.first_matching(&self.kv_usage_spec, signal, out)?;
        let mut max = 0.0f64;
        for sample in select.series(spec) {
            let value = sample.value;
            let utilization = if value.is_nan() {
                out.note(signal, Reason::NaN);
                1.0
            } else if value < 0.0 {
                out.note(signal, Reason::Negative);
                0.0
            } else if value > 1.0 {
                out.note(signal, Reason::OutOfRange);
                1.0
            } else {
                value
            };
            max = max.max(utilization);
        }
        Some(max)
    }

    /// LoRA state from the newest series (largest value; the value is its creation time).
    fn lora(&self, select: &Selector<'_, '_>, out: &mut Extraction) -> Option<LoraState> {
        let signal = Signal::Lora;
        let spec = select.first_matching(&self.lora_spec, signal, out)?;
        let mut newest: Option<Sample<'_>> = None;
        for sample in select.series(spec) {
            if sample.value.is_nan() {
                out.note(signal, Reason::NaN);
            } else if newest.is_none_or(|best| sample.value > best.value) {
                newest = Some(sample);
            }
        }
        let newest = newest?;
        let max_loras = match newest.label(LORA_MAX_LABEL).map(str::trim) {
            None | Some("") => 0,
            Some(text) => match whole_number(text).map(u32::try_from) {
                Some(Ok(max)) => max,
                Some(Err(_)) => {
                    out.note(signal, Reason::OutOfRange);
                    0
                }
                None => {
                    out.note(signal, Reason::Unparsable);
                    0
                }
            },
        };
        Some(LoraState {
            running: adapters(newest.label(LORA_RUNNING_LABEL)),
            waiting: adapters(newest.label(LORA_WAITING_LABEL)),
            max_loras,
        })
    }

    /// Block size and GPU blocks: labels of the first cache info series, overridden by the
    /// direct gauges when configured and present.
    fn geometry(
        &self,
        select: &Selector<'_, '_>,
        out: &mut Extraction,
    ) -> (Option<u32>, Option<u64>) {
        let mut block_size = None;
        let mut num_blocks = None;
        let mut block_size_seen = false;
        let mut num_blocks_seen = false;
        let info = self
            .cache_info_spec
            .as_slice()
            .iter()
            .find_map(|spec| select.series(spec).next());
        if let Some(info) = info {
            if let Some(text) = info.label(self.block_size_label()) {
                block_size_seen = true;
                block_size = positive_label(text, Signal::BlockSize, out)
                    .and_then(|v| fits_u32(v, Signal::BlockSize, out));
            }
            if let Some(text) = info.label(self.num_blocks_label()) {
                num_blocks_seen = true;
                num_blocks = positive_label(text, Signal::NumGpuBlocks, out);
            }
        }
        let direct = |specs: &Specs| {
            specs
                .as_slice()
                .iter()
                .find_map(|spec| select.series(spec).next())
        };
        if let Some(sample) = direct(&self.cache_block_size_spec) {
            block_size_seen = true;
            if let Some(v) = positive_value(sample.value, Signal::BlockSize, out)
                .and_then(|v| fits_u32(v, Signal::BlockSize, out))
            {
                block_size = Some(v);
            }
        }
        if let Some(sample) = direct(&self.cache_num_blocks_spec) {
            num_blocks_seen = true;
            if let Some(v) = positive_value(sample.value, Signal::NumGpuBlocks, out) {
                num_blocks = Some(v);
            }
        }
        let reads_geometry = !self.cache_info_spec.is_empty();
        if !block_size_seen && (reads_geometry || !self.cache_block_size_spec.is_empty()) {
            out.missing.push(Signal::BlockSize);
        }
        if !num_blocks_seen && (reads_geometry || !self.cache_num_blocks_spec.is_empty()) {
            out.missing.push(Signal::NumGpuBlocks);
        }
        (block_size, num_blocks)
    }
}

/// Finds the series of a spec, honouring the mapping's model filter.
struct Selector<'p, 'm> {
    scrape: &'p Scrape<'p>,
    model: Option<&'m str>,
}

impl<'p> Selector<'p, '_> {
    /// The series of `spec` that pass the model filter.
    fn series<'s>(&'s self, spec: &'s MetricSpec) -> impl Iterator<Item = Sample<'p>> + 's {
        let model = self.model;
        self.scrape.samples().filter(move |sample| {
            spec.matches(sample)
                && model.is_none_or(|model| {
                    sample
                        .label(MODEL_NAME_LABEL)
                        .is_none_or(|name| name == model)
                })
        })
    }

    /// The first spec with a series on the page; notes the signal missing when there is none
    /// (and specs were given).
    fn first_matching<'s>(
        &self,
        specs: &'s Specs,
        signal: Signal,
        out: &mut Extraction,
    ) -> Option<&'s MetricSpec> {
        let found = specs
            .as_slice()
            .iter()
            .find(|spec| self.series(spec).next().is_some());
        if found.is_none() && !specs.is_empty() {
            out.missing.push(signal);
        }
        found
    }
}

/// A comma-separated adapter list: names trimmed, empty ones dropped.
fn adapters(list: Option<&str>) -> Vec<String> {
    list.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A whole number written as an integer (`16`) or as a float with no fraction (`16.0`).
fn whole_number(text: &str) -> Option<u64> {
    if let Ok(value) = text.parse::<u64>() {
        return Some(value);
    }
    let value = text.parse::<f64>().ok()?;
    // 2^64 as f64 is exact; anything below it with no fraction converts exactly.
    (value.is_finite()
        && value >= 0.0
        && value.fract() == 0.0
        && value < 18_446_744_073_709_551_616.0)
        .then_some(value as u64)
}

/// A positive whole number from a label value, noting why not.
fn positive_label(text: &str, signal: Signal, out: &mut Extraction) -> Option<u64> {
    match whole_number(text.trim()) {
        Some(0) => {
            out.note(signal, Reason::OutOfRange);
            None
        }
        Some(value) => Some(value),
        None => {
            out.note(signal, Reason::Unparsable);
            None
        }
    }
}

/// A positive whole number from a sample value (rounded), noting why not.
fn positive_value(value: f64, signal: Signal, out: &mut Extraction) -> Option<u64> {
    let reason = if value.is_nan() {
        Reason::NaN
    } else if value < 0.0 {
        Reason::Negative
    } else if value.round() < 1.0 || value >= 18_446_744_073_709_551_616.0 {
        Reason::OutOfRange
    } else {
        return Some(value.round() as u64);
    };
    out.note(signal, reason);
    None
}

/// `value` as a `u32`, noting when it does not fit.
fn fits_u32(value: u64, signal: Signal, out: &mut Extraction) -> Option<u32> {
    let fits = u32::try_from(value).ok();
    if fits.is_none() {
        out.note(signal, Reason::OutOfRange);
    }
    fits
}
