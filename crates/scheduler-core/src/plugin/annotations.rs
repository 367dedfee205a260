//! [`Annotations`]: per-candidate figures a plugin computed during a cycle that are not
//! scores (a predicted latency, a headroom), shown beside the scores in the pick's
//! [`Breakdown`](crate::decision::Breakdown).
//!
//! A plugin records a value under a column name it owns (conventionally
//! `<plugin name>/<figure>`); the scheduler moves the cycle's annotations into the decision's
//! breakdown, where [`BreakdownRow::notes`](crate::decision::BreakdownRow) lists each
//! candidate's. Nothing is allocated for a cycle nobody annotates.
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

use std::sync::Arc;

use crate::endpoint::EndpointId;

/// One column: its name and each annotated candidate's value.
type Column = (Arc<str>, Vec<(EndpointId, f64)>);

/// Per-candidate figures by column (see the [module docs](self)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Annotations {
    /// `(column, [(endpoint, value)])`, columns in the order first recorded.
    columns: Vec<Column>,
}

impl Annotations {
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
        self.columns
            .iter()
            .find(|(c, _)| &**c == column)
            .and_then(|(_, values)| values.iter().find(|(e, _)| *e == endpoint))
            .map(|&(_, v)| v)
    }

    /// The column names, in the order first recorded.
    pub fn columns(&self) -> impl Iterator<Item = &Arc<str>> {
        self.columns.iter().map(|(c, _)| c)
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }
}
