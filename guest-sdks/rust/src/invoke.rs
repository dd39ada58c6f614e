//! Calls to other functions.

use crate::bindings::tally::platform::invoke as wit;
use crate::{Error, Result};

/// Runs `function` on the same book with `input`, waits for it, and returns its output.
///
/// The child sees everything this invocation has read or written on the log. When the
/// child's handler returns an error or the child traps, the call fails with
/// [`Error::Failed`]; an unknown function fails with [`Error::NotFound`].
///
/// The call is exactly-once: the child's invocation ID is derived from this
/// invocation's ID and the call's step, and its outcome is logged, so when the platform
/// runs this invocation again after a crash, the call returns the logged outcome
/// instead of running the child again.
///
/// ```no_run
/// use tally_sdk::{context, invoke};
///
/// // A function may call itself, under the name it was deployed as.
/// let output = invoke::call(&context::function_name(), "child")?;
/// # Ok::<(), tally_sdk::Error>(())
/// ```
pub fn call(function: &str, input: impl AsRef<[u8]>) -> Result<Vec<u8>> {
    wit::call(function, input.as_ref()).map_err(Error::from_wit)
}
