#![no_main]

// `tally_fuzz::targets::durable::STATE_ENTRIES`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::durable::STATE_ENTRIES.run)(data);
});
