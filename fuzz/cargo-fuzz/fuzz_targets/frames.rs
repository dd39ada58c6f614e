#![no_main]

// `tally_fuzz::targets::log::FRAMES`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::log::FRAMES.run)(data);
});
