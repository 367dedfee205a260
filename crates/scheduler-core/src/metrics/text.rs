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

fn write_sample(
    out: &mut String,
    name: &str,
    labels: &[(&str, &str)],
    extra: Option<(&str, &str)>,
    value: &str,
) {
    out.push_str(name);
    let mut all = labels.iter().copied().chain(extra).peekable();
    if all.peek().is_some() {
        out.push('{');
        for (i, (k, v)) in all.enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_label_into(out, v);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
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
        write_sample(out, desc.name, labels, None, &value.to_string());
    }

    fn gauge(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], value: f64) {
        let out = self.family(desc, "gauge");
        write_sample(out, desc.name, labels, None, &float(value));
    }

    fn histogram(&mut self, desc: MetricDesc<'_>, labels: &[(&str, &str)], h: &HistogramSnapshot) {
        let out = self.family(desc, "histogram");
        let bucket = format!("{}_bucket", desc.name);
        for (bound, count) in &h.buckets {
            let le = float(*bound);
            write_sample(out, &bucket, labels, Some(("le", &le)), &count.to_string());
        }
        write_sample(
            out,
            &bucket,
            labels,
            Some(("le", "+Inf")),
            &h.count.to_string(),
        );
        write_sample(
            out,
            &format!("{}_sum", desc.name),
            labels,
            None,
            &float(h.sum),
        );
        write_sample(
            out,
            &format!("{}_count", desc.name),
            labels,
            None,
            &h.count.to_string(),
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
