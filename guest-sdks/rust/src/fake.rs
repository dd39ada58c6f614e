//! Fake bindings for the SDK's unit tests, which run on the host, where the generated
//! imports cannot be called.
//!
//! A module that wraps an interface imports it as `wit` from the bindings, or from here
//! under `cfg(test)`; the functions here have the generated ones' signatures, so the
//! wrapper compiles against both. Each fake records its call, as
//! `interface.function(args...)` with the arguments in `Debug` form, and returns the
//! next reply a test queued with [`reply`]. Both are per thread, as cargo runs each test
//! on a thread of its own.

use std::any::{type_name, Any};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt::Debug;

pub use crate::bindings::tally::platform::types::Error;

thread_local! {
    static CALLS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static REPLIES: RefCell<VecDeque<Box<dyn Any>>> = const { RefCell::new(VecDeque::new()) };
}

/// Queues `reply` as what the next fake call returns; its type must be that call's
/// return type exactly (`Result<Option<String>, Error>` for `objects.get`).
pub fn reply<T: 'static>(reply: T) {
    REPLIES.with_borrow_mut(|replies| replies.push_back(Box::new(reply)));
}

/// Queues `Ok(value)` as the next reply.
pub fn ok<T: 'static>(value: T) {
    reply(Ok::<T, Error>(value));
}

/// Queues `Err(error)` as the next reply, for a call whose `Ok` type is `T`.
pub fn err<T: 'static>(error: Error) {
    reply(Err::<T, Error>(error));
}

/// The calls made since the last look, in order. Every queued reply must have been
/// used: one left over means a call the test expected did not happen.
#[track_caller]
pub fn calls() -> Vec<String> {
    let unused = REPLIES.with_borrow_mut(|replies| std::mem::take(replies).len());
    assert_eq!(unused, 0, "replies queued but not used");
    CALLS.with_borrow_mut(std::mem::take)
}

/// Records a call and returns the reply queued for it.
fn call<T: 'static>(function: &str, args: &[&dyn Debug]) -> T {
    let args: Vec<String> = args.iter().map(|arg| format!("{arg:?}")).collect();
    let call = format!("{function}({})", args.join(", "));
    CALLS.with_borrow_mut(|calls| calls.push(call.clone()));
    let reply = REPLIES.with_borrow_mut(VecDeque::pop_front).unwrap_or_else(|| panic!("no reply queued for {call}"));
    *reply.downcast().unwrap_or_else(|_| panic!("the reply queued for {call} is not a {}", type_name::<T>()))
}

/// Declares the fakes of one interface's functions.
macro_rules! fake {
    ($interface:ident { $(fn $function:ident($($arg:ident: $type:ty),*) -> $return:ty;)* }) => {
        pub mod $interface {
            #[allow(unused_imports)]
            use super::Error;

            $(
                pub fn $function($($arg: $type),*) -> $return {
                    let args: &[&dyn std::fmt::Debug] = &[$(&$arg),*];
                    super::call(concat!(stringify!($interface), ".", stringify!($function)), args)
                }
            )*
        }
    };
}

fake!(objects {
    fn get(object: &str, path: &str) -> Result<Option<String>, Error>;
    fn set(object: &str, path: &str, json: &str) -> Result<(), Error>;
    fn increment(object: &str, path: &str, by: i64) -> Result<(), Error>;
    fn push(object: &str, path: &str, json: &str) -> Result<(), Error>;
    fn remove(object: &str, path: &str) -> Result<(), Error>;
    fn begin(read_only: bool) -> Result<(), Error>;
    fn commit() -> Result<bool, Error>;
    fn abort() -> Result<(), Error>;
});

fake!(queues {
    fn push(queue: &str, message: &[u8]) -> Result<(), Error>;
    fn pop(queue: &str, timeout_ms: u64) -> Result<Option<Vec<u8>>, Error>;
    fn pop_many(queue: &str, max: u32, timeout_ms: u64) -> Result<Vec<Vec<u8>>, Error>;
});

fake!(locks {
    fn acquire(lock: &str, timeout_ms: u64) -> Result<bool, Error>;
    fn release(lock: &str) -> Result<(), Error>;
});

fake!(context {
    fn invocation_id() -> String;
    fn book_id() -> u64;
    fn attempt() -> u32;
    fn function_name() -> String;
    fn key() -> Option<String>;
    fn sleep(ms: u64) -> Result<(), Error>;
    fn sleep_until(unix_ms: u64) -> Result<(), Error>;
    fn promise_create() -> Result<String, Error>;
    fn promise_await(id: &str, timeout_ms: Option<u64>) -> Result<Vec<u8>, Error>;
});

fake!(config_store {
    fn get(key: &str) -> Result<Option<String>, crate::bindings::wasi::config::store::Error>;
    fn get_all() -> Result<Vec<(String, String)>, crate::bindings::wasi::config::store::Error>;
});
