//! `wasi:clocks` and `wasi:random` as the exactly-once core gives them: these
//! definitions shadow wasmtime-wasi's own (the rest of WASI is its), so that every
//! execution of an invocation reads the same clocks and draws the same random bytes
//! (`tally_durable`'s `recorder.rs` says how). The host reads the live clocks and hands
//! the values to the invocation's attempt, which replays or keeps them; the guest's
//! monotonic clock counts from the Unix epoch (`clock::monotonic_ns`), so that nodes
//! roughly agree when a re-execution moves from one to another.
//!
//! Shadowed are the `now` of both clocks and every function of `wasi:random/random`,
//! `insecure` and `insecure-seed`; the WASI context's own monotonic clock, which times what
//! WASI waits for, counts from the same origin.

use tally_durable::RANDOM_BYTES_MAX;
use wasmtime::component::Linker;
use wasmtime::StoreContextMut;
use wasmtime_wasi::p2::bindings::clocks::wall_clock::Datetime;

use super::HostState;
use crate::clock;

/// The version of the WASI interfaces wasmtime-wasi defines (guests importing an older
/// 0.2 version are linked to it by semver).
pub(super) const WASI: &str = "0.2.12";

fn random_len(len: u64) -> wasmtime::Result<usize> {
    if len > RANDOM_BYTES_MAX {
        wasmtime::bail!("requested {len} random bytes, more than the limit of {RANDOM_BYTES_MAX}");
    }
    Ok(len as usize)
}

fn random_bytes(mut store: StoreContextMut<'_, HostState>, (len,): (u64,)) -> wasmtime::Result<(Vec<u8>,)> {
    let mut out = vec![0; random_len(len)?];
    store.data_mut().inv().attempt.random_bytes(&mut out);
    Ok((out,))
}

fn random_u64(mut store: StoreContextMut<'_, HostState>, (): ()) -> wasmtime::Result<(u64,)> {
    Ok((store.data_mut().inv().attempt.random_u64(),))
}

/// Defines the recorded functions over wasmtime-wasi's, which must be in `linker`.
pub(super) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut wall = linker.instance(&format!("wasi:clocks/wall-clock@{WASI}"))?;
    wall.func_wrap("now", |mut store: StoreContextMut<'_, HostState>, (): ()| {
        let ns = store.data_mut().inv().attempt.wall_clock_ns(clock::wall_ns());
        Ok((Datetime { seconds: ns / 1_000_000_000, nanoseconds: (ns % 1_000_000_000) as u32 },))
    })?;
    let mut monotonic = linker.instance(&format!("wasi:clocks/monotonic-clock@{WASI}"))?;
    monotonic.func_wrap("now", |mut store: StoreContextMut<'_, HostState>, (): ()| {
        Ok((store.data_mut().inv().attempt.monotonic_clock_ns(clock::monotonic_ns()),))
    })?;
    let mut random = linker.instance(&format!("wasi:random/random@{WASI}"))?;
    random.func_wrap("get-random-bytes", random_bytes)?;
    random.func_wrap("get-random-u64", random_u64)?;
    // Insecure randomness is the same stream: it needs no other quality, and an
    // invocation gets the same values whichever it asks for.
    let mut insecure = linker.instance(&format!("wasi:random/insecure@{WASI}"))?;
    insecure.func_wrap("get-insecure-random-bytes", random_bytes)?;
    insecure.func_wrap("get-insecure-random-u64", random_u64)?;
    let mut seed = linker.instance(&format!("wasi:random/insecure-seed@{WASI}"))?;
    seed.func_wrap("insecure-seed", |mut store: StoreContextMut<'_, HostState>, (): ()| {
        Ok((store.data_mut().inv().attempt.insecure_seed(),))
    })?;
    linker.allow_shadowing(false);
    Ok(())
}
