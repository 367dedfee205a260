//! `prefix-cache-scorer` publishes its cached-token estimates, the scheduler counts the picked
//! endpoint's uncached tokens as pending prefill, and `prefill-load-scorer` reads both.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::sync::Arc;

use shepherd_scheduler_core::prelude::*;
use shepherd_scorers::builtin_registry;

const YAML: &str = "
plugins:
- type: prefix-cache-scorer
  parameters: {blockSize: 16}
- type: prefill-load-scorer
- type: max-score-picker
schedulingProfiles:
- name: default
  plugins:
  - pluginRef: prefix-cache-scorer
    weight: 1
  - pluginRef: prefill-load-scorer
    weight: 1
  - pluginRef: max-score-picker
";

fn scheduler(members: usize) -> Scheduler {
    let config = EndpointPickerConfig::from_yaml(YAML).unwrap();
    let pool = Arc::new(Pool::new());
    pool.set_members((0..members).map(|i| format!("127.0.0.1:{}", 8000 + i)));
    build_scheduler(&config, &builtin_registry(), pool).unwrap()
}

/// `prefix` shared tokens followed by `suffix` tokens unique to `tag`.
fn request(prefix: u32, suffix: u32, tag: u32) -> InferenceRequest {
    let tokens = (0..prefix)
        .chain((0..suffix).map(|i| 1_000_000 * (tag + 1) + i))
        .collect();
    InferenceRequest::new("r", "m", Prompt::Tokens(tokens))
}

#[test]
fn a_cached_prefix_is_not_counted_as_pending_prefill() {
    let s = scheduler(2);
    let mut first = s.schedule(&request(1600, 40, 0)).unwrap();
    let hot = Arc::clone(first.primary());
    assert_eq!(hot.pending_prefill_tokens(), 1640, "nothing cached yet");
    first.handle_mut().first_token();
    assert_eq!(hot.pending_prefill_tokens(), 0);

    // The same prefix again: the prefix index credits 100 blocks of 16 tokens.
    let second = s.schedule(&request(1600, 40, 1)).unwrap();
    assert!(Arc::ptr_eq(second.primary(), &hot));
    assert_eq!(hot.pending_prefill_tokens(), 40);
}

#[test]
fn requests_sharing_a_prefix_stay_on_the_holder_while_its_pending_prefill_is_short() {
    let s = scheduler(2);
    let mut seed = s.schedule(&request(1600, 40, 0)).unwrap();
    let holder = Arc::clone(seed.primary());
    seed.handle_mut().first_token();
    // The idle server would have to prefill 1640 tokens; the holder's queue of 40-token
    // prefills stays cheaper.
    let decisions: Vec<Decision> = (1..6)
        .map(|i| s.schedule(&request(1600, 40, i)).unwrap())
        .collect();
    assert!(decisions.iter().all(|d| Arc::ptr_eq(d.primary(), &holder)));
    assert_eq!(holder.pending_prefill_tokens(), 5 * 40);
}
