//! Loading a picker configuration (`EndpointPickerConfig::from_yaml`) from pathological
//! texts of 10 KB to 1 MB: the cost must grow linearly with the size (issue 8: 40,000
//! unclosed `[` took 2.6 s, an alias used 8,000 times 6.4 s and 3 GB).
//!
//! Shapes, each filling the given size:
//! - `unclosed`: `[` repeated (rejected: nesting depth);
//! - `nested`: `[` then as many `]` (rejected: nesting depth);
//! - `block-nesting`: `k:` lines each one space deeper (rejected: nesting depth);
//! - `aliases`: one anchored list, then aliases to it (rejected: alias count);
//! - `flat-list`: a flow list of short strings (accepted and parsed in full).
//!
//! Before the criterion groups (throughput in bytes per second), a summary prints the cost per
//! KB at each size (the best of rounds that time the sizes in turn, so load from other work on
//! the machine disturbs every size alike) and the ratio of the 1 MB cost per KB to the 10 KB
//! one: about 1 (or below) for linear cost, about 100 for quadratic.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench config_parse
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use shepherd_scheduler_core::config::EndpointPickerConfig;

const SIZES: [usize; 4] = [10_000, 100_000, 300_000, 1_000_000];

const HEAD: &str = "plugins:\n- type: constant-scorer\n  parameters:\n    k: ";

/// `HEAD` followed by `unit` repeated up to `size` bytes, then `tail`.
fn fill(size: usize, unit: &str, tail: &str) -> String {
    let room = size.saturating_sub(HEAD.len() + tail.len());
    let mut text = String::with_capacity(size);
    text.push_str(HEAD);
    text.push_str(&unit.repeat(room / unit.len()));
    text.push_str(tail);
    text
}

fn unclosed(size: usize) -> String {
    fill(size, "[", "")
}

fn nested(size: usize) -> String {
    let depth = size.saturating_sub(HEAD.len()) / 2;
    format!("{HEAD}{}{}", "[".repeat(depth), "]".repeat(depth))
}

fn block_nesting(size: usize) -> String {
    let mut text = String::from(HEAD);
    text.push('\n');
    let mut indent = 4;
    while text.len() + indent + 3 <= size {
        text.push_str(&" ".repeat(indent));
        text.push_str("k:\n");
        indent += 1;
    }
    text
}

fn aliases(size: usize) -> String {
    let head = "[&a [abcdef, abcdef, abcdef, abcdef], [*a";
    let mut text = fill(size, ",*a", "]]\n");
    text.replace_range(HEAD.len()..HEAD.len() + head.len().min(size / 2), head);
    text
}

fn flat_list(size: usize) -> String {
    let mut text = fill(size, "abc, ", "x]\n");
    text.insert(HEAD.len(), '[');
    text
}

type Shape = (&'static str, fn(usize) -> String);

const SHAPES: [Shape; 5] = [
    ("unclosed", unclosed),
    ("nested", nested),
    ("block-nesting", block_nesting),
    ("aliases", aliases),
    ("flat-list", flat_list),
];

fn load(text: &str) -> bool {
    EndpointPickerConfig::from_yaml(black_box(text)).is_ok()
}

/// The best (least disturbed) time of one load at each size: rounds over the sizes in turn,
/// each timing about the same amount of text (one 1 MB load, or many smaller ones), until
/// `budget` is spent; the minimum is the figure least affected by other work on the machine.
fn best_times(texts: &[String], budget: Duration) -> Vec<Duration> {
    let largest = texts.iter().map(String::len).max().unwrap_or(1);
    let mut best = vec![Duration::MAX; texts.len()];
    let started = Instant::now();
    let mut rounds = 0;
    while rounds < 3 || started.elapsed() < budget {
        for (text, best) in texts.iter().zip(&mut best) {
            let reps = (largest / text.len().max(1)).max(1) as u32;
            let timer = Instant::now();
            for _ in 0..reps {
                load(text);
            }
            *best = (*best).min(timer.elapsed() / reps);
        }
        rounds += 1;
    }
    best
}

fn summary(quick: bool) {
    let budget = Duration::from_millis(if quick { 50 } else { 3000 });
    println!("config_parse: cost per KB of input (best of interleaved rounds)");
    print!("{:<14}", "shape");
    for size in SIZES {
        print!("{:>14}", format!("{} KB", size / 1000));
    }
    println!("{:>14}", "1 MB / 10 KB");
    for (name, make) in SHAPES {
        let texts: Vec<String> = SIZES.iter().map(|&size| make(size)).collect();
        let times = best_times(&texts, budget);
        print!("{name:<14}");
        let per_kb: Vec<f64> = texts
            .iter()
            .zip(&times)
            .map(|(text, time)| time.as_nanos() as f64 / (text.len() as f64 / 1000.0))
            .collect();
        for cost in &per_kb {
            print!("{:>14}", format!("{cost:.0} ns"));
        }
        let ratio = per_kb[per_kb.len() - 1] / per_kb[0];
        println!("{:>14}", format!("{ratio:.2}"));
    }
}

fn bench(c: &mut Criterion) {
    for (name, make) in SHAPES {
        let mut group = c.benchmark_group(format!("config_parse/{name}"));
        for size in SIZES {
            let text = make(size);
            group.throughput(Throughput::Bytes(text.len() as u64));
            group.bench_with_input(BenchmarkId::from_parameter(size), &text, |b, text| {
                b.iter(|| load(text))
            });
        }
        group.finish();
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--test");
    for (name, make) in SHAPES {
        for size in SIZES {
            let text = make(size);
            assert!(text.len() <= size, "{name} {size}: {} bytes", text.len());
            // Only the flat list is a valid configuration; the others hit a limit.
            assert_eq!(load(&text), name == "flat-list", "{name} {size}");
        }
    }
    summary(quick);
    let mut c = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args();
    bench(&mut c);
    c.final_summary();
}
