//! The harness of the hostile suite: Shepherd's binaries started as operators start them (a
//! child process each, so its memory and file descriptors are its own and can be measured),
//! simulated model servers behind them, and readings of a process's resident memory, address
//! space and open files from `/proc`.
//!
//! Every test of this crate plays a client that a public port must survive — slow, idle,
//! lying about lengths, flooding, unauthenticated — on loopback only, with every loop bounded
//! in count and time, and checks that a legitimate client beside it is still served.
//!
//! ```no_run
//! use shepherd_hostile_tests::{Binary, Process, backends};
//!
//! # async fn run() {
//! let servers = backends(2).await;
//! let config = shepherd_hostile_tests::config_file(&format!(
//!     "endpoints:\n{}", shepherd_hostile_tests::endpoint_lines(&servers)
//! ));
//! let gateway = Process::gateway(&config, &[]).await;
//! println!("gateway at {} uses {} KiB", gateway.addr("http"), gateway.rss_kib());
//! # let _ = Binary::Epp; }
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

use shepherd_sim::serve::{self, ServeConfig, ServeHandle};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One of Shepherd's binaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binary {
    /// `shepherd-epp`, the ext_proc endpoint picker.
    Epp,
    /// `shepherd-gateway`, the OpenAI-compatible HTTP gateway.
    Gateway,
}

impl Binary {
    fn package_and_name(self) -> (&'static str, &'static str) {
        match self {
            Binary::Epp => ("shepherd-adapters-extproc", "shepherd-epp"),
            Binary::Gateway => ("shepherd-adapters-http", "shepherd-gateway"),
        }
    }

    /// The binary's path, built first (once per test process) in this build's profile, so
    /// the suite never runs a stale one — or, with `SHEPHERD_HOSTILE_BIN_DIR` set, the one in
    /// that folder as it is (to try another build, an older one say, against the suite).
    pub fn path(self) -> PathBuf {
        if let Some(dir) = std::env::var_os("SHEPHERD_HOSTILE_BIN_DIR").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir).join(self.package_and_name().1);
        }
        static BUILT: OnceLock<build::Built> = OnceLock::new();
        let built = BUILT.get_or_init(build::Built::default);
        built.path(self)
    }
}

mod build {
    //! Building the binaries once per test process.
    use super::Binary;
    use parking_lot::Mutex;
    use std::path::PathBuf;

    #[derive(Debug, Default)]
    pub(super) struct Built(Mutex<Vec<(Binary, PathBuf)>>);

    impl Built {
        pub(super) fn path(&self, binary: Binary) -> PathBuf {
            let mut built = self.0.lock();
            if let Some((_, path)) = built.iter().find(|(b, _)| *b == binary) {
                return path.clone();
            }
            let (package, name) = binary.package_and_name();
            // The test executable is target/<profile>/deps/<name>-<hash>: the binaries are
            // one level up.
            let exe = std::env::current_exe().unwrap();
            let dir = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf();
            let release = dir.file_name().is_some_and(|n| n == "release");
            let target = dir.parent().unwrap().to_path_buf();
            let mut cargo = std::process::Command::new(env!("CARGO"));
            cargo
                .current_dir(super::workspace())
                .args(["build", "--quiet", "-p", package, "--bin", name])
                .env("CARGO_TARGET_DIR", &target);
            if release {
                cargo.arg("--release");
            }
            let status = cargo.status().unwrap();
            assert!(status.success(), "cargo build of {name} failed");
            let path = dir.join(name);
            assert!(path.is_file(), "{} was not built", path.display());
            built.push((binary, path.clone()));
            path
        }
    }
}

/// Simulated vLLM servers on loopback, fast enough for tests.
pub async fn backends(n: usize) -> ServeHandle {
    backends_at(n, 50.0).await
}

/// Simulated vLLM servers on loopback whose engines run `speed` times faster than real time.
pub async fn backends_at(n: usize, speed: f64) -> ServeHandle {
    let mut config = ServeConfig::ephemeral(n);
    config.speed = speed;
    serve::spawn(config).await.unwrap()
}

/// The config's `endpoints:` list items for `servers`, one `  - address: ip:port` line each.
pub fn endpoint_lines(servers: &ServeHandle) -> String {
    servers
        .addrs()
        .iter()
        .map(|a| format!("  - address: {a}\n"))
        .collect()
}

/// A config file holding `text` (kept until the returned handle drops).
pub fn config_file(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().suffix(".yaml").tempfile().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file.flush().unwrap();
    file
}

/// A running Shepherd binary, killed when dropped.
#[derive(Debug)]
pub struct Process {
    child: Child,
    pid: u32,
    addrs: BTreeMap<String, SocketAddr>,
    /// Lines it wrote to stderr (its log), gathered in the background.
    log: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Process {
    /// `shepherd-gateway --config <config>` with every port chosen by the OS; `extra` are more
    /// arguments. Its addresses are named `http` and `admin`.
    pub async fn gateway(config: &tempfile::NamedTempFile, extra: &[&str]) -> Process {
        let mut args = vec![
            "--config".to_owned(),
            config.path().display().to_string(),
            "--port".to_owned(),
            "0".to_owned(),
            "--metrics-port".to_owned(),
            "0".to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        Process::start(Binary::Gateway, &args, &[]).await
    }

    /// `shepherd-epp --config <config>` with every port chosen by the OS; `extra` are more
    /// arguments. Its addresses are named `extproc`, `health` and `admin`.
    pub async fn epp(config: &tempfile::NamedTempFile, extra: &[&str]) -> Process {
        Process::epp_with_env(config, extra, &[]).await
    }

    /// [`Process::epp`] with `env` (see [`Process::start`]: `SHEPHERD_HOSTILE_RLIMIT_AS_KIB`
    /// runs it under an address-space limit).
    pub async fn epp_with_env(
        config: &tempfile::NamedTempFile,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Process {
        let mut args = vec![
            "--config".to_owned(),
            config.path().display().to_string(),
            "--port".to_owned(),
            "0".to_owned(),
            "--health-port".to_owned(),
            "0".to_owned(),
            "--metrics-port".to_owned(),
            "0".to_owned(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        Process::start(Binary::Epp, &args, env).await
    }

    /// Starts `binary` with `args` and `env`, and waits (at most 60 s) for the line that
    /// names its listeners. With `SHEPHERD_HOSTILE_RLIMIT_AS_KIB` in `env`, the process runs
    /// under that address-space limit (`ulimit -v`).
    pub async fn start(binary: Binary, args: &[String], env: &[(&str, &str)]) -> Process {
        let path = binary.path();
        let mut command = match env
            .iter()
            .find(|(k, _)| *k == "SHEPHERD_HOSTILE_RLIMIT_AS_KIB")
        {
            Some((_, kib)) => {
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\""))
                    .arg(&path)
                    .args(args);
                sh
            }
            None => {
                let mut c = Command::new(&path);
                c.args(args);
                c
            }
        };
        command
            .envs(
                env.iter()
                    .filter(|(k, _)| !k.starts_with("SHEPHERD_HOSTILE_"))
                    .copied(),
            )
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().unwrap();
        let pid = child.id().unwrap();
        let log = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        for reader in [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
            child
                .stderr
                .take()
                .map(|e| Box::new(e) as Box<dyn tokio::io::AsyncRead + Unpin + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            let log = std::sync::Arc::clone(&log);
            tokio::spawn(async move {
                let mut lines = BufReader::new(reader).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let _ = tx.send(line.clone());
                    let mut log = log.lock();
                    // Bounded: a flood of log lines must not grow the test itself.
                    if log.len() < 100_000 {
                        log.push(line);
                    }
                }
            });
        }
        drop(tx);
        let mut addrs = BTreeMap::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while !ready(binary, &addrs) {
            let line = tokio::time::timeout_at(deadline, rx.recv())
                .await
                .unwrap_or_else(|_| panic!("{binary:?} did not say where it listens"))
                .unwrap_or_else(|| panic!("{binary:?} exited before listening"));
            addresses(&line, &mut addrs);
        }
        Process {
            child,
            pid,
            addrs,
            log,
        }
    }

    /// The address of listener `name` (`http`, `admin`, `extproc`, `health`).
    pub fn addr(&self, name: &str) -> SocketAddr {
        *self
            .addrs
            .get(name)
            .unwrap_or_else(|| panic!("no {name} listener in {:?}", self.addrs))
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its resident memory, in KiB.
    pub fn rss_kib(&self) -> u64 {
        status_kib(self.pid, "VmRSS:")
    }

    /// Its highest resident memory so far, in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        status_kib(self.pid, "VmHWM:")
    }

    /// Its address space, in KiB.
    pub fn virtual_kib(&self) -> u64 {
        status_kib(self.pid, "VmSize:")
    }

    /// How many files (sockets included) it holds open.
    pub fn open_files(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// The log lines so far that contain `needle`.
    pub fn log_lines(&self, needle: &str) -> Vec<String> {
        let log = self.log.lock();
        log.iter().filter(|l| l.contains(needle)).cloned().collect()
    }
}

/// The Prometheus page of the admin port at `admin`.
pub async fn metrics_page(admin: SocketAddr) -> String {
    reqwest::get(format!("http://{admin}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The sum of the samples of `name` (any labels) on a Prometheus page.
pub fn sample(page: &str, name: &str) -> f64 {
    page.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The sum of the samples of `name` on the admin port's `/metrics`.
pub async fn metric(admin: SocketAddr, name: &str) -> f64 {
    sample(&metrics_page(admin).await, name)
}

fn ready(binary: Binary, addrs: &BTreeMap<String, SocketAddr>) -> bool {
    match binary {
        Binary::Epp => addrs.contains_key("extproc"),
        Binary::Gateway => addrs.contains_key("http") && addrs.contains_key("admin"),
    }
}

/// Reads the listen addresses out of a start-up line of either binary.
fn addresses(line: &str, addrs: &mut BTreeMap<String, SocketAddr>) {
    if let Some(rest) = line.split("shepherd-epp listening").nth(1) {
        for word in rest.split_whitespace() {
            if let Some((name, addr)) = word.split_once('=')
                && let Ok(addr) = addr.trim_matches('"').parse()
            {
                addrs.insert(name.to_owned(), addr);
            }
        }
    }
    for (marker, name) in [
        ("shepherd-gateway: listening on http://", "http"),
        ("shepherd-gateway: admin endpoints on http://", "admin"),
    ] {
        if let Some(rest) = line.split(marker).nth(1)
            && let Ok(addr) = rest.trim().parse()
        {
            addrs.insert(name.to_owned(), addr);
        }
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// This process's open-file limit (a test that holds thousands of connections sizes itself
/// under it).
pub fn open_files_limit() -> u64 {
    // `ulimit -n` is a shell built-in: read the soft limit from /proc instead.
    let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
    limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024)
}
