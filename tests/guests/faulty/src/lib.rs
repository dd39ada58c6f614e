//! A function that misbehaves on request, for the host's tests of bad guests.
//!
//! | input               | behaviour                                                  |
//! |---------------------|------------------------------------------------------------|
//! | `echo:<x>`          | returns `x`                                                |
//! | `trap`              | panics with "faulty guest trapped on purpose"              |
//! | `spin`              | loops forever                                              |
//! | `alloc`             | allocates 1 MiB at a time and keeps it, until memory runs out |
//! | `big:<N>`           | returns N bytes                                            |
//! | `tag-reserved`      | appends with tag 1 << 63 and returns the error's message   |
//! | `tag:<name>:<data>` | appends `data` with `Tag::named(name)`, returns the seqnum |
//!
//! Anything else is an error.

use std::hint::black_box;

use tally_sdk::{log, Tag};

fn handle(input: Vec<u8>) -> Result<Vec<u8>, String> {
    match input.as_slice() {
        b"trap" => panic!("faulty guest trapped on purpose"),
        b"spin" => spin(),
        b"alloc" => alloc(),
        b"tag-reserved" => append_with_reserved_tag(),
        input => {
            if let Some(echo) = input.strip_prefix(b"echo:") {
                Ok(echo.to_vec())
            } else if let Some(len) = input.strip_prefix(b"big:") {
                big(len)
            } else if let Some(name_and_data) = input.strip_prefix(b"tag:") {
                append_with_named_tag(name_and_data)
            } else {
                Err(format!("unknown command {:?}", String::from_utf8_lossy(input)))
            }
        }
    }
}

tally_sdk::handler!(handle);

/// Loops until the host stops the invocation. `black_box` makes each step work the
/// optimiser must keep, so the loop really runs.
fn spin() -> ! {
    let mut steps = 0u64;
    loop {
        steps = black_box(steps.wrapping_add(1));
    }
}

/// Grows linear memory 1 MiB at a time until the host refuses to grow it further; the
/// allocator then aborts, which traps.
fn alloc() -> ! {
    const MIB: usize = 1 << 20;
    let mut hoard = Vec::new();
    loop {
        // A non-zero fill writes every page: a zeroed allocation could be served from
        // fresh (already zero) pages without a write.
        hoard.push(vec![0xa5u8; MIB]);
        // The hoard is never read, so without this the optimiser could free each
        // chunk at once, or never allocate it.
        black_box(&mut hoard);
    }
}

/// Returns `len` bytes.
fn big(len: &[u8]) -> Result<Vec<u8>, String> {
    let len: usize = std::str::from_utf8(len).ok().and_then(|len| len.parse().ok()).ok_or("expected `big:<N>`")?;
    Ok(vec![b'x'; len])
}

/// Appends with a tag reserved for the platform. The platform must refuse it with an
/// error value (not a trap), whose message is the output, e.g. "invalid argument: ...".
fn append_with_reserved_tag() -> Result<Vec<u8>, String> {
    match log::append(&[Tag::new(1 << 63)], b"reserved") {
        Err(error) => Ok(error.to_string().into_bytes()),
        Ok(seqnum) => Err(format!("appended with a reserved tag as record {seqnum}")),
    }
}

/// Appends `<data>` with the tag named `<name>`, and returns the record's seqnum in
/// decimal.
fn append_with_named_tag(name_and_data: &[u8]) -> Result<Vec<u8>, String> {
    let colon = name_and_data.iter().position(|&byte| byte == b':').ok_or("expected `tag:<name>:<data>`")?;
    let (name, data) = (&name_and_data[..colon], &name_and_data[colon + 1..]);
    let name = std::str::from_utf8(name).map_err(|_| "the tag name is not UTF-8")?;
    let seqnum = log::append(&[Tag::named(name)], data).map_err(|error| error.to_string())?;
    Ok(seqnum.to_string().into_bytes())
}
