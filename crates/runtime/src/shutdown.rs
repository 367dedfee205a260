//! The signal that tells every loop, and the adapters' servers, that the runtime is shutting
//! down.
//!
//! ```
//! use shepherd_runtime::ShutdownSignal;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let (trigger, signal) = ShutdownSignal::new();
//! assert!(!signal.is_shutting_down());
//! let waiter = tokio::spawn({
//!     let signal = signal.clone();
//!     async move { signal.wait().await }
//! });
//! trigger.trigger();
//! waiter.await.unwrap();
//! assert!(signal.is_shutting_down());
//! # }
//! ```

use tokio::sync::watch;

/// Resolves once shutdown has begun. Cheap to clone; hand one to each server as its
/// graceful-shutdown future (`signal.wait()`).
#[derive(Debug, Clone)]
pub struct ShutdownSignal {
    rx: watch::Receiver<bool>,
}

/// Begins shutdown for every [`ShutdownSignal`] made with it.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

impl ShutdownSignal {
    /// A trigger and the signal it fires.
    pub fn new() -> (ShutdownTrigger, ShutdownSignal) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger { tx }, ShutdownSignal { rx })
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        *self.rx.borrow()
    }

    /// Waits until shutdown begins (or its trigger is dropped).
    pub async fn wait(&self) {
        let mut rx = self.rx.clone();
        // An error means the trigger is gone: nothing can start the runtime again either.
        let _ = rx.wait_for(|down| *down).await;
    }
}

impl ShutdownTrigger {
    /// Begins shutdown. Calling it again does nothing.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }

    /// A signal fired by this trigger.
    pub fn signal(&self) -> ShutdownSignal {
        ShutdownSignal {
            rx: self.tx.subscribe(),
        }
    }
}
