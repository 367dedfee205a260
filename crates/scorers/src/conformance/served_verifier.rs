//! `destination-endpoint-served-verifier` (a conformance-test plugin upstream): adds to every
//! response the header `x-conformance-test-served-endpoint`, naming the endpoint that served
//! the request as the gateway reported it (Envoy: the `envoy.lb` metadata key
//! `x-gateway-destination-endpoint-served`), or upstream's failure text when the report is
//! missing, so a conformance suite can check that the gateway went where the picker said.
//!
//! `shepherd-epp` reads the report from the metadata Envoy sends with the response headers;
//! `shepherd-gateway` forwards the request itself and names the endpoint it sent it to. The
//! plugin takes no parameters (upstream ignores any).
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::prelude::*;
//! use shepherd_scheduler_core::response_headers::ResponseHeader;
//! use shepherd_scorers::builtin_registry;
//!
//! let config = EndpointPickerConfig::from_yaml(
//!     "plugins:\n- type: destination-endpoint-served-verifier\n- type: random-picker\n",
//! ).unwrap();
//! let pool = Arc::new(Pool::new());
//! pool.set_members(["127.0.0.1:8000"]);
//! let scheduler = build_scheduler(&config, &builtin_registry(), pool).unwrap();
//! assert_eq!(&scheduler.response_headers()[..], [ResponseHeader::served_endpoint()]);
//! ```

use shepherd_scheduler_core::config::{PluginArgs, PluginError};
use shepherd_scheduler_core::plugin::PluginInstance;
use shepherd_scheduler_core::response_headers::ResponseHeader;

/// Registry type name.
pub const TYPE_NAME: &str = "destination-endpoint-served-verifier";

/// Builds the verifier: no scheduling facet, one response header.
pub fn factory(_args: &PluginArgs<'_>) -> Result<PluginInstance, PluginError> {
    Ok(PluginInstance::default().with_response_headers(vec![ResponseHeader::served_endpoint()]))
}
