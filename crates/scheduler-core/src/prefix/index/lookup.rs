//! The lookup walk: how many leading blocks of a chain each endpoint holds.

use super::PrefixIndex;
use crate::endpoint::EndpointId;
use crate::prefix::chain::{HASH_BATCH, MAX_HASH_SPAN};
use crate::prefix::locking;
use crate::prefix::table::{ABSENT, BlockTable, Run, id_of};
use crate::prefix::{BlockChain, PrefixMatch};
use crate::request::Prompt;

/// Blocks whose home slots a lookup loads at once.
const PROBE_BATCH: usize = 32;

impl PrefixIndex {
    /// Looks `chain` up: how many leading blocks each endpoint holds.
    pub fn match_prefix(&self, chain: &mut BlockChain, prompt: &Prompt) -> PrefixMatch {
        let mut out = PrefixMatch::new();
        self.match_into(chain, prompt, &mut out);
        out
    }

    /// Like [`match_prefix`](Self::match_prefix), refilling `out`. Hashes `chain` only as far as
    /// the walk needs (plus at most a quarter of what matched, or a small first batch).
    pub fn match_into(&self, chain: &mut BlockChain, prompt: &Prompt, out: &mut PrefixMatch) {
        let total = chain.total_blocks();
        out.reset(total);
        let Some(&first) = chain.extend_to(prompt, HASH_BATCH).first() else {
            return;
        };
        let table = locking::read(&self.shards[first.shard()].0);
        let at = table.locate(first.get());
        let Some(holders) = table.holders_at(at) else {
            return;
        };
        let PrefixMatch {
            matched, active, ..
        } = out;
        holders.for_each(|t| active.push(t));
        let mut last = holders.signature();
        let mut run = table.run_at(at).map(|r| (0, r));
        // The last key of a run this chain did not follow: the runs on the following blocks
        // of the same insert end there too, and are not tried again.
        let mut left_run = None;
        // Where the current stretch of block-by-block walking began (after a skipped run, the
        // next block is as likely to end the match as the first one).
        let mut stretch = 0;
        let mut i = 1;
        let mut found = [ABSENT; PROBE_BATCH];
        // Chains are hot (shared) then cold (own tail): probe first where the last block was.
        let mut hot = true;
        let mut raw = [0u64; PROBE_BATCH];
        'walk: while !active.is_empty() && i < total {
            // A valid run recorded on the last block seen: when this chain reaches the run's
            // last key at the same distance, every block in between has the same holders.
            if let Some((from, r)) = run.take()
                && left_run != Some(r.end)
            {
                match skip_run(&table, chain, prompt, from, r, last) {
                    Some(next) => {
                        i = next;
                        stretch = next;
                        continue;
                    }
                    None => left_run = Some(r.end),
                }
            }
            // Hash a span that grows with the stretch (so a lookup hashes at most half again
            // what it matched), then probe it in batches with nothing in between: the probes'
            // cache misses overlap each other instead of alternating with hashing.
            let span = ((i - stretch) / 2).clamp(HASH_BATCH, MAX_HASH_SPAN);
            let span_end = (i + span).min(total);
            let computed = chain.extend_to(prompt, span_end);
            let span_end = span_end.min(computed.len());
            if i >= span_end {
                break;
            }
            while i < span_end {
                let end = (i + PROBE_BATCH).min(span_end);
                let batch = end - i;
                for (r, k) in raw.iter_mut().zip(&computed[i..end]) {
                    *r = k.get();
                }
                table.find_batch(&raw[..batch], &mut found[..batch], hot);
                for (j, &at) in found[..batch].iter().enumerate() {
                    let block = i + j;
                    let Some(holders) = table.holders_at(at) else {
                        matched.extend(active.drain(..).map(|t| (EndpointId(id_of(t)), block)));
                        break 'walk;
                    };
                    hot = BlockTable::is_hot(at);
                    let signature = holders.signature();
                    // Same holders as the previous block: every active endpoint still matches.
                    if signature != last {
                        active.retain(|&t| {
                            let keep = holders.contains(t);
                            if !keep {
                                matched.push((EndpointId(id_of(t)), block));
                            }
                            keep
                        });
                        last = signature;
                        if active.is_empty() {
                            break 'walk;
                        }
                    }
                    if let Some(r) = table.run_at(at) {
                        run = Some((block, r));
                        i = block + 1;
                        continue 'walk;
                    }
                }
                i = end;
            }
        }
        // Whoever is still active holds every block (or every block the chain could hash).
        let reached = i.min(total);
        matched.extend(active.drain(..).map(|t| (EndpointId(id_of(t)), reached)));
        matched.sort_unstable_by_key(|m| m.0);
    }
}

/// Skips the run `run` recorded on block `from` of `chain` (whose holders have signature
/// `holders`): hashes on in growing spans, checking at each span end that the chain still has
/// a block with the same holders (else it left the run: give up early, having hashed at most
/// twice what it matched, or 16 blocks), and at the run's last position that the chain has the run's last
/// key — then, chained keys being equal, the chain *is* the recorded one up to there and every
/// block of the run still has the recorded holders. Returns the block after the run.
#[inline]
fn skip_run(
    table: &BlockTable,
    chain: &mut BlockChain,
    prompt: &Prompt,
    from: usize,
    run: Run,
    holders: u64,
) -> Option<usize> {
    let last = from + run.len as usize - 1;
    if last >= chain.total_blocks() {
        return None;
    }
    let mut at = from + 1;
    loop {
        let span = (at - from).clamp(2 * HASH_BATCH, MAX_HASH_SPAN);
        let upto = (at + span).min(last + 1);
        let keys = chain.extend_to(prompt, upto);
        if upto > last {
            return (keys.get(last)?.get() == run.end).then_some(last + 1);
        }
        let probe = keys.get(upto - 1)?.get();
        if table.holders_at(table.locate(probe))?.signature() != holders {
            return None;
        }
        at = upto;
    }
}
