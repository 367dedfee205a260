//! One endpoint's scrape loop.

use std::sync::Arc;
use std::time::Duration;

use shepherd_scheduler_core::endpoint::{EndpointAttributes, Pool};
use tokio::time::{Instant, MissedTickBehavior, interval};

use super::models::EndpointModels;
use super::{EndpointScrapeStats, ScrapeError, ScrapeSettings, dcgm, fetch, models};
use crate::config::EndpointSpec;
use crate::mapping::{EngineMapping, Extraction, Signal};
use crate::prom;

/// Failure logs of one endpoint are written at most this often (the first of a streak always).
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Scrapes one endpoint every interval until aborted.
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) address: String,
    pub(crate) spec: EndpointSpec,
    pub(crate) settings: Arc<ScrapeSettings>,
    pub(crate) pool: Arc<Pool>,
    pub(crate) client: reqwest::Client,
    pub(crate) stats: Arc<EndpointScrapeStats>,
    /// Where custom metrics go (`endpoint-attribute-*` read them).
    pub(crate) attributes: Arc<EndpointAttributes>,
    /// Where the models each endpoint serves go (`models-data-source`).
    pub(crate) models: Arc<EndpointModels>,
}

/// Logs a failure streak without flooding: the first failure, then one line every
/// [`LOG_EVERY`] with how many were not logged, then the recovery.
#[derive(Debug, Default)]
struct FailureLog {
    last_logged: Option<Instant>,
    suppressed: u64,
}

impl FailureLog {
    /// A failure: `Some(failures not logged since the last line)` when this one is to be
    /// logged (the first of a streak, or [`LOG_EVERY`] after the last line), else `None`.
    fn failed(&mut self) -> Option<u64> {
        let now = Instant::now();
        if self
            .last_logged
            .is_none_or(|at| now.duration_since(at) >= LOG_EVERY)
        {
            self.last_logged = Some(now);
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

impl Worker {
    pub(crate) async fn run(self) {
        let mut ticker = interval(self.settings.scrape_interval());
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut log = FailureLog::default();
        let dcgm = self.settings.dcgm.as_ref().filter(|d| d.scraped);
        let mut dcgm_ticker = interval(
            dcgm.and_then(|d| d.interval)
                .unwrap_or(self.settings.interval),
        );
        dcgm_ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut dcgm_log = FailureLog::default();
        let models = self.settings.models.as_ref().filter(|m| m.polled);
        let mut models_ticker = interval(
            models
                .and_then(|m| m.interval)
                .unwrap_or(self.settings.interval),
        );
        models_ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut models_log = FailureLog::default();
        loop {
            tokio::select! {
                _ = ticker.tick() => self.scrape_once(&mut log).await,
                _ = dcgm_ticker.tick(), if dcgm.is_some() => {
                    if let Some(dcgm) = dcgm {
                        self.scrape_dcgm(dcgm, &mut dcgm_log).await;
                    }
                }
                _ = models_ticker.tick(), if models.is_some() => {
                    if let Some(models) = models {
                        self.poll_models(models, &mut models_log).await;
                    }
                }
            }
        }
    }

    /// One poll of the endpoint's `/v1/models` into its model list (kept as it was when the
    /// poll fails, as upstream keeps the last attribute).
    async fn poll_models(&self, source: &models::ModelsSettings, log: &mut FailureLog) {
        let Some(url) = source.url(&self.address) else {
            return;
        };
        let outcome = match fetch::fetch(&self.client, &url, self.settings.timeout).await {
            Ok(body) => models::parse_models(&body).map_err(|e| e.to_string()),
            Err(error) => Err(error.to_string()),
        };
        match outcome {
            Ok(list) => {
                if log.last_logged.take().is_some() {
                    tracing::info!(endpoint = %self.address, source = %source.name, "models poll recovered");
                    *log = FailureLog::default();
                }
                let ids: Vec<String> = list.iter().map(|m| m.id.clone()).collect();
                if self.models.set(&self.address, list) {
                    tracing::info!(endpoint = %self.address, source = %source.name, models = ?ids, "endpoint's models");
                }
            }
            Err(error) => {
                if let Some(not_logged) = log.failed() {
                    tracing::warn!(
                        endpoint = %self.address,
                        source = %source.name,
                        url = %url,
                        %error,
                        not_logged,
                        "models poll failed; keeping the last list"
                    );
                }
            }
        }
    }

    /// One scrape of the endpoint's DCGM exporter into its `GPUUtilization` attribute
    /// (cleared when the scrape fails or the page lacks the metric).
    async fn scrape_dcgm(&self, dcgm: &dcgm::DcgmSettings, log: &mut FailureLog) {
        let Some(endpoint) = self.pool.load().get_by_address(&self.address).cloned() else {
            return;
        };
        let Some(url) = dcgm.url(&self.address) else {
            return;
        };
        let pod = self.spec.label(dcgm::POD_LABEL);
        let outcome = match fetch::fetch(&self.client, &url, self.settings.timeout).await {
            Ok(body) => dcgm::gpu_utilization(&body, pod)
                .ok_or_else(|| format!("no {} sample for this endpoint", dcgm::GPU_UTIL_METRIC)),
            Err(error) => Err(error.to_string()),
        };
        match outcome {
            Ok(value) => {
                self.attributes
                    .set_value(endpoint.id(), dcgm::ATTRIBUTE, value);
                if log.last_logged.take().is_some() {
                    tracing::info!(endpoint = %self.address, source = %dcgm.name, "DCGM scrape recovered");
                    *log = FailureLog::default();
                }
            }
            Err(error) => {
                self.attributes
                    .set_value(endpoint.id(), dcgm::ATTRIBUTE, f64::NAN);
                if let Some(not_logged) = log.failed() {
                    tracing::warn!(
                        endpoint = %self.address,
                        source = %dcgm.name,
                        url = %url,
                        %error,
                        not_logged,
                        "DCGM exporter scrape failed"
                    );
                }
            }
        }
    }

    async fn scrape_once(&self, log: &mut FailureLog) {
        // Discovery and the pool are updated by different tasks: skip a round until the pool
        // has the endpoint.
        let Some(endpoint) = self.pool.load().get_by_address(&self.address).cloned() else {
            return;
        };
        let mapping = self.settings.mapping_for(Some(&self.spec));
        let started = Instant::now();
        let Some(url) = self.settings.url_for(&self.address, &self.spec) else {
            return;
        };
        let outcome = match fetch::fetch(&self.client, &url, self.settings.timeout).await {
            Ok(body) => read_page(&body, mapping),
            Err(error) => Err((error, 0)),
        };
        match outcome {
            Ok((extraction, bad_lines)) => {
                if !extraction.attributes.is_empty() || !mapping.custom_metrics.is_empty() {
                    self.attributes.set(endpoint.id(), &extraction.attributes);
                }
                endpoint.set_metrics(extraction.metrics);
                let failures = self.stats.consecutive_failures();
                self.stats.success(started.elapsed(), bad_lines);
                if failures > 0 {
                    tracing::info!(
                        endpoint = %self.address,
                        failures,
                        "metrics scrape recovered"
                    );
                    *log = FailureLog::default();
                }
                if bad_lines > 0 {
                    tracing::debug!(endpoint = %self.address, bad_lines, "metrics page had unparsable lines");
                }
            }
            Err((error, bad_lines)) => {
                let failures = self.stats.failure(&error, bad_lines);
                let clear_after = u64::from(self.settings.clear_after_failures);
                if clear_after > 0 && failures == clear_after {
                    endpoint.clear_metrics();
                }
                if let Some(not_logged) = log.failed() {
                    tracing::warn!(
                        endpoint = %self.address,
                        url = %url,
                        %error,
                        consecutive_failures = failures,
                        not_logged,
                        "metrics scrape failed"
                    );
                }
            }
        }
    }
}

/// Parses and maps a page; a page with none of the load signals is an error.
fn read_page(
    body: &[u8],
    mapping: &EngineMapping,
) -> Result<(Extraction, usize), (ScrapeError, usize)> {
    let scrape = prom::parse(body).map_err(|_| {
        (
            ScrapeError::TooLarge {
                limit: prom::MAX_INPUT_BYTES,
            },
            0,
        )
    })?;
    let bad_lines = scrape.bad_lines();
    let extraction = mapping.extract(&scrape);
    let read: Vec<Signal> = [
        (Signal::Waiting, &mapping.queued_requests_spec),
        (Signal::Running, &mapping.running_requests_spec),
        (Signal::KvUtilization, &mapping.kv_usage_spec),
    ]
    .into_iter()
    .filter(|(_, specs)| !specs.is_empty())
    .map(|(signal, _)| signal)
    .collect();
    if !read.is_empty() && read.iter().all(|s| extraction.missing.contains(s)) {
        let missing: Vec<&str> = read.iter().map(|s| s.as_str()).collect();
        return Err((
            ScrapeError::NoSignals {
                bad_lines,
                missing: missing.join(", "),
            },
            bad_lines,
        ));
    }
    Ok((extraction, bad_lines))
}
