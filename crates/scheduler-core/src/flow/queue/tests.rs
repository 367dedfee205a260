#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

impl<T> FlowQueue<T> {
    /// Checks the internal links and totals against a recount.
    fn check(&self) {
        let mut live = 0u64;
        let mut bytes = 0u64;
        for (Reverse(priority), band) in &self.bands {
            assert!(band.len > 0, "empty band {priority} kept");
            // Walk the ring once from the cursor.
            let mut seen = 0usize;
            let mut at = band.cursor;
            let (mut band_len, mut band_bytes) = (0u64, 0u64);
            loop {
                let flow = band.flows[at as usize].as_ref().unwrap();
                assert_eq!(band.by_key.get(&flow.key), Some(&at));
                assert_ne!(flow.head, NIL, "empty flow kept in the ring");
                let mut slot = flow.head;
                let mut prev = NIL;
                while slot != NIL {
                    let e = self.slots[slot as usize].entry.as_ref().unwrap();
                    assert_eq!(e.prev, prev);
                    assert_eq!((e.priority, e.flow), (*priority, at));
                    band_len += 1;
                    band_bytes += e.bytes;
                    prev = slot;
                    slot = e.next;
                }
                assert_eq!(flow.tail, prev);
                seen += 1;
                let next = flow.ring_next;
                assert_eq!(band.flows[next as usize].as_ref().unwrap().ring_prev, at);
                at = next;
                if at == band.cursor {
                    break;
                }
            }
            assert_eq!(seen, band.by_key.len());
            assert_eq!((band.len, band.bytes), (band_len, band_bytes));
            live += band_len;
            bytes += band_bytes;
        }
        assert_eq!((self.len, self.bytes), (live, bytes));
        let occupied = self.slots.iter().filter(|s| s.entry.is_some()).count() as u64;
        assert_eq!(occupied, live);
        assert_eq!(self.slots.len() - self.free_slots.len(), live as usize);
        let with_deadline = self
            .slots
            .iter()
            .filter_map(|s| s.entry.as_ref())
            .filter(|e| e.deadline.is_some())
            .count();
        assert_eq!(self.deadlines.len(), with_deadline);
    }
}

#[test]
fn links_and_totals_stay_consistent() {
    let mut q = FlowQueue::new(FlowSettings {
        ttl: Some(Duration::from_millis(40)),
        ..FlowSettings::default()
    });
    let mut tickets = Vec::new();
    let mut x = 12345u64;
    for step in 0..5_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let now = Timestamp::from_millis(step / 4);
        match x % 6 {
            0..=2 => {
                let flow = ["a", "b", "c", "d", ""][(x >> 8) as usize % 5];
                let priority = ((x >> 16) % 4) as i32 - 2;
                if let Ok(t) = q.enqueue(step, priority, flow, (x >> 24) % 100, now) {
                    tickets.push(t);
                }
            }
            3 => {
                q.dispatch_next(now);
            }
            4 if !tickets.is_empty() => {
                let t = tickets.swap_remove((x >> 8) as usize % tickets.len());
                q.cancel(t);
            }
            _ => {
                q.expire(now);
            }
        }
        q.check();
    }
}

#[test]
fn a_slot_is_reused_with_a_new_generation() {
    let mut q = FlowQueue::new(FlowSettings::default());
    let a = q.enqueue(1, 0, "", 1, Timestamp::ZERO).unwrap();
    q.dispatch_next(Timestamp::ZERO).unwrap();
    let b = q.enqueue(2, 0, "", 1, Timestamp::ZERO).unwrap();
    assert_eq!(a.slot, b.slot);
    assert_ne!(a.generation, b.generation);
    assert_eq!(q.cancel(a), None);
    assert_eq!(q.cancel(b), Some(2));
    q.check();
}
