use std::time::Duration;

use crate::clock::Timestamp;

/// LoRA adapters an endpoint is serving or waiting to serve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoraState {
    /// Adapters with running requests.
    pub running: Vec<String>,
    /// Adapters with waiting requests.
    pub waiting: Vec<String>,
    /// Most adapters the server can hold at once (0 when unknown).
    pub max_loras: u32,
}

impl LoraState {
    /// Whether `adapter` is running on the endpoint.
    pub fn is_running(&self, adapter: &str) -> bool {
        self.running.iter().any(|a| a == adapter)
    }

    /// Whether `adapter` is waiting on the endpoint.
    pub fn is_waiting(&self, adapter: &str) -> bool {
        self.waiting.iter().any(|a| a == adapter)
    }

    /// Whether the endpoint has room to load another adapter.
    pub fn has_room(&self) -> bool {
        self.max_loras > 0 && (self.running.len() as u32) < self.max_loras
    }
}

/// The latest metrics scraped from one model server.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EndpointMetrics {
    /// Requests waiting in the server's queue.
    pub waiting: u32,
    /// Requests the server is running.
    pub running: u32,
    /// KV-cache utilization in `[0, 1]`.
    pub kv_utilization: f64,
    /// LoRA adapter state.
    pub lora: LoraState,
    /// KV-cache block size in tokens, when known.
    pub block_size: Option<u32>,
    /// Number of KV-cache blocks on the GPU, when known.
    pub num_gpu_blocks: Option<u64>,
}

impl EndpointMetrics {
    /// KV utilization clamped into `[0, 1]` (NaN counts as full).
    pub fn kv_utilization_clamped(&self) -> f64 {
        clamp_kv(self.kv_utilization)
    }
}

/// KV utilization clamped into `[0, 1]` (NaN counts as full).
fn clamp_kv(kv: f64) -> f64 {
    if kv.is_nan() { 1.0 } else { kv.clamp(0.0, 1.0) }
}

/// The numeric part of an endpoint's metrics, read without locks or reference counting: what
/// distribution scorers and the adaptive detector read on every pick or tick.
///
/// It is refreshed by [`Endpoint::set_metrics`](super::Endpoint::set_metrics) field by field,
/// so a reader racing a scrape may see fields from two consecutive scrapes; each field is
/// itself always a value some scrape produced.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoadMetrics {
    /// Requests waiting in the server's queue.
    pub waiting: u32,
    /// Requests the server is running.
    pub running: u32,
    /// KV-cache utilization as scraped (may be garbage: use [`LoadMetrics::kv_utilization_clamped`]).
    pub kv_utilization: f64,
    /// When these metrics were scraped; `None` means never.
    pub scraped_at: Option<Timestamp>,
}

impl LoadMetrics {
    /// Whether these metrics are older than `max_age` at `now` (never-scraped metrics are stale).
    #[inline]
    pub fn is_stale(&self, now: Timestamp, max_age: Duration) -> bool {
        match self.scraped_at {
            None => true,
            // In integer nanoseconds: no `Duration` built per call on the request path.
            Some(t) => u128::from(now.as_nanos().saturating_sub(t.as_nanos())) > max_age.as_nanos(),
        }
    }

    /// KV utilization clamped into `[0, 1]` (NaN counts as full).
    pub fn kv_utilization_clamped(&self) -> f64 {
        clamp_kv(self.kv_utilization)
    }
}

/// Whether an endpoint may be sent new requests.
///
/// A discovery source or an operator sets it ([`Pool::set_health`](super::Pool::set_health));
/// the scheduler never picks an endpoint that is not [`EndpointHealth::Enabled`], whatever the
/// profile's filters say. Requests already in flight there are not affected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum EndpointHealth {
    /// Takes new requests.
    #[default]
    Enabled = 0,
    /// Finishing the requests it has; takes no new ones (it is about to leave the pool).
    Draining = 1,
    /// Takes no new requests (failed health checks, or switched off by an operator).
    Disabled = 2,
}

impl EndpointHealth {
    pub(super) fn from_u8(v: u8) -> Self {
        match v {
            0 => EndpointHealth::Enabled,
            1 => EndpointHealth::Draining,
            _ => EndpointHealth::Disabled,
        }
    }

    /// The lowercase name (`enabled`, `draining`, `disabled`).
    pub fn as_str(self) -> &'static str {
        match self {
            EndpointHealth::Enabled => "enabled",
            EndpointHealth::Draining => "draining",
            EndpointHealth::Disabled => "disabled",
        }
    }
}
