//! The `tally` binary's commands that are not the node: what it prints for people, and
//! `tally new` and `tally build` for every guest language.

pub mod build;
pub mod new;
pub mod output;
pub mod sdk;
pub mod tools;
