//! Moving a prompt's KV cache from a prefill server to a decode server: how many bytes one
//! token's KV takes, and how long a transfer over the link between servers lasts.
//!
//! A transfer of `tokens` tokens takes
//!
//! ```text
//! latency + tokens × bytes_per_token / bandwidth
//! ```
//!
//! - `bytes_per_token`: 2 (K and V) × layers × KV heads × head dim × bytes per element. For
//!   Llama-3-8B in bf16 (32 layers, 8 KV heads of dim 128, grouped-query attention) that is
//!   2 × 32 × 8 × 128 × 2 = 131 072 B (128 KiB) per token ([`ModelShape::llama3_8b`]; both
//!   hardware presets serve that model). A scenario may set it directly.
//! - `bandwidth`: 25 GB/s by default, an *effective* figure for a NIXL/UCX transfer over one
//!   400 Gb/s RDMA NIC per GPU (50 GB/s line rate, about half reached for the many
//!   medium-sized block copies of a paged cache); NVLink within a node is an order of
//!   magnitude faster, TCP an order slower. This is an assumption, not a measurement.
//! - `latency`: 1 ms per transfer by default (the decode side's request for the blocks, the
//!   connector's handshake and completion notification), also an assumption.
//!
//! At the defaults an 8k-token prompt's KV (1 GiB) takes 1 + 43 = 44 ms, against about
//! 0.2 s of prefill on the simulated H100: the transfer is cheap next to the compute it moves,
//! but not free (a 500-token prompt's 3.6 ms is over a quarter of its 13 ms prefill).
//!
//! ```
//! use shepherd_sim::engine::KvTransfer;
//!
//! let link = KvTransfer::default();
//! assert_eq!(link.bytes_per_token, 131_072);
//! // 1 ms + 8192 × 128 KiB / 25 GB/s
//! let ns = link.transfer_nanos(8192);
//! assert!((43_900_000..44_000_000).contains(&ns), "{ns}");
//! assert_eq!(link.transfer_nanos(0), 0);
//! ```

use serde::{Deserialize, Serialize};

/// The shape of a model's KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelShape {
    /// Transformer layers.
    pub layers: u32,
    /// Key/value heads per layer (fewer than query heads with grouped-query attention).
    pub kv_heads: u32,
    /// Dimension of one head.
    pub head_dim: u32,
    /// Bytes per cached element (2 for bf16/fp16, 1 for fp8).
    pub bytes_per_element: u32,
}

impl ModelShape {
    /// Llama-3-8B in bf16: 32 layers, 8 KV heads of dimension 128 (its `config.json`).
    pub const fn llama3_8b() -> Self {
        ModelShape {
            layers: 32,
            kv_heads: 8,
            head_dim: 128,
            bytes_per_element: 2,
        }
    }

    /// Bytes of K and V for one token across all layers.
    pub const fn kv_bytes_per_token(&self) -> u64 {
        2 * self.layers as u64
            * self.kv_heads as u64
            * self.head_dim as u64
            * self.bytes_per_element as u64
    }
}

/// The KV transfer model (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvTransfer {
    /// Bytes of KV per token.
    pub bytes_per_token: u64,
    /// Effective link bandwidth, GB/s (10⁹ bytes per second).
    pub bandwidth_gbps: f64,
    /// Fixed time per transfer, ms.
    pub latency_ms: f64,
    /// A prefill still unfinished this long after it reached the prefill server's engine is
    /// abandoned and the request served aggregated by its decode server, seconds (`None`:
    /// never; only the request's own timeout applies).
    pub prefill_timeout_s: Option<f64>,
}

impl Default for KvTransfer {
    fn default() -> Self {
        KvTransfer {
            bytes_per_token: ModelShape::llama3_8b().kv_bytes_per_token(),
            bandwidth_gbps: 25.0,
            latency_ms: 1.0,
            prefill_timeout_s: None,
        }
    }
}

impl KvTransfer {
    /// The model for hardware preset `name`: both presets serve Llama-3-8B.
    pub fn for_hardware(_name: &str) -> Self {
        KvTransfer::default()
    }

    /// How long moving the KV of `tokens` tokens takes, ns (0 for none: nothing to move, no
    /// transfer).
    pub fn transfer_nanos(&self, tokens: u32) -> u64 {
        if tokens == 0 {
            return 0;
        }
        let bytes = f64::from(tokens) * self.bytes_per_token as f64;
        let ns = self.latency_ms * 1e6 + bytes / self.bandwidth_gbps;
        if ns.is_finite() && ns > 0.0 {
            ns.round() as u64
        } else {
            0
        }
    }
}

/// The `kvTransfer` section of a scenario, as written; unset fields keep the hardware's
/// defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KvTransferSpec {
    /// Bytes of KV per token.
    pub bytes_per_token: Option<u64>,
    /// Effective link bandwidth, GB/s.
    #[serde(rename = "bandwidthGBps")]
    pub bandwidth_gbps: Option<f64>,
    /// Fixed time per transfer, ms.
    pub latency_ms: Option<f64>,
    /// Prefill timeout, seconds.
    pub prefill_timeout_s: Option<f64>,
}

impl KvTransferSpec {
    /// `base` with this section's fields applied; `Err((field, reason))` for a bad value.
    pub fn apply(&self, base: KvTransfer) -> Result<KvTransfer, (&'static str, &'static str)> {
        let mut out = base;
        if let Some(b) = self.bytes_per_token {
            if b == 0 {
                return Err(("bytesPerToken", "must be > 0"));
            }
            out.bytes_per_token = b;
        }
        if let Some(b) = self.bandwidth_gbps {
            if !(b.is_finite() && b > 0.0) {
                return Err(("bandwidthGBps", "must be > 0"));
            }
            out.bandwidth_gbps = b;
        }
        if let Some(l) = self.latency_ms {
            if !(l.is_finite() && l >= 0.0) {
                return Err(("latencyMs", "must be ≥ 0"));
            }
            out.latency_ms = l;
        }
        if let Some(t) = self.prefill_timeout_s {
            if !(t.is_finite() && t > 0.0) {
                return Err(("prefillTimeoutS", "must be > 0"));
            }
            out.prefill_timeout_s = Some(t);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama3_8b_takes_128_kib_per_token() {
        assert_eq!(ModelShape::llama3_8b().kv_bytes_per_token(), 131_072);
    }

    #[test]
    fn a_transfer_is_latency_plus_bytes_over_bandwidth() {
        let link = KvTransfer {
            bytes_per_token: 1000,
            bandwidth_gbps: 1.0,
            latency_ms: 2.0,
            prefill_timeout_s: None,
        };
        // 1 GB/s is one byte per ns.
        assert_eq!(link.transfer_nanos(10), 2_000_000 + 10_000);
        assert_eq!(link.transfer_nanos(0), 0);
    }

    #[test]
    fn the_section_overrides_and_refuses_bad_values() {
        let spec = KvTransferSpec {
            bandwidth_gbps: Some(100.0),
            ..Default::default()
        };
        let link = spec.apply(KvTransfer::default()).unwrap();
        assert_eq!(link.bandwidth_gbps, 100.0);
        assert_eq!(link.latency_ms, 1.0);
        let bad = KvTransferSpec {
            bandwidth_gbps: Some(0.0),
            ..Default::default()
        };
        assert_eq!(
            bad.apply(KvTransfer::default()).unwrap_err().0,
            "bandwidthGBps"
        );
    }
}
