use std::fmt;
use std::sync::Arc;

use super::{CompletedRequest, Completion, CompletionHook, Outcome};
use crate::clock::{Clock, Timestamp};
use crate::endpoint::{Endpoint, InFlightGuard};
use crate::metrics::CoreMetrics;

/// What every handle of one scheduler shares: the completion hooks, the counters and the clock.
pub(crate) struct Completer {
    pub(crate) hooks: Vec<Arc<dyn CompletionHook>>,
    pub(crate) metrics: Arc<CoreMetrics>,
    pub(crate) clock: Arc<dyn Clock>,
}

/// A scheduled request while it is served: counts it in flight on its endpoint and runs the
/// completion hooks exactly once when it ends. See the [module docs](super).
///
/// It holds a small summary of the request (id, model, prompt-token estimate), never the
/// request itself.
#[must_use = "dropping the handle ends the request as cancelled"]
pub struct RequestHandle {
    guard: InFlightGuard,
    /// Primary first, then the fallbacks in order; `current` indexes the one serving.
    endpoints: Vec<Arc<Endpoint>>,
    current: usize,
    /// The id then the model; `id_len` splits them.
    id_and_model: SmallText,
    id_len: usize,
    prompt_tokens: u64,
    scheduled_at: Timestamp,
    first_token_at: Option<Timestamp>,
    /// `None` for a dry run, which never completes anything.
    completer: Option<Arc<Completer>>,
    finished: bool,
    /// The prefill stage of a disaggregated request: it ends with the first token (the decode
    /// server got the KV cache), or with this request (a success, or else cancelled).
    prefill: Option<Box<RequestHandle>>,
    /// The encode stage of a disaggregated request (its handle, counting the first encode
    /// server, and one guard for each other encode server): it ends as the prefill stage does.
    encode: Option<Box<EncodeHandles>>,
}

/// An encode stage in flight: the stage's handle and the other encode servers' counts.
struct EncodeHandles {
    handle: RequestHandle,
    #[expect(
        dead_code,
        reason = "held only for the counts its guards keep until dropped"
    )]
    others: Vec<InFlightGuard>,
}

impl RequestHandle {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        guard: InFlightGuard,
        endpoints: Vec<Arc<Endpoint>>,
        id: &str,
        model: &str,
        prompt_tokens: u64,
        scheduled_at: Timestamp,
        completer: Option<Arc<Completer>>,
    ) -> Self {
        RequestHandle {
            guard,
            endpoints,
            current: 0,
            id_and_model: SmallText::concat(id, model),
            id_len: id.len(),
            prompt_tokens,
            scheduled_at,
            first_token_at: None,
            // A dry run ran no pick hooks: its completion runs no hooks either.
            finished: completer.is_none(),
            completer,
            prefill: None,
            encode: None,
        }
    }

    /// Makes `prefill` this request's prefill stage (see the field). The stage's own counters
    /// carry the pending prefill on the prefill server, so this endpoint's are released: the
    /// decode server does not prefill the prompt (and a prefill server that decodes too would
    /// otherwise count it twice).
    pub(crate) fn attach_prefill(&mut self, prefill: RequestHandle) {
        self.guard.prefill_done();
        self.prefill = Some(Box::new(prefill));
    }

    /// Makes `encode` this request's encode stage: every server it picked counts the request
    /// in flight (none of them prefills it) until the first token, or the request's end.
    pub(crate) fn attach_encode(&mut self, mut encode: RequestHandle) {
        encode.guard.prefill_done();
        let others = match &encode.completer {
            // A dry run counts nothing.
            None => Vec::new(),
            Some(_) => encode
                .endpoints
                .iter()
                .skip(1)
                .map(|e| e.start_request_uncached(encode.prompt_tokens, 0))
                .collect(),
        };
        self.encode = Some(Box::new(EncodeHandles {
            handle: encode,
            others,
        }));
    }

    /// The encode stage's handle, while it runs.
    pub fn encode(&self) -> Option<&RequestHandle> {
        self.encode.as_deref().map(|e| &e.handle)
    }

    /// The prefill stage's handle, while it runs.
    pub fn prefill(&self) -> Option<&RequestHandle> {
        self.prefill.as_deref()
    }

    /// The request id.
    pub fn id(&self) -> &str {
        self.id_and_model
            .as_str()
            .get(..self.id_len)
            .unwrap_or_default()
    }

    /// The model (or LoRA adapter) the request targets.
    pub fn model(&self) -> &str {
        self.id_and_model
            .as_str()
            .get(self.id_len..)
            .unwrap_or_default()
    }

    /// The endpoint serving the request now (the primary, unless moved to a fallback).
    pub fn endpoint(&self) -> &Arc<Endpoint> {
        self.guard.endpoint()
    }

    /// Every endpoint of the decision, primary first.
    pub fn endpoints(&self) -> &[Arc<Endpoint>] {
        &self.endpoints
    }

    /// When the request was scheduled.
    pub fn scheduled_at(&self) -> Timestamp {
        self.scheduled_at
    }

    /// The first token came back: the endpoint's pending prefill for this request is released
    /// (the request stays in flight) and the time is recorded for the hooks. Calling it again
    /// does nothing.
    pub fn first_token(&mut self) {
        if self.first_token_at.is_none()
            && let Some(c) = &self.completer
        {
            self.first_token_at = Some(c.clock.now());
        }
        self.guard.prefill_done();
        if let Some(prefill) = self.prefill.take() {
            prefill.finish(Completion::success(None));
        }
        if let Some(encode) = self.encode.take() {
            encode.handle.finish(Completion::success(None));
        }
    }

    /// Uncached prompt tokens of this request still counted as pending prefill.
    pub fn pending_prefill_tokens(&self) -> u64 {
        self.guard.pending_prefill_tokens()
    }

    /// The endpoint serving the request could not take it (connection refused before any byte
    /// was sent): moves the request, and its in-flight count, to the next fallback and returns
    /// it; `None` when no fallback is left (the handle is unchanged).
    pub fn move_to_fallback(&mut self) -> Option<&Arc<Endpoint>> {
        let next = self.endpoints.get(self.current + 1)?;
        // Nothing is known to be cached there: the whole prompt is pending prefill.
        self.guard = next.start_request(self.prompt_tokens);
        self.current += 1;
        if let Some(c) = &self.completer {
            c.metrics.record_fallback();
        }
        Some(self.guard.endpoint())
    }

    /// Whether the request was moved to a fallback.
    pub fn used_fallback(&self) -> bool {
        self.current > 0
    }

    /// The request ended as `completion` says: runs the completion hooks, then releases the
    /// in-flight counters. (The handle of a dry run runs no hooks.)
    pub fn finish(mut self, completion: Completion) {
        self.complete(completion);
    }

    fn complete(&mut self, completion: Completion) {
        if let Some(mut prefill) = self.prefill.take() {
            // Without a first token the prefill's fate is unknown: a decode failure is not
            // the prefill server's.
            let outcome = match completion.outcome {
                Outcome::Success => Outcome::Success,
                _ => Outcome::Cancelled,
            };
            prefill.complete(Completion {
                outcome,
                usage: None,
                first_token_at: None,
            });
        }
        if let Some(mut encode) = self.encode.take() {
            let outcome = match completion.outcome {
                Outcome::Success => Outcome::Success,
                _ => Outcome::Cancelled,
            };
            encode.handle.complete(Completion {
                outcome,
                usage: None,
                first_token_at: None,
            });
        }
        if self.finished {
            return;
        }
        self.finished = true;
        let Some(completer) = self.completer.clone() else {
            return;
        };
        if !completer.hooks.is_empty() {
            let completion = Completion {
                first_token_at: completion.first_token_at.or(self.first_token_at),
                ..completion
            };
            let text = self.id_and_model.as_str();
            let (id, model) = text.split_at(self.id_len.min(text.len()));
            let request = CompletedRequest {
                id,
                model,
                endpoint: self.guard.endpoint(),
                prompt_tokens: self.prompt_tokens,
                scheduled_at: self.scheduled_at,
                first_token_at: completion.first_token_at,
                finished_at: completer.clock.now(),
                used_fallback: self.current > 0,
            };
            for hook in &completer.hooks {
                hook.on_complete(&request, &completion);
            }
        }
        completer.metrics.record_completion(completion.outcome);
    }
}

impl Drop for RequestHandle {
    fn drop(&mut self) {
        if !self.finished {
            self.complete(Completion {
                outcome: Outcome::Cancelled,
                usage: None,
                first_token_at: None,
            });
        }
        // The endpoint list's allocation serves this thread's next pick.
        crate::scheduler::spare::give_endpoints(std::mem::take(&mut self.endpoints));
    }
}

impl fmt::Debug for RequestHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestHandle")
            .field("id", &self.id())
            .field("model", &self.model())
            .field("endpoint", &self.guard.endpoint().address())
            .field("prompt_tokens", &self.prompt_tokens)
            .field("used_fallback", &self.used_fallback())
            .finish()
    }
}

/// Bytes of text a handle keeps without allocating: a generated id (32) plus a typical model
/// name.
const INLINE_TEXT: usize = 80;

/// Two short strings kept inline (no allocation on the request path), longer ones on the heap.
enum SmallText {
    Inline { len: u8, bytes: [u8; INLINE_TEXT] },
    Heap(Box<str>),
}

impl SmallText {
    fn concat(a: &str, b: &str) -> Self {
        let len = a.len() + b.len();
        if len <= INLINE_TEXT {
            let mut bytes = [0u8; INLINE_TEXT];
            bytes[..a.len()].copy_from_slice(a.as_bytes());
            bytes[a.len()..len].copy_from_slice(b.as_bytes());
            SmallText::Inline {
                len: len as u8,
                bytes,
            }
        } else {
            SmallText::Heap([a, b].concat().into_boxed_str())
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Always two whole `str`s copied back to back: valid UTF-8.
            SmallText::Inline { len, bytes } => {
                std::str::from_utf8(&bytes[..usize::from(*len)]).unwrap_or_default()
            }
            SmallText::Heap(s) => s,
        }
    }
}
