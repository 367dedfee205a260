//! The response side of an [`Exchange`]: the response headers, body and trailers Envoy sends
//! once a request was routed, what they say of the request's fate (the server that served it,
//! a failure, the usage the body reports), and the request's finish. The answer to the
//! response's end carries the `request-attribute-reporter`s' values as dynamic metadata.

use crate::answer::{self, Replies};
use crate::error::ProtocolError;
use crate::headers::header_value;
use crate::hint::{ServedReport, served_endpoint, served_report};
use crate::options::BodyMode;
use envoy_types::pb::envoy::config::core::v3::Metadata;
use envoy_types::pb::envoy::service::ext_proc::v3::{HttpBody, HttpHeaders};
use envoy_types::pb::google::protobuf::Struct;
use shepherd_scheduler_core::completion::{Completion, RequestHandle};
use shepherd_scheduler_core::response_headers::{ServedReport as StampReport, stamp};

use super::report::reported_metadata;
use super::{Exchange, Phase, Serving, Step};

impl Exchange {
    pub(super) fn on_response_headers(
        &mut self,
        headers: HttpHeaders,
        metadata: Option<&Metadata>,
    ) -> Result<Option<Step>, ProtocolError> {
        let serving = match &mut self.phase {
            Phase::Forwarded(serving) => serving,
            Phase::Done => {
                return Ok(Some(Step::Reply(Replies::one(
                    answer::pass_response_headers(),
                ))));
            }
            _ => return Err(self.unexpected("response headers")),
        };
        let map = headers.headers.as_ref();
        let status = header_value(map, ":status").and_then(|s| s.trim().parse::<u16>().ok());
        serving.failed = status.is_some_and(|s| !(200..300).contains(&s));
        if let (Some(status), true, Some(observation)) =
            (status, serving.failed, serving.observation.as_mut())
        {
            observation.error(&status.to_string());
        }
        let served = served_endpoint(metadata, &self.options.metadata).or_else(|| {
            header_value(map, &self.options.headers.served).map(|v| v.trim().to_string())
        });
        if let Some(served) = served {
            move_to_served(&mut serving.handle, &served);
        }
        let stamped = if self.response_headers.is_empty() {
            Vec::new()
        } else {
            let report = served_report(metadata, &self.options.metadata);
            let report = match &report {
                ServedReport::NoNamespace => StampReport::NoNamespace,
                ServedReport::NoServedKey => StampReport::NoServedKey,
                ServedReport::Address(a) => StampReport::Address(a),
            };
            let endpoint = serving.handle.endpoint();
            stamp(&self.response_headers, report, |key| {
                endpoint.labels().get(key).cloned()
            })
        };
        let answer = answer::stamp_response_headers(&stamped);
        if headers.end_of_stream || self.response_mode == BodyMode::None {
            let metadata = self.finish();
            let replies = Replies::one(answer).with_last_metadata(metadata);
            return Ok(Some(Step::Reply(replies)));
        }
        Ok(Some(Step::Reply(Replies::one(answer))))
    }

    pub(super) fn on_response_body(
        &mut self,
        body: HttpBody,
    ) -> Result<Option<Step>, ProtocolError> {
        let HttpBody {
            body: bytes,
            end_of_stream: end,
            ..
        } = body;
        match &mut self.phase {
            Phase::Forwarded(serving) => {
                if !serving.started && !bytes.is_empty() {
                    serving.started = true;
                    serving.handle.first_token();
                }
                if let Some(observation) = &mut serving.observation
                    && !bytes.is_empty()
                {
                    observation.first_byte();
                    observation.response_bytes(bytes.len());
                }
                serving.scanner.push(&bytes);
            }
            // Not ours to judge any more, but a duplex body must still flow through.
            Phase::Done => {}
            _ => return Err(self.unexpected("response body")),
        }
        let mut reply = if self.response_mode == BodyMode::FullDuplexStreamed {
            let chunks = answer::echo_response_body(bytes, end, self.options.chunk_size);
            Replies::new(Vec::new(), Some(chunks), None)
        } else {
            Replies::one(answer::pass_response_body())
        };
        if end {
            reply = reply.with_last_metadata(self.finish());
        }
        Ok(Some(Step::Reply(reply)))
    }

    pub(super) fn on_response_trailers(&mut self) -> Result<Option<Step>, ProtocolError> {
        let metadata = match &self.phase {
            Phase::Forwarded(_) => self.finish(),
            Phase::Done => None,
            _ => return Err(self.unexpected("response trailers")),
        };
        let reply = Replies::one(answer::response_trailers()).with_last_metadata(metadata);
        Ok(Some(Step::Reply(reply)))
    }

    /// The response ended: finish the handle with what was learned, and give the
    /// reporters' dynamic metadata for the answer to the end.
    pub(super) fn finish(&mut self) -> Option<Struct> {
        let mut reported = None;
        if let Phase::Forwarded(serving) = std::mem::replace(&mut self.phase, Phase::Done) {
            let Serving {
                handle,
                failed,
                scanner,
                observation,
                ..
            } = *serving;
            let completion = if failed {
                Completion::failed()
            } else {
                Completion::success(scanner.usage())
            };
            if !failed && !self.reporters.is_empty() {
                reported = reported_metadata(&self.reporters, completion.usage.as_ref());
            }
            if let Some(observation) = observation {
                observation.finish(completion.usage.as_ref());
            }
            handle.finish(completion);
        }
        reported
    }
}

/// Moves `handle` to the fallback that served the response, when it is a later one.
fn move_to_served(handle: &mut RequestHandle, served: &str) {
    let current = handle.endpoint().address();
    if current == served {
        return;
    }
    let Some(target) = handle
        .endpoints()
        .iter()
        .position(|e| e.address() == served)
    else {
        tracing::debug!(served, "served endpoint is not one the picker named");
        return;
    };
    let Some(now) = handle
        .endpoints()
        .iter()
        .position(|e| e.address() == current)
    else {
        return;
    };
    for _ in now..target {
        if handle.move_to_fallback().is_none() {
            break;
        }
    }
}
