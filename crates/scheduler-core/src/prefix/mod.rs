//! The prefix-cache index: which endpoints are believed to hold which prompt blocks.
//!
//! (Being built: see DESIGN.md section 4.)
