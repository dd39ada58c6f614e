use std::fmt;

/// Declares the function's handler: the entry point the platform calls with the
/// invocation's input.
///
/// `handler!(handle)` takes the path of a function
/// `fn(Vec<u8>) -> Result<O, E>` where `O: Into<Vec<u8>>` (for example `Vec<u8>`,
/// `String` or `&'static str`) and `E: Display` (for example [`Error`](crate::Error),
/// `String` or `anyhow::Error`), and exports it as the component's `handle`. An error
/// is returned to the caller as its message, formatted with `{:#}` so that an
/// `anyhow::Error` shows its chain of causes. A panic traps the invocation, and its
/// message goes to the function's stderr.
///
/// Use it once per component, at the top level of the crate:
///
/// ```
/// fn handle(input: Vec<u8>) -> Result<String, tally_sdk::Error> {
///     Ok(format!("{} bytes", input.len()))
/// }
///
/// tally_sdk::handler!(handle);
/// ```
#[macro_export]
macro_rules! handler {
    ($handle:path) => {
        const _: () = {
            struct Handler;

            impl $crate::bindings::Guest for Handler {
                fn handle(input: ::std::vec::Vec<u8>) -> ::std::result::Result<::std::vec::Vec<u8>, ::std::string::String> {
                    $crate::__handle_result($handle(input))
                }
            }

            $crate::bindings::export! { Handler with_types_in $crate::bindings }
        };
    };
}

/// Converts a handler's result into the one the WIT export returns; used by
/// [`handler!`].
#[doc(hidden)]
pub fn handle_result<O, E>(result: Result<O, E>) -> Result<Vec<u8>, String>
where
    O: Into<Vec<u8>>,
    E: fmt::Display,
{
    result.map(Into::into).map_err(|error| format!("{error:#}"))
}
