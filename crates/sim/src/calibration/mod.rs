//! The engine model against published measurements of vLLM serving Llama-3-8B.
//!
//! Each [`Reference`] is one published figure (its source, its conditions, and whether it
//! is printed in the source, read off a chart, or derived from published data), paired with
//! the [`Measure`] that reproduces its conditions on a simulated engine. [`rows`] runs them
//! all on the built-in presets; `shepherd-sim calibrate` prints the table `docs/calibration.md`
//! shows. The goal is every ratio within 1.25×.
//!
//! ```
//! use shepherd_sim::calibration::{GOAL, rows};
//!
//! for row in rows() {
//!     assert!(row.ratio() <= GOAL && row.ratio() >= 1.0 / GOAL, "{row:?}");
//! }
//! ```

mod measure;
mod references;

pub use measure::Measure;
pub use references::REFERENCES;

use crate::engine::EngineConfig;

/// The calibration goal: every simulated figure within this factor of the published one.
pub const GOAL: f64 = 1.25;

/// How a published figure was obtained from its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provenance {
    /// Printed as a number in the source.
    Printed,
    /// Read off a chart in the source (about ±5–10 % of its scale).
    Chart,
    /// Derived from the source's published data (the note says how).
    Derived,
}

impl Provenance {
    /// A one-letter tag for tables.
    pub fn tag(self) -> &'static str {
        match self {
            Provenance::Printed => "printed",
            Provenance::Chart => "chart",
            Provenance::Derived => "derived",
        }
    }
}

/// One published figure and how to reproduce its conditions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reference {
    /// The engine preset it calibrates (`h100-llama8b`, `a100-llama8b`).
    pub preset: &'static str,
    /// What is measured, in words.
    pub quantity: &'static str,
    /// The published value.
    pub published: f64,
    /// Its unit (`ms`, `tok/s`, `blocks`).
    pub unit: &'static str,
    /// How it was obtained.
    pub provenance: Provenance,
    /// Where it is published, with its conditions.
    pub source: &'static str,
    /// The same measurement on the simulated engine.
    pub measure: Measure,
}

/// A reference with its simulated value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// The published figure.
    pub reference: Reference,
    /// What the simulated engine gives.
    pub simulated: f64,
}

impl Row {
    /// Simulated over published.
    pub fn ratio(&self) -> f64 {
        self.simulated / self.reference.published
    }
}

/// Every reference measured on its preset's engine.
pub fn rows() -> Vec<Row> {
    REFERENCES
        .iter()
        .filter_map(|reference| {
            let config = EngineConfig::preset(reference.preset)?;
            Some(Row {
                reference: *reference,
                simulated: reference.measure.simulate(&config),
            })
        })
        .collect()
}

/// The rows as a Markdown table, then the sources.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| engine | quantity | published | simulated | ratio | source |\n|---|---|---:|---:|---:|---|\n",
    );
    let mut sources: Vec<&str> = Vec::new();
    for row in rows {
        let r = &row.reference;
        let n = match sources.iter().position(|s| *s == r.source) {
            Some(i) => i + 1,
            None => {
                sources.push(r.source);
                sources.len()
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} {} | {} {} | {:.2}× | [{n}] ({}) |\n",
            r.preset,
            r.quantity,
            figure(r.published),
            r.unit,
            figure(row.simulated),
            r.unit,
            row.ratio(),
            r.provenance.tag(),
        ));
    }
    out.push('\n');
    for (i, s) in sources.iter().enumerate() {
        out.push_str(&format!("{}. {s}\n", i + 1));
    }
    out
}

fn figure(v: f64) -> String {
    if v >= 1000.0 {
        let whole = v.round() as u64;
        let mut s = whole.to_string();
        let mut i = s.len();
        while i > 3 {
            i -= 3;
            s.insert(i, ',');
        }
        s
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_names_a_preset() {
        assert_eq!(rows().len(), REFERENCES.len());
    }

    #[test]
    fn every_row_meets_the_goal() {
        let rows = rows();
        let misses: Vec<String> = rows
            .iter()
            .filter(|r| !(r.ratio() <= GOAL && r.ratio() >= 1.0 / GOAL))
            .map(|r| {
                format!(
                    "{}: {} ({:.2}×)",
                    r.reference.preset,
                    r.reference.quantity,
                    r.ratio()
                )
            })
            .collect();
        assert!(misses.is_empty(), "{misses:#?}\n{}", table(&rows));
    }

    #[test]
    fn the_table_numbers_its_sources_once() {
        let text = table(&rows());
        let listed = text
            .lines()
            .filter(|l| l.starts_with(char::is_numeric))
            .count();
        let distinct: std::collections::BTreeSet<_> = REFERENCES.iter().map(|r| r.source).collect();
        assert_eq!(listed, distinct.len());
        assert_eq!(figure(27_793.0), "27,793");
        assert_eq!(figure(6.441), "6.44");
    }
}
