//! {{name}}: a Tally function that returns its input unchanged.

use std::convert::Infallible;

fn handle(input: Vec<u8>) -> Result<Vec<u8>, Infallible> {
    Ok(input)
}

tally_sdk::handler!(handle);
