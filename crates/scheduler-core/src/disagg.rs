//! Prefill/decode disaggregation: scheduling one request with two profiles.
//!
//! In a disaggregated pool, some servers prefill prompts and others decode; the prefill
//! server's KV cache is shipped to the decode server, which answers. As upstream's
//! `disagg-profile-handler` does, Shepherd runs the **decode** profile first (always: its pick
//! is the request's destination); then a [`Decider`] looks at that pick (how much of the
//! prompt the decode server is believed to cache, how long the prompt is) and says whether a
//! separate prefill is worth its transfer; if so the **prefill** profile picks the prefill
//! server. The decision then carries both ([`Decision::prefill`](crate::decision::Decision)),
//! and the adapters send the prefill server's `ip:port` to the decode side in
//! [`PREFILL_ENDPOINT_HEADER`], the header llm-d's decode-side routing sidecar reads. When the
//! decider says no, or the prefill profile finds no candidate, the request is served
//! aggregated by the decode server alone.
//!
//! Encode disaggregation (E/P/D, E/PD) adds a third, optional stage for multimodal requests:
//! after the decode pick, when an **encode** profile exists and its own decider approves the
//! request, the encode profile picks the servers that encode the request's media — several
//! when its picker returns several (`maxNumOfEndpoints`; one by default, as upstream) — and
//! then the prefill stage runs as above. The decision carries them
//! ([`Decision::encode`](crate::decision::Decision::encode)) and the adapters send their
//! comma-separated `ip:port` list in [`ENCODER_ENDPOINTS_HEADER`]. An encode profile that finds
//! no server leaves the request unencoded, like a prefill that finds none.
//!
//! Upstream's `prefill-first` stage order ([`StageOrder::PrefillFirst`]) turns the order
//! around: the prefill profile runs first, for every request, whenever it exists (no decider
//! is asked); the decode profile then runs with the prefill pick as its
//! [`PeerEndpoint`], so its plugins (topology affinity) can keep the decode server near the
//! prefill one. A prefill stage that finds no server leaves the request aggregated, as in the
//! default order.
//!
//! Role filters (`decode-filter`, `prefill-filter`, `encode-filter`, from endpoint labels) in
//! each profile keep each stage on its own servers.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::disagg::{Disaggregation, PREFILL_ENDPOINT_HEADER};
//! use shepherd_scheduler_core::plugin::{CycleState, Decider};
//! use shepherd_scheduler_core::prelude::*;
//! # use shepherd_scheduler_core::rng::PickRng;
//! # struct First;
//! # impl Picker for First {
//! #     fn pick(&self, totals: &[f64], count: usize, _: &mut PickRng) -> Vec<usize> {
//! #         (0..totals.len().min(count)).collect()
//! #     }
//! # }
//!
//! /// Disaggregates every request.
//! struct Always;
//! impl Decider for Always {
//!     fn disaggregate(&self, _: &CycleState<'_>, _: &Arc<Endpoint>) -> bool {
//!         true
//!     }
//! }
//!
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["10.0.0.1:8000", "10.0.0.2:8000"]);
//! let scheduler = Scheduler::builder(pool)
//!     .profile(Profile::builder("decode").picker(Arc::new(First)).build())
//!     .profile(Profile::builder("prefill").picker(Arc::new(First)).build())
//!     .disaggregation(Disaggregation::new("decode", "prefill", Some(Arc::new(Always))))
//!     .build()
//!     .unwrap();
//! let d = scheduler.schedule(&InferenceRequest::new("r", "m", Prompt::Text("hi".into()))).unwrap();
//! assert_eq!(d.profile(), "decode");
//! let prefill = d.prefill().unwrap();
//! assert_eq!(prefill.endpoint().address(), "10.0.0.1:8000");
//! assert_eq!(PREFILL_ENDPOINT_HEADER, "x-prefiller-host-port");
//! d.finish(Completion::success(None));
//! ```

use std::fmt;
use std::sync::Arc;

use crate::decision::Breakdown;
use crate::endpoint::Endpoint;
use crate::plugin::Decider;

/// The request header carrying the prefill server's `ip:port` to the decode side (llm-d's
/// routing sidecar reads it).
pub const PREFILL_ENDPOINT_HEADER: &str = "x-prefiller-host-port";

/// The request header carrying the encode servers' comma-separated `ip:port` list to the
/// decode side (llm-d's routing sidecar reads it).
pub const ENCODER_ENDPOINTS_HEADER: &str = "x-encoder-hosts-ports";

/// The request header naming a server that holds more of the prompt's KV cache than the one
/// that computes it (`ip:port`), for llm-d's routing sidecar to pull those blocks from over
/// the P2P connector instead of recomputing them. A plugin sets it by leaving a
/// [`KvCacheSource`] in its stage's cycle (`p2p-source-producer`).
pub const KV_CACHE_SOURCE_HEADER: &str = "x-kv-cache-source-host-port";

/// The server to pull the prompt's cached KV blocks from, as a pick hook leaves it in a
/// stage's [`Extensions`](crate::plugin::Extensions); the decision keeps the one of the stage
/// that computes the prompt (the prefill stage when there is one, else the decode stage), and
/// the adapters send it in [`KV_CACHE_SOURCE_HEADER`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvCacheSource(pub String);

/// The encode profile's name when a profile handler names none (upstream's default).
pub const DEFAULT_ENCODE_PROFILE: &str = "encode";

/// Encode servers picked when the encode profile's picker sets no `maxNumOfEndpoints`
/// (upstream's default picker count).
pub const DEFAULT_ENCODE_ENDPOINTS: usize = 1;

/// Suffix of an encode stage's request id: its hooks see `<id>:encode`.
pub const ENCODE_ID_SUFFIX: &str = ":encode";

/// Suffix of a prefill stage's request id: its hooks see `<id>:prefill`, so per-request state
/// of the two stages never collides.
pub const PREFILL_ID_SUFFIX: &str = ":prefill";

/// The order of a disaggregated request's stages (upstream's `stageOrder`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StageOrder {
    /// Decode, then encode and prefill when their deciders say so (upstream's default).
    #[default]
    DecodeFirst,
    /// Prefill (whenever its profile exists), then decode with the prefill pick as its peer;
    /// encode when its decider says so.
    PrefillFirst,
}

impl StageOrder {
    /// Upstream's spelling: `decode-first` or `prefill-first`.
    pub fn as_str(self) -> &'static str {
        match self {
            StageOrder::DecodeFirst => "decode-first",
            StageOrder::PrefillFirst => "prefill-first",
        }
    }

    /// Parses upstream's spellings: case, `-` and `_` ignored; `decode-first`, `decode` or
    /// empty, `prefill-first` or `prefill` (`None` for anything else).
    ///
    /// ```
    /// use shepherd_scheduler_core::disagg::StageOrder;
    /// assert_eq!(StageOrder::parse("PrefillFirst"), Some(StageOrder::PrefillFirst));
    /// assert_eq!(StageOrder::parse("decode_first"), Some(StageOrder::DecodeFirst));
    /// assert_eq!(StageOrder::parse(""), Some(StageOrder::DecodeFirst));
    /// assert_eq!(StageOrder::parse("sideways"), None);
    /// ```
    pub fn parse(text: &str) -> Option<StageOrder> {
        let folded: String = text
            .chars()
            .filter(|c| *c != '-' && *c != '_')
            .collect::<String>()
            .to_ascii_lowercase();
        match folded.as_str() {
            "" | "decodefirst" | "decode" => Some(StageOrder::DecodeFirst),
            "prefillfirst" | "prefill" => Some(StageOrder::PrefillFirst),
            _ => None,
        }
    }
}

/// How a scheduler disaggregates: the profiles by name, and the deciders (none: never).
#[derive(Clone)]
pub struct Disaggregation {
    pub(crate) stage_order: StageOrder,
    pub(crate) decode_profile: String,
    pub(crate) prefill_profile: String,
    pub(crate) decider: Option<Arc<dyn Decider>>,
    pub(crate) encode_profile: String,
    pub(crate) encode_decider: Option<Arc<dyn Decider>>,
}

impl Disaggregation {
    /// Decode with `decode_profile`, prefill with `prefill_profile` when `decider` says so.
    pub fn new(
        decode_profile: impl Into<String>,
        prefill_profile: impl Into<String>,
        decider: Option<Arc<dyn Decider>>,
    ) -> Self {
        Disaggregation {
            stage_order: StageOrder::DecodeFirst,
            decode_profile: decode_profile.into(),
            prefill_profile: prefill_profile.into(),
            decider,
            encode_profile: DEFAULT_ENCODE_PROFILE.into(),
            encode_decider: None,
        }
    }

    /// Also encodes, with `encode_profile`, the requests `decider` approves (none: never).
    /// The encode stage runs only when the scheduler has a profile of that name, as upstream
    /// skips a stage whose profile is not configured.
    pub fn with_encode(
        mut self,
        encode_profile: impl Into<String>,
        decider: Option<Arc<dyn Decider>>,
    ) -> Self {
        self.encode_profile = encode_profile.into();
        self.encode_decider = decider;
        self
    }

    /// Runs the stages in `order`. With [`StageOrder::PrefillFirst`] the prefill profile runs
    /// first whenever it exists, and no prefill decider is asked.
    pub fn with_stage_order(mut self, order: StageOrder) -> Self {
        self.stage_order = order;
        self
    }

    /// The stage order.
    pub fn stage_order(&self) -> StageOrder {
        self.stage_order
    }

    /// The encode profile's name.
    pub fn encode_profile(&self) -> &str {
        &self.encode_profile
    }

    /// Whether an encode decider is set (encode disaggregation is on).
    pub fn encodes(&self) -> bool {
        self.encode_decider.is_some()
    }

    /// The decode profile's name.
    pub fn decode_profile(&self) -> &str {
        &self.decode_profile
    }

    /// The prefill profile's name.
    pub fn prefill_profile(&self) -> &str {
        &self.prefill_profile
    }
}

impl fmt::Debug for Disaggregation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Disaggregation")
            .field("stage_order", &self.stage_order)
            .field("decode_profile", &self.decode_profile)
            .field("prefill_profile", &self.prefill_profile)
            .field("decider", &self.decider.is_some())
            .field("encode_profile", &self.encode_profile)
            .field("encode_decider", &self.encode_decider.is_some())
            .finish()
    }
}

/// A profile handler's configuration as a plugin declares it (upstream's
/// `disagg-profile-handler`): profile names and the decider's plugin name, resolved when the
/// scheduler is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileHandlerSpec {
    /// The decode profile.
    pub decode_profile: String,
    /// The prefill profile.
    pub prefill_profile: String,
    /// The prefill decider's plugin name (none: P/D disabled).
    pub prefill_decider: Option<String>,
    /// The encode profile (upstream's default: `encode`).
    pub encode_profile: String,
    /// The encode decider's plugin name (none: encode disaggregation disabled).
    pub encode_decider: Option<String>,
    /// The stage order.
    pub stage_order: StageOrder,
}

/// The endpoint an earlier stage picked, as a later stage's cycle carries it in its
/// [`Extensions`](crate::plugin::Extensions) (upstream's `peer-endpoint` request attribute,
/// which its `disagg-profile-handler` publishes before running the later profile): the decode
/// pick in the encode and prefill stages (`decode-first`), the prefill pick in the decode
/// stage (`prefill-first`). What the topology-affinity plugins compare candidates with.
#[derive(Debug, Clone)]
pub struct PeerEndpoint(pub Arc<Endpoint>);

/// The prefill stage of a disaggregated decision: the server that prefills, and why.
#[derive(Debug)]
pub struct PrefillStage {
    pub(crate) endpoint: Arc<Endpoint>,
    pub(crate) kv_cache_source: Option<String>,
    /// Every prefill scorer's score for every prefill candidate.
    pub breakdown: Breakdown,
}

impl PrefillStage {
    /// The prefill server.
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        &self.endpoint
    }
}

/// The encode stage of a disaggregated decision: the servers that encode the request's media,
/// and why.
#[derive(Debug)]
pub struct EncodeStage {
    pub(crate) endpoints: Vec<Arc<Endpoint>>,
    /// Every encode scorer's score for every encode candidate.
    pub breakdown: Breakdown,
}

impl EncodeStage {
    /// The encode servers, best first.
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints
    }

    /// `ip:port[,ip:port...]`: the value of [`ENCODER_ENDPOINTS_HEADER`].
    pub fn header_value(&self) -> String {
        let mut out = String::new();
        for (i, e) in self.endpoints.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(e.address());
        }
        out
    }
}
