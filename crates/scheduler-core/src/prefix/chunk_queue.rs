//! A FIFO of block keys kept in fixed-size chunks, so that it never grows by copying itself.
//!
//! An endpoint's eviction queue holds every block the endpoint is believed to hold, tens of
//! thousands of keys for long prompts. A `VecDeque` doubles when full, copying the whole queue
//! during one insert (hundreds of microseconds at 64k keys); this queue adds one chunk of
//! [`CHUNK`] keys at a time instead, and keeps the chunk its front frees for the next one its
//! back needs, so a queue in steady state (evicting as much as it gains) allocates nothing.
//! Small queues stay small: the first chunk grows like a `Vec` up to [`CHUNK`].

use std::collections::VecDeque;

/// Keys per chunk (32 KiB).
pub(crate) const CHUNK: usize = 4096;

/// Block keys, oldest first.
#[derive(Debug, Default)]
pub(crate) struct ChunkQueue {
    /// Full chunks but the last; the first starts at `head`.
    chunks: VecDeque<Vec<u64>>,
    /// Keys of the first chunk already taken.
    head: usize,
    len: usize,
    /// An emptied chunk kept for the next one needed.
    spare: Option<Vec<u64>>,
}

impl ChunkQueue {
    /// Keys queued.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Keys the queue can hold without allocating (for heap accounting).
    pub(crate) fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum::<usize>()
            + self.spare.as_ref().map_or(0, Vec::capacity)
            + self.chunks.capacity() * 3
    }

    /// Appends `key`.
    #[inline]
    pub(crate) fn push_back(&mut self, key: u64) {
        match self.chunks.back_mut() {
            Some(last) if last.len() < CHUNK => last.push(key),
            _ => {
                let mut chunk = if self.chunks.is_empty() {
                    Vec::new()
                } else {
                    self.spare
                        .take()
                        .unwrap_or_else(|| Vec::with_capacity(CHUNK))
                };
                chunk.push(key);
                self.chunks.push_back(chunk);
            }
        }
        self.len += 1;
    }

    /// Appends every key of `keys`, in order.
    pub(crate) fn extend(&mut self, keys: impl IntoIterator<Item = u64>) {
        for key in keys {
            self.push_back(key);
        }
    }

    /// Moves the `n` oldest keys (all of them when fewer) to the end of `out`, oldest first.
    pub(crate) fn take_front_into(&mut self, n: usize, out: &mut Vec<u64>) {
        let mut left = n.min(self.len);
        while left > 0 {
            let only = self.chunks.len() == 1;
            let Some(front) = self.chunks.front_mut() else {
                break;
            };
            let end = front.len().min(self.head + left);
            out.extend_from_slice(front.get(self.head..end).unwrap_or(&[]));
            let took = end - self.head;
            self.head = end;
            left -= took;
            self.len -= took;
            if self.head >= front.len() {
                self.head = 0;
                if only {
                    front.clear();
                } else if let Some(mut emptied) = self.chunks.pop_front() {
                    emptied.clear();
                    if emptied.capacity() == CHUNK {
                        self.spare = Some(emptied);
                    }
                }
            }
            if took == 0 {
                break;
            }
        }
    }

    /// The keys, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let head = self.head;
        self.chunks
            .iter()
            .enumerate()
            .flat_map(move |(i, chunk)| {
                chunk
                    .get(if i == 0 { head } else { 0 }..)
                    .unwrap_or(&[])
                    .iter()
            })
            .copied()
    }

    /// Empties the queue, handing back its keys oldest first.
    pub(crate) fn take_all(&mut self) -> impl Iterator<Item = u64> {
        let head = std::mem::take(&mut self.head);
        self.len = 0;
        std::mem::take(&mut self.chunks)
            .into_iter()
            .enumerate()
            .flat_map(move |(i, chunk)| chunk.into_iter().skip(if i == 0 { head } else { 0 }))
    }

    /// Frees the spare chunk and unused chunk slots.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.spare = None;
        self.chunks.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::collections::VecDeque as Model;

    #[test]
    fn behaves_like_a_deque_across_chunk_boundaries() {
        let mut queue = ChunkQueue::default();
        let mut model = Model::new();
        let mut next = 1u64;
        let mut rng = 0x5EED_u64;
        for _ in 0..400 {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let n = (rng >> 33) as usize % (3 * CHUNK);
            if rng & 1 == 0 {
                for _ in 0..n {
                    queue.push_back(next);
                    model.push_back(next);
                    next += 1;
                }
            } else {
                let mut out = vec![0];
                queue.take_front_into(n, &mut out);
                let expected: Vec<u64> = model.drain(..n.min(model.len())).collect();
                assert_eq!(out[1..], expected[..]);
            }
            assert_eq!(queue.len(), model.len());
            assert!(queue.iter().eq(model.iter().copied()));
        }
        let all: Vec<u64> = queue.take_all().collect();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
        assert_eq!(queue.len(), 0);
        assert_eq!(queue.iter().count(), 0);
    }

    #[test]
    fn steady_state_reuses_its_chunks() {
        let mut queue = ChunkQueue::default();
        queue.extend(1..=(4 * CHUNK as u64));
        let mut out = Vec::with_capacity(CHUNK);
        queue.take_front_into(CHUNK / 2, &mut out);
        let bytes = queue.capacity();
        for round in 0..20u64 {
            out.clear();
            queue.take_front_into(CHUNK / 2, &mut out);
            queue.extend((0..CHUNK as u64 / 2).map(|k| 1_000_000 + round * 10_000 + k));
            assert!(queue.capacity() <= bytes + CHUNK);
        }
    }

    #[test]
    fn small_queues_stay_small() {
        let mut queue = ChunkQueue::default();
        queue.extend(1..=10);
        assert!(queue.capacity() < 64);
    }
}
