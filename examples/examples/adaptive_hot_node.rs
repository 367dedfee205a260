//! A scripted hot-node episode driven through the adaptive weights, printed as a timeline.
//!
//! Six endpoints share the load evenly; then one endpoint's queue grows (a hot prefix keeps
//! pulling traffic there), and finally the pool rebalances. Each tick prints every endpoint's
//! load, the two normalized coefficients of variation, the raw and smoothed signal, the mode
//! and the weights of the built-in profile's shape (prefix 3 : queue 2 : kv 2).
//!
//! ```text
//! cargo run -p shepherd-examples --example adaptive_hot_node
//! ```

use std::sync::Arc;

use shepherd_adaptive::{AdaptiveConfig, AdaptiveController};
use shepherd_scheduler_core::clock::{ManualClock, Timestamp};
use shepherd_scheduler_core::endpoint::{Endpoint, EndpointMetrics, Pool};
use shepherd_scheduler_core::plugin::{Category, CycleState, Score, Scorer};
use shepherd_scheduler_core::profile::Profile;

/// Stands in for a real scorer: only the category matters to the adaptive weights.
struct Placeholder(Category);

impl Scorer for Placeholder {
    fn category(&self) -> Category {
        self.0
    }
    fn score(&self, _: &mut CycleState<'_>, _: &[&Arc<Endpoint>], out: &mut [Score]) {
        out.fill(Score::NEUTRAL);
    }
}

const ENDPOINTS: usize = 6;
const TICKS: u64 = 44;

/// Scraped `(running, waiting, kv)` of every endpoint at tick `t`.
fn script(t: u64) -> Vec<(u32, u32, f64)> {
    let mut m = vec![(6, 1, 0.45); ENDPOINTS];
    // Ticks 6..=19: endpoint 0's queue grows by 4 requests a tick and its KV cache fills.
    // Ticks 20..: the pool rebalances; the backlog drains by half each tick.
    let hot_queue = match t {
        0..=5 => 1,
        6..=19 => 1 + 4 * (t - 5) as u32,
        _ => (57u32 >> (t - 19).min(31)).max(1),
    };
    let hot_kv = (0.45 + 0.04 * (hot_queue - 1) as f64).min(0.99);
    m[0] = (if hot_queue > 1 { 12 } else { 6 }, hot_queue, hot_kv);
    m
}

fn main() {
    let profile = Arc::new(
        Profile::builder("default")
            .scorer("prefix", Arc::new(Placeholder(Category::Affinity)), 3.0)
            .scorer("queue", Arc::new(Placeholder(Category::Distribution)), 2.0)
            .scorer("kv", Arc::new(Placeholder(Category::Distribution)), 2.0)
            .build(),
    );
    let config = AdaptiveConfig::default();
    let tick = config.tick_interval();
    let controller = match AdaptiveController::new(Arc::clone(&profile), config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("invalid adaptive config: {e}");
            std::process::exit(1);
        }
    };

    let clock = Arc::new(ManualClock::default());
    let pool = Pool::with_clock(clock.clone());
    pool.set_members((0..ENDPOINTS).map(|i| format!("10.0.0.{}:8000", i + 1)));

    println!(
        "hot-node episode: {ENDPOINTS} endpoints, tick {} ms, settle bound {} ticks",
        tick.as_millis(),
        controller.config().settle_bound_ticks()
    );
    println!("configured weights: prefix 3, queue 2, kv 2 (budget 7)\n");
    let loads_header: String = (1..=ENDPOINTS)
        .map(|i| format!("{:>4}", format!("p{i}")))
        .collect();
    println!(
        "{:>4} {loads_header}  {:>6} {:>6} {:>6} {:>6}  {:<6} {:>6}  {:>6} {:>6} {:>6}",
        "tick", "nCV(p)", "nCV(k)", "signal", "smooth", "mode", "share", "prefix", "queue", "kv"
    );

    let mut now = Timestamp::from_millis(1_000);
    let mut changes = Vec::new();
    for t in 0..TICKS {
        let snapshot = pool.snapshot();
        clock.set(now);
        for (ep, (running, waiting, kv)) in snapshot.endpoints().iter().zip(script(t)) {
            ep.set_metrics(EndpointMetrics {
                running,
                waiting,
                kv_utilization: kv,
                ..Default::default()
            });
        }
        let record = controller.tick(&snapshot, now);
        let loads: String = record
            .endpoints
            .iter()
            .map(|e| format!("{:>4}", e.load))
            .collect();
        let mark = if record.mode_changed() {
            "  <- mode change"
        } else if record.weights_changed {
            "  *"
        } else {
            ""
        };
        println!(
            "{:>4} {loads}  {:>6.3} {:>6.3} {:>6.3} {:>6.3}  {:<6} {:>6.3}  {:>6.3} {:>6.3} {:>6.3}{mark}",
            record.tick,
            record.reading.ncv_load,
            record.reading.ncv_kv,
            record.signal().unwrap_or(f64::NAN),
            record.smoothed,
            record.mode.to_string(),
            record.distribution_share,
            record.weights[0],
            record.weights[1],
            record.weights[2],
        );
        if record.mode_changed() {
            changes.push(format!("tick {:>2}: {}", record.tick, record.reason));
        }
        now = now.saturating_add(tick);
    }

    println!("\nmode changes:");
    for line in changes {
        println!("  {line}");
    }
    let live = profile.weights().load();
    println!(
        "\nweights in force at the end: {:?} (reason: {})",
        live.as_slice(),
        live.reason()
    );
}
