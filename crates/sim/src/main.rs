//! `shepherd-sim`: compare routing policies on simulated vLLM-like servers.
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use shepherd_sim::compare::{CompareOptions, compare};
use shepherd_sim::overload::{OverloadOptions, overload, table as overload_table};
use shepherd_sim::pd::{PdOptions, default_scenarios as pd_scenarios, pd, table as pd_table};
use shepherd_sim::policy::{Policy, builtin_policies, builtin_policy, sim_registry};
use shepherd_sim::replicas::{
    Coordination, DEFAULT_COORDINATIONS, DEFAULT_COUNTS, DEFAULT_POLICIES as REPLICA_POLICIES,
    DEFAULT_SCENARIOS as REPLICA_SCENARIOS, DEFAULT_SPREADS, ReplicaOptions,
    plots as replica_plots, replicas, table as replica_table,
};
use shepherd_sim::report::table;
use shepherd_sim::runner::Spread;
use shepherd_sim::scale::{
    DEFAULT_POLICIES, DEFAULT_SCENARIOS, DEFAULT_SIZES, ScaleOptions, plots as scale_plots, scale,
    table as scale_table,
};
use shepherd_sim::workload::{Scenario, builtin_scenarios, scenario_by_name_or_path};
use shepherd_sim::{SimError, svg, timeline};

/// Simulate a pool of vLLM-like model servers and compare Shepherd routing policies.
///
/// With no arguments: every built-in scenario under every built-in policy, plus the
/// zero-staleness bound; prints the table and writes report.json and SVG plots to --out.
#[derive(Debug, Parser)]
#[command(name = "shepherd-sim", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    compare: CompareArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare routing policies on simulated servers (the default).
    Compare(CompareArgs),
    /// Flow control under overload: one policy on the `overload` scenario with and without
    /// flow control, and unloaded, per priority class and tenant.
    Overload(OverloadArgs),
    /// The scale study: the synthetic scenarios on 8, 32 and 128 servers at the same load per
    /// server; routing quality and the wall-clock cost of each pick as the pool grows.
    Scale(ScaleArgs),
    /// The replica study: R picker replicas side by side with no coordination (each with its
    /// own scheduler, prefix index and in-flight counts), requests spread over them by a load
    /// balancer; hit rate, TTFT p90 and load imbalance against R = 1.
    Replicas(ReplicasArgs),
    /// Prefill/decode disaggregation: each P/D scenario aggregated on four `both` servers,
    /// always disaggregated on 1P:3D and 2P:2D pools, and with the load-aware decider on
    /// those pools and on 1PD:3D and 2PD:2D (prefill servers that also decode); TTFT, TPOT and
    /// output tokens per GPU, and the decider against "always" and "never".
    Pd(PdArgs),
    /// The engine model against published measurements of vLLM serving Llama-3-8B: quantity,
    /// published figure, simulated figure, ratio, source (the table of docs/calibration.md).
    Calibrate,
    /// Serve simulated vLLM servers over HTTP on loopback ports.
    #[cfg(feature = "serve")]
    Serve(shepherd_sim::serve::ServeArgs),
}

#[derive(Debug, Args)]
struct CompareArgs {
    /// Built-in scenario name or scenario YAML file (repeatable; default: all built-ins).
    #[arg(long)]
    scenario: Vec<String>,
    /// Built-in policy name (repeatable; default: all built-ins).
    #[arg(long)]
    policy: Vec<String>,
    /// A Shepherd config file to compare as an extra policy (repeatable).
    #[arg(long)]
    config: Vec<PathBuf>,
    /// Replay a Mooncake-format JSONL trace as a scenario.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Servers for --trace.
    #[arg(long, default_value_t = 8)]
    servers: u32,
    /// Multiply trace timestamps by this (0.5 replays twice as fast).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Skip the zero-staleness bound runs.
    #[arg(long)]
    no_bound: bool,
    /// Also search, per scenario and policy, the highest arrival rate at which at least 90 %
    /// of the requests meet both their objectives (TTFT and TPOT; DistServe's maximum
    /// goodput): the scenario's load scaled up and down, each load on every seed.
    #[arg(long)]
    max_goodput: bool,
    /// Run every (scenario, policy) pair on this many seeds, derived from --seed (the first is
    /// --seed itself); figures become means with 95 % Student's t intervals, and "best" /
    /// "within 5 %" are judged on those intervals; policies with a latency-scorer also get its
    /// prediction error (MAPE) by load level over the seeds.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    seeds: u32,
    #[command(flatten)]
    run: RunArgs,
}

/// What every report takes: seed, output, threads, verbosity.
#[derive(Debug, Args)]
struct RunArgs {
    /// Seed of every run (with `compare --seeds N`, the first of the N seeds).
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Directory for the JSON report (and, for `compare`, the SVG plots).
    #[arg(long, default_value = "out")]
    out: PathBuf,
    /// Print the JSON report to stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Worker threads (default: available cores).
    #[arg(long)]
    threads: Option<usize>,
    /// No progress on stderr.
    #[arg(long)]
    quiet: bool,
}

#[derive(Debug, Args)]
struct ScaleArgs {
    /// Built-in scenario name or scenario YAML file (repeatable; default: shared-prefix,
    /// hot-prefix, multi-turn). Trace scenarios cannot be scaled.
    #[arg(long)]
    scenario: Vec<String>,
    /// Built-in policy name (repeatable; default: round-robin, least-load, static-default,
    /// adaptive, sglang, dynamo).
    #[arg(long)]
    policy: Vec<String>,
    /// Pool size (repeatable; default 8, 32, 128); each a whole multiple of the scenario's own.
    #[arg(long = "servers")]
    sizes: Vec<u32>,
    /// Multiply every stream's start and end times by this, at every size alike (shorter runs).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct ReplicasArgs {
    /// Built-in scenario name or scenario YAML file (repeatable; default: shared-prefix,
    /// multi-turn, mooncake).
    #[arg(long)]
    scenario: Vec<String>,
    /// Built-in policy name (repeatable; default: static-default, adaptive).
    #[arg(long)]
    policy: Vec<String>,
    /// Replica count (repeatable; default 1, 2, 4, 8). Include 1 for the relative figures.
    #[arg(long = "replicas", value_parser = clap::value_parser!(u32).range(1..=256))]
    counts: Vec<u32>,
    /// Spread mode: random, round-robin or connection (repeatable; default random, connection).
    #[arg(long)]
    spread: Vec<Spread>,
    /// Coordination between replicas: none, rendezvous, rendezvous-bounded (load factor 1.25),
    /// rendezvous-bounded:F, load-sync[:MS] (in-flight counts every MS ms, default 10) or
    /// deltas[:MS] (in-flight counts and approximate-index inserts) or rendezvous+deltas[:MS]
    /// or redis[:MS] (the deltas through Redis streams: each exchange also takes a measured
    /// loopback delivery) (repeatable; default none and rendezvous). Include none for the
    /// relative figures.
    #[arg(long)]
    coordination: Vec<Coordination>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct PdArgs {
    /// Built-in scenario name or scenario YAML file (repeatable; default: pd-long-prompt,
    /// pd-decode-heavy, pd-mixed). Roles written in the file are replaced by each run's.
    #[arg(long)]
    scenario: Vec<String>,
    /// Run every arm on this many seeds, derived from --seed; figures become their means.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    seeds: u32,
    /// Skip the search of each arm's maximum goodput (the highest arrival rate at which 90 %
    /// of the requests meet both objectives).
    #[arg(long)]
    no_max_goodput: bool,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Args)]
struct OverloadArgs {
    /// Built-in scenario name or scenario YAML file (streams with `priority` and `fairnessId`).
    #[arg(long, default_value = "overload")]
    scenario: String,
    /// Built-in policy name, or a Shepherd config file, run with and without flow control.
    #[arg(long, default_value = "adaptive")]
    policy: String,
    /// Config fragment with the `flowControl` section (and detector plugin) to turn on
    /// (default: the built-in `policies/flow-control.yaml`).
    #[arg(long)]
    flow_control: Option<PathBuf>,
    /// Rate factor of the unloaded reference run.
    #[arg(long, default_value_t = 0.25)]
    unloaded_scale: f64,
    #[command(flatten)]
    run: RunArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<(), Box<dyn std::error::Error>> = match &cli.command {
        None => real_main(&cli.compare).map_err(Into::into),
        Some(Command::Compare(args)) => real_main(args).map_err(Into::into),
        Some(Command::Overload(args)) => overload_main(args).map_err(Into::into),
        Some(Command::Pd(args)) => pd_main(args).map_err(Into::into),
        Some(Command::Scale(args)) => scale_main(args).map_err(Into::into),
        Some(Command::Replicas(args)) => replicas_main(args).map_err(Into::into),
        Some(Command::Calibrate) => {
            print!(
                "{}",
                shepherd_sim::calibration::table(&shepherd_sim::calibration::rows())
            );
            Ok(())
        }
        #[cfg(feature = "serve")]
        Some(Command::Serve(args)) => args.run().map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shepherd-sim: error: {e}");
            ExitCode::from(2)
        }
    }
}

fn threads(requested: Option<usize>) -> usize {
    requested.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(std::num::NonZero::get)
            .unwrap_or(1)
    })
}

/// `given`, or `default` when nothing was given on the command line.
fn or_default<T: Clone>(given: &[T], default: &[T]) -> Vec<T> {
    if given.is_empty() {
        default.to_vec()
    } else {
        given.to_vec()
    }
}

/// The scenarios named on the command line, or the `default` built-ins.
fn scenarios_or(given: &[String], default: &[&str]) -> Result<Vec<Scenario>, SimError> {
    let names: Vec<&str> = if given.is_empty() {
        default.to_vec()
    } else {
        given.iter().map(String::as_str).collect()
    };
    names.iter().map(|s| scenario_by_name_or_path(s)).collect()
}

/// The built-in policies named on the command line, or the `default` ones.
fn policies_or(given: &[String], default: &[&str]) -> Result<Vec<Policy>, SimError> {
    let names: Vec<&str> = if given.is_empty() {
        default.to_vec()
    } else {
        given.iter().map(String::as_str).collect()
    };
    names.iter().map(|p| builtin_policy(p)).collect()
}

/// What a study leaves behind: its JSON report (and plots) in `--out`, the JSON or the table
/// on stdout, a one-line summary on stderr.
struct StudyOutput<'a> {
    file: &'a str,
    json: String,
    plots: Vec<(String, String)>,
    table: String,
    summary: String,
}

fn emit(run: &RunArgs, out: StudyOutput<'_>) -> Result<(), SimError> {
    write_file(&run.out, out.file, &out.json)?;
    for (name, text) in &out.plots {
        write_file(&run.out, name, text)?;
    }
    if run.json {
        println!("{}", out.json);
    } else {
        println!("{}", out.table);
    }
    if !run.quiet {
        eprintln!("{}; report in {}", out.summary, run.out.display());
    }
    Ok(())
}

fn write_file(dir: &Path, name: &str, text: &str) -> Result<(), SimError> {
    std::fs::create_dir_all(dir).map_err(|source| SimError::Io {
        path: dir.display().to_string(),
        source,
    })?;
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| SimError::Io {
        path: path.display().to_string(),
        source,
    })
}

fn overload_main(cli: &OverloadArgs) -> Result<(), SimError> {
    if !(cli.unloaded_scale.is_finite() && cli.unloaded_scale > 0.0) {
        return Err(SimError::Input {
            file: "--unloaded-scale".into(),
            line: 0,
            field: "unloaded-scale".into(),
            reason: "must be > 0".into(),
        });
    }
    let scenario = scenario_by_name_or_path(&cli.scenario)?;
    let policy_path = Path::new(&cli.policy);
    let policy = if policy_path.exists() {
        Policy::from_file(policy_path)?
    } else {
        builtin_policy(&cli.policy)?
    };
    let mut opts = OverloadOptions {
        seed: cli.run.seed,
        threads: threads(cli.run.threads),
        unloaded_scale: cli.unloaded_scale,
        progress: !cli.run.quiet,
        ..OverloadOptions::default()
    };
    if let Some(path) = &cli.flow_control {
        opts.flow_control = SimError::read(path)?;
    }
    let started = std::time::Instant::now();
    let result = overload(&scenario, &policy, &sim_registry(), &opts)?;
    emit(
        &cli.run,
        StudyOutput {
            file: "overload.json",
            json: serde_json::to_string_pretty(&result.report).unwrap_or_default(),
            plots: Vec::new(),
            table: overload_table(&result.report),
            summary: format!(
                "{} runs in {:.1} s wall",
                result.runs.len(),
                started.elapsed().as_secs_f64()
            ),
        },
    )
}

fn pd_main(cli: &PdArgs) -> Result<(), SimError> {
    let scenarios = if cli.scenario.is_empty() {
        pd_scenarios()?
    } else {
        cli.scenario
            .iter()
            .map(|s| scenario_by_name_or_path(s))
            .collect::<Result<_, _>>()?
    };
    let opts = PdOptions {
        seed: cli.run.seed,
        seeds: cli.seeds,
        threads: threads(cli.run.threads),
        progress: !cli.run.quiet,
        max_goodput: !cli.no_max_goodput,
    };
    let started = std::time::Instant::now();
    let study = pd(&scenarios, &sim_registry(), &opts)?;
    emit(
        &cli.run,
        StudyOutput {
            file: "pd.json",
            json: serde_json::to_string_pretty(&study.report).unwrap_or_default(),
            plots: Vec::new(),
            table: pd_table(&study.report),
            summary: format!(
                "{} runs, {} simulated events in {:.1} s wall",
                study.run_count,
                study.events,
                started.elapsed().as_secs_f64()
            ),
        },
    )
}

fn scale_main(cli: &ScaleArgs) -> Result<(), SimError> {
    let scenarios = scenarios_or(&cli.scenario, DEFAULT_SCENARIOS)?;
    let policies = policies_or(&cli.policy, DEFAULT_POLICIES)?;
    let opts = ScaleOptions {
        sizes: or_default(&cli.sizes, DEFAULT_SIZES),
        time_scale: cli.time_scale,
        seed: cli.run.seed,
        threads: threads(cli.run.threads),
        progress: !cli.run.quiet,
    };
    let study = scale(&scenarios, &policies, &sim_registry(), &opts)?;
    emit(
        &cli.run,
        StudyOutput {
            file: "scale.json",
            json: serde_json::to_string_pretty(&study.report).unwrap_or_default(),
            plots: scale_plots(&study.report),
            table: scale_table(&study.report),
            summary: format!(
                "{} runs, {} simulated events in {:.1} s wall",
                study.run_count, study.events, study.wall_seconds
            ),
        },
    )
}

fn replicas_main(cli: &ReplicasArgs) -> Result<(), SimError> {
    let scenarios = scenarios_or(&cli.scenario, REPLICA_SCENARIOS)?;
    let policies = policies_or(&cli.policy, REPLICA_POLICIES)?;
    let opts = ReplicaOptions {
        counts: or_default(&cli.counts, DEFAULT_COUNTS),
        spreads: or_default(&cli.spread, DEFAULT_SPREADS),
        coordinations: or_default(&cli.coordination, DEFAULT_COORDINATIONS),
        seed: cli.run.seed,
        threads: threads(cli.run.threads),
        progress: !cli.run.quiet,
    };
    let study = replicas(&scenarios, &policies, &sim_registry(), &opts)?;
    emit(
        &cli.run,
        StudyOutput {
            file: "replicas.json",
            json: serde_json::to_string_pretty(&study.report).unwrap_or_default(),
            plots: replica_plots(&study.report),
            table: replica_table(&study.report),
            summary: format!(
                "{} runs, {} simulated events in {:.1} s wall",
                study.run_count, study.events, study.wall_seconds
            ),
        },
    )
}

fn real_main(cli: &CompareArgs) -> Result<(), SimError> {
    let mut scenarios = Vec::new();
    for s in &cli.scenario {
        scenarios.push(scenario_by_name_or_path(s)?);
    }
    if let Some(trace) = &cli.trace {
        if !(cli.time_scale.is_finite() && cli.time_scale > 0.0) {
            return Err(SimError::Input {
                file: "--time-scale".into(),
                line: 0,
                field: "time-scale".into(),
                reason: "must be > 0".into(),
            });
        }
        scenarios.push(Scenario::for_trace(trace, cli.servers, cli.time_scale)?);
    }
    if scenarios.is_empty() {
        scenarios = builtin_scenarios()?;
    }
    let mut policies = if cli.policy.is_empty() {
        builtin_policies()?
    } else {
        cli.policy
            .iter()
            .map(|p| builtin_policy(p))
            .collect::<Result<Vec<_>, _>>()?
    };
    for c in &cli.config {
        policies.push(Policy::from_file(c)?);
    }
    let registry = sim_registry();
    let threads = threads(cli.run.threads);
    let comparison = compare(
        &scenarios,
        &policies,
        &registry,
        &CompareOptions {
            seed: cli.run.seed,
            seeds: cli.seeds,
            threads,
            fresh_bound: !cli.no_bound,
            progress: !cli.run.quiet,
            max_goodput: cli.max_goodput,
        },
    )?;
    let json = serde_json::to_string_pretty(&comparison.report).unwrap_or_default();
    std::fs::create_dir_all(&cli.run.out).map_err(|source| SimError::Io {
        path: cli.run.out.display().to_string(),
        source,
    })?;
    let write = |name: &str, text: &str| {
        let path = cli.run.out.join(name);
        std::fs::write(&path, text).map_err(|source| SimError::Io {
            path: path.display().to_string(),
            source,
        })
    };
    write("report.json", &json)?;
    for (scenario, runs) in scenarios.iter().zip(&comparison.runs) {
        for (name, text) in svg::plots(scenario, runs) {
            write(&name, &text)?;
        }
        for run in runs {
            if let Some(text) = timeline::csv(run) {
                write(
                    &format!("{}-{}-adaptive.csv", scenario.name, run.policy),
                    &text,
                )?;
            }
        }
    }
    if cli.run.json {
        println!("{json}");
    } else {
        println!("{}", table(&comparison.report));
    }
    if !cli.run.quiet {
        eprintln!(
            "{} runs, {} simulated events in {:.1} s wall ({:.0}k events/s); report and plots in {}",
            comparison.run_count,
            comparison.events,
            comparison.wall_seconds,
            comparison.events as f64 / comparison.wall_seconds.max(1e-9) / 1e3,
            cli.run.out.display()
        );
    }
    Ok(())
}
