//! What the simulated engine gives for one calibration quantity, measured by running it.

use crate::engine::{BatchShape, Engine, EngineConfig, EngineEvent, EngineRequest};

/// A quantity the simulated engine can be measured on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Measure {
    /// Time to first token of a lone request with this many prompt tokens on an idle server,
    /// frontend included (ms).
    Ttft {
        /// Prompt tokens.
        prompt: u32,
    },
    /// Duration of one decode step of `batch` requests, each with `context` tokens (ms).
    DecodeStep {
        /// Decoding requests.
        batch: u32,
        /// Context tokens of each.
        context: u32,
    },
    /// Prompt tokens per second of a lone request's prefill, time to first token without the
    /// frontend.
    PrefillThroughput {
        /// Prompt tokens.
        prompt: u32,
    },
    /// The matmul part of one forward pass over this many tokens (ms): what a profile of the
    /// linear layers alone measures.
    LinearLayers {
        /// Tokens in the forward pass.
        tokens: u32,
    },
    /// KV blocks of the GPU.
    KvBlocks,
}

impl Measure {
    /// The simulated value on `config`.
    pub fn simulate(&self, config: &EngineConfig) -> f64 {
        match *self {
            Measure::Ttft { prompt } => {
                let prefill = lone_prefill_ns(config, prompt);
                (prefill + config.cost.frontend_nanos(prompt)) as f64 / 1e6
            }
            Measure::DecodeStep { batch, context } => decode_step_ns(config, batch, context) / 1e6,
            Measure::PrefillThroughput { prompt } => {
                let ns = lone_prefill_ns(config, prompt).max(1);
                f64::from(prompt) / (ns as f64 / 1e9)
            }
            Measure::LinearLayers { tokens } => config.cost.matmul_ns(f64::from(tokens)) / 1e6,
            Measure::KvBlocks => f64::from(config.num_gpu_blocks),
        }
    }
}

/// The prefill of a lone request on an idle engine: from its arrival at the engine to its
/// first token.
fn lone_prefill_ns(config: &EngineConfig, prompt: u32) -> u64 {
    let mut engine = Engine::new(*config);
    let request = EngineRequest {
        id: 1,
        prompt_len: prompt.max(1),
        output_len: 2,
        block_hashes: Vec::new(),
        tokens: None,
    };
    if engine.add_request(request, 0).is_err() {
        return 0;
    }
    let mut now = 0;
    while let Some(d) = engine.begin_step(now) {
        now += d;
        engine.finish_step(now);
        if engine
            .drain_events()
            .iter()
            .any(|e| matches!(e, EngineEvent::FirstToken { .. }))
        {
            break;
        }
    }
    now
}

/// One step of `batch` requests that are all decoding at `context` tokens each.
fn decode_step_ns(config: &EngineConfig, batch: u32, context: u32) -> f64 {
    let shape = BatchShape {
        requests: batch,
        decode_tokens: u64::from(batch),
        decode_context: u64::from(batch) * u64::from(context),
        ..BatchShape::default()
    };
    config.cost.step_nanos(&shape) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_prefill_is_the_sum_of_its_chunks() {
        let config = EngineConfig::h100_llama8b();
        let chunk = config.max_num_batched_tokens;
        let one = lone_prefill_ns(&config, chunk);
        let two = lone_prefill_ns(&config, 2 * chunk);
        // The second chunk attends to the first too, so it costs more than the first.
        assert!(two > 2 * one, "{one} {two}");
        let ttft = Measure::Ttft { prompt: chunk }.simulate(&config);
        let frontend = config.cost.frontend_nanos(chunk) as f64 / 1e6;
        assert!((ttft - one as f64 / 1e6 - frontend).abs() < 1e-9);
    }

    #[test]
    fn the_decode_step_grows_with_batch_and_context() {
        let config = EngineConfig::a100_llama8b();
        let step = |batch, context| Measure::DecodeStep { batch, context }.simulate(&config);
        assert!(step(1, 100) < step(32, 100));
        assert!(step(32, 100) < step(32, 4000));
        assert!(step(256, 100) < step(256, 1000));
    }
}
