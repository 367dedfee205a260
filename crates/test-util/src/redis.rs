//! A real `redis-server` (Debian's package, `scripts/install-redis.sh`) for the tests of the
//! replicas' Redis backend: started on a free loopback port with a temporary directory and no
//! persistence, killed and started again on the same port, removed when dropped.
//!
//! With the `tls` feature, `TlsFiles::generate` makes a throwaway certificate authority and
//! a server certificate for `127.0.0.1` and `localhost`, and [`RedisServer::start_tls`]
//! serves TLS only (`--port 0 --tls-port PORT`) with them.
//!
//! [`RedisServer::binary`] finds the server (`SHEPHERD_REDIS`, else `redis-server` on the
//! `PATH`); without one a test says it is skipped, unless `SHEPHERD_REQUIRE_E2E=1`, when a
//! missing server is a failure.
//!
//! ```no_run
//! use shepherd_test_util::redis::{RedisAuth, RedisServer};
//!
//! let Some(binary) = RedisServer::binary("my_test") else { return };
//! let mut server = RedisServer::start(&binary, RedisAuth::Acl {
//!     user: "shepherd".into(),
//!     password: "a-long-test-password".into(),
//!     keys: "shepherd:*".into(),
//! });
//! let url = server.url(); // redis://127.0.0.1:PORT
//! server.kill();
//! server.restart();
//! # let _ = url;
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Who may connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisAuth {
    /// Anyone (the `default` user without a password).
    Open,
    /// The `default` user with this password (`requirepass`).
    Password(String),
    /// Only the ACL user `user` with `password`, on the keys matching `keys`, allowed only
    /// the commands the replicas run (`PING`, `XADD`, `XREAD`, `XRANGE`, `XREVRANGE`); the
    /// `default` user is off.
    Acl {
        /// The user.
        user: String,
        /// Its password.
        password: String,
        /// The key pattern it may use.
        keys: String,
    },
}

/// A running (or killed) `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    binary: PathBuf,
    port: u16,
    dir: PathBuf,
    auth: RedisAuth,
    /// The server's certificate and key, and the CA its clients are checked against: TLS
    /// only when set.
    tls: Option<TlsFiles>,
    child: Option<Child>,
}

/// PEM files of a throwaway certificate authority and of a server certificate it signed.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The authority's certificate: what a client trusts.
    pub ca: PathBuf,
    /// The server's certificate (for `127.0.0.1` and `localhost`).
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

#[cfg(feature = "tls")]
impl TlsFiles {
    /// A new authority (named `name`) and a server certificate signed by it, written to
    /// `dir` as `NAME-ca.pem`, `NAME-server.pem` and `NAME-server-key.pem`.
    ///
    /// # Panics
    ///
    /// When the certificates cannot be made or written.
    pub fn generate(dir: &Path, name: &str) -> TlsFiles {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        };
        fn fail<T>(e: rcgen::Error) -> T {
            panic!("test certificates: {e}")
        }
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(fail);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap_or_else(fail);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap_or_else(fail);
        let issuer = Issuer::new(ca_params, ca_key);
        let mut server_params =
            CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
                .unwrap_or_else(fail);
        server_params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        let server_key = KeyPair::generate().unwrap_or_else(fail);
        let server_cert = server_params
            .signed_by(&server_key, &issuer)
            .unwrap_or_else(fail);
        let files = TlsFiles {
            ca: dir.join(format!("{name}-ca.pem")),
            cert: dir.join(format!("{name}-server.pem")),
            key: dir.join(format!("{name}-server-key.pem")),
        };
        for (path, text) in [
            (&files.ca, ca_cert.pem()),
            (&files.cert, server_cert.pem()),
            (&files.key, server_key.serialize_pem()),
        ] {
            std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        files
    }
}

impl RedisServer {
    /// The server binary, or `None` (after saying the test named `test` is skipped) when
    /// there is none and `SHEPHERD_REQUIRE_E2E` is not `1`.
    ///
    /// # Panics
    ///
    /// When there is none and `SHEPHERD_REQUIRE_E2E=1`.
    pub fn binary(test: &str) -> Option<PathBuf> {
        let from_env = std::env::var_os("SHEPHERD_REDIS").map(PathBuf::from);
        let found = from_env.or_else(|| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join("redis-server"))
                    .find(|p| p.is_file())
            })
        });
        if found.is_none() {
            let required = std::env::var("SHEPHERD_REQUIRE_E2E").is_ok_and(|v| v == "1");
            assert!(
                !required,
                "SHEPHERD_REQUIRE_E2E=1 but no redis-server: run scripts/install-redis.sh and export SHEPHERD_REDIS=<the path it prints>"
            );
            eprintln!(
                "SKIPPED {test}: no redis-server (run scripts/install-redis.sh and export SHEPHERD_REDIS=<the path it prints>)"
            );
        }
        found
    }

    /// Starts a server on a free loopback port, waiting until it answers.
    ///
    /// # Panics
    ///
    /// When it cannot be started or does not answer within 10 s.
    pub fn start(binary: &Path, auth: RedisAuth) -> RedisServer {
        Self::start_with(binary, auth, None)
    }

    /// Starts a server that speaks TLS only (`--port 0 --tls-port PORT`) with `tls`'s
    /// certificate, not asking clients for one; `rediss://127.0.0.1:PORT` reaches it.
    ///
    /// # Panics
    ///
    /// When it cannot be started or does not accept connections within 10 s.
    pub fn start_tls(binary: &Path, auth: RedisAuth, tls: TlsFiles) -> RedisServer {
        Self::start_with(binary, auth, Some(tls))
    }

    fn start_with(binary: &Path, auth: RedisAuth, tls: Option<TlsFiles>) -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or_else(|e| panic!("no free port: {e}"));
        let dir =
            std::env::temp_dir().join(format!("shepherd-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut server = RedisServer {
            binary: binary.to_path_buf(),
            port,
            dir,
            auth,
            tls,
            child: None,
        };
        server.restart();
        server
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://` when the server speaks TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server (SIGKILL): everything it held is gone, as no persistence is on.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on its port (killing it first if it runs), empty.
    ///
    /// # Panics
    ///
    /// When it cannot be started or does not answer within 10 s.
    pub fn restart(&mut self) {
        self.kill();
        let mut command = Command::new(&self.binary);
        match &self.tls {
            None => {
                command.arg("--port").arg(self.port.to_string());
            }
            Some(tls) => {
                command
                    .args(["--port", "0", "--tls-port"])
                    .arg(self.port.to_string())
                    .arg("--tls-cert-file")
                    .arg(&tls.cert)
                    .arg("--tls-key-file")
                    .arg(&tls.key)
                    .arg("--tls-ca-cert-file")
                    .arg(&tls.ca)
                    .args(["--tls-auth-clients", "no"]);
            }
        }
        command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--protected-mode", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        match &self.auth {
            RedisAuth::Open => {}
            RedisAuth::Password(password) => {
                command.arg("--requirepass").arg(password);
            }
            RedisAuth::Acl {
                user,
                password,
                keys,
            } => {
                command
                    .args(["--user", "default", "off"])
                    .arg("--user")
                    .arg(user)
                    .arg("on")
                    .arg(format!(">{password}"))
                    .arg(format!("~{keys}"))
                    .args(["+ping", "+xadd", "+xread", "+xrange", "+xrevrange"]);
            }
        }
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.answers() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        );
    }

    /// Whether the server answers a `PING` (with `PONG`, or by asking for a password); a
    /// TLS server, whether it accepts a connection.
    pub fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        if self.tls.is_some() {
            return true;
        }
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        if stream.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut answer = [0u8; 64];
        match stream.read(&mut answer) {
            Ok(n) if n > 0 => answer[0] == b'+' || answer[..n].starts_with(b"-NOAUTH"),
            _ => false,
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
