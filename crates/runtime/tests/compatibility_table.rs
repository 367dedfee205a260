//! `docs/compatibility.md`, the core's table of upstream plugin types and the built-in
//! registry agree: every registered type is in the table (or is an older upstream name or a
//! Shepherd extension), every type the table says the registry builds is registered, no type
//! it says is not implemented yet is registered, and the page lists every type with the
//! table's verdict.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use shepherd_scheduler_core::config::{
    OLDER_UPSTREAM_NAMES, SHEPHERD_EXTENSIONS, Status, UPSTREAM_TYPES, framework_plugin,
    framework_plugins, upstream_type,
};
use shepherd_scorers::builtin_registry;

fn page() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/compatibility.md");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn every_registered_type_is_in_the_table() {
    let registry = builtin_registry();
    for name in registry.types() {
        let known = upstream_type(name).is_some()
            || OLDER_UPSTREAM_NAMES.iter().any(|(older, _)| *older == name)
            || SHEPHERD_EXTENSIONS.contains(&name);
        assert!(
            known,
            "`{name}` is registered but not in the compatibility table"
        );
    }
}

#[test]
fn the_tables_statuses_match_the_registry() {
    let registry = builtin_registry();
    for t in UPSTREAM_TYPES {
        match t.status {
            Status::Registry => assert!(
                registry.contains(t.name),
                "`{}` is marked implemented by the registry but is not registered",
                t.name
            ),
            Status::Framework => assert!(
                framework_plugin(t.name).is_some(),
                "`{}` is marked honoured outside the registry but the core does not know it",
                t.name
            ),
            Status::NotYet(area) => assert!(
                !registry.contains(t.name),
                "`{}` is registered now: mark it implemented (it was not yet: {area})",
                t.name
            ),
        }
    }
    for p in framework_plugins() {
        assert_eq!(
            upstream_type(p.plugin_type).map(|t| t.status),
            Some(Status::Framework),
            "{}",
            p.plugin_type
        );
    }
    for (older, _) in OLDER_UPSTREAM_NAMES {
        assert!(registry.contains(older), "{older}");
    }
}

#[test]
fn the_page_lists_every_type_with_the_tables_verdict() {
    let page = page();
    for t in UPSTREAM_TYPES {
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", t.name)))
            .unwrap_or_else(|| panic!("docs/compatibility.md has no row for `{}`", t.name));
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[3], t.verdict(), "{row}");
        if let Status::NotYet(area) = t.status {
            assert_eq!(cells[4], area.to_string(), "{row}");
        }
        assert_eq!(cells[5], t.note, "{row}");
    }
    for name in SHEPHERD_EXTENSIONS
        .iter()
        .chain(OLDER_UPSTREAM_NAMES.iter().map(|(n, _)| n))
    {
        assert!(page.contains(&format!("| `{name}` |")), "{name}");
    }
}

#[test]
fn the_table_has_every_upstream_type_once() {
    let mut names: Vec<&str> = UPSTREAM_TYPES.iter().map(|t| t.name).collect();
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "a type is listed twice");
    // registerInTreePlugins at the snapshot registers 99 calls over 97 distinct names
    // (prefill-filter and decode-filter twice).
    assert_eq!(count, 97);
}
