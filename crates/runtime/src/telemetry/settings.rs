//! The tracing settings, read from OpenTelemetry's standard environment variables.
//!
//! | variable | values | default |
//! |---|---|---|
//! | `OTEL_TRACES_EXPORTER` | `otlp`, `console`, `none` | `none`: tracing off |
//! | `OTEL_SDK_DISABLED` | `true` turns tracing off whatever the exporter | `false` |
//! | `OTEL_TRACES_SAMPLER` | `always_on`, `always_off`, `traceidratio`, `parentbased_always_on`, `parentbased_always_off`, `parentbased_traceidratio` | `parentbased_traceidratio` (the llm-d picker's) |
//! | `OTEL_TRACES_SAMPLER_ARG` | the ratio, in `[0, 1]` | `0.1` (the llm-d picker's) |
//! | `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL` | `grpc`, `http/protobuf` | `grpc` (what the llm-d picker speaks) |
//! | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` | the traces URL, used as it is | — |
//! | `OTEL_EXPORTER_OTLP_ENDPOINT` | the collector's base URL (`/v1/traces` added for HTTP) | `http://localhost:4317` (gRPC), `http://localhost:4318` (HTTP) |
//! | `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS` | `key=value,key2=value2` (values percent-decoded) | none |
//! | `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT` | milliseconds | `10000` |
//! | `OTEL_SERVICE_NAME` | the `service.name` resource attribute | the binary's name |
//!
//! A value that cannot be read is an error naming the variable, not a silent default: a
//! misspelt sampler would otherwise trace everything or nothing.
//!
//! ```
//! use shepherd_runtime::telemetry::{Exporter, Protocol, SamplerKind, TracingSettings};
//!
//! let env = [
//!     ("OTEL_TRACES_EXPORTER", "otlp"),
//!     ("OTEL_TRACES_SAMPLER", "traceidratio"),
//!     ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
//!     ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
//!     ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
//! ];
//! let lookup = |name: &str| env.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
//! let settings = TracingSettings::from_lookup("shepherd-gateway", lookup).unwrap();
//! assert_eq!(settings.exporter, Exporter::Otlp);
//! assert_eq!(settings.sampler, SamplerKind::TraceIdRatio(0.01));
//! assert_eq!(settings.protocol, Protocol::HttpProtobuf);
//! assert_eq!(settings.traces_endpoint(), "http://collector:4318/v1/traces");
//! assert_eq!(settings.service_name, "shepherd-gateway");
//! ```

use std::time::Duration;

/// Where finished spans go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exporter {
    /// Tracing off: no span is made.
    None,
    /// OTLP to a collector.
    Otlp,
    /// One JSON line per span on stdout.
    Console,
}

/// The OTLP transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC.
    Grpc,
    /// OTLP/HTTP with protobuf bodies.
    HttpProtobuf,
}

/// Which traces are recorded.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SamplerKind {
    /// Every trace.
    AlwaysOn,
    /// No trace.
    AlwaysOff,
    /// This share of traces, chosen by trace id.
    TraceIdRatio(f64),
    /// The caller's decision when its `traceparent` says; otherwise the inner sampler.
    ParentBased(ParentRoot),
}

/// The sampler of a parent-based sampler for traces that start here.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParentRoot {
    /// Record every new trace.
    AlwaysOn,
    /// Record no new trace.
    AlwaysOff,
    /// Record this share of new traces.
    TraceIdRatio(f64),
}

/// Why the `OTEL_*` variables cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// A variable holds a value outside its list.
    #[error("{variable}={value:?} is not one of: {expected}")]
    Unknown {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What it may be.
        expected: &'static str,
    },
    /// A number that is not one, or out of range.
    #[error("{variable}={value:?}: {reason}")]
    BadNumber {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// A header list entry without `=`.
    #[error("{variable}: entry {entry:?} is not key=value")]
    BadHeader {
        /// The variable.
        variable: &'static str,
        /// The entry.
        entry: String,
    },
}

/// The tracing settings. See the [settings module docs](crate::telemetry::settings).
#[derive(Debug, Clone, PartialEq)]
pub struct TracingSettings {
    /// Where spans go.
    pub exporter: Exporter,
    /// Which traces are kept.
    pub sampler: SamplerKind,
    /// The OTLP transport.
    pub protocol: Protocol,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, used as it is.
    pub traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`, the collector's base URL.
    pub endpoint: Option<String>,
    /// Headers (metadata for gRPC) sent with every export.
    pub headers: Vec<(String, String)>,
    /// How long one export may take.
    pub timeout: Duration,
    /// The `service.name` resource attribute.
    pub service_name: String,
}

/// Most headers an export carries (a bound on what an environment variable can make).
const MAX_HEADERS: usize = 64;

impl TracingSettings {
    /// Reads the process environment; `default_service` names the service when
    /// `OTEL_SERVICE_NAME` is unset.
    pub fn from_env(default_service: &str) -> Result<Self, SettingsError> {
        Self::from_lookup(default_service, |name| std::env::var(name).ok())
    }

    /// Reads the variables through `lookup` (tests pass a table).
    pub fn from_lookup(
        default_service: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SettingsError> {
        let get = |name: &str| {
            lookup(name)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let disabled = match get("OTEL_SDK_DISABLED").as_deref() {
            None => false,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(v) => {
                return Err(SettingsError::Unknown {
                    variable: "OTEL_SDK_DISABLED",
                    value: v.to_string(),
                    expected: "true, false",
                });
            }
        };
        let exporter = match get("OTEL_TRACES_EXPORTER") {
            None => Exporter::None,
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "none" => Exporter::None,
                "otlp" => Exporter::Otlp,
                "console" => Exporter::Console,
                _ => {
                    return Err(SettingsError::Unknown {
                        variable: "OTEL_TRACES_EXPORTER",
                        value: v,
                        expected: "otlp, console, none",
                    });
                }
            },
        };
        let exporter = if disabled { Exporter::None } else { exporter };
        let ratio = match get("OTEL_TRACES_SAMPLER_ARG") {
            None => DEFAULT_RATIO,
            Some(v) => parse_ratio(&v)?,
        };
        let sampler = match get("OTEL_TRACES_SAMPLER") {
            None => SamplerKind::ParentBased(ParentRoot::TraceIdRatio(ratio)),
            Some(v) => match v.to_ascii_lowercase().as_str() {
                "always_on" => SamplerKind::AlwaysOn,
                "always_off" => SamplerKind::AlwaysOff,
                "traceidratio" => SamplerKind::TraceIdRatio(ratio),
                "parentbased_always_on" => SamplerKind::ParentBased(ParentRoot::AlwaysOn),
                "parentbased_always_off" => SamplerKind::ParentBased(ParentRoot::AlwaysOff),
                "parentbased_traceidratio" => {
                    SamplerKind::ParentBased(ParentRoot::TraceIdRatio(ratio))
                }
                _ => {
                    return Err(SettingsError::Unknown {
                        variable: "OTEL_TRACES_SAMPLER",
                        value: v,
                        expected: "always_on, always_off, traceidratio, parentbased_always_on, \
                                   parentbased_always_off, parentbased_traceidratio",
                    });
                }
            },
        };
        let (protocol_var, protocol) = first_of(
            &get,
            [
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                "OTEL_EXPORTER_OTLP_PROTOCOL",
            ],
        );
        let protocol = match protocol {
            None => Protocol::Grpc,
            Some(v) => match v.as_str() {
                "grpc" => Protocol::Grpc,
                "http/protobuf" => Protocol::HttpProtobuf,
                _ => {
                    return Err(SettingsError::Unknown {
                        variable: protocol_var,
                        value: v,
                        expected: "grpc, http/protobuf (http/json is not supported)",
                    });
                }
            },
        };
        let (headers_var, headers) = first_of(
            &get,
            [
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "OTEL_EXPORTER_OTLP_HEADERS",
            ],
        );
        let headers = match headers {
            None => Vec::new(),
            Some(v) => parse_headers(headers_var, &v)?,
        };
        let (timeout_var, timeout) = first_of(
            &get,
            [
                "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
                "OTEL_EXPORTER_OTLP_TIMEOUT",
            ],
        );
        let timeout = match timeout {
            None => DEFAULT_TIMEOUT,
            Some(v) => match v.parse::<u64>() {
                Ok(ms) => Duration::from_millis(ms),
                Err(_) => {
                    return Err(SettingsError::BadNumber {
                        variable: timeout_var,
                        value: v,
                        reason: "not a whole number of milliseconds",
                    });
                }
            },
        };
        Ok(TracingSettings {
            exporter,
            sampler,
            protocol,
            traces_endpoint: get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            endpoint: get("OTEL_EXPORTER_OTLP_ENDPOINT"),
            headers,
            timeout,
            service_name: get("OTEL_SERVICE_NAME").unwrap_or_else(|| default_service.to_string()),
        })
    }

    /// Whether spans are made at all.
    pub fn is_enabled(&self) -> bool {
        self.exporter != Exporter::None
    }

    /// The URL spans are exported to: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` (plus `/v1/traces` over HTTP), else the default port on
    /// localhost for the protocol.
    pub fn traces_endpoint(&self) -> String {
        if let Some(url) = &self.traces_endpoint {
            return url.clone();
        }
        match (self.protocol, &self.endpoint) {
            (Protocol::Grpc, Some(base)) => base.clone(),
            (Protocol::Grpc, None) => "http://localhost:4317".to_string(),
            (Protocol::HttpProtobuf, Some(base)) => {
                format!("{}/v1/traces", base.trim_end_matches('/'))
            }
            (Protocol::HttpProtobuf, None) => "http://localhost:4318/v1/traces".to_string(),
        }
    }
}

/// The ratio upstream's picker samples at when none is given.
const DEFAULT_RATIO: f64 = 0.1;
/// The OTLP exporters' default timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The first of `names` that is set, with its name (the last name when none is).
fn first_of<const N: usize>(
    get: &impl Fn(&str) -> Option<String>,
    names: [&'static str; N],
) -> (&'static str, Option<String>) {
    for name in names {
        if let Some(v) = get(name) {
            return (name, Some(v));
        }
    }
    (names[N - 1], None)
}

fn parse_ratio(value: &str) -> Result<f64, SettingsError> {
    let bad = |reason| SettingsError::BadNumber {
        variable: "OTEL_TRACES_SAMPLER_ARG",
        value: value.to_string(),
        reason,
    };
    let ratio: f64 = value.parse().map_err(|_| bad("not a number"))?;
    if (0.0..=1.0).contains(&ratio) {
        Ok(ratio)
    } else {
        Err(bad("a ratio must be within [0, 1]"))
    }
}

/// `k=v,k2=v2`, each side trimmed and percent-decoded (the spec's W3C-baggage-like format).
fn parse_headers(
    variable: &'static str,
    value: &str,
) -> Result<Vec<(String, String)>, SettingsError> {
    let mut headers = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(SettingsError::BadHeader {
                variable,
                entry: entry.to_string(),
            });
        };
        let k = percent_decode(k.trim());
        if k.is_empty() {
            return Err(SettingsError::BadHeader {
                variable,
                entry: entry.to_string(),
            });
        }
        if headers.len() == MAX_HEADERS {
            break;
        }
        headers.push((k.to_ascii_lowercase(), percent_decode(v.trim())));
    }
    Ok(headers)
}

/// `%XX` sequences decoded (invalid ones kept as they are).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn read(env: &[(&str, &str)]) -> Result<TracingSettings, SettingsError> {
        TracingSettings::from_lookup("svc", |name| {
            env.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn off_by_default_with_upstreams_sampler_and_grpc() {
        let s = read(&[]).unwrap();
        assert!(!s.is_enabled());
        assert_eq!(
            s.sampler,
            SamplerKind::ParentBased(ParentRoot::TraceIdRatio(0.1))
        );
        assert_eq!(s.protocol, Protocol::Grpc);
        assert_eq!(s.traces_endpoint(), "http://localhost:4317");
        assert_eq!(s.service_name, "svc");
        assert_eq!(s.timeout, Duration::from_secs(10));
    }

    #[test]
    fn every_sampler_name_reads() {
        let cases = [
            ("always_on", SamplerKind::AlwaysOn),
            ("always_off", SamplerKind::AlwaysOff),
            ("traceidratio", SamplerKind::TraceIdRatio(0.25)),
            (
                "parentbased_always_on",
                SamplerKind::ParentBased(ParentRoot::AlwaysOn),
            ),
            (
                "parentbased_always_off",
                SamplerKind::ParentBased(ParentRoot::AlwaysOff),
            ),
            (
                "parentbased_traceidratio",
                SamplerKind::ParentBased(ParentRoot::TraceIdRatio(0.25)),
            ),
        ];
        for (name, kind) in cases {
            let s = read(&[
                ("OTEL_TRACES_SAMPLER", name),
                ("OTEL_TRACES_SAMPLER_ARG", "0.25"),
            ])
            .unwrap();
            assert_eq!(s.sampler, kind, "{name}");
        }
    }

    #[test]
    fn bad_values_name_their_variable() {
        let e = read(&[("OTEL_TRACES_EXPORTER", "jaeger")]).unwrap_err();
        assert!(e.to_string().contains("OTEL_TRACES_EXPORTER"), "{e}");
        let e = read(&[("OTEL_TRACES_SAMPLER", "sometimes")]).unwrap_err();
        assert!(e.to_string().contains("OTEL_TRACES_SAMPLER"), "{e}");
        let e = read(&[("OTEL_TRACES_SAMPLER_ARG", "1.5")]).unwrap_err();
        assert!(e.to_string().contains("[0, 1]"), "{e}");
        let e = read(&[("OTEL_TRACES_SAMPLER_ARG", "NaN")]).unwrap_err();
        assert!(e.to_string().contains("OTEL_TRACES_SAMPLER_ARG"), "{e}");
        let e = read(&[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")]).unwrap_err();
        assert!(
            e.to_string().contains("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
            "{e}"
        );
        let e = read(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]).unwrap_err();
        assert!(e.to_string().contains("key=value"), "{e}");
    }

    #[test]
    fn the_sdk_switch_and_none_turn_tracing_off() {
        assert!(
            !read(&[
                ("OTEL_TRACES_EXPORTER", "otlp"),
                ("OTEL_SDK_DISABLED", "true")
            ])
            .unwrap()
            .is_enabled()
        );
        assert!(
            !read(&[("OTEL_TRACES_EXPORTER", "none")])
                .unwrap()
                .is_enabled()
        );
        assert!(
            read(&[("OTEL_TRACES_EXPORTER", "console")])
                .unwrap()
                .is_enabled()
        );
    }

    #[test]
    fn endpoints_follow_the_spec() {
        let s = read(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318/"),
        ])
        .unwrap();
        assert_eq!(s.traces_endpoint(), "http://c:4318/v1/traces");
        let s = read(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://t:9/custom"),
        ])
        .unwrap();
        assert_eq!(s.traces_endpoint(), "http://t:9/custom");
        let s = read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://g:4317")]).unwrap();
        assert_eq!(s.traces_endpoint(), "http://g:4317");
        let s = read(&[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ])
        .unwrap();
        assert_eq!(s.protocol, Protocol::HttpProtobuf);
    }

    #[test]
    fn headers_are_split_trimmed_and_decoded() {
        let s = read(&[
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "Authorization=Bearer%20abc, x-tenant = t1 ,,",
            ),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
        ])
        .unwrap();
        assert_eq!(
            s.headers,
            [
                ("authorization".to_string(), "Bearer abc".to_string()),
                ("x-tenant".to_string(), "t1".to_string())
            ]
        );
        assert_eq!(s.timeout, Duration::from_millis(2500));
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}
