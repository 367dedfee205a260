//! Hand-written SVG plots: latency CDFs per policy, per-server load over time, and the adaptive
//! controller's signal, mode and weights over time.

use std::fmt::Write as _;

use crate::report::measure::ttfts_ms;
use crate::runner::RunResult;
use crate::workload::Scenario;

const W: f64 = 720.0;
const H: f64 = 360.0;
const L: f64 = 60.0;
const R: f64 = 170.0;
const T: f64 = 30.0;
const B: f64 = 40.0;
const COLORS: &[&str] = &[
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// One line of a chart: a name for the legend and its points.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// How a chart draws its axes and points.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Axes {
    /// Logarithmic x axis.
    pub(crate) log_x: bool,
    /// Logarithmic y axis (from the smallest positive value instead of 0).
    pub(crate) log_y: bool,
    /// A dot on every point (for series of a few points).
    pub(crate) markers: bool,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn chart(title: &str, x_label: &str, y_label: &str, series: &[Series], log_x: bool) -> String {
    chart_with(
        title,
        x_label,
        y_label,
        series,
        Axes {
            log_x,
            ..Axes::default()
        },
    )
}

/// A line chart of `series` with a legend on the right.
pub(crate) fn chart_with(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    axes: Axes,
) -> String {
    let log_x = axes.log_x;
    let mut xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let first = xs.next().unwrap_or(0.0);
    let (mut x0, mut x1) = xs.fold((first, first), |(a, b), x| (a.min(x), b.max(x)));
    let ys = || series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let y_max = ys().fold(0.0f64, f64::max).max(1e-9);
    // Linear: 0 to the largest value. Logarithmic: log10 of the smallest positive value to
    // log10 of the largest, widened to at least one decade.
    let (y0, y1) = if axes.log_y {
        let low = ys().filter(|y| *y > 0.0).fold(y_max, f64::min).log10();
        let high = y_max.log10();
        let mid = (low + high) / 2.0;
        if high - low < 1.0 {
            (mid - 0.5, mid + 0.5)
        } else {
            (low, high)
        }
    } else {
        (0.0, y_max)
    };
    let y_of = |y: f64| {
        if axes.log_y { y.max(1e-12).log10() } else { y }
    };
    if log_x {
        x0 = x0.max(1e-3).log10();
        x1 = x1.max(1e-3).log10();
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    let px = |x: f64| {
        let x = if log_x { x.max(1e-3).log10() } else { x };
        L + (x - x0) / (x1 - x0) * (W - L - R)
    };
    let py = |y: f64| H - B - (y_of(y) - y0) / (y1 - y0) * (H - T - B);
    let y_label_at = |f: f64| {
        let v = y0 + f * (y1 - y0);
        if axes.log_y { 10f64.powf(v) } else { v }
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"18\" font-size=\"13\">{}</text>\n",
        L,
        escape(title)
    );
    let _ = writeln!(
        out,
        "<line x1=\"{L}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{L}\" y1=\"{T}\" x2=\"{L}\" y2=\"{}\" stroke=\"black\"/>",
        H - B,
        W - R,
        H - B,
        H - B
    );
    for k in 0..=4 {
        let f = f64::from(k) / 4.0;
        let xv = x0 + f * (x1 - x0);
        let label = if log_x { 10f64.powf(xv) } else { xv };
        let _ = writeln!(
            out,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            L + f * (W - L - R),
            H - B + 14.0,
            fmt_num(label),
            L - 4.0,
            H - B - f * (H - T - B) + 4.0,
            fmt_num(y_label_at(f))
        );
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text><text x=\"12\" y=\"{:.1}\" transform=\"rotate(-90 12 {:.1})\" text-anchor=\"middle\">{}</text>",
        (L + W - R) / 2.0,
        H - 6.0,
        escape(x_label),
        H / 2.0,
        H / 2.0,
        escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let mut d = String::new();
        for (j, &(x, y)) in s.points.iter().enumerate() {
            let _ = write!(
                d,
                "{}{:.1},{:.1}",
                if j == 0 { "M" } else { " L" },
                px(x),
                py(y)
            );
        }
        if axes.markers {
            for &(x, y) in &s.points {
                let _ = write!(
                    out,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\"/>",
                    px(x),
                    py(y)
                );
            }
        }
        let _ = writeln!(
            out,
            "<path d=\"{d}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\"/><text x=\"{}\" y=\"{:.1}\" fill=\"{color}\">{}</text>",
            W - R + 8.0,
            T + 14.0 * i as f64 + 8.0,
            escape(&s.name)
        );
    }
    out.push_str("</svg>\n");
    out
}

fn fmt_num(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn downsample<T: Clone>(v: &[T], max: usize) -> Vec<T> {
    if v.len() <= max {
        return v.to_vec();
    }
    let step = v.len().div_ceil(max);
    v.iter().step_by(step).cloned().collect()
}

/// `(file name, SVG text)` of every plot for one scenario's runs.
pub fn plots(scenario: &Scenario, runs: &[RunResult]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let cdfs: Vec<Series> = runs
        .iter()
        .map(|r| {
            let t = ttfts_ms(r, None);
            let n = t.len().max(1) as f64;
            let points = downsample(
                &t.iter()
                    .enumerate()
                    .map(|(i, &x)| (x, (i + 1) as f64 / n))
                    .collect::<Vec<_>>(),
                400,
            );
            Series {
                name: r.policy.clone(),
                points,
            }
        })
        .collect();
    out.push((
        format!("{}-ttft-cdf.svg", scenario.name),
        chart(
            &format!("{}: TTFT CDF", scenario.name),
            "TTFT (ms, log)",
            "fraction of requests",
            &cdfs,
            true,
        ),
    ));
    for r in runs {
        let n = r.load_series.first().map_or(0, |(_, l)| l.len());
        let samples = downsample(&r.load_series, 600);
        let series: Vec<Series> = (0..n)
            .map(|s| Series {
                name: format!("server {s}"),
                points: samples
                    .iter()
                    .map(|(t, l)| (*t as f64 / 1e9, f64::from(l[s])))
                    .collect(),
            })
            .collect();
        out.push((
            format!("{}-{}-load.svg", scenario.name, r.policy),
            chart(
                &format!(
                    "{} / {}: load per server (running + waiting)",
                    scenario.name, r.policy
                ),
                "time (s)",
                "requests",
                &series,
                false,
            ),
        ));
        if !r.adaptive_series.is_empty() {
            let samples = downsample(&r.adaptive_series, 600);
            let mut series = vec![
                Series {
                    name: "signal (raw)".into(),
                    points: samples
                        .iter()
                        .filter_map(|a| a.signal.map(|s| (a.time as f64 / 1e9, s)))
                        .collect(),
                },
                Series {
                    name: "signal (smoothed)".into(),
                    points: samples
                        .iter()
                        .map(|a| (a.time as f64 / 1e9, a.smoothed))
                        .collect(),
                },
            ];
            let mut modes: Vec<String> = Vec::new();
            for a in &samples {
                if !modes.contains(&a.mode) {
                    modes.push(a.mode.clone());
                }
            }
            series.push(Series {
                name: format!("mode ({})", modes.join("/")),
                points: samples
                    .iter()
                    .map(|a| {
                        let m = modes.iter().position(|m| *m == a.mode).unwrap_or(0) as f64;
                        (a.time as f64 / 1e9, m / (modes.len().max(2) - 1) as f64)
                    })
                    .collect(),
            });
            let total = |a: &crate::runner::AdaptiveSample| a.weights.iter().sum::<f64>().max(1e-9);
            for (k, name) in r.scorer_names.iter().enumerate() {
                series.push(Series {
                    name: format!("w {name}"),
                    points: samples
                        .iter()
                        .map(|a| {
                            (
                                a.time as f64 / 1e9,
                                a.weights.get(k).copied().unwrap_or(0.0) / total(a),
                            )
                        })
                        .collect(),
                });
            }
            out.push((
                format!("{}-{}-adaptive.svg", scenario.name, r.policy),
                chart(
                    &format!(
                        "{} / {}: signal, mode, weight shares",
                        scenario.name, r.policy
                    ),
                    "time (s)",
                    "value",
                    &series,
                    false,
                ),
            ));
        }
    }
    out
}
