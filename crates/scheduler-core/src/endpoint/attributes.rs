//! Numeric per-endpoint attributes beyond the core metrics: upstream's *custom metrics*
//! (`core-metrics-extractor` → `engineConfigs[].customMetrics[]`: a metric spec read into an
//! attribute key at every scrape), which the `endpoint-attribute-scorer` and
//! `endpoint-attribute-filter` read.
//!
//! One table per shared state, in [`Resources`] under [`ENDPOINT_ATTRIBUTES`]: a column per
//! attribute key (at most [`MAX_ATTRIBUTE_KEYS`]), a row per endpoint. A reader resolves its
//! key to a column once ([`EndpointAttributes::column`]) and then reads every candidate's value
//! under one read lock, by the endpoint's id ([`EndpointAttributes::read`]). Rows are indexed
//! by the id modulo [`MAX_ROWS`] and remember their id, so the table stays bounded however
//! many endpoints come and go, and a row never answers for another endpoint.
//!
//! ```
//! use shepherd_scheduler_core::endpoint::{EndpointAttributes, EndpointId};
//! use shepherd_scheduler_core::resources::Resources;
//!
//! let resources = Resources::new();
//! let table = EndpointAttributes::of(&resources);
//! table.set(EndpointId(3), &[("custom.queue_depth".to_string(), 7.0)]);
//! let column = table.column("custom.queue_depth").unwrap();
//! table.read(|values| {
//!     assert_eq!(values.get(column, EndpointId(3)), Some(7.0));
//!     assert_eq!(values.get(column, EndpointId(4)), None);
//! });
//! table.forget(EndpointId(3));
//! table.read(|values| assert_eq!(values.get(column, EndpointId(3)), None));
//! ```

use std::sync::Arc;

use parking_lot::RwLock;

use super::EndpointId;
use crate::resources::Resources;

/// The [`Resources`] name of the [`EndpointAttributes`] table.
pub const ENDPOINT_ATTRIBUTES: &str = "shepherd.endpoint-attributes";

/// Most attribute keys the table holds (more are not stored).
pub const MAX_ATTRIBUTE_KEYS: usize = 16;

/// Rows of the table: endpoint ids are taken modulo this.
pub const MAX_ROWS: usize = 1 << 14;

/// A column of the table: one attribute key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column(usize);

/// The table (see the module docs).
#[derive(Debug, Default)]
pub struct EndpointAttributes {
    keys: RwLock<Vec<String>>,
    values: RwLock<Values>,
    /// Columns written one value at a time by another source ([`set_value`](Self::set_value):
    /// the DCGM exporter's), which [`set`](Self::set) leaves alone.
    external: RwLock<Vec<usize>>,
}

/// The values, read under one lock ([`EndpointAttributes::read`]).
#[derive(Debug, Default)]
pub struct Values {
    /// `columns[c][row]`: the endpoint id the row holds and its value (NaN: none).
    columns: Vec<Vec<(u32, f64)>>,
}

impl Values {
    /// One column, for a reader that looks many endpoints up in it
    /// ([`ColumnValues::get`] answers as [`Values::get`] does).
    #[inline]
    pub fn column(&self, column: Column) -> ColumnValues<'_> {
        ColumnValues(self.columns.get(column.0).map_or(&[], Vec::as_slice))
    }

    /// Endpoint `id`'s value of `column`, when it has one.
    #[inline]
    pub fn get(&self, column: Column, id: EndpointId) -> Option<f64> {
        let (holder, value) = *self.columns.get(column.0)?.get(id.0 as usize % MAX_ROWS)?;
        (holder == id.0 && !value.is_nan()).then_some(value)
    }
}

/// One column's values ([`Values::column`]).
#[derive(Debug, Clone, Copy)]
pub struct ColumnValues<'a>(&'a [(u32, f64)]);

impl ColumnValues<'_> {
    /// Endpoint `id`'s value, when it has one.
    #[inline]
    pub fn get(&self, id: EndpointId) -> Option<f64> {
        let (holder, value) = *self.0.get(id.0 as usize % MAX_ROWS)?;
        (holder == id.0 && !value.is_nan()).then_some(value)
    }
}

impl EndpointAttributes {
    /// The table in `resources`, created when absent.
    pub fn of(resources: &Resources) -> Arc<EndpointAttributes> {
        resources.get_or_insert_with(ENDPOINT_ATTRIBUTES, EndpointAttributes::default)
    }

    /// The column of `key`, created when new; `None` when the table already has
    /// [`MAX_ATTRIBUTE_KEYS`] others.
    pub fn column(&self, key: &str) -> Option<Column> {
        if let Some(i) = self.keys.read().iter().position(|k| k == key) {
            return Some(Column(i));
        }
        let mut keys = self.keys.write();
        if let Some(i) = keys.iter().position(|k| k == key) {
            return Some(Column(i));
        }
        if keys.len() >= MAX_ATTRIBUTE_KEYS {
            return None;
        }
        keys.push(key.to_string());
        Some(Column(keys.len() - 1))
    }

    /// Endpoint `id`'s attributes after a scrape: those given are set, every other key is
    /// cleared for it (an attribute the page no longer has is gone, not stale).
    pub fn set(&self, id: EndpointId, attributes: &[(String, f64)]) {
        let columns: Vec<(Column, f64)> = attributes
            .iter()
            .filter_map(|(key, value)| Some((self.column(key)?, *value)))
            .collect();
        let width = self.keys.read().len();
        let row = id.0 as usize % MAX_ROWS;
        let external = self.external.read().clone();
        let mut values = self.values.write();
        if values.columns.len() < width {
            values.columns.resize_with(width, Vec::new);
        }
        for (c, column) in values.columns.iter_mut().enumerate() {
            if external.contains(&c) {
                continue;
            }
            let value = columns
                .iter()
                .find(|(col, _)| col.0 == c)
                .map_or(f64::NAN, |(_, v)| *v);
            if column.len() <= row {
                if value.is_nan() {
                    continue;
                }
                column.resize(row + 1, (u32::MAX, f64::NAN));
            }
            column[row] = (id.0, value);
        }
    }

    /// Sets endpoint `id`'s value of the one attribute `key` (NaN clears it), for a source
    /// other than the metrics page's custom metrics (the DCGM exporter): [`set`](Self::set)
    /// leaves such a column alone from then on. Ignored when the table is full of other keys.
    pub fn set_value(&self, id: EndpointId, key: &str, value: f64) {
        let Some(column) = self.column(key) else {
            return;
        };
        {
            let mut external = self.external.write();
            if !external.contains(&column.0) {
                external.push(column.0);
            }
        }
        let row = id.0 as usize % MAX_ROWS;
        let mut values = self.values.write();
        if values.columns.len() <= column.0 {
            values.columns.resize_with(column.0 + 1, Vec::new);
        }
        let cells = &mut values.columns[column.0];
        if cells.len() <= row {
            if value.is_nan() {
                return;
            }
            cells.resize(row + 1, (u32::MAX, f64::NAN));
        }
        cells[row] = (id.0, value);
    }

    /// Forgets endpoint `id` (it left the pool).
    pub fn forget(&self, id: EndpointId) {
        let row = id.0 as usize % MAX_ROWS;
        let mut values = self.values.write();
        for column in &mut values.columns {
            if let Some(slot) = column.get_mut(row)
                && slot.0 == id.0
            {
                *slot = (u32::MAX, f64::NAN);
            }
        }
    }

    /// Runs `f` over the values under one read lock.
    #[inline]
    pub fn read<R>(&self, f: impl FnOnce(&Values) -> R) -> R {
        f(&self.values.read())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_value_from_another_source_survives_the_pages_custom_metrics() {
        let table = EndpointAttributes::default();
        table.set_value(EndpointId(1), "GPUUtilization", 0.4);
        table.set(EndpointId(1), &[("queue".to_string(), 3.0)]);
        let gpu = table.column("GPUUtilization").unwrap();
        let queue = table.column("queue").unwrap();
        table.read(|v| {
            assert_eq!(v.get(gpu, EndpointId(1)), Some(0.4));
            assert_eq!(v.get(queue, EndpointId(1)), Some(3.0));
        });
        table.set_value(EndpointId(1), "GPUUtilization", f64::NAN);
        table.set(EndpointId(1), &[]);
        table.read(|v| {
            assert_eq!(v.get(gpu, EndpointId(1)), None);
            assert_eq!(v.get(queue, EndpointId(1)), None);
        });
    }
}
