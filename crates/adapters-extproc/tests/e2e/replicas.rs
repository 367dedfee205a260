//! What the tests with several `shepherd-epp` replicas share: their precise-mode policy, and
//! waiting on a replica's metrics.

use super::*;

/// Precise prefix matching (KV events) plus in-flight load: a policy whose index is the same
/// in every replica.
pub const PRECISE_POLICY: &str = "plugins:
- type: precise-prefix-cache-producer
- type: prefix-cache-scorer
  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}
- type: active-request-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - {pluginRef: prefix-cache-scorer, weight: 3}
  - {pluginRef: active-request-scorer, weight: 1}
  - pluginRef: max-score-picker
";

/// Blocks the precise producer learnt from the servers' `BlockStored` events.
pub const STORED: &str =
    "shepherd_kv_events_stored_blocks_total{plugin=\"precise-prefix-cache-producer\"}";

impl Stack {
    /// Every replica: the first, then the others.
    pub fn epps(&self) -> Vec<&Epp> {
        std::iter::once(&self.epp).chain(&self.more_epps).collect()
    }

    /// Waits until `series` on `epp`'s metrics reaches `at_least` (10 s at most).
    pub async fn wait_metric(&self, epp: &Epp, series: &str, at_least: f64) {
        for _ in 0..400 {
            if sample(&self.metrics_of(epp).await, series) >= at_least {
                return;
            }
            sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "{series} never reached {at_least}:\n{}",
            self.metrics_of(epp).await
        );
    }

    /// Routes `prompt` through `listener`, then waits until every replica but the one that
    /// picked it has received index keys from a peer since (10 s at most): the pick has
    /// reached them, however loaded the machine. The server that answered.
    pub async fn routed_and_shared(&self, listener: &str, prompt: &str) -> String {
        const RECEIVED: &str = "shepherd_replicas_index_keys_received_total";
        let mut before = Vec::new();
        for epp in self.epps() {
            before.push(sample(&self.metrics_of(epp).await, RECEIVED));
        }
        let served = self.routed(listener, prompt).await;
        let others = self.epps().len() - 1;
        for _ in 0..400 {
            let mut grown = 0;
            for (epp, was) in self.epps().into_iter().zip(&before) {
                if sample(&self.metrics_of(epp).await, RECEIVED) > *was {
                    grown += 1;
                }
            }
            if grown >= others {
                return served;
            }
            sleep(Duration::from_millis(25)).await;
        }
        panic!("the first pick never reached {others} replicas");
    }

    /// The sum over the servers of `per_endpoint` (a gauge with an `endpoint` label) on
    /// `epp`'s metrics.
    pub async fn endpoint_sum(&self, epp: &Epp, per_endpoint: &str) -> f64 {
        let metrics = self.metrics_of(epp).await;
        (0..self.sims.len())
            .map(|i| {
                let series = format!("{per_endpoint}{{endpoint=\"{}\"}}", self.server(i));
                sample(&metrics, &series)
            })
            .sum()
    }

    /// Waits until every replica sees its peers in the exchange, and, in precise mode
    /// (`kv_events`), is subscribed to every server's KV events.
    pub async fn wait_replicas_ready(&self, kv_events: bool) {
        let peers = self.epps().len() as f64 - 1.0;
        for epp in self.epps() {
            if kv_events {
                let servers = self.sims.len() as f64;
                self.wait_metric(epp, "shepherd_kv_events_connected_publishers", servers)
                    .await;
            }
            self.wait_metric(epp, "shepherd_replicas_live_peers", peers)
                .await;
        }
    }

    /// Waits until every replica counts at least one of the others' requests in flight.
    pub async fn wait_peer_load(&self) {
        for epp in self.epps() {
            let mut seen = 0.0;
            for _ in 0..400 {
                seen = self
                    .endpoint_sum(epp, "shepherd_endpoint_peer_in_flight_requests")
                    .await;
                if seen >= 1.0 {
                    break;
                }
                sleep(Duration::from_millis(10)).await;
            }
            assert!(seen >= 1.0, "{}", self.metrics_of(epp).await);
        }
    }

    /// Has simulated server `index` compute `prompt` (straight, not through Envoy), then waits
    /// until every replica's precise index holds its blocks (at least 40).
    pub async fn hold_on_server(&self, index: usize, prompt: &str) {
        let response = self
            .http
            .post(format!("http://{}/v1/completions", self.server(index)))
            .json(&serde_json::json!({"model": MODEL, "prompt": prompt, "max_tokens": 2}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.bytes().await.unwrap();
        for epp in self.epps() {
            self.wait_metric(epp, STORED, 40.0).await;
        }
    }
}
