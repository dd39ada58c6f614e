//! What the current invocation is.

use crate::bindings::tally::platform::context as wit;

/// The invocation's ID. It stays the same when the platform runs the invocation again,
/// so it can key work that must happen once.
pub fn invocation_id() -> String {
    wit::invocation_id()
}

/// The ID of the book the invocation is bound to, which every [`log`](crate::log) call
/// acts on.
pub fn book_id() -> u64 {
    wit::book_id()
}

/// Which execution of the invocation this is: 1 for the first, then 2, 3, ... when the
/// platform runs it again.
pub fn attempt() -> u32 {
    wit::attempt()
}

/// The name the function was deployed under.
pub fn function_name() -> String {
    wit::function_name()
}
