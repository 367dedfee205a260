//! Reading a model server's `/metrics` page: the cost the scraper pays per endpoint per scrape.
//!
//! - `prom_parse/parse/vllm-49KB`: `prom::parse` of a vLLM page (one engine, LoRA on, 15
//!   histograms: about 49 KB, 392 samples, 120 `# HELP`/`# TYPE` lines), the runtime crate's
//!   test fixture;
//! - `prom_parse/parse+map/vllm-49KB`: the same plus `EngineMapping::vllm().extract`;
//! - `prom_parse/map/vllm-49KB`: the mapping alone, on an already parsed page;
//! - the same three for the data-parallel page (two engines: about 83 KB) and an SGLang page
//!   (about 14 KB).
//!
//! Then a summary of medians measured in this same run: µs per page and MB/s.
//!
//! ```text
//! cargo bench -p shepherd-benches --bench prom_parse
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use shepherd_runtime::mapping::EngineMapping;
use shepherd_runtime::prom::parse;

const VLLM: &str = include_str!("../../crates/runtime/tests/fixtures/vllm.txt");
const VLLM_DP2: &str = include_str!("../../crates/runtime/tests/fixtures/vllm-dp2.txt");
const SGLANG: &str = include_str!("../../crates/runtime/tests/fixtures/sglang.txt");

/// Median of `f` over `samples` timed runs of `batch` calls each, in nanoseconds per call.
fn median_ns(samples: usize, batch: usize, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..batch {
                f();
            }
            start.elapsed().as_nanos() as f64 / batch as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

struct Row {
    page: &'static str,
    bytes: usize,
    samples: usize,
    parse_ns: f64,
    both_ns: f64,
    map_ns: f64,
}

fn main() {
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(50)
        .configure_from_args();
    let pages = [
        ("vllm-49KB", VLLM, EngineMapping::vllm()),
        ("vllm-dp2-83KB", VLLM_DP2, EngineMapping::vllm()),
        ("sglang-14KB", SGLANG, EngineMapping::sglang()),
    ];
    let mut rows = Vec::new();
    for (label, page, mapping) in &pages {
        let bytes = page.as_bytes();
        let parsed = parse(bytes).expect("fixture parses");
        assert_eq!(parsed.bad_lines(), 0, "{label} has bad lines");
        let mut group = criterion.benchmark_group("prom_parse");
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(BenchmarkId::new("parse", label), |b| {
            b.iter(|| black_box(parse(black_box(bytes)).map(|s| s.len())))
        });
        group.bench_function(BenchmarkId::new("parse+map", label), |b| {
            b.iter(|| {
                let scrape = parse(black_box(bytes)).expect("fixture parses");
                black_box(mapping.extract(&scrape))
            })
        });
        group.bench_function(BenchmarkId::new("map", label), |b| {
            b.iter(|| black_box(mapping.extract(black_box(&parsed))))
        });
        group.finish();
        rows.push(Row {
            page: label,
            bytes: bytes.len(),
            samples: parsed.len(),
            parse_ns: median_ns(101, 20, || {
                black_box(parse(black_box(bytes)).map(|s| s.len())).ok();
            }),
            both_ns: median_ns(101, 20, || {
                if let Ok(scrape) = parse(black_box(bytes)) {
                    black_box(mapping.extract(&scrape));
                }
            }),
            map_ns: median_ns(101, 20, || {
                black_box(mapping.extract(black_box(&parsed)));
            }),
        });
    }

    criterion.final_summary();
    println!("\n== metrics page parsing (medians, this run) ==");
    println!(
        "{:>14} {:>8} {:>8} {:>10} {:>8} {:>14} {:>8}",
        "page", "bytes", "samples", "parse µs", "MB/s", "parse+map µs", "map µs"
    );
    for r in &rows {
        println!(
            "{:>14} {:>8} {:>8} {:>10.1} {:>8.0} {:>14.1} {:>8.1}",
            r.page,
            r.bytes,
            r.samples,
            r.parse_ns / 1e3,
            r.bytes as f64 / r.parse_ns * 1e3,
            r.both_ns / 1e3,
            r.map_ns / 1e3
        );
    }
}
