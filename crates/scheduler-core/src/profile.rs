//! Scheduling profiles: a named list of admitters, filters, weighted scorers and one picker.
//!
//! Profiles are usually built from config (see [`crate::config`]); building one by hand:
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::profile::Profile;
//! # use shepherd_scheduler_core::{rng::PickRng, plugin::Picker};
//! # struct First;
//! # impl Picker for First {
//! #     fn pick(&self, totals: &[f64], count: usize, _: &mut PickRng) -> Vec<usize> {
//! #         (0..totals.len().min(count)).collect()
//! #     }
//! # }
//! let profile = Profile::builder("default").picker(Arc::new(First)).build();
//! assert_eq!(profile.name(), "default");
//! assert!(profile.scorers().is_empty());
//! ```

use std::sync::Arc;

use crate::plugin::{Admitter, Category, Filter, PickHook, Picker, Scorer};
use crate::weights::{WeightTable, Weights};

/// An admitter as used in a profile.
#[derive(Clone)]
pub struct AdmitterEntry {
    /// Plugin name.
    pub name: Arc<str>,
    /// The admitter.
    pub admitter: Arc<dyn Admitter>,
}

/// A filter as used in a profile.
#[derive(Clone)]
pub struct FilterEntry {
    /// Plugin name.
    pub name: Arc<str>,
    /// The filter.
    pub filter: Arc<dyn Filter>,
}

/// A scorer as used in a profile.
#[derive(Clone)]
pub struct ScorerEntry {
    /// Plugin name.
    pub name: Arc<str>,
    /// Plugin type (`prefix-cache-scorer`, ...): the name when built by hand.
    pub plugin_type: Arc<str>,
    /// The scorer.
    pub scorer: Arc<dyn Scorer>,
    /// Its category (read once at build time).
    pub category: Category,
}

/// A named list of filters, weighted scorers and one picker.
///
/// Aligned to 128 bytes for the same reason as
/// [`PoolSnapshot`](crate::endpoint::PoolSnapshot): concurrent picks bump its `Arc` count.
#[repr(align(128))]
pub struct Profile {
    name: Arc<str>,
    admitters: Vec<AdmitterEntry>,
    filters: Vec<FilterEntry>,
    scorers: Vec<ScorerEntry>,
    weights: Arc<Weights>,
    picker_name: Arc<str>,
    picker: Arc<dyn Picker>,
    pick_hooks: Vec<Arc<dyn PickHook>>,
}

impl Profile {
    /// Starts building a profile called `name`.
    pub fn builder(name: impl Into<Arc<str>>) -> ProfileBuilder {
        ProfileBuilder {
            name: name.into(),
            admitters: Vec::new(),
            filters: Vec::new(),
            scorers: Vec::new(),
            weights: Vec::new(),
            picker: None,
            pick_hooks: Vec::new(),
        }
    }

    /// The profile's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The profile's name, shared.
    pub fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// Its admitters, in order (run before the filters).
    pub fn admitters(&self) -> &[AdmitterEntry] {
        &self.admitters
    }

    /// Its filters, in order.
    pub fn filters(&self) -> &[FilterEntry] {
        &self.filters
    }

    /// Its scorers, in order (aligned with the weight table).
    pub fn scorers(&self) -> &[ScorerEntry] {
        &self.scorers
    }

    /// Its live weights.
    pub fn weights(&self) -> &Arc<Weights> {
        &self.weights
    }

    /// Its picker.
    pub fn picker(&self) -> &Arc<dyn Picker> {
        &self.picker
    }

    /// Its picker's plugin name.
    pub fn picker_name(&self) -> &str {
        &self.picker_name
    }

    /// Hooks run after this profile picks.
    pub fn pick_hooks(&self) -> &[Arc<dyn PickHook>] {
        &self.pick_hooks
    }
}

/// Builds a [`Profile`].
pub struct ProfileBuilder {
    name: Arc<str>,
    admitters: Vec<AdmitterEntry>,
    filters: Vec<FilterEntry>,
    scorers: Vec<ScorerEntry>,
    weights: Vec<f64>,
    picker: Option<(Arc<str>, Arc<dyn Picker>)>,
    pick_hooks: Vec<Arc<dyn PickHook>>,
}

impl ProfileBuilder {
    /// Adds an admitter named `name`.
    pub fn admitter(mut self, name: impl Into<Arc<str>>, admitter: Arc<dyn Admitter>) -> Self {
        self.admitters.push(AdmitterEntry {
            name: name.into(),
            admitter,
        });
        self
    }

    /// Adds a filter named `name`.
    pub fn filter(mut self, name: impl Into<Arc<str>>, filter: Arc<dyn Filter>) -> Self {
        self.filters.push(FilterEntry {
            name: name.into(),
            filter,
        });
        self
    }

    /// Adds a scorer named `name` with `weight` (its plugin type taken to be its name).
    pub fn scorer(self, name: impl Into<Arc<str>>, scorer: Arc<dyn Scorer>, weight: f64) -> Self {
        let name = name.into();
        self.typed_scorer(Arc::clone(&name), name, scorer, weight)
    }

    /// Adds a scorer named `name`, of plugin type `plugin_type`, with `weight`.
    pub fn typed_scorer(
        mut self,
        name: impl Into<Arc<str>>,
        plugin_type: impl Into<Arc<str>>,
        scorer: Arc<dyn Scorer>,
        weight: f64,
    ) -> Self {
        let category = scorer.category();
        self.scorers.push(ScorerEntry {
            name: name.into(),
            plugin_type: plugin_type.into(),
            scorer,
            category,
        });
        self.weights.push(weight);
        self
    }

    /// Sets the picker (named after its type when built by hand).
    pub fn picker(self, picker: Arc<dyn Picker>) -> Self {
        self.named_picker("picker", picker)
    }

    /// Sets the picker, with its plugin name.
    pub fn named_picker(mut self, name: impl Into<Arc<str>>, picker: Arc<dyn Picker>) -> Self {
        self.picker = Some((name.into(), picker));
        self
    }

    /// Adds a hook run after this profile picks.
    pub fn pick_hook(mut self, hook: Arc<dyn PickHook>) -> Self {
        self.pick_hooks.push(hook);
        self
    }

    /// Whether a picker has been set.
    pub fn has_picker(&self) -> bool {
        self.picker.is_some()
    }

    /// Finishes the profile. Without a picker, the first-ranked endpoint wins (ties by order).
    pub fn build(self) -> Profile {
        let (picker_name, picker) = self
            .picker
            .unwrap_or_else(|| (Arc::from("highest-total"), Arc::new(HighestTotal)));
        Profile {
            name: self.name,
            admitters: self.admitters,
            filters: self.filters,
            scorers: self.scorers,
            weights: Arc::new(Weights::new(WeightTable::new(self.weights))),
            picker_name,
            picker,
            pick_hooks: self.pick_hooks,
        }
    }
}

/// Fallback picker: highest totals first, ties by candidate order. Deterministic, no RNG.
struct HighestTotal;

impl Picker for HighestTotal {
    fn pick(&self, totals: &[f64], count: usize, _rng: &mut crate::rng::PickRng) -> Vec<usize> {
        let mut order: Vec<usize> = (0..totals.len()).collect();
        order.sort_by(|&a, &b| totals[b].total_cmp(&totals[a]).then(a.cmp(&b)));
        order.truncate(count);
        order
    }
}

impl std::fmt::Debug for AdmitterEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmitterEntry")
            .field("name", &self.name)
            .finish()
    }
}

impl std::fmt::Debug for FilterEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterEntry")
            .field("name", &self.name)
            .finish()
    }
}

impl std::fmt::Debug for ScorerEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScorerEntry")
            .field("name", &self.name)
            .field("plugin_type", &self.plugin_type)
            .field("category", &self.category)
            .finish()
    }
}

impl std::fmt::Debug for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Profile")
            .field("name", &self.name)
            .field("admitters", &self.admitters)
            .field("filters", &self.filters)
            .field("scorers", &self.scorers)
            .field("weights", &self.weights.load().as_slice())
            .field("picker", &self.picker_name)
            .field("pick_hooks", &self.pick_hooks.len())
            .finish()
    }
}

impl std::fmt::Debug for ProfileBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileBuilder")
            .field("name", &self.name)
            .field("admitters", &self.admitters)
            .field("filters", &self.filters)
            .field("scorers", &self.scorers)
            .field("weights", &self.weights)
            .finish()
    }
}
