//! Peers handed to the direct exchange by a discovery (`replicas.peers: {kubernetes: ...}`):
//! the current addresses on a watch channel, and the task that keeps them, stopped with the
//! exchange.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The discovered peers' addresses (this replica excluded), kept current.
#[derive(Debug)]
pub(crate) struct DiscoveredPeers {
    /// The addresses, sorted; replaced whole on every change.
    pub(crate) rx: watch::Receiver<Arc<Vec<SocketAddr>>>,
    /// The most peers the exchange keeps (`maxPeers`).
    pub(crate) max: usize,
    /// The task feeding `rx`, aborted when this is dropped.
    pub(crate) task: Option<JoinHandle<()>>,
}

impl Drop for DiscoveredPeers {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
