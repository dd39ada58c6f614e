//! What the gateway reads from a request before a route runs: tokens, the
//! `Tally-Position` header, a deploy's `tables` query and a tag in a path or query.

use std::sync::OnceLock;

use tally::auth::{self, Action, Grant, Role, Scope};
use tally::gateway::{format_position, parse_position, parse_tables, parse_tag};
use tally_logsvc::Tag;

use super::log::context;
use super::{pick, picked, text};
use crate::Target;

pub const TOKENS: Target = Target {
    name: "tokens",
    what: "bearer tokens (tally_<id>_<secret>) and roles as requests and the CLI give them, and grants as the \
           platform keeps them (JSON): only the minted token authenticates (tally auth.rs)",
    seeds: tokens_seeds,
    dictionary: &[b"tally_", b"_", b"0", b"f", b"F", b"read", b"invoke", b"deploy", b"admin", b"\"role\""],
    run: tokens,
};

/// A grant and its token, minted once per process.
fn minted() -> &'static (Grant, String) {
    static MINTED: OnceLock<(Grant, String)> = OnceLock::new();
    MINTED.get_or_init(|| {
        let scope = Scope { functions: vec!["f*".into()], books: [7].into(), promise: None };
        Grant::mint(Role::Deploy, scope, Some(u64::MAX), std::array::from_fn(|i| i as u8))
    })
}

fn tokens_seeds() -> Vec<Vec<u8>> {
    let (grant, token) = minted();
    vec![picked(0, token.as_bytes()), picked(1, b"deploy"), picked(2, &serde_json::to_vec(grant).expect("a grant encodes"))]
}

fn tokens(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, 3) else { return false };
    let s = text(bytes);
    match which {
        0 => {
            let parsed = auth::parse(&s);
            let hex = |t: &str, n: usize| t.len() == n && t.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            let rule = s
                .strip_prefix("tally_")
                .and_then(|r| r.split_once('_'))
                .is_some_and(|(id, secret)| hex(id, 16) && hex(secret, 64));
            assert_eq!(parsed.is_ok(), rule, "{s:?}: {parsed:?}");
            let Ok((_, secret)) = parsed else { return false };
            // The caller finds the grant by the token's id; the grant takes its secret only.
            let (grant, token) = minted();
            let target = auth::Target { function: Some("f1"), book: Some(7), promise: None };
            let checked = grant.check(secret, Action::Deploy, &target, 0);
            assert_eq!(checked.is_ok(), token.ends_with(&format!("_{secret}")), "{s:?} authenticated as {token:?}");
            true
        }
        1 => Role::parse(&s).is_ok_and(|role| {
            assert_eq!(serde_json::to_value(role).expect("a role encodes"), s.as_str(), "a role named otherwise");
            true
        }),
        _ => serde_json::from_slice::<Grant>(bytes).is_ok_and(|grant| {
            let again = serde_json::to_vec(&grant).expect("a grant encodes");
            assert_eq!(serde_json::from_slice::<Grant>(&again).expect("reads back"), grant);
            true
        }),
    }
}

pub const GATEWAY_PARAMS: Target = Target {
    name: "gateway_params",
    what: "the Tally-Position header (term.index per log), a deploy's tables query (table:protocol,...), and a \
           tag given as a number, 0x-hex or a name (tally gateway.rs, gateway/books.rs)",
    seeds: gateway_params_seeds,
    dictionary: &[b".", b",", b":", b"0x", b" ", b"65535", b"read-optimized", b"write-optimized", b"symmetric", b"auto"],
    run: gateway_params,
};

fn gateway_params_seeds() -> Vec<Vec<u8>> {
    vec![
        picked(0, format_position(&context(&[(1, 4), (65_535, u64::MAX)])).as_bytes()),
        picked(0, b" 3.9 , 0.0"),
        picked(1, b"accounts:write-optimized,log:read-optimized"),
        picked(2, b"0xdeadbeef"),
        picked(2, b"orders"),
        picked(2, b"18446744073709551615"),
    ]
}

fn gateway_params(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, 3) else { return false };
    let s = text(bytes);
    match which {
        0 => parse_position(&s).is_ok_and(|ctx| {
            assert!(ctx.positions().len() <= 256, "{} positions from {s:?}", ctx.positions().len());
            let again = format_position(&ctx);
            assert_eq!(parse_position(&again).as_ref(), Ok(&ctx), "{s:?} written as {again:?}");
            true
        }),
        1 => parse_tables(&s).is_ok_and(|tables| {
            let again: Vec<String> = tables.iter().map(|(t, p)| format!("{t}:{}", p.name())).collect();
            let again = again.join(",");
            assert_eq!(parse_tables(&again).ok().as_ref(), Some(&tables), "{s:?} written as {again:?}");
            true
        }),
        _ => {
            let tag = parse_tag(&s);
            let number = match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16).ok(),
                None => s.parse::<u64>().ok(),
            };
            assert_eq!(tag, number.map_or_else(|| Tag::from_name(&s), Tag), "{s:?}");
            if number.is_none() {
                assert!(!tag.is_reserved(), "a name gave the platform's tag {tag:?}");
            }
            number.is_some()
        }
    }
}
