use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;

use super::PluginError;
use crate::clock::Clock;
use crate::endpoint::Pool;
use crate::plugin::PluginInstance;
use crate::resources::Resources;
use crate::shared::SharedState;

/// What a plugin factory gets to build one instance.
pub struct PluginArgs<'a> {
    /// Instance name.
    pub name: &'a str,
    /// Registered type name.
    pub plugin_type: &'a str,
    /// Its `parameters` (JSON null when absent).
    pub parameters: &'a serde_json::Value,
    /// The pool the scheduler will run over.
    pub pool: &'a Arc<Pool>,
    /// The pool's clock (the one clock of everything scheduled over the pool).
    pub clock: &'a Arc<dyn Clock>,
    /// Shared state: a plugin keeps what others (or the embedder) must reach here, under its
    /// instance name, with [`Resources::get_or_insert_with`].
    pub resources: &'a Arc<Resources>,
    /// The scheduler's seed (for plugins with randomness of their own).
    pub seed: u64,
}

impl<'a> PluginArgs<'a> {
    /// Arguments for building plugin `name` of `plugin_type` over `shared`.
    pub fn new(
        name: &'a str,
        plugin_type: &'a str,
        parameters: &'a serde_json::Value,
        shared: &'a SharedState,
        seed: u64,
    ) -> Self {
        PluginArgs {
            name,
            plugin_type,
            parameters,
            pool: &shared.pool,
            clock: shared.pool.clock(),
            resources: &shared.resources,
            seed,
        }
    }

    /// Deserializes the parameters into `T`; absent parameters give `T::default()`.
    ///
    /// Use `#[serde(deny_unknown_fields, rename_all = "camelCase")]` on `T` so typos are errors.
    pub fn parse<T: DeserializeOwned + Default>(&self) -> Result<T, PluginError> {
        if self.parameters.is_null() {
            return Ok(T::default());
        }
        Ok(T::deserialize(self.parameters)?)
    }
}

/// Builds a plugin instance from its arguments.
pub type PluginFactory =
    Arc<dyn Fn(&PluginArgs<'_>) -> Result<PluginInstance, PluginError> + Send + Sync>;

/// Plugin type name → factory.
///
/// ```
/// use std::sync::Arc;
/// use shepherd_scheduler_core::config::Registry;
/// use shepherd_scheduler_core::plugin::PluginInstance;
/// # use shepherd_scheduler_core::{endpoint::Endpoint, plugin::{Category, CycleState, Score, Scorer}};
/// # struct Constant(f64);
/// # impl Scorer for Constant {
/// #     fn category(&self) -> Category { Category::Balance }
/// #     fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
/// #         out.fill(Score::new(self.0));
/// #     }
/// # }
/// let mut registry = Registry::new();
/// registry.register("constant-scorer", |_args| Ok(PluginInstance::scorer(Arc::new(Constant(1.0)))));
/// assert!(registry.contains("constant-scorer"));
/// ```
#[derive(Clone, Default)]
pub struct Registry {
    factories: BTreeMap<String, PluginFactory>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Registers `factory` under `plugin_type`, replacing any earlier one.
    pub fn register<F>(&mut self, plugin_type: impl Into<String>, factory: F) -> &mut Self
    where
        F: Fn(&PluginArgs<'_>) -> Result<PluginInstance, PluginError> + Send + Sync + 'static,
    {
        self.factories.insert(plugin_type.into(), Arc::new(factory));
        self
    }

    /// Whether `plugin_type` is registered.
    pub fn contains(&self, plugin_type: &str) -> bool {
        self.factories.contains_key(plugin_type)
    }

    /// The factory for `plugin_type`.
    pub fn get(&self, plugin_type: &str) -> Option<&PluginFactory> {
        self.factories.get(plugin_type)
    }

    /// Registered type names, sorted.
    pub fn types(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.factories.keys()).finish()
    }
}

impl std::fmt::Debug for PluginArgs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginArgs")
            .field("name", &self.name)
            .field("plugin_type", &self.plugin_type)
            .field("parameters", &self.parameters)
            .field("seed", &self.seed)
            .finish()
    }
}
