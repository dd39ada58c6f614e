#![no_main]

// `tally_fuzz::targets::log::RECORD_JOURNAL`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::log::RECORD_JOURNAL.run)(data);
});
