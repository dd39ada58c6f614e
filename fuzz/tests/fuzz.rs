//! Every fuzz target for a bounded time: `TALLY_FUZZ_SECONDS` each (3 by default), from
//! `TALLY_FUZZ_SEED` (else a seed from the clock, printed first). A failure prints the
//! target, the seed, the execution and the input in hex; `cargo run -p tally-fuzz --
//! replay TARGET HEX` runs that input again. One test per target, so that the test
//! command runs them side by side and names the one that failed.

#[global_allocator]
static ALLOC: tally_fuzz::Tracking = tally_fuzz::Tracking;

macro_rules! fuzz_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                tally_fuzz::check(stringify!($name), tally_fuzz::options_from_env());
            }
        )*

        #[test]
        fn every_target_has_a_test() {
            let tested = [$(stringify!($name)),*];
            let targets: Vec<&str> = tally_fuzz::targets::ALL.iter().map(|t| t.name).collect();
            assert_eq!(targets, tested, "a test per target, in order");
        }
    };
}

/// `cargo-fuzz/` (built only with nightly) has a binary per target, of its name, that
/// runs that target and nothing else.
#[test]
fn every_target_has_a_cargo_fuzz_binary() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cargo-fuzz");
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("cargo-fuzz/Cargo.toml");
    assert_eq!(manifest.matches("[[bin]]").count(), tally_fuzz::targets::ALL.len(), "a binary per target");
    for t in tally_fuzz::targets::ALL {
        let path = format!("fuzz_targets/{}.rs", t.name);
        assert!(manifest.contains(&format!("name = \"{}\"\npath = \"{path}\"", t.name)), "no binary {}", t.name);
        let source = std::fs::read_to_string(dir.join(&path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let call = format!("::{}.run)(data)", t.name.to_uppercase());
        assert!(source.contains(&call), "{path} does not call {call}");
    }
}

fuzz_tests!(
    frames,
    record_meta,
    record_journal,
    metalog_journal,
    metalog_entries,
    etcd_values,
    step_records,
    write_log,
    core_records,
    schedule_state,
    cron,
    state_entries,
    http_messages,
    manifests,
    routes,
    outbound,
    secrets,
    guest_args,
    objects,
    tokens,
    gateway_params,
);
