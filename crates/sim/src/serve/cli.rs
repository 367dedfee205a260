//! `shepherd-sim serve`: the command line.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use clap::{Args, ValueEnum};
use shepherd_scheduler_core::kv_events::wire::Encoding;

use crate::engine::EngineConfig;

use super::config::{
    DEFAULT_KV_EVENTS_BUFFER_STEPS, DEFAULT_KV_EVENTS_PORT_BASE, DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MAX_PENDING, DEFAULT_MAX_TOKENS, DEFAULT_MAX_TOKENS_CAP, DEFAULT_MODEL, DEFAULT_PRESET,
    KvEventsConfig,
};
use super::{ServeConfig, ServeError, run};

/// Servers started when neither `--servers` nor `--ports` is given.
pub const DEFAULT_SERVERS: usize = 2;
/// The first port when neither `--port-base` nor `--ports` is given (vLLM's default port).
pub const DEFAULT_PORT_BASE: u16 = 8000;

/// Serve N simulated vLLM servers over HTTP on loopback ports, each running the simulator's
/// engine in real time: OpenAI completions (JSON and SSE), /v1/models, /metrics with vLLM's
/// metric names, /health, /reset_prefix_cache; optionally vLLM's KV-cache events over
/// ZeroMQ. Each response names its server in `x-shepherd-sim-server`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Number of servers, on consecutive ports from --port-base [default: 2].
    #[arg(long)]
    pub servers: Option<usize>,
    /// Port of server 0; server i listens on port-base + i.
    #[arg(long, default_value_t = DEFAULT_PORT_BASE, conflicts_with = "ports")]
    pub port_base: u16,
    /// Explicit ports, one per server (comma-separated; 0 lets the OS pick).
    #[arg(long, value_delimiter = ',')]
    pub ports: Vec<u16>,
    /// Listen address (loopback only: 127.0.0.0/8 or ::1).
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub host: IpAddr,
    /// Engine preset of every server (h100-llama8b, a100-llama8b).
    #[arg(long, default_value = DEFAULT_PRESET)]
    pub preset: String,
    /// Served model name; requests for another model get 404.
    #[arg(long, default_value = DEFAULT_MODEL)]
    pub model: String,
    /// More names the model answers to (repeatable, or comma-separated): vLLM's extra
    /// `--served-model-name`s or LoRA adapters.
    #[arg(long = "alias", value_delimiter = ',')]
    pub aliases: Vec<String>,
    /// Simulated seconds per wall-clock second (2 runs the engines twice as fast as real time).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Override the preset's number of KV-cache blocks (16 tokens each).
    #[arg(long)]
    pub num_gpu_blocks: Option<u32>,
    /// Override the preset's largest batch (vLLM's --max-num-seqs).
    #[arg(long)]
    pub max_num_seqs: Option<u32>,
    /// Output tokens of a request without max_tokens.
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS)]
    pub default_max_tokens: u32,
    /// Largest output per request (larger max_tokens are capped).
    #[arg(long, default_value_t = DEFAULT_MAX_TOKENS_CAP)]
    pub max_tokens_cap: u32,
    /// Longest prompt + output accepted, in tokens.
    #[arg(long, default_value_t = DEFAULT_MAX_MODEL_LEN)]
    pub max_model_len: u32,
    /// Requests one server holds at once before it answers 503.
    #[arg(long, default_value_t = DEFAULT_MAX_PENDING)]
    pub max_pending: usize,
    /// Runtime worker threads (default: available cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Publish KV-cache events as vLLM does (ZeroMQ PUB plus a ROUTER replay socket per
    /// server, topic kv@HOST:PORT@MODEL).
    #[arg(long)]
    pub kv_events: bool,
    /// Port of server 0's KV-event PUB socket: server i publishes on base + 2i and replays
    /// on base + 2i + 1 (0 lets the OS pick).
    #[arg(long, default_value_t = DEFAULT_KV_EVENTS_PORT_BASE, requires = "kv_events")]
    pub kv_events_port_base: u16,
    /// Payload encoding: msgspec array_like (positional, vLLM's older format) or map
    /// (field names, tag under "type").
    #[arg(long, value_enum, default_value_t = KvEventsEncoding::Array, requires = "kv_events")]
    pub kv_events_encoding: KvEventsEncoding,
    /// Batches kept for replay (vLLM's buffer_steps).
    #[arg(long, default_value_t = DEFAULT_KV_EVENTS_BUFFER_STEPS, requires = "kv_events")]
    pub kv_events_buffer_steps: usize,
    /// Replay replies carry the topic before the sequence number, as the newest vLLM sends
    /// them (default: [seq, payload], as older vLLM and SGLang).
    #[arg(long, requires = "kv_events")]
    pub kv_events_replay_topic: bool,
    /// One prefill/decode role per server, comma-separated (`prefill`, `decode`, `both`, ...;
    /// llm-d's `llm-d.ai/role` values); label the endpoints the same way in Shepherd's config.
    #[arg(long, value_delimiter = ',')]
    pub roles: Vec<String>,
    /// Bytes of KV per token read from a remote prefill (default: Llama-3-8B in bf16).
    #[arg(long)]
    pub kv_bytes_per_token: Option<u64>,
    /// Effective bandwidth of the link a remote prefill's KV is read over, GB/s.
    #[arg(long)]
    pub kv_bandwidth_gbps: Option<f64>,
    /// Fixed time per KV transfer, ms.
    #[arg(long)]
    pub kv_latency_ms: Option<f64>,
    /// The routing sidecar gives up on a remote prefill after this many simulated seconds
    /// and serves the request aggregated (default: no limit).
    #[arg(long)]
    pub prefill_timeout_s: Option<f64>,
}

/// `--kv-events-encoding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KvEventsEncoding {
    /// Positional arrays, the tag first (msgspec `array_like=True`).
    Array,
    /// Field-name maps, the tag under `"type"`.
    Map,
}

impl From<KvEventsEncoding> for Encoding {
    fn from(e: KvEventsEncoding) -> Self {
        match e {
            KvEventsEncoding::Array => Encoding::ArrayLike,
            KvEventsEncoding::Map => Encoding::Map,
        }
    }
}

impl ServeArgs {
    /// The configuration these flags describe.
    pub fn to_config(&self) -> Result<ServeConfig, ServeError> {
        let invalid = |option, reason: String| ServeError::Config { option, reason };
        let ports: Vec<u16> = if self.ports.is_empty() {
            let servers = self.servers.unwrap_or(DEFAULT_SERVERS);
            (0..servers)
                .map(|i| {
                    u16::try_from(i)
                        .ok()
                        .and_then(|i| self.port_base.checked_add(i))
                        .ok_or_else(|| {
                            invalid(
                                "port-base",
                                format!("{} + {servers} servers passes port 65535", self.port_base),
                            )
                        })
                })
                .collect::<Result<_, _>>()?
        } else {
            if let Some(servers) = self.servers
                && servers != self.ports.len()
            {
                return Err(invalid(
                    "servers",
                    format!("{servers} servers but {} ports", self.ports.len()),
                ));
            }
            self.ports.clone()
        };
        let mut engine = EngineConfig::preset(&self.preset).ok_or_else(|| {
            invalid(
                "preset",
                format!(
                    "unknown preset `{}` (known: {})",
                    self.preset,
                    EngineConfig::PRESETS.join(", ")
                ),
            )
        })?;
        if let Some(blocks) = self.num_gpu_blocks {
            engine.num_gpu_blocks = blocks;
        }
        if let Some(seqs) = self.max_num_seqs {
            engine.max_num_seqs = seqs;
        }
        let mut config = ServeConfig::new(
            ports
                .into_iter()
                .map(|port| SocketAddr::new(self.host, port))
                .collect(),
        );
        config.engine = engine;
        config.model = self.model.clone();
        config.aliases = self.aliases.clone();
        config.speed = self.speed;
        config.default_max_tokens = self.default_max_tokens;
        config.max_tokens_cap = self.max_tokens_cap;
        config.max_model_len = self.max_model_len;
        config.max_pending = self.max_pending;
        config.roles = self.roles.iter().map(|r| r.trim().to_owned()).collect();
        let t = &mut config.kv_transfer;
        t.bytes_per_token = self.kv_bytes_per_token.unwrap_or(t.bytes_per_token);
        t.bandwidth_gbps = self.kv_bandwidth_gbps.unwrap_or(t.bandwidth_gbps);
        t.latency_ms = self.kv_latency_ms.unwrap_or(t.latency_ms);
        t.prefill_timeout_s = self.prefill_timeout_s.or(t.prefill_timeout_s);
        if self.kv_events {
            config.kv_events = Some(KvEventsConfig {
                port_base: self.kv_events_port_base,
                buffer_steps: self.kv_events_buffer_steps,
                encoding: self.kv_events_encoding.into(),
                replay_topic: self.kv_events_replay_topic,
                ..KvEventsConfig::default()
            });
        }
        config.validate()?;
        Ok(config)
    }

    /// Builds a tokio runtime and serves until Ctrl-C (the `serve` subcommand).
    pub fn run(&self) -> Result<(), ServeError> {
        let config = self.to_config()?;
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        builder.enable_all();
        if let Some(threads) = self.threads {
            builder.worker_threads(threads.max(1));
        }
        let runtime = builder.build().map_err(ServeError::Runtime)?;
        runtime.block_on(run(config))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn config(args: &[&str]) -> Result<ServeConfig, ServeError> {
        let mut argv = vec!["serve"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv).unwrap().serve.to_config()
    }

    #[test]
    fn defaults_match_the_library() {
        let c = config(&[]).unwrap();
        let ports: Vec<u16> = c.addrs.iter().map(SocketAddr::port).collect();
        assert_eq!(ports, [8000, 8001]);
        let library = ServeConfig::new(c.addrs.clone());
        assert_eq!(c, library);
    }

    #[test]
    fn ports_and_port_base() {
        let c = config(&["--servers", "4", "--port-base", "8100"]).unwrap();
        let ports: Vec<u16> = c.addrs.iter().map(SocketAddr::port).collect();
        assert_eq!(ports, [8100, 8101, 8102, 8103]);
        let c = config(&["--ports", "9001,9005"]).unwrap();
        assert_eq!(c.addrs.len(), 2);
        assert!(config(&["--ports", "9001,9005", "--servers", "3"]).is_err());
        assert!(config(&["--servers", "3", "--port-base", "65534"]).is_err());
    }

    #[test]
    fn rejects_non_loopback_and_bad_values() {
        assert!(matches!(
            config(&["--host", "0.0.0.0"]),
            Err(ServeError::NotLoopback(_))
        ));
        assert!(config(&["--host", "::1"]).is_ok());
        assert!(config(&["--speed", "0"]).is_err());
        assert!(config(&["--preset", "tpu"]).is_err());
        let c = config(&["--preset", "a100-llama8b", "--num-gpu-blocks", "100"]).unwrap();
        assert_eq!(c.engine.num_gpu_blocks, 100);
    }

    #[test]
    fn kv_event_flags() {
        assert_eq!(config(&[]).unwrap().kv_events, None);
        let c = config(&["--kv-events"]).unwrap();
        assert_eq!(c.kv_events, Some(KvEventsConfig::default()));
        let kv = c.kv_events.unwrap();
        assert_eq!(kv.ports(0), Some((5557, 5558)));
        assert_eq!(kv.ports(1), Some((5559, 5560)));
        let c = config(&[
            "--kv-events",
            "--kv-events-port-base",
            "0",
            "--kv-events-encoding",
            "map",
            "--kv-events-buffer-steps",
            "5",
            "--kv-events-replay-topic",
        ])
        .unwrap();
        let kv = c.kv_events.unwrap();
        assert_eq!((kv.port_base, kv.buffer_steps), (0, 5));
        assert!(kv.replay_topic);
        assert_eq!(kv.encoding, Encoding::Map);
        assert_eq!(kv.ports(3), Some((0, 0)));
        // The flags need --kv-events; the ports must fit.
        let mut argv = vec!["serve", "--kv-events-port-base", "6000"];
        assert!(Cli::try_parse_from(&argv).is_err());
        argv.push("--kv-events");
        assert!(Cli::try_parse_from(&argv).is_ok());
        assert!(config(&["--kv-events", "--kv-events-port-base", "65534"]).is_err());
    }
}
