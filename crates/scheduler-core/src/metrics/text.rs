use std::fmt::Write;

use super::{HistogramSnapshot, MetricDesc, MetricsSource, MetricsVisitor};

/// Renders every metric of `sources` in the Prometheus text exposition format (version
/// 0.0.4): one `# HELP` and `# TYPE` per metric name, samples grouped under it in the order
/// they were reported, label values escaped.
pub fn render_prometheus(sources: &[&dyn MetricsSource]) -> String {
    let mut renderer = Renderer::default();
    for source in sources {
        source.visit_metrics(&mut renderer);
    }
    let mut out = String::new();
    for family in renderer.families {
        let _ = writeln!(out, "# HELP {} {}", family.name, escape_help(&family.help));
        let _ = writeln!(out, "# TYPE {} {}", family.name, family.kind);
        out.push_str(&family.samples);
    }
    out
}

#[derive(Debug)]
struct Family {
    name: String,
    help: String,
    kind: &'static str,
    samples: String,
}

#[derive(Debug, Default)]
struct Renderer {
    families: Vec<Family>,
    /// Family name → its index in `families`.
    index: std::collections::HashMap<String, usize>,
    /// The family reported last (sources report a family's samples one after another).
    last: usize,
    /// The `le` values of the last histogram's bounds, formatted (a family's series share
    /// their bounds).
    le: Vec<(f64, String)>,
}

impl Renderer {
    fn family(&mut self, desc: MetricDesc<'_>, kind: &'static str) -> &mut String {
        let pos = match self.families.get(self.last) {
            Some(f) if f.name == desc.name => self.last,
            _ => match self.index.get(desc.name) {
                Some(&pos) => pos,
                None => {
                    self.families.push(Family {
                        name: desc.name.to_string(),
                        help: desc.help.to_string(),
                        kind,
                        samples: String::new(),
                    });
                    let pos = self.families.len() - 1;
                    self.index.insert(desc.name.to_string(), pos);
                    pos
                }
            },
        };
        self.last = pos;
        &mut self.families[pos].samples
    }
}

/// `labels` written once, escaped and comma-separated (without braces).
fn label_text(labels: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push_str("=\"");
        escape_label_into(&mut out, v);
        out.push('"');
    }
    out
}

/// A sample's value.
#[derive(Clone, Copy)]
enum Value {
    Count(u64),
    Float(f64),
}

/// One sample line: `name{labels[,extra]} value`.
fn write_sample(
    out: &mut String,
    name: &str,
    labels: &str,
    extra: Option<(&str, &str)>,
    value: Value,
) {
    out.push_str(name);
    if !labels.is_empty() || extra.is_some() {
        out.push('{');
        out.push_str(labels);
        if let Some((k, v)) = extra {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            out.push_str(v);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    match value {
        Value::Count(n) => push_u64(out, n),
        Value::Float(v) => {
            let _ = write!(out, "{}", Float(v));
        }
    }
    out.push('\n');
}

/// Writes `n` in decimal (without the formatting machinery: most samples are counts).
fn push_u64(out: &mut String, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &digits[i..] {
        out.push(char::from(d));
    }
}

/// A sample value as the text format writes it (`NaN`, `+Inf`, `-Inf`, else the number).
struct Float(f64);

impl std::fmt::Display for Float {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = self.0;
        if v.is_nan() {
            f.write_str("NaN")
        } else if v == f64::INFINITY {
            f.write_str("+Inf")
        } else if v == f64::NEG_INFINITY {
            f.write_str("-Inf")
        } else {
            write!(f, "{v}")
        }
    }
}

fn escape_label_into(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

impl MetricsVisitor for Renderer {
    fn counter(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: u64) {
        let out = self.family(desc, "counter");
        write_sample(
            out,
            desc.name,
            &label_text(labels),
            None,
            Value::Count(value),
        );
    }

    fn gauge(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: f64) {
        let out = self.family(desc, "gauge");
        write_sample(
            out,
            desc.name,
            &label_text(labels),
            None,
            Value::Float(value),
        );
    }

    fn histogram(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let same_bounds = self.le.len() == h.buckets.len()
            && self
                .le
                .iter()
                .zip(&h.buckets)
                .all(|((a, _), (b, _))| a.to_bits() == b.to_bits());
        if !same_bounds {
            self.le = h
                .buckets
                .iter()
                .map(|(b, _)| (*b, Float(*b).to_string()))
                .collect();
        }
        let le = std::mem::take(&mut self.le);
        let out = self.family(desc, "histogram");
        let labels = label_text(labels);
        let bucket = format!("{}_bucket", desc.name);
        for ((_, text), (_, count)) in le.iter().zip(&h.buckets) {
            write_sample(
                out,
                &bucket,
                &labels,
                Some(("le", text)),
                Value::Count(*count),
            );
        }
        self.le = le;
        let out = self.family(desc, "histogram");
        write_sample(
            out,
            &bucket,
            &labels,
            Some(("le", "+Inf")),
            Value::Count(h.count),
        );
        write_sample(
            out,
            &format!("{}_sum", desc.name),
            &labels,
            None,
            Value::Float(h.sum),
        );
        write_sample(
            out,
            &format!("{}_count", desc.name),
            &labels,
            None,
            Value::Count(h.count),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl MetricsSource for Fixed {
        fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
            let d = MetricDesc::new("x_total", "An x.\nTwo lines.");
            v.counter(d, &[("a", "q\"uote\\d\nnl")], 3);
            v.gauge(MetricDesc::new("y", "A y."), &[], f64::NAN);
            v.counter(d, &[("a", "b")], 4);
        }
    }

    #[test]
    fn counts_are_written_in_decimal() {
        for n in [0, 7, 10, 1234567890, u64::MAX] {
            let mut out = String::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn histograms_of_one_family_share_their_bounds_text() {
        struct Two;
        impl MetricsSource for Two {
            fn visit_metrics(&self, v: &mut dyn MetricsVisitor) {
                let d = MetricDesc::new("h_seconds", "An h.");
                let h = |n| HistogramSnapshot {
                    buckets: vec![(0.0, 0), (0.005, n), (1.0, n)],
                    sum: 0.5,
                    count: n + 1,
                };
                v.histogram(d, &[("a", "x")], &h(1));
                v.histogram(d, &[], &h(2));
            }
        }
        let text = render_prometheus(&[&Two]);
        assert!(text.contains("h_seconds_bucket{a=\"x\",le=\"0\"} 0\n"));
        assert!(text.contains("h_seconds_bucket{a=\"x\",le=\"0.005\"} 1\n"));
        assert!(text.contains("h_seconds_bucket{le=\"1\"} 2\nh_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("h_seconds_sum 0.5\nh_seconds_count 3\n"));
    }

    #[test]
    fn families_group_and_labels_escape() {
        let text = render_prometheus(&[&Fixed]);
        assert_eq!(
            text,
            "# HELP x_total An x.\\nTwo lines.\n# TYPE x_total counter\n\
             x_total{a=\"q\\\"uote\\\\d\\nnl\"} 3\nx_total{a=\"b\"} 4\n\
             # HELP y A y.\n# TYPE y gauge\ny NaN\n"
        );
    }
}
