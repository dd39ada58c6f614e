#![no_main]

// `tally_fuzz::targets::log::METALOG_ENTRIES`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::log::METALOG_ENTRIES.run)(data);
});
