//! The largest single allocation of each execution, so that a decoder that allocates
//! what a length prefix claims (rather than what the input holds, or up to its limit)
//! is a failure. Counts only in a binary that installs [`Tracking`] as its global
//! allocator (the test binary and the command line do); elsewhere it reads 0.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// A single allocation above this many bytes fails the execution: every decoder here
/// refuses rather than allocates past its limit or past what its input holds, and the
/// largest limit met in one allocation is a frame's (the targets use 1 MiB).
pub const ALLOC_BYTES_MAX: usize = 64 << 20;

thread_local! {
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, noting the largest request of each thread.
pub struct Tracking;

fn note(size: usize) {
    // During a thread's teardown the slot may be gone: that allocation is not counted.
    let _ = PEAK.try_with(|peak| peak.set(peak.get().max(size)));
}

// SAFETY: every call is forwarded to `System` unchanged; `note` does not allocate.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The largest allocation of this thread since the last call.
pub fn take_peak() -> usize {
    PEAK.with(|peak| peak.replace(0))
}
