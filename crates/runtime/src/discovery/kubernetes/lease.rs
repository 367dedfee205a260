//! Leader election over a `coordination.k8s.io/v1` Lease, for upstream's active-passive mode
//! (`--ha-enable-leader-election`): one replica holds the lease and is the leader; the others
//! keep their pool view warm and take over when the leader stops renewing.
//!
//! The rules are client-go's (what upstream's picker runs through controller-runtime): the
//! lease names its holder and is renewed every `retry_period`; a replica that sees the same
//! holder record unchanged for `lease_duration` (measured on its own clock, so clock skew
//! between nodes does not matter) takes the lease over with a write guarded by the lease's
//! resourceVersion, so two replicas never both win; a leader that cannot renew within
//! `renew_deadline` steps down. Defaults are controller-runtime's: 15 s, 10 s, 2 s. The lease
//! is named as upstream names it ([`lease_name`]) in the pool's namespace.
//!
//! Where upstream's picker exits when it loses the lease (and is restarted), Shepherd steps
//! down to follower and keeps running. [`LeaderElection::release`] hands the lease over at
//! shutdown (upstream's release-on-cancel), so a follower takes over at its next try.
//!
//! ```no_run
//! use std::time::Duration;
//! use shepherd_runtime::discovery::kubernetes::{LeaderElection, LeaseSettings, lease_name};
//!
//! # async fn run(client: kube::Client) {
//! let settings = LeaseSettings::new(lease_name("prod", "llama"), "prod", "picker-0");
//! let election = LeaderElection::start(client, settings);
//! let mut leader = election.subscribe();
//! while !*leader.borrow_and_update() {
//!     leader.changed().await.ok();
//! }
//! println!("leading");
//! election.release().await;
//! # }
//! ```

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The lease upstream's picker takes for the pool `pool` of `namespace`.
///
/// ```
/// assert_eq!(shepherd_runtime::discovery::kubernetes::lease_name("prod", "llama"), "epp-prod-llama.llm-d.ai");
/// ```
pub fn lease_name(namespace: &str, pool: &str) -> String {
    format!("epp-{namespace}-{pool}.llm-d.ai")
}

/// Which lease, who is asking, and the timings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// The Lease's name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// This replica's identity (the holder it writes).
    pub identity: String,
    /// How long a lease not renewed stays held.
    pub lease_duration: Duration,
    /// How long a leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// The time between two tries.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// The lease `name` in `namespace` for `identity`, with controller-runtime's timings.
    pub fn new(
        name: impl Into<String>,
        namespace: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaseSettings {
            name: name.into(),
            namespace: namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// These settings with the timings of the config file's `leaderElection` section.
    pub fn with_timings(mut self, config: &crate::config::LeaderElectionConfig) -> Self {
        self.lease_duration = Duration::from_millis(config.lease_duration_ms);
        self.renew_deadline = Duration::from_millis(config.renew_deadline_ms);
        self.retry_period = Duration::from_millis(config.retry_period_ms);
        self
    }

    /// A holder identity for this process: the pod's name (`POD_NAME`, else `HOSTNAME`, else
    /// `shepherd`) and a random suffix, as controller-runtime makes one.
    pub fn default_identity() -> String {
        use std::hash::{BuildHasher, RandomState};
        let host = ["POD_NAME", "HOSTNAME"]
            .iter()
            .find_map(|v| std::env::var(v).ok().filter(|h| !h.trim().is_empty()))
            .unwrap_or_else(|| "shepherd".to_string());
        let suffix = RandomState::new().hash_one(std::process::id());
        format!("{}_{suffix:016x}", host.trim())
    }
}

/// A running election. Dropping it stops trying (without releasing; see
/// [`LeaderElection::release`]).
#[derive(Debug)]
pub struct LeaderElection {
    rx: watch::Receiver<bool>,
    task: Option<JoinHandle<()>>,
    api: Api<Lease>,
    settings: LeaseSettings,
}

impl LeaderElection {
    /// Starts trying for the lease on the current tokio runtime.
    pub fn start(client: Client, settings: LeaseSettings) -> Self {
        let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
        let (tx, rx) = watch::channel(false);
        let elector = Elector {
            api: api.clone(),
            settings: settings.clone(),
            observed: None,
            tx,
            announced: false,
        };
        tracing::info!(
            lease = %settings.name,
            namespace = %settings.namespace,
            identity = %settings.identity,
            "leader election: trying for the lease (a follower reports NOT_SERVING until it leads)"
        );
        LeaderElection {
            rx,
            task: Some(tokio::spawn(elector.run())),
            api,
            settings,
        }
    }

    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Leadership as it changes.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Stops trying and, when leading, gives the lease up (an empty holder), so a follower
    /// takes over at its next try instead of after the lease expires.
    pub async fn release(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if !self.is_leader() {
            return;
        }
        let released = tokio::time::timeout(Duration::from_secs(2), async {
            let mut lease = self.api.get(&self.settings.name).await?;
            let spec = lease.spec.get_or_insert_with(Default::default);
            if spec.holder_identity.as_deref() != Some(&self.settings.identity) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.api
                .replace(&self.settings.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        })
        .await;
        match released {
            Ok(Ok(())) => {
                tracing::info!(lease = %self.settings.name, "leader election: lease released")
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, "leader election: could not release the lease; it expires on its own")
            }
            Err(_) => tracing::warn!(
                "leader election: the API server did not answer the release; the lease expires on its own"
            ),
        }
    }
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// The holder record last seen and when it was first seen (this replica's clock).
#[derive(Debug)]
struct Observed {
    record: (Option<String>, Option<String>, Option<String>),
    since: Instant,
}

struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<Observed>,
    tx: watch::Sender<bool>,
    /// Whether the role was logged once (a first follower says so too).
    announced: bool,
}

/// The outcome of one try.
enum Try {
    /// This replica holds the lease (acquired or renewed).
    Held,
    /// Another replica holds it and it has not expired (or another won the race).
    Other,
}

impl Elector {
    async fn run(mut self) {
        let mut last_held: Option<Instant> = None;
        let mut failing = false;
        loop {
            let tried = tokio::time::timeout(
                self.settings.retry_period.max(Duration::from_millis(100)),
                self.try_once(),
            )
            .await;
            let now = Instant::now();
            match tried {
                Ok(Ok(Try::Held)) => {
                    last_held = Some(now);
                    failing = false;
                    self.lead(true);
                }
                Ok(Ok(Try::Other)) => {
                    failing = false;
                    last_held = None;
                    self.lead(false);
                }
                Ok(Err(error)) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(%error, lease = %self.settings.name, "leader election: the lease cannot be read or written; retrying");
                    }
                }
                Err(_) => {
                    if !std::mem::replace(&mut failing, true) {
                        tracing::warn!(lease = %self.settings.name, "leader election: the API server did not answer in time; retrying");
                    }
                }
            }
            if *self.tx.borrow()
                && last_held.is_none_or(|t| now.duration_since(t) > self.settings.renew_deadline)
            {
                tracing::warn!(
                    lease = %self.settings.name,
                    deadline_ms = self.settings.renew_deadline.as_millis() as u64,
                    "leader election: lease not renewed within the deadline; stepping down"
                );
                self.lead(false);
            }
            tokio::time::sleep(self.settings.retry_period).await;
        }
    }

    fn lead(&mut self, leading: bool) {
        let changed = self.tx.send_if_modified(|current| {
            let changed = *current != leading;
            *current = leading;
            changed
        });
        if changed || !std::mem::replace(&mut self.announced, true) {
            if leading {
                tracing::info!(lease = %self.settings.name, identity = %self.settings.identity, "leader election: now the leader (SERVING)");
            } else {
                tracing::info!(lease = %self.settings.name, "leader election: now a follower (NOT_SERVING)");
            }
        }
    }

    async fn try_once(&mut self) -> Result<Try, kube::Error> {
        let me = self.settings.identity.clone();
        let now = Timestamp::now();
        let duration_secs =
            i32::try_from(self.settings.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.settings.name.clone()),
                    namespace: Some(self.settings.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Try::Held),
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(Try::Other),
                Err(error) => Err(error),
            };
        };
        let spec = lease.spec.get_or_insert_with(Default::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let record = (
            holder.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
            lease.metadata.resource_version.clone(),
        );
        let observed_now = Instant::now();
        if self.observed.as_ref().is_none_or(|o| o.record != record) {
            self.observed = Some(Observed {
                record,
                since: observed_now,
            });
        }
        let held_by_me = holder.as_deref() == Some(me.as_str());
        if let Some(other) = &holder
            && !held_by_me
        {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.settings.lease_duration, Duration::from_secs);
            let since = self.observed.as_ref().map_or(observed_now, |o| o.since);
            if observed_now.duration_since(since) < duration {
                tracing::trace!(holder = %other, "leader election: lease held by another replica");
                return Ok(Try::Other);
            }
            tracing::info!(previous = %other, "leader election: the lease expired; taking it over");
        }
        if !held_by_me {
            spec.acquire_time = Some(MicroTime(now));
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
        }
        spec.holder_identity = Some(me);
        spec.lease_duration_seconds = Some(duration_secs);
        spec.renew_time = Some(MicroTime(now));
        // The write carries the resourceVersion read: a concurrent writer makes it fail.
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Try::Held),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Try::Other),
            Err(error) => Err(error),
        }
    }
}
