//! Per-mode curve settings: the Richards curve parameters and the share range.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::error::AdaptiveError;

/// One end of a mode's Distribution-share range: a fixed fraction of the budget, or the share
/// the profile's configured weights give Distribution scorers (written `configured`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ShareBound {
    /// The profile's configured Distribution share: Σ Distribution weights / (Σ Affinity +
    /// Σ Distribution weights).
    Configured,
    /// A fixed fraction of the budget, in `[0, 1]`.
    Fixed(f64),
}

impl ShareBound {
    /// The bound as a number, given the profile's configured Distribution share.
    pub fn resolve(self, configured_share: f64) -> f64 {
        match self {
            ShareBound::Configured => configured_share,
            ShareBound::Fixed(v) => v,
        }
    }

    pub(crate) fn validate(self, field: &'static str) -> Result<(), AdaptiveError> {
        match self {
            ShareBound::Configured => Ok(()),
            ShareBound::Fixed(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Ok(()),
            ShareBound::Fixed(v) => Err(AdaptiveError::OutOfRange {
                field,
                value: v,
                expected: "a number in [0, 1] or `configured`",
            }),
        }
    }
}

impl fmt::Display for ShareBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShareBound::Configured => f.write_str("configured"),
            ShareBound::Fixed(v) => write!(f, "{v}"),
        }
    }
}

impl Serialize for ShareBound {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ShareBound::Configured => serializer.serialize_str("configured"),
            ShareBound::Fixed(v) => serializer.serialize_f64(*v),
        }
    }
}

impl<'de> Deserialize<'de> for ShareBound {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BoundVisitor;
        impl Visitor<'_> for BoundVisitor {
            type Value = ShareBound;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number in [0, 1] or the string `configured`")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ShareBound, E> {
                Ok(ShareBound::Fixed(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ShareBound, E> {
                Ok(ShareBound::Fixed(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ShareBound, E> {
                Ok(ShareBound::Fixed(v as f64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ShareBound, E> {
                if v == "configured" {
                    Ok(ShareBound::Configured)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        deserializer.deserialize_any(BoundVisitor)
    }
}

/// How one mode maps the smoothed signal r ∈ [0, 1] to the Distribution share of the weight
/// budget: share(r) = min + (max − min) · σ̂(r), where σ̂ is the generalized logistic
/// (Richards) curve σ(r) = 1 / (1 + Q·e^(−k(r − r₀)))^(1/ν), rescaled so that σ̂(0) = 0 and
/// σ̂(1) = 1. The share is therefore exactly `minShare` at r = 0, exactly `maxShare` at r = 1,
/// and non-decreasing in between.
///
/// When a mode section is given in YAML, the fields it leaves out keep that mode's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModeCurve {
    /// Share at r = 0. Steady default `configured`; burst default 0.70.
    pub min_share: ShareBound,
    /// Share at r = 1 (raised to `minShare` if it resolves lower). Steady default 0.75; burst
    /// default 0.90.
    pub max_share: ShareBound,
    /// r₀, the curve's midpoint, in `[0, 1]`. Steady default 0.30; burst default 0.50.
    pub midpoint: f64,
    /// k, the steepness, in `(0, 200]`. Steady default 10; burst default 8.
    pub steepness: f64,
    /// Q, the curve's offset factor, in `(0, 10⁶]`. Default 1.
    pub q: f64,
    /// ν, the asymmetry exponent, in `(0, 100]` (1 gives the plain logistic). Default 1.
    pub nu: f64,
}

impl ModeCurve {
    /// Defaults of the `steady` mode: from the configured share up to 0.75, midpoint 0.3.
    pub fn steady_default() -> Self {
        ModeCurve {
            min_share: ShareBound::Configured,
            max_share: ShareBound::Fixed(0.75),
            midpoint: 0.30,
            steepness: 10.0,
            q: 1.0,
            nu: 1.0,
        }
    }

    /// Defaults of the `burst` mode: from 0.70 up to 0.90, midpoint 0.5.
    pub fn burst_default() -> Self {
        ModeCurve {
            min_share: ShareBound::Fixed(0.70),
            max_share: ShareBound::Fixed(0.90),
            midpoint: 0.50,
            steepness: 8.0,
            q: 1.0,
            nu: 1.0,
        }
    }

    pub(crate) fn validate(&self, section: Section) -> Result<(), AdaptiveError> {
        let f = |name| section.field(name);
        self.min_share.validate(f("minShare"))?;
        self.max_share.validate(f("maxShare"))?;
        check(f("midpoint"), self.midpoint, 0.0, 1.0, "a number in [0, 1]")?;
        positive_up_to(
            f("steepness"),
            self.steepness,
            200.0,
            "a number in (0, 200]",
        )?;
        positive_up_to(f("q"), self.q, 1e6, "a number in (0, 1000000]")?;
        positive_up_to(f("nu"), self.nu, 100.0, "a number in (0, 100]")?;
        if let (ShareBound::Fixed(lo), ShareBound::Fixed(hi)) = (self.min_share, self.max_share)
            && lo > hi
        {
            return Err(AdaptiveError::Inconsistent {
                field: f("minShare"),
                reason: format!("minShare {lo} is above maxShare {hi}"),
            });
        }
        Ok(())
    }
}

/// Which mode section a curve belongs to (for error messages).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Section {
    Steady,
    Burst,
}

impl Section {
    fn field(self, name: &'static str) -> &'static str {
        match (self, name) {
            (Section::Steady, "minShare") => "steady.minShare",
            (Section::Steady, "maxShare") => "steady.maxShare",
            (Section::Steady, "midpoint") => "steady.midpoint",
            (Section::Steady, "steepness") => "steady.steepness",
            (Section::Steady, "q") => "steady.q",
            (Section::Steady, "nu") => "steady.nu",
            (Section::Burst, "minShare") => "burst.minShare",
            (Section::Burst, "maxShare") => "burst.maxShare",
            (Section::Burst, "midpoint") => "burst.midpoint",
            (Section::Burst, "steepness") => "burst.steepness",
            (Section::Burst, "q") => "burst.q",
            (Section::Burst, "nu") => "burst.nu",
            (Section::Steady, _) => "steady",
            (Section::Burst, _) => "burst",
        }
    }
}

pub(crate) fn check(
    field: &'static str,
    value: f64,
    lo: f64,
    hi: f64,
    expected: &'static str,
) -> Result<(), AdaptiveError> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(())
    } else {
        Err(AdaptiveError::OutOfRange {
            field,
            value,
            expected,
        })
    }
}

fn positive_up_to(
    field: &'static str,
    value: f64,
    hi: f64,
    expected: &'static str,
) -> Result<(), AdaptiveError> {
    if value.is_finite() && value > 0.0 && value <= hi {
        Ok(())
    } else {
        Err(AdaptiveError::OutOfRange {
            field,
            value,
            expected,
        })
    }
}

/// A partially written mode section: the fields present override the mode's defaults.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CurvePatch {
    min_share: Option<ShareBound>,
    max_share: Option<ShareBound>,
    midpoint: Option<f64>,
    steepness: Option<f64>,
    q: Option<f64>,
    nu: Option<f64>,
}

impl CurvePatch {
    fn apply(self, base: ModeCurve) -> ModeCurve {
        ModeCurve {
            min_share: self.min_share.unwrap_or(base.min_share),
            max_share: self.max_share.unwrap_or(base.max_share),
            midpoint: self.midpoint.unwrap_or(base.midpoint),
            steepness: self.steepness.unwrap_or(base.steepness),
            q: self.q.unwrap_or(base.q),
            nu: self.nu.unwrap_or(base.nu),
        }
    }
}

pub(crate) fn patch_steady<'de, D: Deserializer<'de>>(d: D) -> Result<ModeCurve, D::Error> {
    Ok(CurvePatch::deserialize(d)?.apply(ModeCurve::steady_default()))
}

pub(crate) fn patch_burst<'de, D: Deserializer<'de>>(d: D) -> Result<ModeCurve, D::Error> {
    Ok(CurvePatch::deserialize(d)?.apply(ModeCurve::burst_default()))
}
