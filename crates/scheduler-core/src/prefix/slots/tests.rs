#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;

fn filled(n: u64) -> Slots<Slot> {
    let mut slots = Slots::default();
    for key in 1..=n {
        slots.insert(Slot { key, a: 1, b: 0 });
    }
    slots
}

fn empty_out(slots: &mut Slots<Slot>, n: u64) {
    for key in 1..=n {
        if let Some(i) = slots.find(key) {
            slots.delete(i);
        }
    }
}

#[test]
fn small_arrays_keep_their_slots_when_emptied() {
    let mut slots = filled(200);
    // The last doubling's old array, freed.
    slots.drain(usize::MAX);
    let bytes = slots.heap_bytes();
    empty_out(&mut slots, 200);
    assert_eq!(slots.len(), 0);
    assert_eq!(slots.heap_bytes(), bytes);
    // Refilling does not grow it again either.
    for key in 1..=200 {
        slots.insert(Slot { key, a: 1, b: 0 });
    }
    assert_eq!(slots.heap_bytes(), bytes);
}

#[test]
fn large_arrays_shrink_when_mostly_empty() {
    let mut slots = filled(10_000);
    let bytes = slots.heap_bytes();
    empty_out(&mut slots, 9_990);
    assert_eq!(slots.len(), 10);
    // A shrink drains its old array a step per insert or delete, like a doubling: the
    // operations that follow finish it (and the next shrink).
    for _ in 0..10_000 {
        slots.insert(Slot {
            key: 20_000,
            a: 1,
            b: 0,
        });
        let at = slots.find(20_000).unwrap();
        slots.delete(at);
    }
    assert!(slots.heap_bytes() <= SHRINK_FLOOR_BYTES.max(bytes / 8));
    for key in 9_991..=10_000 {
        assert!(slots.find(key).is_some());
    }
}

#[test]
fn a_doubling_moves_keys_a_few_at_a_time() {
    // 96 keys fill 128 slots to 3/4; the 97th starts a doubling to 256.
    let mut slots = filled(96);
    slots.drain(usize::MAX);
    slots.insert(Slot {
        key: 97,
        a: 1,
        b: 0,
    });
    // 96 keys to move and 128 slots to pass: 224 units, several inserts' work.
    assert!(slots.resizing());
    assert!((1..=97).all(|key| slots.find(key).is_some()));
    let mut key = 97;
    while slots.resizing() {
        key += 1;
        slots.insert(Slot { key, a: 1, b: 0 });
    }
    // 224 units, STEP an insert (the last slots may hold no key left to move).
    let inserts = (key - 96) as usize;
    assert!(
        inserts * STEP <= 224 && inserts * STEP > 224 - 128,
        "drained at key {key}"
    );
    assert_eq!(slots.heap_bytes(), 256 * 16);
    assert!((1..=key).all(|key| slots.find(key).is_some()));
}

#[test]
fn no_insert_moves_more_than_a_step_of_keys() {
    // Each insert spends at most STEP units on the old array, however large it is.
    let mut slots = Slots::<Slot>::default();
    let mut most = 0;
    for key in 1..=20_000u64 {
        let old_before = slots.old.len();
        let resizing = slots.resizing();
        slots.insert(Slot { key, a: 1, b: 0 });
        if resizing {
            most = most.max(old_before - slots.old.len());
        }
    }
    assert!(most <= STEP, "{most} keys moved by one insert");
    assert!((1..=20_000).all(|key| slots.find(key).is_some()));
}

/// One operation on both the slots and a model.
#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u32),
    Delete(u64),
    Touch(u64, u32),
    /// Inserts the absent keys of `start..start + n`, one at a time.
    Fill(u64, u64),
    /// Deletes the present keys of `start..start + n`, one at a time.
    Drop(u64, u64),
}

fn op() -> impl Strategy<Value = Op> {
    // Keys from a small range collide on their homes and make long probe runs; a few
    // with high bits set exercise the filter's fingerprints.
    let key = prop_oneof![1u64..4000, (1u64..40).prop_map(|k| k << 41 | k)];
    prop_oneof![
        4 => (key.clone(), 1u32..1000).prop_map(|(k, a)| Op::Insert(k, a)),
        3 => key.clone().prop_map(Op::Delete),
        1 => (key, 1u32..1000).prop_map(|(k, b)| Op::Touch(k, b)),
        2 => (1u64..4000, 1u64..3000).prop_map(|(k, n)| Op::Fill(k, n)),
        2 => (1u64..4000, 1u64..3000).prop_map(|(k, n)| Op::Drop(k, n)),
    ]
}

/// A filtered slot type, to run the hot array's filter through resizes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Filtered(Slot);

impl Keyed for Filtered {
    const FILTERED: bool = true;
    type Raw = [u64; 2];

    fn key(&self) -> u64 {
        self.0.key
    }

    fn raw_key(raw: &[u64; 2]) -> u64 {
        raw[0]
    }

    fn pack(self) -> [u64; 2] {
        self.0.pack()
    }

    fn unpack(raw: [u64; 2]) -> Self {
        Filtered(Slot::unpack(raw))
    }
}

/// Runs `ops` on slots of type `T` (built from a [`Slot`]) and on a map, checking after every
/// operation that they answer alike for every key the operations use.
fn check<T: Keyed + PartialEq>(ops: &[Op], wrap: impl Fn(Slot) -> T, unwrap: impl Fn(T) -> Slot) {
    let mut slots = Slots::<T>::default();
    let mut model: HashMap<u64, (u32, u32)> = HashMap::new();
    let mut keys = std::collections::BTreeSet::new();
    for op in ops {
        let (start, n, fill) = match *op {
            Op::Insert(key, a) => (key, 1, Some(a)),
            Op::Delete(key) => (key, 1, None),
            Op::Touch(key, b) => {
                if let Some(i) = slots.find(key) {
                    let mut slot = unwrap(slots.get(i).unwrap());
                    slot.b = b;
                    slots.set(i, wrap(slot));
                    model.insert(key, (slot.a, b));
                }
                (key, 0, None)
            }
            Op::Fill(start, n) => (start, n, Some(start as u32)),
            Op::Drop(start, n) => (start, n, None),
        };
        for key in start..start + n {
            match fill {
                Some(a) => match slots.probe(key) {
                    Ok(i) => assert_eq!(unwrap(slots.get(i).unwrap()).key, key),
                    Err(vacancy) => {
                        assert!(!model.contains_key(&key));
                        let slot = Slot { key, a, b: 0 };
                        let i = slots.insert_at(wrap(slot), vacancy);
                        assert_eq!(slots.get(i).map(&unwrap), Some(slot));
                        model.insert(key, (a, 0));
                        keys.insert(key);
                    }
                },
                None => {
                    let found = slots.find(key);
                    assert_eq!(found.is_some(), model.contains_key(&key));
                    if let Some(i) = found {
                        slots.delete(i);
                        model.remove(&key);
                    }
                }
            }
        }
        assert_eq!(slots.len(), model.len());
        for &key in &keys {
            let got = slots.find(key).and_then(|i| slots.get(i)).map(&unwrap);
            let want = model.get(&key).map(|&(a, b)| Slot { key, a, b });
            assert_eq!(got, want, "key {key}");
            if want.is_some() {
                assert!(slots.may_hold(key));
            }
            // A batch of one finds the same.
            let mut home = [0u64];
            slots.load_homes(&[key], &mut home);
            assert_eq!(slots.resolve(key, home[0]).is_some(), want.is_some());
            match slots.find_near::<4>(key) {
                Near::Found(i) => assert_eq!(slots.get(i).map(&unwrap), want),
                Near::Vacant(_) => assert!(want.is_none()),
                Near::Far => {}
            }
        }
    }
    let mut all: Vec<Slot> = slots.iter().map(&unwrap).collect();
    all.sort_by_key(|s| s.key);
    let mut want: Vec<Slot> = model
        .iter()
        .map(|(&key, &(a, b))| Slot { key, a, b })
        .collect();
    want.sort_by_key(|s| s.key);
    assert_eq!(all, want);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Through any number of doublings and halvings, the slots answer every key as a map does.
    #[test]
    fn slots_answer_like_a_map_across_resizes(ops in prop::collection::vec(op(), 1..40)) {
        check(&ops, |s| s, |s| s);
    }

    /// The same with a filter (the hot array's slot type).
    #[test]
    fn filtered_slots_answer_like_a_map_across_resizes(ops in prop::collection::vec(op(), 1..40)) {
        check(&ops, Filtered, |f| f.0);
    }
}
