//! The smallest Tally function: it returns its input unchanged.

use std::convert::Infallible;

/// Echoes the input. Nothing can go wrong, so the error type is `Infallible`.
fn handle(input: Vec<u8>) -> Result<Vec<u8>, Infallible> {
    Ok(input)
}

tally_sdk::handler!(handle);
