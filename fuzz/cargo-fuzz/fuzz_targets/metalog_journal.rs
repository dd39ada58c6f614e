#![no_main]

// `tally_fuzz::targets::log::METALOG_JOURNAL`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::log::METALOG_JOURNAL.run)(data);
});
