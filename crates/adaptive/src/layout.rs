//! Which scorers the configurator may rescale, and how a Distribution share becomes weights.
//!
//! The *budget* B is the sum of the configured Affinity and Distribution weights. For a share
//! d ∈ [0, 1], every Distribution scorer's configured weight is multiplied by d·B / D₀ and every
//! Affinity scorer's by (1 − d)·B / A₀ (D₀, A₀: the configured sums), so the categories sum to
//! d·B and (1 − d)·B, and the ratios inside a category are those of the config. Balance scorers
//! keep their configured weight.
//!
//! Every number here stays finite, whatever the configured weights: weights so large that
//! their sum would overflow (two at `1e308`, say) are all scaled down by one power of two
//! when the layout is made, Balance ones included. That keeps every ratio between scorers, and
//! so every pick, and it makes the sum of any weights this layout hands out a finite number.
//!
//! ```
//! use shepherd_adaptive::layout::ScorerLayout;
//! use shepherd_scheduler_core::plugin::Category;
//!
//! let layout = ScorerLayout::new(
//!     vec![Category::Affinity, Category::Distribution, Category::Distribution],
//!     vec![3.0, 2.0, 2.0],
//! );
//! assert_eq!(layout.budget(), 7.0);
//! assert_eq!(layout.configured_share(), Some(4.0 / 7.0));
//! let w = layout.weights_for_share(6.0 / 7.0);
//! assert!((w[0] - 1.0).abs() < 1e-12 && (w[1] - 3.0).abs() < 1e-12 && (w[2] - 3.0).abs() < 1e-12);
//! ```

use shepherd_scheduler_core::plugin::Category;
use shepherd_scheduler_core::profile::Profile;

/// The categories and configured weights of one profile's scorers, in profile order.
#[derive(Debug, Clone, PartialEq)]
pub struct ScorerLayout {
    categories: Vec<Category>,
    configured: Vec<f64>,
    affinity: f64,
    distribution: f64,
}

impl ScorerLayout {
    /// A layout of scorers with these categories and configured weights (negative, NaN and
    /// infinite weights count as 0; a missing weight as 0, an extra one is ignored). When the
    /// weights' sum would not be finite, all of them are scaled down by the same power of two
    /// (see the module docs), and [`configured`](Self::configured) returns the scaled weights.
    pub fn new(categories: Vec<Category>, configured: Vec<f64>) -> Self {
        let mut configured: Vec<f64> = (0..categories.len())
            .map(|i| match configured.get(i) {
                Some(&w) if w.is_finite() && w > 0.0 => w,
                _ => 0.0,
            })
            .collect();
        let scale = summable_scale(&configured);
        if scale < 1.0 {
            for w in &mut configured {
                *w *= scale;
            }
        }
        let sum = |cat| {
            categories
                .iter()
                .zip(&configured)
                .filter(|(c, _)| **c == cat)
                .map(|(_, w)| *w)
                .sum::<f64>()
        };
        let affinity = sum(Category::Affinity);
        let distribution = sum(Category::Distribution);
        ScorerLayout {
            categories,
            configured,
            affinity,
            distribution,
        }
    }

    /// The layout of `profile`: its scorers' categories and configured weights.
    pub fn from_profile(profile: &Profile) -> Self {
        ScorerLayout::new(
            profile.scorers().iter().map(|s| s.category).collect(),
            profile.weights().configured().as_slice().to_vec(),
        )
    }

    /// The scorers' categories.
    pub fn categories(&self) -> &[Category] {
        &self.categories
    }

    /// The configured weights (scaled down when their sum would overflow; see
    /// [`new`](Self::new)).
    pub fn configured(&self) -> &[f64] {
        &self.configured
    }

    /// B: configured Affinity plus Distribution weight.
    pub fn budget(&self) -> f64 {
        self.affinity + self.distribution
    }

    /// The configured weight sum of `category`.
    pub fn configured_total(&self, category: Category) -> f64 {
        match category {
            Category::Affinity => self.affinity,
            Category::Distribution => self.distribution,
            Category::Balance => self
                .categories
                .iter()
                .zip(&self.configured)
                .filter(|(c, _)| **c == Category::Balance)
                .map(|(_, w)| *w)
                .sum(),
        }
    }

    /// D₀ / B, the Distribution share the config asks for; `None` when there is nothing to
    /// trade (no Affinity weight or no Distribution weight), in which case the weights never
    /// change.
    pub fn configured_share(&self) -> Option<f64> {
        (self.affinity > 0.0 && self.distribution > 0.0).then(|| self.distribution / self.budget())
    }

    /// Whether the layout has weight in both Affinity and Distribution to trade.
    pub fn can_trade(&self) -> bool {
        self.configured_share().is_some()
    }

    /// The weights that give Distribution scorers `share` of the budget (clamped into
    /// `[0, 1]`). Exactly the configured weights when `share` equals the configured share or
    /// when there is nothing to trade.
    pub fn weights_for_share(&self, share: f64) -> Vec<f64> {
        let Some(configured_share) = self.configured_share() else {
            return self.configured.clone();
        };
        let share = if share.is_nan() {
            configured_share
        } else {
            share.clamp(0.0, 1.0)
        };
        if share == configured_share {
            return self.configured.clone();
        }
        // Each weight's fraction of its category (at most 1) times the category's new total
        // (at most the budget): no intermediate value can overflow, however small one
        // category's configured total is next to the budget.
        let budget = self.budget();
        let to_distribution = share * budget;
        let to_affinity = (1.0 - share) * budget;
        self.categories
            .iter()
            .zip(&self.configured)
            .map(|(category, &w)| match category {
                Category::Affinity => w / self.affinity * to_affinity,
                Category::Distribution => w / self.distribution * to_distribution,
                Category::Balance => w,
            })
            .collect()
    }
}

/// The largest power of two `s ≤ 1` such that the weights times `s` sum to at most
/// `f64::MAX / 2`: each of the n weights is brought to at most `f64::MAX / (2n)`. Exact for
/// every weight that does not fall into the subnormal range on the way down.
fn summable_scale(weights: &[f64]) -> f64 {
    let largest = weights.iter().copied().fold(0.0, f64::max);
    let bound = f64::MAX / 2.0 / weights.len().max(1) as f64;
    let mut scale = 1.0;
    // At most log2(2n) + 1 halvings: the largest weight is at most f64::MAX.
    while largest * scale > bound {
        scale *= 0.5;
    }
    scale
}
