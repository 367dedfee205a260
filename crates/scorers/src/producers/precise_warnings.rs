//! What a `precise-prefix-cache-producer` (or `-scorer`) accepts and does not use: nested keys
//! upstream's decoder ignores, and the deprecated in-indexer tokenizer. Each becomes a warning
//! (see [`crate::parameter_warnings`]), never a refusal.

use std::collections::BTreeMap;

use super::precise_prefix::PrecisePrefixParameters;

impl PrecisePrefixParameters {
    /// One line per parameter accepted and not used.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let mut ignored = |at: &str, keys: &BTreeMap<String, serde_json::Value>| {
            warnings.extend(keys.keys().map(|key| {
                format!("`{at}.{key}` is not read by Shepherd and is ignored, as upstream's decoder ignores keys it does not know")
            }));
        };
        ignored("tokenProcessorConfig", &self.token_processor_config.ignored);
        ignored("indexerConfig", &self.indexer_config.ignored);
        ignored(
            "indexerConfig.kvBlockIndexConfig",
            &self.indexer_config.kv_block_index_config.ignored,
        );
        let index = &self.indexer_config.kv_block_index_config;
        let mut nested = Vec::new();
        let mut external_notes = Vec::new();
        for (name, external) in [
            ("redisConfig", &index.redis_config),
            ("valkeyConfig", &index.valkey_config),
        ] {
            let Some(external) = external else { continue };
            external_notes.push(format!(
                "`indexerConfig.kvBlockIndexConfig.{name}` is accepted and not connected to: every \
                 Shepherd replica hears every server's KV events and keeps the same index in its \
                 own memory, so the precise index needs no Redis (a pick never waits on it); the \
                 replicas share their load and approximate index through Redis with \
                 `replicas: {{backend: redis}}` (docs/replicas.md)"
            ));
            nested.push((name, &external.ignored));
        }
        for (name, keys) in nested {
            ignored(&format!("indexerConfig.kvBlockIndexConfig.{name}"), keys);
        }
        warnings.extend(external_notes);
        if self.indexer_config.tokenizers_pool_config.is_some() {
            warnings.push(
                "`indexerConfig.tokenizersPoolConfig` is deprecated upstream and ignored: \
                 tokenization is the `token-producer`'s (without one, requests are cut into \
                 blocks from their own token ids, else from 4-byte pseudo tokens, which match \
                 only servers that tokenize the same way)"
                    .to_string(),
            );
        }
        warnings
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn upstreams_redis_index_is_accepted_with_a_warning_and_never_shown() {
        let p: PrecisePrefixParameters = serde_json::from_value(serde_json::json!({
            "indexerConfig": {"kvBlockIndexConfig": {
                "redisConfig": {"address": "redis://user:s3cret@redis:6379/0"},
                "enableMetrics": true
            }}
        }))
        .unwrap();
        assert!(p.validate().is_ok());
        let warnings = p.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("redisConfig") && warnings[0].contains("backend: redis"));
        assert!(!format!("{p:?} {warnings:?}").contains("s3cret"));
        let valkey: PrecisePrefixParameters = serde_json::from_value(serde_json::json!({
            "indexerConfig": {"kvBlockIndexConfig": {"valkeyConfig": {
                "address": "valkey://valkey:6379", "backendType": "valkey", "enableRDMA": false
            }}}
        }))
        .unwrap();
        assert!(valkey.validate().is_ok());
        let wrong: PrecisePrefixParameters = serde_json::from_value(serde_json::json!({
            "indexerConfig": {"kvBlockIndexConfig": {"redisConfig": {"backendType": "memcached"}}}
        }))
        .unwrap();
        assert!(wrong.validate().is_err());
        let cost: PrecisePrefixParameters = serde_json::from_value(serde_json::json!({
            "indexerConfig": {"kvBlockIndexConfig": {"costAwareMemoryConfig": {"size": "2GiB"}}}
        }))
        .unwrap();
        assert!(cost.validate().is_err());
    }

    #[test]
    fn the_older_scorers_nested_keys_load_with_a_warning_each() {
        // The inference scheduler's README example of the all-in-one scorer.
        let p: PrecisePrefixParameters = serde_json::from_value(serde_json::json!({
            "tokenProcessorConfig": {"blockSize": 16, "hashSeed": "12345"},
            "kvEventsConfig": {"topicFilter": "kv@", "concurrency": 4, "discoverPods": true,
                               "podDiscoveryConfig": {"socketPort": 5556}},
            "indexerConfig": {
                "prefixStoreConfig": {"cacheSize": 500000, "blockSize": 256},
                "kvBlockIndexConfig": {"inMemoryConfig": {"size": 100000000, "podCacheSize": 10},
                                       "enableMetrics": true},
                "tokenizersPoolConfig": {"modelName": "hf-repo/model-name", "workersCount": 8}
            }
        }))
        .unwrap();
        assert!(p.validate().is_ok());
        let warnings = p.warnings();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("indexerConfig.prefixStoreConfig"));
        assert!(warnings[1].contains("tokenizersPoolConfig"));
        // Outside upstream's nested configs, a typo is still an error.
        assert!(
            serde_json::from_value::<PrecisePrefixParameters>(
                serde_json::json!({"speculativeIndexin": true})
            )
            .is_err()
        );
    }
}
