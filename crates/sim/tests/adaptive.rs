//! The adaptive policy in the simulator: its controller really ticks, moves the weights during
//! a hot-node episode, and gives the configured weights back once the pool is balanced.

use shepherd_sim::policy::{Policy, builtin_policy, sim_registry};
use shepherd_sim::runner::{RunOptions, run};
use shepherd_sim::workload::Scenario;

/// The hot-prefix shape at reduced scale: one long shared prompt at low concurrency, a spike
/// of concurrency on it, and background traffic that outlasts the spike.
const HOT: &str = "
name: hot-small
servers: 4
streams:
  - name: hot-low
    kind: shared-prefix
    prefixKey: hot
    groups: 1
    promptsPerGroup: 200
    systemTokens: 4000
    questionTokens: 100
    outputTokens: 60
    load: { closed: 2 }
    endS: 6
  - name: hot-spike
    kind: shared-prefix
    prefixKey: hot
    groups: 1
    promptsPerGroup: 200
    systemTokens: 4000
    questionTokens: 100
    outputTokens: 60
    load: { closed: 40 }
    startS: 6
    endS: 12
  - name: background
    kind: shared-prefix
    groups: 8
    promptsPerGroup: 10
    systemTokens: 500
    questionTokens: 100
    outputTokens: 60
    load: { rate: 6 }
    endS: 20
";

#[test]
fn adaptive_weights_move_in_the_spike_and_return_after_it() {
    let scenario = Scenario::from_yaml(HOT, "hot-small.yaml").unwrap();
    // The preset without its hot-prefix scorer: with it, this small spike is spread before it
    // unbalances the pool much (what the controller does is the point here).
    let yaml = shepherd_adaptive::preset::ADAPTIVE_CONFIG_YAML
        .replace("  - type: hot-prefix-scorer\n", "")
        .replace(
            "      - pluginRef: hot-prefix-scorer\n        weight: 4\n",
            "",
        );
    assert!(!yaml.contains("pluginRef: hot-prefix-scorer"));
    let policy = Policy::from_yaml("adaptive-without-hot-prefix", &yaml, "<test>").unwrap();
    let result = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap();
    let configured = vec![3.0, 2.0, 2.0, 1.0, 2.0];
    assert_eq!(
        result.scorer_names,
        [
            "prefix-cache-scorer",
            "queue-scorer",
            "kv-cache-utilization-scorer",
            "active-request-scorer",
            "prefill-load-scorer"
        ]
    );
    let series = &result.adaptive_series;
    // The controller ticks on its own 200 ms period of simulated time.
    assert!(series.len() > 50, "only {} ticks", series.len());
    assert!(
        series
            .windows(2)
            .all(|w| w[1].time - w[0].time == 200_000_000)
    );
    assert_eq!(series[0].weights, configured);

    let secs = |t: u64| t as f64 / 1e9;
    let spike: Vec<_> = series
        .iter()
        .filter(|a| (6.0..12.0).contains(&secs(a.time)))
        .collect();
    let burst = spike
        .iter()
        .find(|a| a.mode == "burst")
        .expect("the spike never put the controller in burst");
    // In burst the in-flight scorer outweighs prefix affinity; affinity lost weight.
    assert!(burst.weights[0] < 1.0, "prefix weight {:?}", burst.weights);
    assert!(burst.weights[3] > burst.weights[0], "{:?}", burst.weights);
    assert!(burst.distribution_share >= 0.9);
    for a in series {
        let total: f64 = a.weights.iter().sum();
        assert!(
            (total - 10.0).abs() < 1e-9,
            "budget not kept: {:?}",
            a.weights
        );
    }

    // Background only: the pool is balanced again and the configured weights are back.
    let after: Vec<_> = series
        .iter()
        .filter(|a| (15.0..19.0).contains(&secs(a.time)))
        .collect();
    assert!(!after.is_empty());
    let last = after.last().unwrap();
    assert_eq!(last.mode, "steady");
    let drift: f64 = last
        .weights
        .iter()
        .zip(&configured)
        .map(|(w, c)| (w - c).abs())
        .sum();
    // Within 1.25 % of the 10.0 budget: the smoothed signal decays toward zero, it does not snap.
    assert!(drift < 0.125, "weights after the spike: {:?}", last.weights);
}

#[test]
fn static_policies_have_no_controller() {
    let scenario = Scenario::from_yaml(HOT, "hot-small.yaml").unwrap();
    let policy = builtin_policy("static-default-plus").unwrap();
    let result = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap();
    assert!(result.adaptive_series.is_empty());
}

#[test]
fn an_invalid_adaptive_section_is_an_error_naming_the_field() {
    let yaml = "
plugins:
  - type: prefix-cache-scorer
  - type: queue-scorer
schedulingProfiles:
  - name: default
    plugins:
      - pluginRef: prefix-cache-scorer
      - pluginRef: queue-scorer
adaptive:
  hysteresis: { enter: 0.2, exit: 0.5 }
";
    let policy = shepherd_sim::policy::Policy::from_yaml("bad", yaml, "bad.yaml").unwrap();
    let scenario = Scenario::from_yaml(HOT, "hot-small.yaml").unwrap();
    let err = run(&scenario, &policy, &sim_registry(), RunOptions::default()).unwrap_err();
    assert!(err.to_string().contains("hysteresis.exit"), "{err}");
}
