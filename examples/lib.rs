//! Runnable examples: see `examples/`.
