//! Ordering candidates by a key with random tie-breaking.

/// A candidate's sort key: larger `key` first, then larger `tie` (a random draw), then lower
/// `index` (only reached if two 64-bit draws collide, which keeps the order total).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranked {
    pub(crate) key: f64,
    pub(crate) tie: u64,
    pub(crate) index: usize,
}

fn best_first(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    b.key
        .total_cmp(&a.key)
        .then(b.tie.cmp(&a.tie))
        .then(a.index.cmp(&b.index))
}

/// Up to this many picks, [`top`] keeps a small sorted buffer instead of selecting.
const SMALL_TOP: usize = 8;

/// The indexes of the `count` best entries, best first. Selects before sorting, so the cost is
/// linear in the candidates plus `count · log count`; for the usual few picks (primary and a
/// couple of fallbacks) a single pass with a tiny sorted buffer does it.
pub(crate) fn top(mut ranked: Vec<Ranked>, count: usize) -> Vec<usize> {
    let count = count.min(ranked.len());
    if count == 0 {
        return Vec::new();
    }
    if count <= SMALL_TOP && count < ranked.len() {
        let mut best: Vec<Ranked> = Vec::with_capacity(count + 1);
        for r in ranked {
            if best.len() == count {
                if let Some(worst) = best.last()
                    && best_first(&r, worst) != std::cmp::Ordering::Less
                {
                    continue;
                }
                best.pop();
            }
            let at = best.partition_point(|b| best_first(b, &r) == std::cmp::Ordering::Less);
            best.insert(at, r);
        }
        return best.into_iter().map(|r| r.index).collect();
    }
    if count < ranked.len() {
        ranked.select_nth_unstable_by(count - 1, best_first);
        ranked.truncate(count);
    }
    ranked.sort_unstable_by(best_first);
    ranked.into_iter().map(|r| r.index).collect()
}

/// [`top`] over `ranked` (an iterator of `len` entries) into `out`, without allocating when
/// `count` is at most [`SMALL_TOP`]: the same indexes in the same order (the order is total).
pub(crate) fn top_into(
    ranked: impl Iterator<Item = Ranked>,
    len: usize,
    count: usize,
    out: &mut Vec<usize>,
) {
    out.clear();
    let count = count.min(len);
    if count == 0 {
        return;
    }
    if count > SMALL_TOP {
        out.extend(top(ranked.collect(), count));
        return;
    }
    let mut best = [Ranked {
        key: 0.0,
        tie: 0,
        index: 0,
    }; SMALL_TOP];
    let mut kept = 0;
    for r in ranked {
        if kept == count {
            if best_first(&r, &best[count - 1]) != std::cmp::Ordering::Less {
                continue;
            }
            kept -= 1;
        }
        let at = best[..kept].partition_point(|b| best_first(b, &r) == std::cmp::Ordering::Less);
        best.copy_within(at..kept, at + 1);
        best[at] = r;
        kept += 1;
    }
    out.extend(best[..kept].iter().map(|r| r.index));
}

/// A total that sorts sensibly: NaN ranks below everything.
pub(crate) fn sane_total(t: f64) -> f64 {
    if t.is_nan() { f64::NEG_INFINITY } else { t }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_by_key_then_tie() {
        let ranked = vec![
            Ranked {
                key: 1.0,
                tie: 5,
                index: 0,
            },
            Ranked {
                key: 2.0,
                tie: 0,
                index: 1,
            },
            Ranked {
                key: 1.0,
                tie: 9,
                index: 2,
            },
            Ranked {
                key: f64::NEG_INFINITY,
                tie: 1,
                index: 3,
            },
        ];
        assert_eq!(top(ranked.clone(), 4), vec![1, 2, 0, 3]);
        assert_eq!(top(ranked.clone(), 2), vec![1, 2]);
        assert_eq!(top(ranked, 0), Vec::<usize>::new());
    }

    proptest::proptest! {
        #[test]
        fn top_into_agrees_with_top(
            entries in proptest::collection::vec((0u8..4, 0u64..6), 0..40),
            count in 0usize..12,
        ) {
            let ranked: Vec<Ranked> = entries
                .iter()
                .enumerate()
                .map(|(index, &(key, tie))| Ranked { key: f64::from(key), tie, index })
                .collect();
            let mut out = vec![99];
            top_into(ranked.iter().copied(), ranked.len(), count, &mut out);
            proptest::prop_assert_eq!(out, top(ranked, count));
        }
    }
}
