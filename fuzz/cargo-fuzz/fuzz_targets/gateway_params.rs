#![no_main]

// `tally_fuzz::targets::gateway::GATEWAY_PARAMS`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::gateway::GATEWAY_PARAMS.run)(data);
});
