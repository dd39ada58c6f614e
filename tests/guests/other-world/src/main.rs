//! A component of the wrong world: built as a binary for wasm32-wasip2, it is a
//! `wasi:cli/command` exporting `wasi:cli/run`, not a `tally:platform/function`
//! exporting `handle`. The host must refuse to deploy it.

fn main() {
    println!("hi");
}
