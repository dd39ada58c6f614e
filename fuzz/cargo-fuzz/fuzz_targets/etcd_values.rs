#![no_main]

// `tally_fuzz::targets::log::ETCD_VALUES`: see its `what`.
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (tally_fuzz::targets::log::ETCD_VALUES.run)(data);
});
