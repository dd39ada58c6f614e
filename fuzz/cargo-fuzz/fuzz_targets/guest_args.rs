#![no_main]

// `tally_fuzz::targets::host::GUEST_ARGS`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::host::GUEST_ARGS.run)(data);
});
