//! The scraper: one worker task per endpoint, following the discovered set and the settings.

use std::collections::BTreeMap;
use std::sync::Arc;

use shepherd_scheduler_core::endpoint::{EndpointAttributes, Pool};
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinSet};

use super::worker::Worker;
use super::{ScrapeSettings, ScrapeStats};
use crate::config::EndpointSpec;
use crate::discovery::EndpointSet;
use crate::shutdown::ShutdownSignal;

/// Everything the scraper loop needs.
#[derive(Debug)]
pub(crate) struct Scraper {
    pub(crate) pool: Arc<Pool>,
    pub(crate) sets: watch::Receiver<Arc<EndpointSet>>,
    pub(crate) settings: watch::Receiver<Arc<ScrapeSettings>>,
    pub(crate) stats: Arc<ScrapeStats>,
    pub(crate) client: reqwest::Client,
    pub(crate) attributes: Arc<EndpointAttributes>,
    /// The models each endpoint serves (`models-data-source`).
    pub(crate) models: Arc<super::models::EndpointModels>,
}

impl Scraper {
    /// Runs until `stop`: a worker per endpoint of the current set, restarted when the
    /// settings or the endpoint's labels change (or after it panicked), stopped when it
    /// leaves the set. A slow endpoint only delays its own worker.
    pub(crate) async fn run(mut self, stop: ShutdownSignal) {
        let mut tasks: JoinSet<()> = JoinSet::new();
        let mut workers: BTreeMap<String, (EndpointSpec, AbortHandle)> = BTreeMap::new();
        let mut running_settings: Option<Arc<ScrapeSettings>> = None;
        let (mut sets_open, mut settings_open) = (true, true);
        loop {
            let set = Arc::clone(&self.sets.borrow_and_update());
            let settings = Arc::clone(&self.settings.borrow_and_update());
            if running_settings
                .as_ref()
                .is_some_and(|r| !Arc::ptr_eq(r, &settings))
            {
                for (_, (_, handle)) in std::mem::take(&mut workers) {
                    handle.abort();
                }
            }
            running_settings = Some(Arc::clone(&settings));
            self.reconcile(&set, &settings, &mut workers, &mut tasks);

            tokio::select! {
                changed = self.sets.changed(), if sets_open => sets_open = changed.is_ok(),
                changed = self.settings.changed(), if settings_open => settings_open = changed.is_ok(),
                Some(ended) = tasks.join_next_with_id(), if !tasks.is_empty() => {
                    // Workers loop until aborted; one that ended otherwise (a panic) is
                    // forgotten here and started again by the next reconcile.
                    let id = match &ended {
                        Ok((id, ())) => *id,
                        Err(error) => error.id(),
                    };
                    if let Err(error) = &ended
                        && error.is_panic()
                    {
                        tracing::error!(%error, "metrics scrape task panicked; restarting it");
                    }
                    workers.retain(|_, (_, handle)| handle.id() != id);
                }
                () = stop.wait() => break,
            }
        }
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }

    fn reconcile(
        &self,
        set: &EndpointSet,
        settings: &Arc<ScrapeSettings>,
        workers: &mut BTreeMap<String, (EndpointSpec, AbortHandle)>,
        tasks: &mut JoinSet<()>,
    ) {
        workers.retain(|address, (spec, handle)| {
            let keep = set.get(address) == Some(spec);
            if !keep {
                handle.abort();
                if set.get(address).is_none() {
                    self.stats.remove(address);
                    self.models.forget(address);
                }
            }
            keep
        });
        for (spec, address) in set.endpoints().iter().zip(set.address_list()) {
            if workers.contains_key(address) {
                continue;
            }
            let address = address.clone();
            let worker = Worker {
                address: address.clone(),
                spec: spec.clone(),
                settings: Arc::clone(settings),
                pool: Arc::clone(&self.pool),
                client: self.client.clone(),
                stats: self.stats.endpoint(&address),
                attributes: Arc::clone(&self.attributes),
                models: Arc::clone(&self.models),
            };
            let handle = tasks.spawn(worker.run());
            workers.insert(address, (spec.clone(), handle));
        }
    }
}
