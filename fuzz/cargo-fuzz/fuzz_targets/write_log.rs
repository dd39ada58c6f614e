#![no_main]

// `tally_fuzz::targets::durable::WRITE_LOG`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::durable::WRITE_LOG.run)(data);
});
