//! Dynamo's router cuts prompts into the engine's KV block size: a worker registers its model
//! with the engine's `--block-size` (`register_llm(..., kv_cache_block_size =
//! engine_args.block_size)` in Dynamo's vLLM worker), and the frontend builds the KV router —
//! its indexer and its cost — with the registered size (`kv_chooser_for(...,
//! card.kv_cache_block_size, ...)`). [`follow_engine_block_size`] does the same to a policy
//! before a run: every `dynamo-kv-cost-scorer` without an explicit `blockSize` gets the
//! simulated engines' block size, and so does the `precise-prefix-cache-producer` it reads
//! (`prefixMatchInfoProducerName`), its stand-in for Dynamo's KV indexer, unless that one sets
//! `tokenProcessorConfig.blockSize` itself. A size written in the policy wins, as the
//! frontend's own `--kv-cache-block-size` flag does upstream.
//!
//! ```
//! # use shepherd_sim::policy::builtin_policy;
//! let mut policy = builtin_policy("dynamo").unwrap();
//! shepherd_sim::policy::follow_engine_block_size(&mut policy.config, 32);
//! let scorer = policy.config.plugins.iter().find(|p| p.plugin_type == "dynamo-kv-cost-scorer").unwrap();
//! assert_eq!(scorer.parameters["blockSize"], 32);
//! ```

use serde_json::{Map, Value};
use shepherd_scheduler_core::config::EndpointPickerConfig;

use super::TYPE_NAME;

/// Gives every Dynamo scorer of `config` that sets no `blockSize`, and the prefix producer it
/// reads, the engines' `block_size` (see the module docs). Parameters that are not a map are
/// left alone for the plugin's own parser to refuse.
pub fn follow_engine_block_size(config: &mut EndpointPickerConfig, block_size: u32) {
    let mut producers = Vec::new();
    for spec in config
        .plugins
        .iter_mut()
        .filter(|p| p.plugin_type == TYPE_NAME)
    {
        let Some(params) = object(&mut spec.parameters) else {
            continue;
        };
        params
            .entry("blockSize")
            .or_insert_with(|| Value::from(block_size));
        if let Some(Value::String(name)) = params.get("prefixMatchInfoProducerName") {
            producers.push(name.clone());
        }
    }
    for spec in config.plugins.iter_mut().filter(|p| {
        let name = p.name.as_deref().unwrap_or(p.plugin_type.as_str());
        producers.iter().any(|n| n == name)
    }) {
        let Some(params) = object(&mut spec.parameters) else {
            continue;
        };
        let processor = params
            .entry("tokenProcessorConfig")
            .or_insert_with(|| Value::Object(Map::new()));
        let Some(processor) = object(processor) else {
            continue;
        };
        if !processor.contains_key("blockSize") && !processor.contains_key("blockSizeTokens") {
            processor.insert("blockSize".into(), Value::from(block_size));
        }
    }
}

/// `value` as a JSON map (null, a plugin without parameters, becomes an empty one); `None`
/// for anything else.
fn object(value: &mut Value) -> Option<&mut Map<String, Value>> {
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    value.as_object_mut()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(yaml: &str) -> EndpointPickerConfig {
        EndpointPickerConfig::from_yaml(yaml).unwrap()
    }

    #[test]
    fn the_scorer_and_its_producer_take_the_engine_size() {
        let mut c = config(
            "plugins:\n- type: precise-prefix-cache-producer\n- type: dynamo-kv-cost-scorer\n  parameters: {prefixMatchInfoProducerName: precise-prefix-cache-producer}\n- type: max-score-picker\n",
        );
        follow_engine_block_size(&mut c, 64);
        assert_eq!(c.plugins[1].parameters["blockSize"], 64);
        assert_eq!(
            c.plugins[0].parameters["tokenProcessorConfig"]["blockSize"],
            64
        );
    }

    #[test]
    fn sizes_written_in_the_policy_win_and_others_are_untouched() {
        let mut c = config(
            "plugins:\n- type: precise-prefix-cache-producer\n  name: idx\n  parameters: {tokenProcessorConfig: {blockSizeTokens: 8}}\n- type: precise-prefix-cache-producer\n- type: dynamo-kv-cost-scorer\n  parameters: {blockSize: 16, prefixMatchInfoProducerName: idx}\n",
        );
        follow_engine_block_size(&mut c, 32);
        assert_eq!(c.plugins[2].parameters["blockSize"], 16);
        let idx = &c.plugins[0].parameters["tokenProcessorConfig"];
        assert_eq!(idx["blockSizeTokens"], 8);
        assert!(idx.get("blockSize").is_none());
        // A producer the Dynamo scorer does not read is Shepherd's, not Dynamo's.
        assert!(c.plugins[1].parameters.is_null());
    }
}
