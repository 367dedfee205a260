//! Without the `otel` feature: span types that cannot exist, so every
//! [`RequestTrace`](super::RequestTrace) is off and compiles to nothing.

use std::future::Future;

use shepherd_scheduler_core::decision::Decision;
use shepherd_scheduler_core::scheduler::{ScheduleError, ScheduleObserver};

use super::trace::{ModeSource, Propagation};

/// No request span: uninhabited.
#[derive(Debug)]
pub(crate) enum Request {}

/// No child span: uninhabited.
#[derive(Debug)]
pub(crate) enum Child {}

/// No scheduling span: uninhabited.
#[derive(Debug)]
pub(crate) enum Scoring {}

impl Request {
    pub(crate) fn start(_: Option<&str>, _: Option<&str>, _: Option<ModeSource>) -> Option<Self> {
        None
    }
    pub(crate) fn set_str(&self, _: &'static str, _: &str) {
        match *self {}
    }
    pub(crate) fn set_i64(&self, _: &'static str, _: i64) {
        match *self {}
    }
    pub(crate) fn set_error(&self, _: &str, _: &str) {
        match *self {}
    }
    pub(crate) fn propagation(&self) -> Propagation {
        match *self {}
    }
    pub(crate) fn flow_control(&self, _: i64, _: Option<&str>) -> Option<Child> {
        match *self {}
    }
    pub(crate) fn scoring(&self) -> Option<Scoring> {
        match *self {}
    }
    pub(crate) fn upstream(&self, _: &str, _: u32) -> Option<Child> {
        match *self {}
    }
    pub(crate) fn span(&self) -> SpanRef {
        match *self {}
    }
}

/// No span to enter.
#[derive(Debug)]
pub(crate) enum SpanRef {}

/// `future` as it is.
pub(crate) async fn instrument<F: Future>(_: Option<SpanRef>, future: F) -> F::Output {
    future.await
}

impl Child {
    pub(crate) fn set_str(&self, _: &'static str, _: &str) {
        match *self {}
    }
    pub(crate) fn set_i64(&self, _: &'static str, _: i64) {
        match *self {}
    }
    pub(crate) fn set_error(&self, _: &str, _: &str) {
        match *self {}
    }
    pub(crate) fn propagation(&self) -> Propagation {
        match *self {}
    }
}

impl Scoring {
    pub(crate) fn observer(&self) -> &dyn ScheduleObserver {
        match *self {}
    }
    pub(crate) fn finish(self, _: Result<&Decision, &ScheduleError>) {
        match self {}
    }
}
