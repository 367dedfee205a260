//! Applying a new config to a running runtime: the one path for the first config's
//! successors, whether they come from the watched file or from the embedder.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use shepherd_scheduler_core::config::{Registry, build_scheduler_in};
use shepherd_scheduler_core::metrics::{MetricDesc, MetricsSource, MetricsVisitor};
use shepherd_scheduler_core::reload::ReloadableScheduler;
use tokio::sync::watch;

use super::RuntimeError;
use crate::adaptive::{AdaptiveRunner, build_controller};
use crate::config::RuntimeConfig;
use crate::discovery::{EndpointSet, StaticDiscovery};
use crate::scrape::ScrapeSettings;

const RELOADS: MetricDesc<'static> = MetricDesc::new(
    "shepherd_config_reloads_total",
    "Config reloads, by result: applied, unchanged, or rejected (the previous config kept running).",
);
const LAST_OK: MetricDesc<'static> = MetricDesc::new(
    "shepherd_config_last_reload_successful",
    "1 when the latest config reload was applied (or there was none), 0 when it was rejected.",
);

/// What a reload changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadOutcome {
    /// The scheduling policy (plugins, profiles, scheduler settings, adaptive section) was
    /// rebuilt and swapped in.
    pub policy_changed: bool,
    /// The static endpoint list changed.
    pub endpoints_changed: bool,
    /// The scraping settings changed (the scraper restarted its workers).
    pub scraping_changed: bool,
    /// The `server`, `gateway`, `flowControl` or `discovery` section changed: those take
    /// effect on a restart.
    pub restart_needed: bool,
}

impl ReloadOutcome {
    /// Whether anything changed.
    pub fn changed(&self) -> bool {
        self.policy_changed
            || self.endpoints_changed
            || self.scraping_changed
            || self.restart_needed
    }
}

/// Reload counters, exported as a [`MetricsSource`].
#[derive(Debug)]
pub struct ReloadStats {
    applied: AtomicU64,
    unchanged: AtomicU64,
    rejected: AtomicU64,
    last_ok: AtomicBool,
}

impl Default for ReloadStats {
    fn default() -> Self {
        ReloadStats {
            applied: AtomicU64::new(0),
            unchanged: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            last_ok: AtomicBool::new(true),
        }
    }
}

impl ReloadStats {
    /// Reloads that changed something.
    pub fn applied(&self) -> u64 {
        self.applied.load(Ordering::Relaxed)
    }

    /// Reloads of an identical config.
    pub fn unchanged(&self) -> u64 {
        self.unchanged.load(Ordering::Relaxed)
    }

    /// Reloads refused (bad YAML, bad values, unreadable file): the previous config kept
    /// running.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// Whether the latest reload was applied (true before any).
    pub fn last_ok(&self) -> bool {
        self.last_ok.load(Ordering::Relaxed)
    }
}

impl MetricsSource for ReloadStats {
    fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
        v.counter(RELOADS, &[("result", "applied")], self.applied());
        v.counter(RELOADS, &[("result", "unchanged")], self.unchanged());
        v.counter(RELOADS, &[("result", "rejected")], self.rejected());
        v.gauge(LAST_OK, &[], f64::from(u8::from(self.last_ok())));
    }
}

/// Applies configs to the running parts.
pub(crate) struct Applier {
    pub(crate) lock: Mutex<()>,
    pub(crate) current: watch::Sender<Arc<RuntimeConfig>>,
    pub(crate) registry: Registry,
    pub(crate) scheduler: Arc<ReloadableScheduler>,
    pub(crate) discovery: Option<Arc<StaticDiscovery>>,
    pub(crate) settings: watch::Sender<Arc<ScrapeSettings>>,
    pub(crate) adaptive: Arc<AdaptiveRunner>,
    pub(crate) adaptive_enabled: bool,
    pub(crate) allow_experimental: bool,
    pub(crate) stats: Arc<ReloadStats>,
}

impl fmt::Debug for Applier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Applier")
            .field("generation", &self.scheduler.generation())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Applier {
    /// Puts `next` in force. Everything is built before anything is swapped, so a config
    /// that fails anywhere leaves the running one whole.
    pub(crate) fn apply(&self, next: RuntimeConfig) -> Result<ReloadOutcome, RuntimeError> {
        let _serial = self.lock.lock();
        let result = self.apply_locked(next);
        match &result {
            Ok(outcome) if outcome.changed() => {
                self.stats.applied.fetch_add(1, Ordering::Relaxed);
                self.stats.last_ok.store(true, Ordering::Relaxed);
            }
            Ok(_) => {
                self.stats.unchanged.fetch_add(1, Ordering::Relaxed);
                self.stats.last_ok.store(true, Ordering::Relaxed);
            }
            Err(error) => self.reject(error),
        }
        result
    }

    /// Counts and logs a config that could not be used; the running one stays.
    pub(crate) fn reject(&self, error: &dyn std::error::Error) {
        self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        self.stats.last_ok.store(false, Ordering::Relaxed);
        tracing::error!(%error, "config reload rejected; the previous config keeps running");
    }

    fn apply_locked(&self, next: RuntimeConfig) -> Result<ReloadOutcome, RuntimeError> {
        let current = Arc::clone(&self.current.borrow());
        let outcome = ReloadOutcome {
            policy_changed: current.policy != next.policy,
            endpoints_changed: current.endpoints != next.endpoints,
            scraping_changed: current.scraping != next.scraping,
            restart_needed: current.server != next.server
                || current.gateway != next.gateway
                || current.flow_control != next.flow_control
                || current.discovery != next.discovery,
        };
        if !outcome.changed() {
            return Ok(outcome);
        }

        // Every reload: an Alpha flow-control or data-layer plugin may come without a
        // policy change.
        next.check_stability(self.allow_experimental)
            .map_err(RuntimeError::Policy)?;
        let mut rebuilt = None;
        if outcome.policy_changed {
            let scheduler =
                build_scheduler_in(&next.policy, &self.registry, self.scheduler.shared())
                    .map_err(RuntimeError::Policy)?;
            let controller = if self.adaptive_enabled {
                build_controller(&next.policy, &scheduler)?
            } else {
                None
            };
            rebuilt = Some((scheduler, controller));
        }
        let settings = if outcome.scraping_changed {
            Some(ScrapeSettings::from_config(&next.scraping).map_err(RuntimeError::Scraping)?)
        } else {
            None
        };

        if let Some((scheduler, controller)) = rebuilt {
            self.scheduler.swap(scheduler);
            self.adaptive.replace(controller);
        }
        if let Some(settings) = settings {
            self.settings.send_replace(Arc::new(settings));
        }
        if outcome.endpoints_changed {
            match &self.discovery {
                Some(discovery) => {
                    discovery.replace(EndpointSet::new(next.endpoints.iter().cloned()));
                }
                None => tracing::warn!(
                    "the config's `endpoints` changed, but endpoints come from another discovery source; ignored"
                ),
            }
        }
        if outcome.restart_needed {
            tracing::warn!(
                "the config's `server`, `gateway`, `flowControl` or `discovery` section changed; it takes effect on a restart"
            );
        }
        for warning in next.warnings() {
            tracing::warn!(%warning, "config section ignored");
        }
        tracing::info!(
            policy = outcome.policy_changed,
            endpoints = outcome.endpoints_changed,
            scraping = outcome.scraping_changed,
            generation = self.scheduler.generation(),
            "config reloaded"
        );
        self.current.send_replace(Arc::new(next));
        Ok(outcome)
    }
}
