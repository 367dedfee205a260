//! The built-in filters.

pub mod lora_affinity;

pub use lora_affinity::{LoraAffinityFilter, LoraAffinityFilterParameters};
