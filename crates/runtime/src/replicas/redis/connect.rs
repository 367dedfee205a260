//! Building the Redis client from `replicas.redis`, and the check at start: a wrong password,
//! an unknown ACL user or one without the stream commands stops the start with a clear error;
//! a server that cannot be reached does not (the replica routes on its own knowledge until
//! Redis is there).

use std::time::Duration;

use redis::{Client, IntoConnectionInfo, RedisError};

use crate::config::{RedisReplicasConfig, SecretError};

/// Why the Redis backend cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisStartError {
    /// The password's variable or file could not be read.
    #[error("replicas.redis.password: {0}")]
    Password(#[source] SecretError),
    /// The CA file could not be read.
    #[error("replicas.redis.tls.caFile: cannot read {}: {source}", path.display())]
    CaFile {
        /// The file.
        path: std::path::PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The server's TLS certificate is not trusted (not signed by `tls.caFile`'s authority,
    /// or not for the URL's host): a wrong CA is a configuration mistake, not an outage.
    #[error(
        "replicas.redis: the TLS certificate of Redis at {address} is not trusted ({reason}); check that replicas.redis.tls.caFile ({ca}) holds the authority that signed the server's certificate, and that the URL's host is one the certificate names"
    )]
    Certificate {
        /// The server (host and port).
        address: String,
        /// Why the certificate was refused.
        reason: String,
        /// The CA file, or `the system's roots`.
        ca: String,
    },
    /// The URL is not one the client takes.
    #[error("replicas.redis.url: {0}")]
    Url(String),
    /// Redis refused this replica's credentials or commands.
    #[error(
        "replicas.redis: Redis at {address} refused this replica ({reason}); check replicas.redis.username, the password in {password_from}, and that the ACL user may run XADD, XREAD, XRANGE and XREVRANGE on the keys {prefix}:*"
    )]
    Refused {
        /// The server (host and port; never the credentials).
        address: String,
        /// What Redis answered.
        reason: String,
        /// Where the password came from (the variable or file, never its value).
        password_from: String,
        /// The key prefix.
        prefix: String,
    },
}

/// The client for `config`: its URL (`rediss://` when `tls` is set), ACL user, password (read
/// now) and CA certificates.
pub(crate) fn client(config: &RedisReplicasConfig) -> Result<Client, RedisStartError> {
    let password = config
        .password
        .as_ref()
        .map(|p| p.resolve())
        .transpose()
        .map_err(RedisStartError::Password)?;
    let url = match (config.uses_tls(), config.url.strip_prefix("redis://")) {
        (true, Some(rest)) => format!("rediss://{rest}"),
        _ => config.url.clone(),
    };
    let info = url
        .as_str()
        .into_connection_info()
        .map_err(|e| RedisStartError::Url(e.to_string()))?;
    let mut settings = info.redis_settings().clone();
    if let Some(user) = &config.username {
        settings = settings.set_username(user);
    }
    if let Some(password) = password {
        settings = settings.set_password(password);
    }
    let info = info.set_redis_settings(settings);
    // TLS goes through rustls with its `ring` provider, the only one this build enables
    // (the runtime's `redis` feature turns it on), so rustls picks it by itself.
    let ca = config.tls.as_ref().and_then(|t| t.ca_file.as_ref());
    match ca {
        Some(path) => {
            let root_cert = std::fs::read(path).map_err(|source| RedisStartError::CaFile {
                path: path.clone(),
                source,
            })?;
            Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(root_cert),
                },
            )
            .map_err(|e| RedisStartError::Url(e.to_string()))
        }
        None => Client::open(info).map_err(|e| RedisStartError::Url(e.to_string())),
    }
}

/// Whether `error` is Redis refusing the credentials or a command (rather than not being
/// there).
pub(crate) fn is_refusal(error: &RedisError) -> bool {
    error.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(error.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
}

/// Why the server's TLS certificate was refused, when that is what `error` is: rustls's
/// certificate error, found down the error's sources (the client wraps it in an I/O error).
pub(crate) fn certificate_refused(error: &RedisError) -> Option<String> {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(mut current) = next {
        // The client keeps its I/O errors behind an `Arc`, which hides them from `source`.
        if let Some(shared) = current.downcast_ref::<Shared>() {
            current = &**shared;
        }
        let tls = current.downcast_ref::<rustls::Error>().or_else(|| {
            current
                .downcast_ref::<std::io::Error>()
                .and_then(|io| io.get_ref())
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        });
        if let Some(tls) = tls {
            return certificate_error(tls);
        }
        next = current.source();
    }
    None
}

fn certificate_error(error: &rustls::Error) -> Option<String> {
    match error {
        rustls::Error::InvalidCertificate(_) => Some(error.to_string()),
        _ => None,
    }
}

/// The server's address as the log and errors show it (no credentials).
pub(crate) fn address(client: &Client) -> String {
    client.get_connection_info().addr().to_string()
}

/// Connects once and runs `probe` (the commands this replica needs): `Err` only when Redis
/// refuses the credentials or a command; an unreachable server is `Ok(false)` (logged).
pub(crate) async fn check(
    client: &Client,
    config: &RedisReplicasConfig,
    probe: &redis::Pipeline,
) -> Result<bool, RedisStartError> {
    let refused = |error: &RedisError| RedisStartError::Refused {
        address: address(client),
        reason: error.to_string(),
        password_from: match &config.password {
            Some(crate::config::Secret::Env { env }) => format!("the variable {env}"),
            Some(crate::config::Secret::File { file }) => format!("the file {}", file.display()),
            Some(crate::config::Secret::Value(_)) => "the config".into(),
            None => "no password (none given)".into(),
        },
        prefix: config.prefix.clone(),
    };
    let timeout = config.timeout();
    let settings = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    let attempt = tokio::time::timeout(timeout + Duration::from_millis(100), async {
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&settings)
            .await?;
        // A PING alone first: Redis answers a client that has not authenticated NOAUTH, and
        // closes its connection on a command of more than ten arguments (the probe's XADD).
        let pong = redis::cmd("PING")
            .query_async::<redis::Value>(&mut conn)
            .await?;
        if let Some(error) = super::link::server_error(&pong) {
            return Err(error);
        }
        let reply = probe.query_async::<redis::Value>(&mut conn).await?;
        match super::link::server_error(&reply) {
            Some(error) => Err(error),
            None => Ok(reply),
        }
    })
    .await;
    match attempt {
        Ok(Ok(_)) => Ok(true),
        Ok(Err(error)) if is_refusal(&error) => Err(refused(&error)),
        Ok(Err(error)) if certificate_refused(&error).is_some() => {
            Err(RedisStartError::Certificate {
                address: address(client),
                reason: certificate_refused(&error).unwrap_or_default(),
                ca: config
                    .tls
                    .as_ref()
                    .and_then(|t| t.ca_file.as_ref())
                    .map_or_else(
                        || "the system's roots".to_owned(),
                        |p| p.display().to_string(),
                    ),
            })
        }
        Ok(Err(error)) => {
            tracing::warn!(address = %address(client), %error, "Redis cannot be reached at start; routing on this replica's own knowledge until it can");
            Ok(false)
        }
        Err(_) => {
            tracing::warn!(address = %address(client), "Redis did not answer at start; routing on this replica's own knowledge until it does");
            Ok(false)
        }
    }
}
