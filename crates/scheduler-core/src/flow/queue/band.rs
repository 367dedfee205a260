//! One priority band: its flows in a ring (round robin), each flow an intrusive FCFS list of
//! slots in the queue's slab.

use hashbrown::HashMap;

use super::super::config::BandLimits;
use super::NIL;

pub(super) struct Flow {
    pub(super) key: Box<str>,
    pub(super) head: u32,
    pub(super) tail: u32,
    pub(super) ring_prev: u32,
    pub(super) ring_next: u32,
}

pub(super) struct Band {
    pub(super) limits: BandLimits,
    pub(super) len: u64,
    pub(super) bytes: u64,
    pub(super) flows: Vec<Option<Flow>>,
    pub(super) free_flows: Vec<u32>,
    pub(super) by_key: HashMap<Box<str>, u32, ahash::RandomState>,
    /// The flow served next; `NIL` when the band is empty.
    pub(super) cursor: u32,
}

impl Band {
    pub(super) fn new(limits: BandLimits) -> Self {
        Band {
            limits,
            len: 0,
            bytes: 0,
            flows: Vec::new(),
            free_flows: Vec::new(),
            by_key: HashMap::default(),
            cursor: NIL,
        }
    }

    pub(super) fn flow(&mut self, index: u32) -> &mut Flow {
        match self.flows.get_mut(index as usize).and_then(Option::as_mut) {
            Some(f) => f,
            None => unreachable!("flow index {index} refers to a live flow"),
        }
    }

    /// The flow for `key`, created (at the end of the round) if absent.
    pub(super) fn flow_for(&mut self, key: &str) -> u32 {
        if let Some(&i) = self.by_key.get(key) {
            return i;
        }
        let flow = Flow {
            key: key.into(),
            head: NIL,
            tail: NIL,
            ring_prev: NIL,
            ring_next: NIL,
        };
        let index = match self.free_flows.pop() {
            Some(i) => {
                self.flows[i as usize] = Some(flow);
                i
            }
            None => {
                self.flows.push(Some(flow));
                (self.flows.len() - 1) as u32
            }
        };
        self.by_key.insert(key.into(), index);
        // Join the ring just before the cursor: served after every flow already waiting.
        if self.cursor == NIL {
            let f = self.flow(index);
            f.ring_prev = index;
            f.ring_next = index;
            self.cursor = index;
        } else {
            let next = self.cursor;
            let prev = self.flow(next).ring_prev;
            self.flow(prev).ring_next = index;
            self.flow(next).ring_prev = index;
            let f = self.flow(index);
            f.ring_prev = prev;
            f.ring_next = next;
        }
        index
    }

    /// Removes an empty flow from the ring and frees it.
    pub(super) fn drop_flow(&mut self, index: u32) {
        let (prev, next) = {
            let f = self.flow(index);
            (f.ring_prev, f.ring_next)
        };
        if next == index {
            self.cursor = NIL;
        } else {
            self.flow(prev).ring_next = next;
            self.flow(next).ring_prev = prev;
            if self.cursor == index {
                self.cursor = next;
            }
        }
        if let Some(flow) = self.flows[index as usize].take() {
            self.by_key.remove(&flow.key);
        }
        self.free_flows.push(index);
    }
}
