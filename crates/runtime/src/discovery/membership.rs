//! Applying a discovery source's endpoint sets to the pool.

use std::sync::Arc;

use shepherd_scheduler_core::endpoint::Pool;
use tokio::sync::watch;

use super::EndpointSet;
use crate::shutdown::ShutdownSignal;

/// Makes the pool's members exactly `set`'s addresses. Endpoints that stay keep their live
/// counters and metrics; the ones that leave are forgotten by the pool's listeners (the prefix
/// index). Requests in flight on a removed endpoint keep it alive until they end.
pub(crate) fn apply_set(pool: &Pool, set: &EndpointSet) {
    let before: Vec<String> = pool
        .snapshot()
        .endpoints()
        .iter()
        .map(|e| e.address().to_owned())
        .collect();
    let after = set.addresses();
    if before == after {
        return;
    }
    pool.set_members(&after);
    let added: Vec<&String> = after.iter().filter(|a| !before.contains(a)).collect();
    let removed: Vec<&String> = before.iter().filter(|a| !after.contains(a)).collect();
    tracing::info!(
        ?added,
        ?removed,
        members = after.len(),
        "endpoint set changed"
    );
}

/// Follows `sets` until shutdown, applying each new set to `pool`.
pub(crate) async fn follow(
    pool: Arc<Pool>,
    mut sets: watch::Receiver<Arc<EndpointSet>>,
    stop: ShutdownSignal,
) {
    loop {
        let set = Arc::clone(&sets.borrow_and_update());
        apply_set(&pool, &set);
        tokio::select! {
            changed = sets.changed() => {
                if changed.is_err() {
                    // The source is gone: the last set stays.
                    stop.wait().await;
                    return;
                }
            }
            () = stop.wait() => return,
        }
    }
}
