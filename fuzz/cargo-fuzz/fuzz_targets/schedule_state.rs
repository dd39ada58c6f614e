#![no_main]

// `tally_fuzz::targets::durable::SCHEDULE_STATE`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::durable::SCHEDULE_STATE.run)(data);
});
