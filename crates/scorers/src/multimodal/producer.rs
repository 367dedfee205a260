//! `mm-embeddings-cache-producer`: keeps the per-endpoint [`EncoderCache`] the
//! `mm-embeddings-cache-scorer` reads.
//!
//! Parameters, as upstream: `cacheSizeInMBPerServer` (integer, default 4096; `<= 0` is the
//! default). The budget describes the model server's encoder cache, at an assumed 2 MiB an
//! item: `4096 / 2 = 2048` hashes remembered per endpoint. Shepherd caps that at
//! [`MAX_ENTRIES_PER_ENDPOINT`] to bound its own memory.
//!
//! ```
//! use shepherd_scorers::multimodal::producer::{MmCacheParameters, entries_per_endpoint};
//!
//! assert_eq!(entries_per_endpoint(4096), 2048);
//! assert_eq!(entries_per_endpoint(0), 2048); // the default
//! assert_eq!(entries_per_endpoint(1), 1);
//! let p: MmCacheParameters = serde_json::from_value(serde_json::json!({"cacheSizeInMBPerServer": 2048})).unwrap();
//! assert_eq!(p.entries(), 1024);
//! ```

use std::sync::Arc;

use serde::Deserialize;
use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;

use super::{EncoderCache, cache_resource_name};

/// The type name.
pub const TYPE_NAME: &str = "mm-embeddings-cache-producer";

/// Upstream's default budget: 4 GiB.
pub const DEFAULT_CACHE_SIZE_MB: i64 = 4096;

/// Upstream's assumed size of one tracked item: 2 MiB.
pub const MIB_PER_ITEM: i64 = 2;

/// Most hashes Shepherd remembers per endpoint, whatever the budget (about 16 bytes each).
pub const MAX_ENTRIES_PER_ENDPOINT: usize = 1 << 20;

/// The producer's parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct MmCacheParameters {
    /// Per-endpoint budget in MiB of the model servers' encoder caches.
    #[serde(rename = "cacheSizeInMBPerServer")]
    pub cache_size_in_mb_per_server: i64,
}

impl MmCacheParameters {
    /// Hashes remembered per endpoint.
    pub fn entries(&self) -> usize {
        entries_per_endpoint(self.cache_size_in_mb_per_server)
    }
}

/// Hashes remembered per endpoint for a budget of `mb` MiB, as upstream converts it (at least
/// 1), capped at [`MAX_ENTRIES_PER_ENDPOINT`].
pub fn entries_per_endpoint(mb: i64) -> usize {
    let mb = if mb <= 0 { DEFAULT_CACHE_SIZE_MB } else { mb };
    let n = (mb / MIB_PER_ITEM).max(1);
    usize::try_from(n).map_or(MAX_ENTRIES_PER_ENDPOINT, |n| {
        n.min(MAX_ENTRIES_PER_ENDPOINT)
    })
}

/// Builds an `mm-embeddings-cache-producer`: the [`EncoderCache`] kept in the shared
/// resources under [`cache_resource_name`] of the plugin's name (a reload keeps what it
/// learned, at the new capacity). Scorers record picks into it and read it; the cache forgets
/// endpoints that leave the pool.
pub fn factory(args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    let parameters: MmCacheParameters = args.parse()?;
    let entries = parameters.entries();
    let cache = args
        .resources
        .get_or_insert_with(&cache_resource_name(args.name), || {
            EncoderCache::named(args.name, entries)
        });
    cache.set_capacity(entries);
    Ok(PluginInstance::default()
        .with_membership_listener(Arc::clone(&cache) as Arc<_>)
        .with_metrics_source(cache))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn upstreams_conversion_and_bad_keys() {
        assert_eq!(entries_per_endpoint(-5), 2048);
        assert_eq!(entries_per_endpoint(3), 1);
        assert_eq!(entries_per_endpoint(i64::MAX), MAX_ENTRIES_PER_ENDPOINT);
        let p: MmCacheParameters =
            serde_json::from_value(serde_json::json!({"cacheSizeInMBPerServer": 4096})).unwrap();
        assert_eq!(p.entries(), 2048);
        assert!(
            serde_json::from_value::<MmCacheParameters>(serde_json::json!({"cacheSize": 1}))
                .is_err()
        );
        assert!(
            serde_json::from_value::<MmCacheParameters>(
                serde_json::json!({"cacheSizeInMBPerServer": "big"})
            )
            .is_err()
        );
    }
}
