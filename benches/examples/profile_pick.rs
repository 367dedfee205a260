//! A fixed loop of default-profile picks, for profilers (callgrind, perf):
//! `cargo build --release -p shepherd-benches --example profile_pick` then
//! `valgrind --tool=callgrind target/release/examples/profile_pick 64 1024 20000`.

use shepherd_benches::workload::{grouped_prompt, pool, request};
use shepherd_scorers::build_default_scheduler;

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>().unwrap_or(0));
    let endpoints = args.next().unwrap_or(64).max(1);
    let bytes = args.next().unwrap_or(1024).max(1);
    let picks = args.next().unwrap_or(20_000);
    let (pool, _clock) = pool(endpoints);
    let Ok(scheduler) = build_default_scheduler(pool) else {
        eprintln!("the default config failed to build");
        return;
    };
    let requests: Vec<_> = (0..256u64)
        .map(|i| request(i, grouped_prompt(i % 64, i, bytes / 2, bytes - bytes / 2)))
        .collect();
    let mut sum = 0usize;
    for i in 0..picks {
        if let Ok(d) = scheduler.schedule(&requests[i % requests.len()]) {
            sum += d.endpoints().len();
        }
    }
    println!("{sum}");
}
