//! Prefill/decode disaggregation in the runner: what llm-d's routing sidecar on the decode
//! server does with a decision that has a prefill stage.
//!
//! 1. The request passes the **prefill server's** frontend and reaches its engine as a
//!    prefill-only job (the prompt and one output token, under the id
//!    `id | `[`PREFILL_JOB`]): it queues and batches there as any request, and leaves its
//!    prompt's blocks in that server's prefix cache.
//! 2. When the job finishes, the request goes to the **decode server**: its frontend, then the
//!    KV transfer of the prompt tokens the decode server does not already cache (its leading
//!    cached blocks at that moment), priced by the scenario's
//!    [`KvTransfer`](crate::engine::KvTransfer) model.
//! 3. When the KV has arrived, the decode engine takes the request with its prompt present
//!    ([`Engine::add_transferred`](crate::engine::Engine::add_transferred)): it computes only
//!    the last prompt token before the first output token, then decodes. The first token there
//!    is the request's first token (TTFT includes the prefill's queueing, the prefill and the
//!    transfer), and it ends the decision's prefill stage.
//!
//! **Fallback**: a prefill server whose engine refuses the job, or that has not finished it
//! within the scenario's `kvTransfer.prefillTimeoutS`, loses it (the job is aborted) and the
//! request is served aggregated by its decode server, through that server's frontend, as if it
//! had never been disaggregated. The decision's prefill stage then stays counted in flight on
//! the prefill server until the decode server's first token (the handle has no separate end
//! for an abandoned prefill).
//!
//! A decision whose prefill server is its decode server is served aggregated: there is
//! nothing to move.

use crate::engine::{EngineEvent, EngineRequest};

use super::events::Event;
use super::{NS, Sim};

/// Marks a prefill-only job's engine id: the request's id with the top bit set, so the job
/// never collides with the request itself (should both land on one engine).
pub(super) const PREFILL_JOB: u64 = 1 << 63;

/// Where a disaggregated request's prefill stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// In the prefill server's frontend.
    Frontend,
    /// In the prefill server's engine.
    Prefilling,
    /// Prefilled; in the decode server's frontend and on the link.
    Transferring,
}

/// A disaggregated request before its decode server takes it.
#[derive(Debug)]
pub(super) struct PdStage {
    /// The prefill server.
    prefill: u32,
    /// The request as the decode server will take it.
    request: EngineRequest,
    phase: Phase,
}

/// The request id of a prefill-only job's engine event, when it is one.
pub(super) fn prefill_job(event: &EngineEvent) -> Option<u64> {
    let id = match *event {
        EngineEvent::Scheduled { id }
        | EngineEvent::FirstToken { id }
        | EngineEvent::Finished { id, .. } => id,
    };
    (id & PREFILL_JOB != 0).then_some(id & !PREFILL_JOB)
}

impl Sim<'_> {
    /// Sends `request` (already live, its decode server picked) to prefill server `prefill`'s
    /// frontend.
    pub(super) fn start_prefill(&mut self, now: u64, request: EngineRequest, prefill: u32) {
        let id = request.id;
        let frontend = self.scenario.engine.cost.frontend_nanos(request.prompt_len);
        self.disagg.insert(
            id,
            PdStage {
                prefill,
                request,
                phase: Phase::Frontend,
            },
        );
        self.queue.push(now + frontend, Event::PrefillDeliver(id));
    }

    /// The request has passed the prefill server's frontend: its prefill-only job reaches that
    /// engine, or, refused, the request falls back to aggregated serving.
    pub(super) fn on_prefill_deliver(&mut self, now: u64, id: u64) {
        let Some(stage) = self.disagg.get_mut(&id) else {
            return;
        };
        let job = EngineRequest {
            id: id | PREFILL_JOB,
            prompt_len: stage.request.prompt_len,
            output_len: 1,
            block_hashes: stage.request.block_hashes.clone(),
            tokens: stage.request.tokens.clone(),
        };
        let prefill = stage.prefill;
        if self.engines[prefill as usize]
            .add_request(job, now)
            .is_err()
        {
            self.fall_back(now, id);
            return;
        }
        stage.phase = Phase::Prefilling;
        if let Some(t) = self.scenario.kv_transfer.prefill_timeout_s {
            self.queue
                .push(now + (t * NS) as u64, Event::PrefillTimeout(id));
        }
        self.kick(prefill, now);
    }

    /// An engine event of request `id`'s prefill-only job.
    pub(super) fn on_prefill_event(&mut self, now: u64, id: u64, event: EngineEvent) {
        match event {
            EngineEvent::Scheduled { .. } => {
                if let Some(live) = self.live.get(&id) {
                    self.records[live.record].first_scheduled.get_or_insert(now);
                }
            }
            EngineEvent::FirstToken { .. } => {}
            EngineEvent::Finished { .. } => self.on_prefill_finished(now, id),
        }
    }

    /// The prefill is done: the request leaves for its decode server's frontend, and its KV
    /// for the decode server's memory.
    fn on_prefill_finished(&mut self, now: u64, id: u64) {
        let (Some(stage), Some(live)) = (self.disagg.get_mut(&id), self.live.get(&id)) else {
            return;
        };
        let decode = live.server;
        let bs = self.scenario.engine.block_size;
        let request = &stage.request;
        let prompt_blocks = ((request.prompt_len / bs) as usize).min(request.block_hashes.len());
        let cached = self.engines[decode as usize]
            .cached_prefix_blocks(&request.block_hashes[..prompt_blocks])
            as u32
            * bs;
        let moved = request.prompt_len - cached.min(request.prompt_len);
        let delay = self.scenario.engine.cost.frontend_nanos(request.prompt_len)
            + self.scenario.kv_transfer.transfer_nanos(moved);
        stage.phase = Phase::Transferring;
        let record = &mut self.records[live.record];
        record.prefill_server = Some(stage.prefill);
        record.transferred_tokens = moved;
        self.queue.push(now + delay, Event::KvArrived(id));
    }

    /// The KV has arrived: the decode engine takes the request with its prompt present.
    pub(super) fn on_kv_arrived(&mut self, now: u64, id: u64) {
        let Some(stage) = self.disagg.remove(&id) else {
            return;
        };
        let Some(server) = self.live.get(&id).map(|l| l.server) else {
            return;
        };
        if self.engines[server as usize]
            .add_transferred(stage.request, now)
            .is_err()
        {
            self.drop_live(now, id);
            return;
        }
        self.kick(server, now);
    }

    /// The prefill server has had the job for `prefillTimeoutS`: unless it has finished, it is
    /// aborted there and the request served aggregated.
    pub(super) fn on_prefill_timeout(&mut self, now: u64, id: u64) {
        let Some(stage) = self.disagg.get(&id) else {
            return;
        };
        if stage.phase != Phase::Prefilling {
            return;
        }
        let prefill = stage.prefill;
        self.engines[prefill as usize].abort(id | PREFILL_JOB);
        self.fall_back(now, id);
    }

    /// Serves request `id` aggregated by its decode server: through that server's frontend to
    /// its engine.
    fn fall_back(&mut self, now: u64, id: u64) {
        let Some(stage) = self.disagg.remove(&id) else {
            return;
        };
        self.prefill_fallbacks += 1;
        let frontend = self
            .scenario
            .engine
            .cost
            .frontend_nanos(stage.request.prompt_len);
        if frontend == 0 {
            self.deliver(now, stage.request);
        } else {
            self.delivering.insert(id, stage.request);
            self.queue.push(now + frontend, Event::Deliver(id));
        }
    }

    /// Forgets request `id`'s prefill stage, if it has one, aborting its job on the prefill
    /// server (the request timed out).
    pub(super) fn abandon_prefill(&mut self, id: u64) {
        if let Some(stage) = self.disagg.remove(&id)
            && stage.phase == Phase::Prefilling
        {
            self.engines[stage.prefill as usize].abort(id | PREFILL_JOB);
        }
    }
}
