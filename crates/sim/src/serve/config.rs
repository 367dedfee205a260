//! What the simulated servers serve, and how fast.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use shepherd_scheduler_core::kv_events::wire::Encoding;

use crate::engine::{EngineConfig, KvTransfer};
use crate::workload::KNOWN_ROLES;

use super::ServeError;

/// The model name served by default (what vLLM reports for `--model meta-llama/Llama-3.1-8B-Instruct`).
pub const DEFAULT_MODEL: &str = "meta-llama/Llama-3.1-8B-Instruct";
/// The engine preset used by default (see [`EngineConfig::PRESETS`]).
pub const DEFAULT_PRESET: &str = "h100-llama8b";
/// Output tokens of a request that gives no `max_tokens`.
pub const DEFAULT_MAX_TOKENS: u32 = 16;
/// Largest output a request gets; larger `max_tokens` are capped to it.
pub const DEFAULT_MAX_TOKENS_CAP: u32 = 4096;
/// Longest prompt plus output accepted, in tokens (Llama 3.1's context length).
pub const DEFAULT_MAX_MODEL_LEN: u32 = 131_072;
/// Requests one server holds at once (queued, running or being answered) before it answers 503.
pub const DEFAULT_MAX_PENDING: usize = 1024;
/// Slowest speed factor accepted.
pub const MIN_SPEED: f64 = 1e-3;
/// Fastest speed factor accepted.
pub const MAX_SPEED: f64 = 1e6;
/// Largest request body accepted, in bytes (the core parser's default limit).
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// The first KV-event port by default: vLLM's default publisher endpoint is `tcp://*:5557`.
pub const DEFAULT_KV_EVENTS_PORT_BASE: u16 = 5557;
/// Batches kept for replay by default (vLLM's `buffer_steps`).
pub const DEFAULT_KV_EVENTS_BUFFER_STEPS: usize = 10_000;
/// Batches waiting between an engine and its publisher by default before new ones are dropped
/// (vLLM's `max_queue_size`).
pub const DEFAULT_KV_EVENTS_QUEUE: usize = 100_000;
/// Largest publisher queue accepted.
const MAX_KV_EVENTS_QUEUE: usize = 1 << 24;

/// KV-cache event publishing, as vLLM's `ZmqEventPublisher` does it (`--kv-events-config`
/// with `publisher: zmq`, a replay endpoint, `buffer_steps`).
///
/// Server `i` binds a ZeroMQ PUB socket on `port_base + 2i` and a ROUTER replay socket on
/// `port_base + 2i + 1`, on the host of its HTTP address; `port_base` 0 lets the OS pick
/// every port. Its topic is `kv@<ip:port of its HTTP address>@<model>`.
///
/// ```
/// use shepherd_sim::serve::{KvEventsConfig, ServeConfig};
///
/// let mut config = ServeConfig::ephemeral(2);
/// config.kv_events = Some(KvEventsConfig::ephemeral()); // PUB and replay ports picked by the OS
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KvEventsConfig {
    /// Port of server 0's PUB socket; 0 lets the OS pick every port.
    pub port_base: u16,
    /// Batches kept for replay (0 keeps none: a replay only gets the end marker).
    pub buffer_steps: usize,
    /// How payloads are encoded: msgspec `array_like` (vLLM before the switch to maps, the
    /// default) or field-name maps.
    pub encoding: Encoding,
    /// Batches waiting for the publisher before new ones are dropped (and counted).
    pub queue_capacity: usize,
    /// Replay replies carry the topic before the sequence number, as the newest vLLM sends
    /// them (`[topic, seq, payload]`, the end marker `[empty, -1, empty]`); without, they are
    /// `[seq, payload]` and `[-1, empty]`, as older vLLM and SGLang send them (the default).
    pub replay_topic: bool,
}

impl Default for KvEventsConfig {
    /// The CLI's defaults: ports from 5557, 10,000 batches for replay, array-like payloads.
    fn default() -> Self {
        KvEventsConfig {
            port_base: DEFAULT_KV_EVENTS_PORT_BASE,
            buffer_steps: DEFAULT_KV_EVENTS_BUFFER_STEPS,
            encoding: Encoding::ArrayLike,
            queue_capacity: DEFAULT_KV_EVENTS_QUEUE,
            replay_topic: false,
        }
    }
}

impl KvEventsConfig {
    /// The defaults, with every port picked by the OS (for tests).
    pub fn ephemeral() -> Self {
        KvEventsConfig {
            port_base: 0,
            ..KvEventsConfig::default()
        }
    }

    /// The PUB and replay ports of server `index` (both 0 when the OS picks), or `None` when
    /// they pass port 65535.
    pub fn ports(&self, index: usize) -> Option<(u16, u16)> {
        if self.port_base == 0 {
            return Some((0, 0));
        }
        let publish = u16::try_from(index)
            .ok()
            .and_then(|i| i.checked_mul(2))
            .and_then(|offset| self.port_base.checked_add(offset))?;
        Some((publish, publish.checked_add(1)?))
    }
}

/// Everything [`spawn`](super::spawn) needs. The defaults are the CLI's defaults.
///
/// ```
/// use shepherd_sim::serve::ServeConfig;
///
/// let mut config = ServeConfig::ephemeral(2); // two servers on 127.0.0.1, ports picked by the OS
/// config.speed = 20.0; // simulated time runs 20 times faster than the wall clock
/// assert!(config.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ServeConfig {
    /// One listen address per server, in server order (loopback only; port 0 lets the OS pick).
    pub addrs: Vec<SocketAddr>,
    /// The engine of every server.
    pub engine: EngineConfig,
    /// The model name served; requests for any other model (but [`Self::aliases`]) get 404.
    pub model: String,
    /// More names the same model answers to (vLLM's extra `--served-model-name`s, or LoRA
    /// adapters): a request for one is served, and its answer names the model it asked for.
    pub aliases: Vec<String>,
    /// Simulated seconds per wall-clock second: 2 runs the engines twice as fast as real time.
    pub speed: f64,
    /// Requests one server holds at once before it answers 503.
    pub max_pending: usize,
    /// Output tokens of a request that gives no `max_tokens`.
    pub default_max_tokens: u32,
    /// Largest output a request gets (larger `max_tokens` are capped).
    pub max_tokens_cap: u32,
    /// Longest prompt plus output accepted, in tokens; longer requests get 400.
    pub max_model_len: u32,
    /// Largest request body accepted, in bytes; larger bodies get 413.
    pub max_body_bytes: usize,
    /// KV-cache event publishing over ZeroMQ; `None` (the default) publishes nothing.
    pub kv_events: Option<KvEventsConfig>,
    /// Server `i`'s prefill/decode role (`llm-d.ai/role` values: `prefill`, `decode`, `both`,
    /// ...), or empty: every server does both. A prefill-only server has no routing sidecar
    /// (it ignores `x-prefiller-host-port`); a decode-only server refuses to prefill for a
    /// remote decode (`kv_transfer_params.do_remote_decode`).
    pub roles: Vec<String>,
    /// How long reading a remote prefill's KV takes (and the sidecar's prefill timeout).
    pub kv_transfer: KvTransfer,
}

impl ServeConfig {
    /// Servers listening on `addrs`, with every other setting at its default.
    pub fn new(addrs: Vec<SocketAddr>) -> Self {
        let engine =
            EngineConfig::preset(DEFAULT_PRESET).unwrap_or_else(EngineConfig::h100_llama8b);
        ServeConfig {
            addrs,
            engine,
            model: DEFAULT_MODEL.to_owned(),
            aliases: Vec::new(),
            speed: 1.0,
            max_pending: DEFAULT_MAX_PENDING,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            max_tokens_cap: DEFAULT_MAX_TOKENS_CAP,
            max_model_len: DEFAULT_MAX_MODEL_LEN,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            kv_events: None,
            roles: Vec::new(),
            kv_transfer: KvTransfer::default(),
        }
    }

    /// Whether `model` is served: the model or one of its aliases.
    pub fn serves(&self, model: &str) -> bool {
        model == self.model || self.aliases.iter().any(|a| a == model)
    }

    /// Server `index`'s role, when roles are given.
    pub fn role(&self, index: usize) -> Option<&str> {
        self.roles.get(index).map(String::as_str)
    }

    /// Whether server `index` has a routing sidecar: every server but prefill-only ones.
    pub fn has_sidecar(&self, index: usize) -> bool {
        !matches!(
            self.role(index),
            Some("prefill" | "encode-prefill" | "encode")
        )
    }

    /// Whether server `index` prefills for a remote decode: every server but decode-only ones.
    pub fn prefills_for_remote(&self, index: usize) -> bool {
        !matches!(self.role(index), Some("decode" | "encode"))
    }

    /// `servers` servers on 127.0.0.1, each on a port the OS picks (for tests).
    pub fn ephemeral(servers: usize) -> Self {
        let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);
        ServeConfig::new(vec![any; servers])
    }

    /// Checks every setting: at least one server, loopback addresses, a positive finite
    /// speed, non-zero limits.
    pub fn validate(&self) -> Result<(), ServeError> {
        let invalid = |option, reason: &str| {
            Err(ServeError::Config {
                option,
                reason: reason.to_owned(),
            })
        };
        if self.addrs.is_empty() {
            return invalid("servers", "at least one server is needed");
        }
        if let Some(addr) = self.addrs.iter().find(|a| !a.ip().is_loopback()) {
            return Err(ServeError::NotLoopback(*addr));
        }
        if !(MIN_SPEED..=MAX_SPEED).contains(&self.speed) {
            return invalid("speed", "must be between 0.001 and 1000000");
        }
        if self.model.is_empty() {
            return invalid("model", "must not be empty");
        }
        if self.max_pending == 0 {
            return invalid("max-pending", "must be at least 1");
        }
        if self.default_max_tokens == 0 || self.max_tokens_cap == 0 {
            return invalid("max-tokens", "output limits must be at least 1 token");
        }
        if self.max_model_len < 2 {
            return invalid("max-model-len", "must be at least 2 tokens");
        }
        if self.engine.num_gpu_blocks == 0 || self.engine.block_size == 0 {
            return invalid(
                "num-gpu-blocks",
                "the KV cache must have at least one block",
            );
        }
        if !self.roles.is_empty() && self.roles.len() != self.addrs.len() {
            return Err(ServeError::Config {
                option: "roles",
                reason: format!(
                    "{} roles for {} servers: give one per server",
                    self.roles.len(),
                    self.addrs.len()
                ),
            });
        }
        if let Some(r) = self
            .roles
            .iter()
            .find(|r| !KNOWN_ROLES.contains(&r.as_str()))
        {
            return Err(ServeError::Config {
                option: "roles",
                reason: format!("unknown role `{r}` (known: {})", KNOWN_ROLES.join(", ")),
            });
        }
        let t = &self.kv_transfer;
        if t.bytes_per_token == 0
            || !(t.bandwidth_gbps.is_finite() && t.bandwidth_gbps > 0.0)
            || !(t.latency_ms.is_finite() && t.latency_ms >= 0.0)
            || t.prefill_timeout_s
                .is_some_and(|s| !(s.is_finite() && s > 0.0))
        {
            return invalid(
                "kv-transfer",
                "bytes per token and bandwidth must be positive, latency and timeout finite and not negative",
            );
        }
        if let Some(kv) = &self.kv_events {
            if kv.ports(self.addrs.len().saturating_sub(1)).is_none() {
                return Err(ServeError::Config {
                    option: "kv-events-port-base",
                    reason: format!(
                        "{} + 2 ports for each of {} servers passes port 65535",
                        kv.port_base,
                        self.addrs.len()
                    ),
                });
            }
            if !(1..=MAX_KV_EVENTS_QUEUE).contains(&kv.queue_capacity) {
                return invalid("kv-events-queue", "must be between 1 and 16777216");
            }
        }
        Ok(())
    }
}
