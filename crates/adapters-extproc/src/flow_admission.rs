//! The runtime's flow controller as the picker's admission hook.

use std::fmt;

use shepherd_adapters_extproc::{Admission, Admitted, BoxFuture, Rejection};
use shepherd_runtime::flow::FlowController;
use shepherd_scheduler_core::request::InferenceRequest;

/// Asks the flow controller before each request is scheduled: it waits while the pool is
/// saturated, and a drop is answered with its status and `x-shepherd-dropped-reason`.
pub(crate) struct FlowAdmission(pub(crate) FlowController);

impl Admission for FlowAdmission {
    fn admit<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<Admitted, Rejection>> {
        Box::pin(async move {
            match self.0.admit(self.0.request_of(request)).await {
                Ok(permit) => Ok(Admitted::holding(permit)),
                Err(reason) => {
                    tracing::info!(
                        request_id = %request.id,
                        priority = request.priority,
                        reason = reason.as_str(),
                        "flow control dropped a request"
                    );
                    Err(Rejection::Dropped(reason))
                }
            }
        })
    }
}

impl fmt::Debug for FlowAdmission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FlowAdmission").field(&self.0).finish()
    }
}
