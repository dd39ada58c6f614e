#![no_main]

// `tally_fuzz::targets::gateway::TOKENS`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::gateway::TOKENS.run)(data);
});
