//! Turning a [`Rejection`] into the `ImmediateResponse` Envoy sends to the client instead of
//! forwarding the request.
//!
//! Every rejection carries its HTTP status, the header `x-shepherd-dropped-reason: <reason>`,
//! `content-type: application/json`, and a small body in the shape OpenAI clients understand:
//!
//! ```json
//! {"error":{"message":"unknown model `gpt-9`","type":"unknown_model","code":404}}
//! ```
//!
//! `details` (Envoy's `%RESPONSE_CODE_DETAILS%` in access logs) is `shepherd_<reason>`.
//!
//! ```
//! use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
//! use shepherd_adapters_extproc::{reject::immediate_response, ExtProcOptions, Rejection};
//!
//! let answer = immediate_response(&Rejection::EmptySubset, &ExtProcOptions::default());
//! let Some(Response::ImmediateResponse(immediate)) = answer.response else { unreachable!() };
//! assert_eq!(immediate.status.unwrap().code, 503);
//! assert_eq!(immediate.details, "shepherd_empty_subset");
//! ```

use envoy_types::pb::envoy::service::ext_proc::v3::processing_response::Response;
use envoy_types::pb::envoy::service::ext_proc::v3::{
    HeaderMutation, ImmediateResponse, ProcessingResponse,
};
use envoy_types::pb::envoy::r#type::v3::HttpStatus;

use shepherd_scheduler_core::echo::{MAX_MESSAGE_BYTES, truncated};

use crate::error::Rejection;
use crate::headers::set_header;
use crate::options::ExtProcOptions;

/// The JSON body of a rejection; its message at most
/// [`MAX_MESSAGE_BYTES`], however much of
/// the client's text (a model name) it quotes.
pub fn error_body(rejection: &Rejection) -> Vec<u8> {
    let message = rejection.to_string();
    let body = serde_json::json!({
        "error": {
            "message": truncated(&message, MAX_MESSAGE_BYTES),
            "type": rejection.reason(),
            "code": rejection.http_status(),
        }
    });
    body.to_string().into_bytes()
}

/// The `ImmediateResponse` answering `rejection`. See the [module docs](self).
pub fn immediate_response(rejection: &Rejection, options: &ExtProcOptions) -> ProcessingResponse {
    let reason = rejection.reason();
    let immediate = ImmediateResponse {
        status: Some(HttpStatus {
            code: i32::from(rejection.http_status()),
        }),
        headers: Some(HeaderMutation {
            set_headers: vec![
                set_header(&options.headers.dropped_reason, reason),
                set_header("content-type", "application/json"),
            ],
            remove_headers: Vec::new(),
        }),
        body: error_body(rejection),
        grpc_status: None,
        details: format!("shepherd_{reason}"),
    };
    ProcessingResponse {
        response: Some(Response::ImmediateResponse(immediate)),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_huge_model_name_is_not_echoed_whole() {
        let body = error_body(&Rejection::UnknownModel("m".repeat(15 << 20)));
        assert!(body.len() < 2 * MAX_MESSAGE_BYTES, "{} bytes", body.len());
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"]["type"], "unknown_model");
    }
}
