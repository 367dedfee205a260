//! Ridge regression of a small dense problem: the normal equations `(XᵀX + λI) w = Xᵀy`
//! accumulated sample by sample and solved by Cholesky factorization.
//!
//! With `D` features the accumulators are `D × D + D` floats, whatever the number of samples,
//! and a solve is `O(D³)`: microseconds for the handful of features a latency model uses.
//!
//! ```
//! use shepherd_scorers::latency::NormalEquations;
//!
//! let mut eq = NormalEquations::<2>::default();
//! for x in 0..100 {
//!     let x = f64::from(x);
//!     eq.add(&[1.0, x], 3.0 + 2.0 * x, 1.0);
//! }
//! let w = eq.solve(1e-9).unwrap();
//! assert!((w[0] - 3.0).abs() < 1e-6 && (w[1] - 2.0).abs() < 1e-9);
//! ```

/// The accumulated normal equations of a `D`-feature least-squares problem.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormalEquations<const D: usize> {
    xtx: [[f64; D]; D],
    xty: [f64; D],
    weight: f64,
}

impl<const D: usize> Default for NormalEquations<D> {
    fn default() -> Self {
        NormalEquations {
            xtx: [[0.0; D]; D],
            xty: [0.0; D],
            weight: 0.0,
        }
    }
}

impl<const D: usize> NormalEquations<D> {
    /// Adds sample `(x, y)` with weight `w`; samples with a non-finite value or a weight that
    /// is not positive are ignored (returns whether it was added).
    #[allow(clippy::needless_range_loop)] // matrix indices, written as the algebra reads
    pub fn add(&mut self, x: &[f64; D], y: f64, w: f64) -> bool {
        if !(y.is_finite() && w.is_finite() && w > 0.0 && x.iter().all(|v| v.is_finite())) {
            return false;
        }
        for i in 0..D {
            for j in 0..D {
                self.xtx[i][j] += w * x[i] * x[j];
            }
            self.xty[i] += w * x[i] * y;
        }
        self.weight += w;
        true
    }

    /// The total weight of the samples added.
    pub fn weight(&self) -> f64 {
        self.weight
    }

    /// The weights minimizing `Σ w (y − x·β)² + λ |β|²` (λ scaled by the samples' weight so it
    /// means the same at any count), or `None` when the system is singular or not finite.
    #[allow(clippy::needless_range_loop)] // matrix indices, written as the algebra reads
    pub fn solve(&self, lambda: f64) -> Option<[f64; D]> {
        let mut a = self.xtx;
        let ridge = lambda.max(0.0) * self.weight.max(1.0);
        for (i, row) in a.iter_mut().enumerate() {
            row[i] += ridge;
        }
        // Cholesky: a = L Lᵀ, L stored in the lower triangle of `l`.
        let mut l = [[0.0f64; D]; D];
        for i in 0..D {
            for j in 0..=i {
                let mut sum = a[i][j];
                for k in 0..j {
                    sum -= l[i][k] * l[j][k];
                }
                if i == j {
                    // A pivot lost to rounding relative to its diagonal: singular.
                    if !(sum.is_finite() && sum > 1e-12 * a[i][i].abs() && sum > 1e-300) {
                        return None;
                    }
                    l[i][i] = sum.sqrt();
                } else {
                    l[i][j] = sum / l[j][j];
                }
            }
        }
        // Forward (L z = b) then back substitution (Lᵀ β = z).
        let mut z = [0.0f64; D];
        for i in 0..D {
            let mut sum = self.xty[i];
            for k in 0..i {
                sum -= l[i][k] * z[k];
            }
            z[i] = sum / l[i][i];
        }
        let mut beta = [0.0f64; D];
        for i in (0..D).rev() {
            let mut sum = z[i];
            for k in i + 1..D {
                sum -= l[k][i] * beta[k];
            }
            beta[i] = sum / l[i][i];
        }
        beta.iter().all(|b| b.is_finite()).then_some(beta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_singular_system_has_no_solution_without_ridge() {
        let mut eq = NormalEquations::<2>::default();
        for _ in 0..10 {
            eq.add(&[1.0, 1.0], 2.0, 1.0);
        }
        assert_eq!(eq.solve(0.0), None);
        // With a ridge the weight is shared between the two identical features.
        let w = eq.solve(1e-6).unwrap();
        assert!((w[0] - w[1]).abs() < 1e-9 && (w[0] + w[1] - 2.0).abs() < 1e-3);
    }

    #[test]
    fn garbage_samples_are_ignored() {
        let mut eq = NormalEquations::<1>::default();
        assert!(!eq.add(&[f64::NAN], 1.0, 1.0));
        assert!(!eq.add(&[1.0], f64::INFINITY, 1.0));
        assert!(!eq.add(&[1.0], 1.0, 0.0));
        assert!(!eq.add(&[1.0], 1.0, -1.0));
        assert_eq!(eq.weight(), 0.0);
        assert_eq!(eq.solve(0.0), None);
    }

    proptest! {
        /// Exact linear data is recovered, whatever the coefficients.
        #[test]
        fn exact_linear_data_is_recovered(
            b in proptest::array::uniform3(-100.0f64..100.0),
            xs in proptest::collection::vec((0.0f64..1000.0, 0.0f64..50.0), 20..60),
        ) {
            let mut eq = NormalEquations::<3>::default();
            for &(u, v) in &xs {
                let x = [1.0, u, v];
                eq.add(&x, b[0] + b[1] * u + b[2] * v, 1.0);
            }
            if let Some(w) = eq.solve(1e-12) {
                for &(u, v) in &xs {
                    let fit = w[0] + w[1] * u + w[2] * v;
                    let want = b[0] + b[1] * u + b[2] * v;
                    prop_assert!((fit - want).abs() <= 1e-4 * (1.0 + want.abs()), "{fit} vs {want}");
                }
            }
        }
    }
}
