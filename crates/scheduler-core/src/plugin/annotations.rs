//! [`Annotations`]: per-candidate figures a plugin computed during a cycle that are not
//! scores (a predicted latency, a headroom), shown beside the scores in the pick's
//! [`Breakdown`](crate::decision::Breakdown).
//!
//! A plugin records a value under a column name it owns (conventionally
//! `<plugin name>/<figure>`); the scheduler moves the cycle's annotations into the decision's
//! breakdown, where [`BreakdownRow::notes`](crate::decision::BreakdownRow) lists each
//! candidate's. Nothing is allocated for a cycle nobody annotates.
//!
//! A plugin that already keeps its figures for the cycle can share them instead of copying
//! them: [`Annotations::record_table`] takes an [`AnnotationTable`], read only when the
//! breakdown is shown.
//!
//! ```
//! use std::sync::Arc;
//! use shepherd_scheduler_core::endpoint::EndpointId;
//! use shepherd_scheduler_core::plugin::Annotations;
//!
//! let column: Arc<str> = Arc::from("predicted-latency-producer/ttft_ms");
//! let mut notes = Annotations::default();
//! notes.record(&column, EndpointId(1), 120.5);
//! notes.record(&column, EndpointId(2), 80.0);
//! notes.record(&column, EndpointId(1), 121.0); // replaces the first value
//! assert_eq!(notes.get("predicted-latency-producer/ttft_ms", EndpointId(1)), Some(121.0));
//! assert_eq!(notes.get("predicted-latency-producer/ttft_ms", EndpointId(3)), None);
//! notes.record_all(&column, [(EndpointId(3), 40.0)]);
//! assert_eq!(notes.get("predicted-latency-producer/ttft_ms", EndpointId(3)), Some(40.0));
//! assert_eq!(notes.columns().count(), 1);
//! ```

use std::fmt;
use std::sync::Arc;

use crate::endpoint::EndpointId;

/// One column: its name and each annotated candidate's value.
type Column = (Arc<str>, Vec<(EndpointId, f64)>);

/// Columns of per-candidate figures that a plugin keeps itself, shared with the breakdown
/// rather than copied into it ([`Annotations::record_table`]).
pub trait AnnotationTable: Send + Sync + fmt::Debug {
    /// The column names, in order.
    fn columns(&self) -> &[Arc<str>];
    /// Column `column`'s (an index into [`AnnotationTable::columns`]) value for `endpoint`.
    fn value(&self, column: usize, endpoint: EndpointId) -> Option<f64>;
}

/// Per-candidate figures by column that are not scores, recorded by plugins during a cycle
/// and shown beside the scores in the pick's [`Breakdown`](crate::decision::Breakdown).
#[derive(Debug, Clone, Default)]
pub struct Annotations {
    /// `(column, [(endpoint, value)])`, columns in the order first recorded.
    columns: Vec<Column>,
    /// Shared tables, after the recorded columns.
    tables: Vec<Arc<dyn AnnotationTable>>,
}

impl Annotations {
    /// Shows `table`'s columns in the breakdown, read when it is shown. A table whose first
    /// column is already a table's replaces that table (a plugin that predicted more
    /// candidates later in the cycle shares its fuller table).
    pub fn record_table(&mut self, table: Arc<dyn AnnotationTable>) {
        let first = table.columns().first();
        match self
            .tables
            .iter()
            .position(|t| t.columns().first() == first)
        {
            Some(i) => self.tables[i] = table,
            None => self.tables.push(table),
        }
    }

    /// Records `value` for `endpoint` in `column`, replacing an earlier value.
    pub fn record(&mut self, column: &Arc<str>, endpoint: EndpointId, value: f64) {
        let values = match self.columns.iter().position(|(c, _)| c == column) {
            Some(i) => &mut self.columns[i].1,
            None => {
                self.columns.push((Arc::clone(column), Vec::new()));
                let last = self.columns.len() - 1;
                &mut self.columns[last].1
            }
        };
        match values.iter_mut().find(|(e, _)| *e == endpoint) {
            Some(slot) => slot.1 = value,
            None => values.push((endpoint, value)),
        }
    }

    /// Records every `(endpoint, value)` of `values` in `column` (endpoints distinct). A column
    /// new to this cycle takes them in one append, without looking for earlier values.
    pub fn record_all(
        &mut self,
        column: &Arc<str>,
        values: impl IntoIterator<Item = (EndpointId, f64)>,
    ) {
        match self.columns.iter().position(|(c, _)| c == column) {
            Some(_) => {
                for (endpoint, value) in values {
                    self.record(column, endpoint, value);
                }
            }
            None => self
                .columns
                .push((Arc::clone(column), values.into_iter().collect())),
        }
    }

    /// The value of `endpoint` in `column`, if recorded.
    pub fn get(&self, column: &str, endpoint: EndpointId) -> Option<f64> {
        if let Some((_, values)) = self.columns.iter().find(|(c, _)| &**c == column) {
            return values.iter().find(|(e, _)| *e == endpoint).map(|&(_, v)| v);
        }
        self.tables.iter().find_map(|t| {
            let i = t.columns().iter().position(|c| &**c == column)?;
            t.value(i, endpoint)
        })
    }

    /// The column names: those recorded, in the order first recorded, then the tables'.
    pub fn columns(&self) -> impl Iterator<Item = &Arc<str>> {
        self.columns
            .iter()
            .map(|(c, _)| c)
            .chain(self.tables.iter().flat_map(|t| t.columns().iter()))
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty() && self.tables.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Column 0: the endpoint's id × `scale`; column 1: only for even ids.
    #[derive(Debug)]
    struct Table {
        columns: Vec<Arc<str>>,
        scale: f64,
    }

    impl AnnotationTable for Table {
        fn columns(&self) -> &[Arc<str>] {
            &self.columns
        }

        fn value(&self, column: usize, endpoint: EndpointId) -> Option<f64> {
            match column {
                0 => Some(f64::from(endpoint.0) * self.scale),
                1 => endpoint.0.is_multiple_of(2).then_some(1.0),
                _ => None,
            }
        }
    }

    fn table(scale: f64) -> Arc<dyn AnnotationTable> {
        Arc::new(Table {
            columns: vec![Arc::from("p/a"), Arc::from("p/b")],
            scale,
        })
    }

    #[test]
    fn tables_are_read_after_the_recorded_columns_and_replace_their_own_kind() {
        let mut notes = Annotations::default();
        assert!(notes.is_empty());
        notes.record_table(table(2.0));
        assert!(!notes.is_empty());
        notes.record(&Arc::from("q/c"), EndpointId(3), 9.0);
        let columns: Vec<&str> = notes.columns().map(|c| &**c).collect();
        assert_eq!(columns, ["q/c", "p/a", "p/b"]);
        assert_eq!(notes.get("p/a", EndpointId(3)), Some(6.0));
        assert_eq!(notes.get("p/b", EndpointId(3)), None);
        assert_eq!(notes.get("p/b", EndpointId(4)), Some(1.0));
        assert_eq!(notes.get("q/c", EndpointId(3)), Some(9.0));
        assert_eq!(notes.get("nobody", EndpointId(3)), None);
        // The same plugin's fuller table replaces its first: no column twice.
        notes.record_table(table(3.0));
        assert_eq!(notes.columns().count(), 3);
        assert_eq!(notes.get("p/a", EndpointId(3)), Some(9.0));
    }
}
