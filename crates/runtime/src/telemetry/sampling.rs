//! The sampling decision, taken before any span exists: a request that is not sampled costs
//! a header parse and a random number, nothing more. The OpenTelemetry sampler semantics:
//! `always_on` / `always_off`; `traceidratio` keeps a trace when the low 63 bits of its id
//! fall under `ratio × 2⁶³` (the SDK's rule, so every service using it keeps the same
//! traces); `parentbased_*` follows the caller's `sampled` flag when its `traceparent` is
//! valid and applies the root sampler otherwise (to a fresh random id).
//!
//! ```
//! use shepherd_runtime::telemetry::sampling::{Parent, should_sample};
//! use shepherd_runtime::telemetry::{ParentRoot, SamplerKind};
//!
//! let parent = Parent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
//! assert!(parent.is_some_and(|p| p.sampled));
//! let upstream = SamplerKind::ParentBased(ParentRoot::TraceIdRatio(0.1));
//! assert!(should_sample(upstream, parent));
//! assert!(!should_sample(upstream, Parent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00")));
//! assert!(!should_sample(SamplerKind::AlwaysOff, parent));
//! ```

use std::cell::Cell;

use super::settings::{ParentRoot, SamplerKind};

/// The caller's span, from a valid W3C `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parent {
    /// The low 64 bits of the trace id (what ratio sampling reads).
    pub trace_id_low: u64,
    /// The caller's `sampled` flag.
    pub sampled: bool,
}

impl Parent {
    /// `version-traceid-parentid-flags`, lowercase hex; `None` when malformed, an all-zero id,
    /// or version `ff` (W3C Trace Context §3.2).
    pub fn parse(header: &str) -> Option<Parent> {
        let mut parts = header.trim().split('-');
        let version = parts.next()?;
        let trace_id = parts.next()?;
        let parent_id = parts.next()?;
        let flags = parts.next()?;
        let hex = |s: &str, len: usize| {
            s.len() == len
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !hex(version, 2)
            || version == "ff"
            || !hex(trace_id, 32)
            || !hex(parent_id, 16)
            || !hex(flags, 2)
        {
            return None;
        }
        // Version 00 has exactly four fields; later versions may add more.
        if version == "00" && parts.next().is_some() {
            return None;
        }
        if trace_id.bytes().all(|b| b == b'0') || parent_id.bytes().all(|b| b == b'0') {
            return None;
        }
        let trace_id_low = u64::from_str_radix(&trace_id[16..], 16).ok()?;
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Parent {
            trace_id_low,
            sampled: flags & 1 == 1,
        })
    }
}

/// Whether a request with `parent` (the caller's span, if any) is recorded under `sampler`.
pub fn should_sample(sampler: SamplerKind, parent: Option<Parent>) -> bool {
    let low = || parent.map_or_else(random_u64, |p| p.trace_id_low);
    match sampler {
        SamplerKind::AlwaysOn => true,
        SamplerKind::AlwaysOff => false,
        SamplerKind::TraceIdRatio(ratio) => by_ratio(ratio, low()),
        SamplerKind::ParentBased(root) => match parent {
            Some(parent) => parent.sampled,
            None => match root {
                ParentRoot::AlwaysOn => true,
                ParentRoot::AlwaysOff => false,
                ParentRoot::TraceIdRatio(ratio) => by_ratio(ratio, random_u64()),
            },
        },
    }
}

/// The SDK's rule: the low 63 bits under `ratio × 2⁶³`.
fn by_ratio(ratio: f64, trace_id_low: u64) -> bool {
    if ratio >= 1.0 {
        return true;
    }
    let bound = (ratio.max(0.0) * (1u64 << 63) as f64) as u64;
    (trace_id_low >> 1) < bound
}

/// A fast per-thread pseudo-random number (xorshift64*, seeded from std's random hasher
/// keys): ratio sampling of new traces needs a uniform draw, not a secret.
fn random_u64() -> u64 {
    thread_local! {
        static STATE: Cell<u64> = Cell::new({
            use std::hash::{BuildHasher, Hasher};
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(0x9E37_79B9_7F4A_7C15);
            h.finish() | 1
        });
    }
    STATE.with(|state| {
        let mut x = state.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn traceparents_are_read_as_w3c_says() {
        let p = Parent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        assert!(p.sampled);
        assert_eq!(p.trace_id_low, 0xa3ce_929d_0e0e_4736);
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-zz",
        ] {
            assert_eq!(Parent::parse(bad), None, "{bad:?}");
        }
        // A later version may carry more fields.
        assert!(
            Parent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x").is_some()
        );
    }

    #[test]
    fn parent_based_follows_the_caller_and_ratios_match_the_sdk_rule() {
        let sampled = Parent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        let dropped = Parent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
        let pb = SamplerKind::ParentBased(ParentRoot::AlwaysOff);
        assert!(should_sample(pb, sampled));
        assert!(!should_sample(pb, dropped));
        assert!(!should_sample(pb, None));
        assert!(should_sample(
            SamplerKind::ParentBased(ParentRoot::AlwaysOn),
            None
        ));
        // traceidratio ignores the flag and reads the id: 0xa3ce… >> 1 is about 0.64 × 2⁶³.
        assert!(should_sample(SamplerKind::TraceIdRatio(0.7), dropped));
        assert!(!should_sample(SamplerKind::TraceIdRatio(0.6), sampled));
        assert!(!should_sample(SamplerKind::TraceIdRatio(0.0), sampled));
        assert!(should_sample(SamplerKind::TraceIdRatio(1.0), dropped));
    }

    #[test]
    fn new_traces_are_kept_at_the_ratio() {
        let kind = SamplerKind::ParentBased(ParentRoot::TraceIdRatio(0.1));
        let kept = (0..100_000).filter(|_| should_sample(kind, None)).count();
        assert!((9_000..11_000).contains(&kept), "{kept}");
    }
}
