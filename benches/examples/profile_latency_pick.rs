//! A fixed loop of dry-run picks of one `latency_pick` case, for profilers (callgrind, perf):
//! `cargo build --release -p shepherd-benches --example profile_latency_pick`, then
//! `valgrind --tool=callgrind target/release/examples/profile_latency_pick default+latency 2000`.
//! The case names are those of `cargo bench -p shepherd-benches --bench latency_pick`.

use shepherd_benches::latency_setup::{DRY, cases, request};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "default+latency".into());
    let picks = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000usize);
    let request = request();
    let cases = cases(&request);
    let Some((_, scheduler)) = cases.iter().find(|(n, _)| *n == name) else {
        let names: Vec<_> = cases.iter().map(|(n, _)| *n).collect();
        eprintln!("unknown case {name:?}; the cases are {names:?}");
        std::process::exit(2);
    };
    let mut sum = 0usize;
    for _ in 0..picks {
        if let Ok(d) = scheduler.schedule_with(&request, DRY) {
            sum += d.endpoints().len();
        }
    }
    println!("{sum}");
}
