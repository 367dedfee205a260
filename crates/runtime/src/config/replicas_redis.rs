//! The `replicas.redis` subsection: the Redis or Valkey server the replicas of
//! `backend: redis` share their load and index inserts through.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Secret;

/// Default prefix of the two stream keys (`shepherd:loads`, `shepherd:index`).
pub const DEFAULT_REDIS_PREFIX: &str = "shepherd";
/// Default length of the index stream, in entries: what a starting replica reads back.
pub const DEFAULT_HISTORY_ENTRIES: u64 = 4_096;
/// Default bound on the replicas whose load this replica keeps.
pub const DEFAULT_MAX_PEERS: usize = 64;
/// Default bound on one Redis command or connection attempt, in milliseconds.
pub const DEFAULT_REDIS_TIMEOUT_MS: u64 = 500;

/// Where and how to reach the shared Redis (or Valkey) server.
///
/// The password is never written in the config: `password: {env: NAME}` or
/// `password: {file: path}` (an inline value is refused, and so is a URL with a user or
/// password in it); `/debug/config` shows the variable or the path only.
///
/// ```
/// use shepherd_runtime::config::{RedisReplicasConfig, Secret};
///
/// let redis: RedisReplicasConfig = serde_norway::from_str(
///     "url: rediss://valkey.shepherd.svc:6380/2\nusername: shepherd\npassword: {env: REDIS_PASSWORD}\ntls: {caFile: /etc/redis/ca.pem}\n",
/// ).unwrap();
/// assert!(redis.uses_tls());
/// assert_eq!(redis.username.as_deref(), Some("shepherd"));
/// assert_eq!(redis.password, Some(Secret::Env { env: "REDIS_PASSWORD".into() }));
/// assert_eq!(redis.history_entries, 4096);
/// assert_eq!(redis.loads_key(), "shepherd:loads");
/// assert!(redis.problem().is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisReplicasConfig {
    /// `redis://host:port[/db]`, or `rediss://` for TLS; no user or password in it.
    pub url: String,
    /// TLS to the server (also implied by a `rediss://` URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<RedisTls>,
    /// The ACL user (Redis 6 and later, Valkey); none authenticates as `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    /// The password, from an environment variable or a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<Secret>,
    /// Prefix of the keys: `PREFIX:loads` and `PREFIX:index` (default `shepherd`). Replicas
    /// of one pool share a prefix; another pool on the same server takes another.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// This replica's name among the others (default: the host name and the process id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Entries kept in the index stream (default 4096): the window a starting replica reads
    /// back to rebuild its approximate index, and the memory the stream takes in Redis.
    #[serde(default = "default_history")]
    pub history_entries: u64,
    /// Whether a starting replica reads the index stream back (default true).
    #[serde(default = "default_true")]
    pub warm_start: bool,
    /// Most other replicas whose load is kept at once (default 64; a silent one's place is
    /// freed when it expires).
    #[serde(default = "default_max_peers")]
    pub max_peers: usize,
    /// Bound on one command or connection attempt, in milliseconds (default 500).
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
}

/// TLS settings of the Redis connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisTls {
    /// PEM file of the certificate authorities to trust (default: the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_file: Option<PathBuf>,
}

fn default_prefix() -> String {
    DEFAULT_REDIS_PREFIX.to_owned()
}

fn default_history() -> u64 {
    DEFAULT_HISTORY_ENTRIES
}

fn default_true() -> bool {
    true
}

fn default_max_peers() -> usize {
    DEFAULT_MAX_PEERS
}

fn default_timeout() -> u64 {
    DEFAULT_REDIS_TIMEOUT_MS
}

impl RedisReplicasConfig {
    /// A section for `url` with every default.
    pub fn new(url: impl Into<String>) -> Self {
        RedisReplicasConfig {
            url: url.into(),
            tls: None,
            username: None,
            password: None,
            prefix: default_prefix(),
            name: None,
            history_entries: default_history(),
            warm_start: true,
            max_peers: default_max_peers(),
            timeout_ms: default_timeout(),
        }
    }

    /// Whether the connection is TLS (`tls` given, or a `rediss://` URL).
    pub fn uses_tls(&self) -> bool {
        self.tls.is_some() || self.url.starts_with("rediss://")
    }

    /// The key of the load stream.
    pub fn loads_key(&self) -> String {
        format!("{}:loads", self.prefix)
    }

    /// The key of the index stream.
    pub fn index_key(&self) -> String {
        format!("{}:index", self.prefix)
    }

    /// Bound on one command or connection attempt.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms)
    }

    /// This replica's name: `name`, else the host name and the process id.
    pub fn replica_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .or_else(|| {
                std::fs::read_to_string("/etc/hostname")
                    .ok()
                    .map(|h| h.trim().to_owned())
            })
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "replica".to_owned());
        format!("{host}/{}", std::process::id())
    }

    /// Why the subsection is invalid, if it is (field, reason).
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let rest = self
            .url
            .strip_prefix("redis://")
            .or_else(|| self.url.strip_prefix("rediss://"));
        let Some(rest) = rest else {
            return Some((
                "replicas.redis.url",
                "must start with redis:// (or rediss:// for TLS)".into(),
            ));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            return Some((
                "replicas.redis.url",
                "holds a user or password: give `username`, and `password: {env: NAME}` or `{file: path}` (a password is never written in the config)".into(),
            ));
        }
        if authority.is_empty() {
            return Some(("replicas.redis.url", "names no host".into()));
        }
        match &self.password {
            Some(Secret::Value(_)) => {
                return Some((
                    "replicas.redis.password",
                    "is written in the config: give `{env: NAME}` or `{file: path}` instead".into(),
                ));
            }
            Some(Secret::Env { env }) if env.is_empty() => {
                return Some(("replicas.redis.password", "`env` names no variable".into()));
            }
            Some(Secret::File { file }) if file.as_os_str().is_empty() => {
                return Some(("replicas.redis.password", "`file` names no file".into()));
            }
            _ => {}
        }
        if self.username.as_deref().is_some_and(str::is_empty) {
            return Some(("replicas.redis.username", "is empty".into()));
        }
        if self.prefix.is_empty() {
            return Some(("replicas.redis.prefix", "is empty".into()));
        }
        if self.name.as_deref().is_some_and(str::is_empty) {
            return Some(("replicas.redis.name", "is empty".into()));
        }
        if self.history_entries == 0 && self.warm_start {
            return Some((
                "replicas.redis.historyEntries",
                "0 keeps nothing to warm a start from: give at least 1, or `warmStart: false`"
                    .into(),
            ));
        }
        if self.max_peers == 0 {
            return Some(("replicas.redis.maxPeers", "must be at least 1".into()));
        }
        if self.timeout_ms == 0 {
            return Some(("replicas.redis.timeoutMs", "must be at least 1".into()));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(text: &str) -> RedisReplicasConfig {
        serde_norway::from_str(text).unwrap()
    }

    #[test]
    fn passwords_stay_out_of_the_config_text() {
        let inline = parse("url: redis://127.0.0.1:6379\npassword: hunter2hunter2\n");
        assert_eq!(inline.problem().unwrap().0, "replicas.redis.password");
        let in_url = parse("url: redis://shepherd:hunter2@127.0.0.1:6379\n");
        let (field, reason) = in_url.problem().unwrap();
        assert_eq!(field, "replicas.redis.url");
        assert!(!reason.contains("hunter2"), "{reason}");
        let from_file = parse("url: redis://127.0.0.1:6379\npassword: {file: /run/pw}\n");
        assert!(from_file.problem().is_none());
        let shown = serde_json::to_string(&from_file).unwrap();
        assert!(
            shown.contains(r#""password":{"file":"/run/pw"}"#),
            "{shown}"
        );
    }

    #[test]
    fn bad_urls_and_bounds_are_refused() {
        assert!(parse("url: http://x:1\n").problem().is_some());
        assert!(parse("url: redis:///0\n").problem().is_some());
        assert!(parse("url: redis://x:1\nmaxPeers: 0\n").problem().is_some());
        assert!(
            parse("url: redis://x:1\nhistoryEntries: 0\n")
                .problem()
                .is_some()
        );
        assert!(
            parse("url: redis://x:1\nhistoryEntries: 0\nwarmStart: false\n")
                .problem()
                .is_none()
        );
        assert!(!parse("url: redis://x:1\n").uses_tls());
        assert!(parse("url: redis://x:1\ntls: {}\n").uses_tls());
    }
}
