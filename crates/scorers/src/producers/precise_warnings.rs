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
