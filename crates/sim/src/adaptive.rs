//! Binding to the other Shepherd crates: the built-in plugin registry and the adaptive
//! controller.

use shepherd_scheduler_core::config::Registry;
use shepherd_scheduler_core::scheduler::Scheduler;

use crate::error::SimError;
use crate::policy::Policy;
use crate::runner::TickDriver;

/// The registry of built-in plugins.
pub(crate) fn base_registry() -> Registry {
    shepherd_scorers::builtin_registry()
}

/// The adaptive controller for `policy`, bound to the default profile of `scheduler`.
pub(crate) fn driver(
    _policy: &Policy,
    _scheduler: &Scheduler,
) -> Result<Option<Box<dyn TickDriver>>, SimError> {
    Ok(None)
}
