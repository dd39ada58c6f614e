#![no_main]

// `tally_fuzz::targets::host::OBJECTS`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::host::OBJECTS.run)(data);
});
