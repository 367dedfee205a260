//! The request's path and query, decoded.

use std::collections::HashMap;

use crate::store::Resource;

/// `%XX` and `+` decoded; invalid escapes are kept as they are.
pub(crate) fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => (percent_decode(k), percent_decode(v)),
            None => (percent_decode(pair), String::new()),
        })
        .collect()
}

/// What a path names: a resource, optionally a namespace, optionally one object.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) group: String,
    pub(crate) version: String,
    pub(crate) plural: String,
    pub(crate) namespace: Option<String>,
    pub(crate) name: Option<String>,
}

impl Target {
    pub(crate) fn matches(&self, resource: &Resource) -> bool {
        resource.group == self.group
            && resource.version == self.version
            && resource.plural == self.plural
    }
}

/// `/api/v1/[namespaces/NS/]PLURAL[/NAME]` or `/apis/G/V/[namespaces/NS/]PLURAL[/NAME]`.
pub(crate) fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<String> = path
        .split('/')
        .filter(|p| !p.is_empty())
        .map(percent_decode)
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let (group, version, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        rest => (None, rest),
    };
    let (plural, name) = match rest {
        [plural] => (*plural, None),
        [plural, name] => (*plural, Some(name.to_string())),
        _ => return None,
    };
    Some(Target {
        group: group.to_string(),
        version: version.to_string(),
        plural: plural.to_string(),
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn paths_and_queries() {
        let t = parse_path("/api/v1/namespaces/ns/pods").unwrap();
        assert_eq!(
            (t.plural.as_str(), t.namespace.as_deref()),
            ("pods", Some("ns"))
        );
        let t = parse_path("/apis/inference.networking.k8s.io/v1/namespaces/ns/inferencepools/p")
            .unwrap();
        assert_eq!(t.name.as_deref(), Some("p"));
        assert!(parse_path("/healthz").is_none());
        let q = parse_query(Some("labelSelector=app%3Dvllm%2Cx%3Dy&watch=true&a+b=%zz"));
        assert_eq!(q["labelSelector"], "app=vllm,x=y");
        assert_eq!(q["a b"], "%zz");
    }
}
