//! What the scheduler decided, and why.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use crate::endpoint::{Endpoint, InFlightGuard};
use crate::plugin::{Category, Score};

/// The scheduler's answer for one request.
///
/// Holding the decision holds the primary endpoint's [`InFlightGuard`]: the request counts as in
/// flight there until the decision (or the guard taken out of it) is dropped.
#[derive(Debug)]
pub struct Decision {
    /// The profile that produced it.
    pub profile: Arc<str>,
    /// Primary first, then the fallbacks in order.
    pub endpoints: Vec<Arc<Endpoint>>,
    /// In-flight guard on the primary.
    pub guard: InFlightGuard,
    /// Every scorer's score for every candidate.
    pub breakdown: Breakdown,
}

impl Decision {
    /// The endpoint that should serve the request.
    pub fn primary(&self) -> &Arc<Endpoint> {
        self.guard.endpoint()
    }

    /// The ordered fallbacks.
    pub fn fallbacks(&self) -> &[Arc<Endpoint>] {
        self.endpoints.get(1..).unwrap_or(&[])
    }

    /// `ip:port[,ip:port...]`: the value of `x-gateway-destination-endpoint`.
    pub fn destination_header(&self) -> String {
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

/// A scorer's column in a [`Breakdown`].
#[derive(Debug, Clone, Serialize)]
pub struct ScorerColumn {
    /// Plugin name.
    pub name: Arc<str>,
    /// Category.
    pub category: Category,
    /// Weight in force for this pick.
    pub weight: f64,
}

/// One candidate's row in a [`Breakdown`].
#[derive(Debug, Clone, Serialize)]
pub struct BreakdownRow {
    /// Candidate address.
    pub address: Arc<str>,
    /// One score per scorer column.
    pub scores: Vec<Score>,
    /// Σ weight × score.
    pub total: f64,
    /// Position in the pick (0 = primary), when picked.
    pub rank: Option<usize>,
}

/// Every scorer's raw score and weight for every candidate that survived the filters, so any
/// pick can be explained.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Breakdown {
    /// Candidates before filtering.
    pub candidates_before_filters: usize,
    /// The scorer columns.
    pub scorers: Vec<ScorerColumn>,
    /// Picker plugin name.
    pub picker: Arc<str>,
    /// One row per scored candidate.
    pub rows: Vec<BreakdownRow>,
}

impl fmt::Display for Breakdown {
    /// A small text table, picked rows marked with their rank.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:<24}", "endpoint")?;
        for c in &self.scorers {
            write!(f, " {:>18}", format!("{}×{:.2}", c.name, c.weight))?;
        }
        writeln!(f, " {:>8} {:>5}", "total", "rank")?;
        for row in &self.rows {
            write!(f, "{:<24}", row.address)?;
            for s in &row.scores {
                let mark = if s.neutral { "~" } else { " " };
                write!(f, " {:>17.3}{}", s.value, mark)?;
            }
            let rank = row.rank.map(|r| r.to_string()).unwrap_or_default();
            writeln!(f, " {:>8.3} {:>5}", row.total, rank)?;
        }
        write!(
            f,
            "(~ = neutral: the scorer could not judge; picker: {})",
            self.picker
        )
    }
}
