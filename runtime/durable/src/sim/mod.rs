//! The deterministic simulator of the exactly-once layer (work in progress).
