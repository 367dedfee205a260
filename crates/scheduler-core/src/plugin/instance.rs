use std::sync::Arc;

use super::{Admitter, CompletionHook, Decider, Filter, PickHook, Picker, Scorer};
use crate::disagg::ProfileHandlerSpec;
use crate::endpoint::MembershipListener;
use crate::metrics::MetricsSource;
use crate::scheduler::HeaderProfileSelector;

/// A built plugin: the facets it implements, each ready to be wired into profiles.
///
/// ```
/// use std::sync::Arc;
/// use shepherd_scheduler_core::plugin::PluginInstance;
/// # use shepherd_scheduler_core::{endpoint::Endpoint, plugin::{Category, CycleState, Score, Scorer}};
/// # struct Constant;
/// # impl Scorer for Constant {
/// #     fn category(&self) -> Category { Category::Balance }
/// #     fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
/// #         out.fill(Score::new(1.0));
/// #     }
/// # }
/// let plugin = PluginInstance::scorer(Arc::new(Constant));
/// assert!(plugin.as_scorer().is_some());
/// assert!(plugin.as_picker().is_none());
/// ```
#[derive(Clone, Default)]
pub struct PluginInstance {
    admitter: Option<Arc<dyn Admitter>>,
    decider: Option<Arc<dyn Decider>>,
    profile_handler: Option<ProfileHandlerSpec>,
    profile_selector: Option<HeaderProfileSelector>,
    filter: Option<Arc<dyn Filter>>,
    scorer: Option<Arc<dyn Scorer>>,
    picker: Option<Arc<dyn Picker>>,
    pick_hook: Option<Arc<dyn PickHook>>,
    every_profile_hook: Option<Arc<dyn PickHook>>,
    completion_hook: Option<Arc<dyn CompletionHook>>,
    membership: Option<Arc<dyn MembershipListener>>,
    metrics: Option<Arc<dyn MetricsSource>>,
    screener: Option<Arc<dyn Filter>>,
    response_headers: Vec<crate::response_headers::ResponseHeader>,
}

impl PluginInstance {
    /// A plugin that is an admitter.
    pub fn admitter(admitter: Arc<dyn Admitter>) -> Self {
        PluginInstance {
            admitter: Some(admitter),
            ..Default::default()
        }
    }

    /// A plugin that is a P/D decider.
    pub fn decider(decider: Arc<dyn Decider>) -> Self {
        PluginInstance {
            decider: Some(decider),
            ..Default::default()
        }
    }

    /// A plugin that is a profile handler (see [`crate::disagg`]).
    pub fn profile_handler(spec: ProfileHandlerSpec) -> Self {
        PluginInstance {
            profile_handler: Some(spec),
            ..Default::default()
        }
    }

    /// A profile handler that chooses each request's profile from a header.
    pub fn profile_selector(selector: HeaderProfileSelector) -> Self {
        PluginInstance {
            profile_selector: Some(selector),
            ..Default::default()
        }
    }

    /// A plugin that is a filter.
    pub fn filter(filter: Arc<dyn Filter>) -> Self {
        PluginInstance {
            filter: Some(filter),
            ..Default::default()
        }
    }

    /// A plugin that is a *screener*: a filter that runs first in every profile of the
    /// config, listed in one or not (upstream's request-control screeners run once before the
    /// scheduling profiles, so no profile can undo them).
    pub fn screener(filter: Arc<dyn Filter>) -> Self {
        PluginInstance {
            screener: Some(filter),
            ..Default::default()
        }
    }

    /// Adds response headers the adapters write once the serving endpoint is known
    /// ([`crate::response_headers`]).
    pub fn with_response_headers(
        mut self,
        headers: Vec<crate::response_headers::ResponseHeader>,
    ) -> Self {
        self.response_headers = headers;
        self
    }

    /// The response headers this plugin asks for.
    pub fn response_headers(&self) -> &[crate::response_headers::ResponseHeader] {
        &self.response_headers
    }

    /// The screener facet.
    pub fn as_screener(&self) -> Option<&Arc<dyn Filter>> {
        self.screener.as_ref()
    }

    /// A plugin that is a scorer.
    pub fn scorer(scorer: Arc<dyn Scorer>) -> Self {
        PluginInstance {
            scorer: Some(scorer),
            ..Default::default()
        }
    }

    /// A plugin that is a picker.
    pub fn picker(picker: Arc<dyn Picker>) -> Self {
        PluginInstance {
            picker: Some(picker),
            ..Default::default()
        }
    }

    /// Adds a pick hook facet.
    pub fn with_pick_hook(mut self, hook: Arc<dyn PickHook>) -> Self {
        self.pick_hook = Some(hook);
        self
    }

    /// Adds a pick hook that runs in every profile, whether a profile lists the plugin or not
    /// (a request-level producer, which upstream runs once per request).
    pub fn with_every_profile_hook(mut self, hook: Arc<dyn PickHook>) -> Self {
        self.every_profile_hook = Some(hook);
        self
    }

    /// The every-profile pick hook facet.
    pub fn as_every_profile_hook(&self) -> Option<&Arc<dyn PickHook>> {
        self.every_profile_hook.as_ref()
    }

    /// Adds a completion hook facet.
    pub fn with_completion_hook(mut self, hook: Arc<dyn CompletionHook>) -> Self {
        self.completion_hook = Some(hook);
        self
    }

    /// Adds a membership listener facet (told when endpoints leave the pool).
    pub fn with_membership_listener(mut self, listener: Arc<dyn MembershipListener>) -> Self {
        self.membership = Some(listener);
        self
    }

    /// Adds a metrics source facet (visited when the scheduler's metrics are exported).
    pub fn with_metrics_source(mut self, source: Arc<dyn MetricsSource>) -> Self {
        self.metrics = Some(source);
        self
    }

    /// Adds a filter facet.
    pub fn with_filter(mut self, filter: Arc<dyn Filter>) -> Self {
        self.filter = Some(filter);
        self
    }

    /// The decider facet.
    pub fn as_decider(&self) -> Option<&Arc<dyn Decider>> {
        self.decider.as_ref()
    }

    /// The profile handler facet.
    pub fn as_profile_handler(&self) -> Option<&ProfileHandlerSpec> {
        self.profile_handler.as_ref()
    }

    /// The header profile selector facet.
    pub fn as_profile_selector(&self) -> Option<&HeaderProfileSelector> {
        self.profile_selector.as_ref()
    }

    /// The admitter facet.
    pub fn as_admitter(&self) -> Option<&Arc<dyn Admitter>> {
        self.admitter.as_ref()
    }

    /// The filter facet.
    pub fn as_filter(&self) -> Option<&Arc<dyn Filter>> {
        self.filter.as_ref()
    }

    /// The scorer facet.
    pub fn as_scorer(&self) -> Option<&Arc<dyn Scorer>> {
        self.scorer.as_ref()
    }

    /// The picker facet.
    pub fn as_picker(&self) -> Option<&Arc<dyn Picker>> {
        self.picker.as_ref()
    }

    /// The pick hook facet.
    pub fn as_pick_hook(&self) -> Option<&Arc<dyn PickHook>> {
        self.pick_hook.as_ref()
    }

    /// The completion hook facet.
    pub fn as_completion_hook(&self) -> Option<&Arc<dyn CompletionHook>> {
        self.completion_hook.as_ref()
    }

    /// The membership listener facet.
    pub fn as_membership_listener(&self) -> Option<&Arc<dyn MembershipListener>> {
        self.membership.as_ref()
    }

    /// The metrics source facet.
    pub fn as_metrics_source(&self) -> Option<&Arc<dyn MetricsSource>> {
        self.metrics.as_ref()
    }
}

impl std::fmt::Debug for PluginInstance {
    /// The facets the plugin has.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginInstance")
            .field("filter", &self.filter.is_some())
            .field("scorer", &self.scorer.is_some())
            .field("picker", &self.picker.is_some())
            .field("pick_hook", &self.pick_hook.is_some())
            .field("every_profile_hook", &self.every_profile_hook.is_some())
            .field("completion_hook", &self.completion_hook.is_some())
            .field("membership_listener", &self.membership.is_some())
            .field("metrics_source", &self.metrics.is_some())
            .finish()
    }
}
