#![no_main]

// `tally_fuzz::targets::durable::CORE_RECORDS`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::durable::CORE_RECORDS.run)(data);
});
