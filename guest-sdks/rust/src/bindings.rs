//! Bindings for world `tally:platform/function`, generated from the repository's `wit/`.
//!
//! The module is public (and hidden) only because [`handler!`](crate::handler) expands
//! in the user's crate to wit-bindgen's export macro, which names the generated items
//! by path. Everything else in the SDK wraps these bindings; no generated type appears
//! in the SDK's public API.

wit_bindgen::generate!({
    world: "function",
    path: "../../wit",
    // The export macro is used from user crates, through `handler!`.
    pub_export_macro: true,
    default_bindings_module: "tally_sdk::bindings",
    with: { "wasi:config/store@0.2.0-rc.1": generate },
});
