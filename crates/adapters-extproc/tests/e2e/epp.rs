//! A `shepherd-epp` child process: started with a config, waited on until it listens (and is
//! ready), its log kept.

use super::*;

/// A `shepherd-epp` process.
pub struct Epp {
    pub child: Child,
    pub extproc: SocketAddr,
    pub health: SocketAddr,
    pub admin: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
    /// What it was started with, for [`Epp::restart`].
    config: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn field(line: &str, key: &str) -> Option<SocketAddr> {
    line.split_whitespace()
        .find_map(|word| word.strip_prefix(key))
        .and_then(|v| v.parse().ok())
}

impl Epp {
    /// Starts `shepherd-epp --config <path>` and waits until it listens and, when `ready`, is
    /// ready (an endpoint has fresh metrics).
    pub async fn start(config: &Path, extra_args: &[&str], ready: bool) -> Epp {
        Epp::start_with_env(config, extra_args, ready, &[]).await
    }

    /// [`Epp::start`] with more environment variables.
    pub async fn start_with_env(
        config: &Path,
        extra_args: &[&str],
        ready: bool,
        env: &[(String, String)],
    ) -> Epp {
        let mut child = Command::new(env!("CARGO_BIN_EXE_shepherd-epp"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .arg("--config")
            .arg(config)
            .args(["--config-poll-ms", "100", "--drain-timeout-secs", "10"])
            .args(extra_args)
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start shepherd-epp");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = oneshot::channel();
        tokio::spawn({
            let log = Arc::clone(&log);
            async move {
                let mut tx = Some(tx);
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line.contains("shepherd-epp listening")
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send(line.clone());
                    }
                    log.lock().push(line);
                }
            }
        });
        let line = match tokio::time::timeout(Duration::from_secs(20), rx).await {
            Ok(Ok(line)) => line,
            _ => panic!(
                "shepherd-epp did not start; its log:\n{}",
                log.lock().join("\n")
            ),
        };
        let epp = Epp {
            child,
            extproc: field(&line, "extproc=").unwrap(),
            health: field(&line, "health=").unwrap(),
            admin: field(&line, "admin=").unwrap(),
            log,
            config: config.to_path_buf(),
            args: extra_args.iter().map(|a| a.to_string()).collect(),
            env: env.to_vec(),
        };
        if ready {
            epp.wait_ready().await;
        }
        epp
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        let url = format!("http://{}/readyz", self.admin);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(r) = client.get(&url).send().await
                && r.status().is_success()
            {
                return;
            }
            sleep(Duration::from_millis(20)).await;
        }
        panic!("shepherd-epp never ready; its log:\n{}", self.log());
    }

    pub fn log(&self) -> String {
        self.log.lock().join("\n")
    }

    /// Sends SIGTERM (graceful shutdown).
    pub fn terminate(&self) {
        let pid = self.child.id().expect("still running");
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Sends SIGKILL (a crash: nothing is drained, nothing is said to the peers).
    pub fn kill(&mut self) {
        self.child.start_kill().expect("still running");
    }

    /// Starts the same config again on the same ports (after it exited), keeping the log of
    /// the earlier run at the front of [`Epp::log`].
    pub async fn restart(&mut self, ready: bool) {
        let ports = [
            "--port".to_string(),
            self.extproc.port().to_string(),
            "--health-port".to_string(),
            self.health.port().to_string(),
            "--metrics-port".to_string(),
            self.admin.port().to_string(),
        ];
        let args: Vec<&str> = self.args.iter().chain(&ports).map(String::as_str).collect();
        let earlier = self.log();
        let next = Epp::start_with_env(&self.config, &args, ready, &self.env).await;
        assert_eq!(next.extproc, self.extproc, "restarted on the same port");
        next.log.lock().insert(0, earlier);
        *self = Epp {
            args: std::mem::take(&mut self.args),
            env: std::mem::take(&mut self.env),
            ..next
        };
    }

    /// Waits for the process to exit.
    pub async fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        tokio::time::timeout(within, self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("shepherd-epp still running; log:\n{}", self.log()))
            .unwrap()
    }
}
