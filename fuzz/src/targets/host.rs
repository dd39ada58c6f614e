//! What the host takes from outside: an HTTP function's request and response as the
//! invocation's input and output, the routes and allow-lists deploys declare, sealed
//! secrets in manifests, and every argument a guest passes at the WIT boundary.

use std::net::IpAddr;
use std::sync::OnceLock;

use serde_json::Value;
use tally_durable::fuzzing as durable;
use tally_durable::objects::{self, ObjOp};
use tally_durable::{InstanceId, InvocationKey, Protocol};
use tally_host::fuzzing as host;
use tally_host::{Destination, HttpRequest, HttpResponse, Outbound, Route};

use super::{fields, join, pick, picked, take_u64, text};
use crate::Target;

pub const HTTP_MESSAGES: Target = Target {
    name: "http_messages",
    what: "an HTTP function's request (its invocation's input) and response (its output): magic, format byte, \
           bincode; a request as the host builds it for wasi:http (host message.rs, host/http.rs)",
    seeds: http_messages_seeds,
    dictionary: &[b"TLYH\0\x01", b"GET", b"https", b"http", b"/", b"?", b"host", b":", b"\r\n", b"\0"],
    run: http_messages,
};

fn http_messages_seeds() -> Vec<Vec<u8>> {
    let request = HttpRequest {
        method: "PATCH".into(),
        scheme: "https".into(),
        authority: "example.com:8443".into(),
        path_with_query: "/a/b?x=1&x=2".into(),
        headers: vec![("x-a".into(), b"1".to_vec()), ("x-a".into(), vec![0xff, 0])],
        body: vec![0, 1, 2, 255],
    };
    let response =
        HttpResponse { status: 418, headers: vec![], body: b"tea".to_vec(), trailers: Some(vec![("t".into(), vec![])]) };
    vec![request.encode(), HttpRequest::post(b"body".to_vec()).encode(), response.encode()]
}

fn http_messages(data: &[u8]) -> bool {
    let request = HttpRequest::decode(data);
    if let Some(r) = &request {
        assert_eq!(HttpRequest::decode(&r.encode()).as_ref(), Some(r), "a request encoded again reads the same");
        let _ = host::request_to_guest(r.clone());
    }
    let response = HttpResponse::decode(data);
    if let Some(r) = &response {
        assert_eq!(HttpResponse::decode(&r.encode()).as_ref(), Some(r), "a response encoded again reads the same");
    }
    request.is_some() || response.is_some()
}

pub const MANIFESTS: Target = Target {
    name: "manifests",
    what: "registry manifests as every node reads them from the log (deploy, config, delete, and operations of \
           newer nodes): what decodes encodes again to bytes that decode to the same (host registry.rs)",
    seeds: manifests_seeds,
    dictionary: &[b"{", b"}", b"\"op\"", b"\"deploy\"", b"\"config\"", b"\"delete\"", b"\"limits\"", b"null", b"\\u0000"],
    run: manifests,
};

fn manifests_seeds() -> Vec<Vec<u8>> {
    [
        r#"{"op":"deploy","name":"f","sha256":"ab","size":3,"chunks":[7],"limits":{"timeout_ms":5},"tables":{"t":"read-optimized"},"deployed_at_ms":1,"outbound":["https://a.example"],"routes":["/api@3"],"public":true,"by":"0123456789abcdef"}"#,
        r#"{"op":"config","name":"f","set":{"K":{"value":"v"}},"unset":["J"],"by":"x","at_ms":9}"#,
        r#"{"op":"delete","name":"f"}"#,
        r#"{"op":"rename","from":"f","to":"g"}"#,
    ]
    .iter()
    .map(|m| m.as_bytes().to_vec())
    .collect()
}

fn manifests(data: &[u8]) -> bool {
    let Some(encoded) = tally_host::decode_manifest(data) else { return false };
    let again = tally_host::decode_manifest(&encoded).expect("a manifest encoded again decodes");
    assert_eq!(again, encoded, "a manifest encodes to bytes that decode to the same");
    true
}

pub const ROUTES: Target = Target {
    name: "routes",
    what: "the routes an HTTP function declares at deploy (?routes=, manifests), and a request's host and path \
           matched against them (host routes.rs)",
    seeds: routes_seeds,
    dictionary: &[b"/", b"@", b",", b".", b"-", b":", b"/v1", b"/fn", b"/healthz", b"/metrics", b"//", b"?", b"%"],
    run: routes,
};

fn routes_seeds() -> Vec<Vec<u8>> {
    [
        ("/api,shop.example.com/,/v2@7", "shop.example.com:8080", "/api/users/7"),
        ("Shop.Example.com/v2/@7", "SHOP.example.com", "/v2"),
        ("/a", "", "/ab"),
        ("h.example/x/y@0", "h.example", "/x/y/"),
    ]
    .iter()
    .map(|(routes, host, path)| join(&[routes.as_bytes(), host.as_bytes(), path.as_bytes()]))
    .collect()
}

fn routes(data: &[u8]) -> bool {
    let [list, host, path] = fields(data).map(text);
    let Ok(routes) = tally_host::parse_routes(&list) else { return false };
    let host = Some(host.as_str()).filter(|h| !h.is_empty());
    for route in &routes {
        assert_eq!(Route::parse(&route.to_string()).as_ref(), Ok(route), "a route written from what it parsed");
        assert!(route.prefix.starts_with('/'), "{route:?}");
        if !path.starts_with('/') {
            continue;
        }
        if let Some(rest) = route.matches(host, &path) {
            // The function gets the path below the prefix, which the prefix and it make.
            assert!(rest.starts_with('/'), "{route:?} matched {path:?} leaving {rest:?}");
            let whole = match (route.prefix.as_str(), rest) {
                ("/", rest) => rest.to_string(),
                (prefix, "/") if path == prefix => path.clone(),
                (prefix, rest) => format!("{prefix}{rest}"),
            };
            assert_eq!(whole, path, "{route:?} matched {path:?} leaving {rest:?}");
        }
    }
    true
}

pub const OUTBOUND: Target = Target {
    name: "outbound",
    what: "a deploy's outbound allow-list (?outbound=, manifests), the origin of a guest's request out checked \
           against it, and the addresses its host resolves to (host outbound.rs, host/outgoing.rs)",
    seeds: outbound_seeds,
    dictionary: &[b"https://", b"http://", b"[", b"]", b":", b"::1", b"127.0.0.1", b"localhost", b"@", b"/", b","],
    run: outbound,
};

fn outbound_seeds() -> Vec<Vec<u8>> {
    let v4 = [93, 184, 216, 34, 127, 0, 0, 1, 169, 254, 169, 254];
    let v6: Vec<u8> = "::1".parse::<std::net::Ipv6Addr>().expect("an address").octets().to_vec();
    [
        ("https://api.example.com,http://127.0.0.1:9000", "https", "api.example.com", &v4[..]),
        ("http://[::1]:80/", "http", "[::1]:80", &v6[..]),
        ("HTTPS://Localhost", "https", "localhost:443", &v4[4..8]),
    ]
    .iter()
    .map(|(list, scheme, authority, ips)| join(&[list.as_bytes(), scheme.as_bytes(), authority.as_bytes(), ips]))
    .collect()
}

/// Addresses from bytes, alternately 4 (IPv4) and 16 (IPv6), 64 at most (a name's
/// answer holds a few).
fn addresses(mut bytes: &[u8]) -> Vec<IpAddr> {
    let mut out = Vec::new();
    while !bytes.is_empty() && out.len() < 64 {
        let n = if out.len() % 2 == 0 { 4 } else { 16 };
        let mut octets = [0u8; 16];
        let take = n.min(bytes.len());
        octets[..take].copy_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        out.push(match n {
            4 => IpAddr::from([octets[0], octets[1], octets[2], octets[3]]),
            _ => IpAddr::from(octets),
        });
    }
    out
}

fn outbound(data: &[u8]) -> bool {
    let [list, scheme, authority, ips] = fields(data);
    let Ok(allowed) = Outbound::parse(&text(list)) else { return false };
    for d in &allowed.allowed {
        assert_eq!(Destination::parse(&d.to_string()).as_ref(), Ok(d), "a destination written from what it parsed");
        assert_ne!(d.port, 0, "{d:?}");
    }
    let scheme = text(scheme);
    let (name, port) = host::outgoing_origin(&scheme, &text(authority));
    if let Ok(to) = allowed.check(&scheme, &name, port) {
        assert!(allowed.allowed.contains(to), "checked against a destination not on the list: {to:?}");
        assert_eq!(to.port, port, "{to:?}");
        let resolved = addresses(ips);
        if let Ok(reachable) = Outbound::reachable(to, &resolved) {
            for ip in &reachable {
                assert!(resolved.contains(ip), "{ip} reached but not resolved");
                let named = to.host == "localhost" || to.host.parse::<IpAddr>().is_ok();
                assert!(named || !internal_by_documentation(*ip), "{to:?} reaches internal {ip}");
            }
        }
    }
    true
}

/// Whether an address is one `outbound.rs` documents as never reached unless the
/// destination names it: loopback, private, link-local, unspecified (a subset of what
/// it refuses, written again here from its documentation).
fn internal_by_documentation(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local() || v4.is_unspecified(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

pub const SECRETS: Target = Target {
    name: "secrets",
    what: "a function's secrets as manifests carry them (hex of a nonce and a ChaCha20-Poly1305 sealing) opened \
           for a guest: only what was sealed for that function and key opens (host settings.rs)",
    seeds: secrets_seeds,
    dictionary: &[b"0", b"f", b"F", b"00", b"ff"],
    run: secrets,
};

/// Function, key, value and their sealing, made once per process. The nonce is random,
/// so this target's seeds differ from run to run: a failure replays from its printed
/// input (the key is fixed), not from its seed.
fn sealed() -> &'static [(String, String, String, String)] {
    static SEALED: OnceLock<Vec<(String, String, String, String)>> = OnceLock::new();
    SEALED.get_or_init(|| {
        [("f", "API_TOKEN", "s3cret"), ("f", "k", ""), ("g", "DB.url-1", "postgres://u:p@h/d")]
            .iter()
            .map(|&(f, k, v)| {
                let sealing = host::seal_secret(f, k, v).expect("a secret seals");
                assert_eq!(host::open_secret(f, k, &sealing).as_deref(), Ok(v), "a sealed secret opens");
                (f.to_string(), k.to_string(), v.to_string(), sealing)
            })
            .collect()
    })
}

fn secrets_seeds() -> Vec<Vec<u8>> {
    sealed().iter().map(|(f, k, _, s)| join(&[f.as_bytes(), k.as_bytes(), s.as_bytes()])).collect()
}

fn secrets(data: &[u8]) -> bool {
    let [function, key, sealing] = fields(data).map(text);
    match host::open_secret(&function, &key, &sealing) {
        Ok(value) => {
            // Only the bytes sealed for this function and key open, however their hex is
            // spelled (`settings.rs` reads each pair with `u8::from_str_radix`, which
            // takes either case, and a `+` sign).
            let bytes = spelled(&sealing);
            let found = sealed().iter().find(|(f, k, _, s)| *f == function && *k == key && spelled(s) == bytes);
            assert!(found.is_some_and(|(_, _, v, _)| *v == value), "{function:?} {key:?} opened {sealing:?}");
            true
        }
        Err(_) => false,
    }
}

/// The bytes hex text spells, pair by pair as `u8::from_str_radix` reads them.
fn spelled(hex: &str) -> Option<Vec<u8>> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect()
}

pub const GUEST_ARGS: Target = Target {
    name: "guest_args",
    what: "what a guest passes at the WIT boundary and the core checks: state tables, keys and values, log tags, \
           books, object/queue/lock names, object paths, invocation keys and IDs, protocols, schedule names; \
           each against the rule its documentation states",
    seeds: guest_args_seeds,
    dictionary: &[b"a", b"-", b"_", b"/", b"~0", b"~1", b"~", b"read-optimized", b"write-optimized", b"auto"],
    run: guest_args,
};

const GUEST_CHECKS: u8 = 10;

fn guest_args_seeds() -> Vec<Vec<u8>> {
    let mut seeds = vec![
        picked(0, b"accounts_v2-1"),
        picked(1, &join(&[b"t", b"key", b"value"])),
        picked(2, &[3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80]),
        picked(3, &(1u64 << 63 | 5).to_le_bytes()),
        picked(4, "a name of any characters: é".as_bytes()),
        picked(5, b"/a/0/b~1c/~0"),
        picked(6, b"k"),
        picked(7, b"00ff"),
        picked(8, b"write-optimized"),
        picked(9, b"nightly-report_v2.1"),
    ];
    seeds.push(picked(1, &join(&[b"t", b"", b""])));
    seeds
}

fn guest_args(data: &[u8]) -> bool {
    let Some((which, bytes)) = pick(data, GUEST_CHECKS) else { return false };
    let s = text(bytes);
    match which {
        0 => {
            let rule = (1..=64).contains(&s.len())
                && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"-_".contains(&b));
            agrees(tally_durable::check_table(&s).is_ok(), rule, &s)
        }
        1 => {
            let [table, key, value] = fields(bytes);
            let value = (!value.is_empty()).then_some(value);
            let ok = durable::check_object(&text(table), key, value).is_ok();
            let rule = tally_durable::check_table(&text(table)).is_ok()
                && !key.is_empty()
                && key.len() <= tally_durable::KEY_MAX
                && value.is_none_or(|v| v.len() <= tally_durable::VALUE_MAX);
            agrees(ok, rule, &s)
        }
        2 => {
            let tags: Vec<u64> = bytes.chunks(8).map(|c| take_u64(c).0).collect();
            agrees(durable::check_guest_tags(&tags).is_ok(), tags.iter().all(|t| t >> 63 == 0), &s)
        }
        3 => {
            let (book, _) = take_u64(bytes);
            agrees(durable::check_book(book).is_ok(), book >> 63 == 0, &s)
        }
        4 => {
            let names = [
                (objects::check_name(&s).is_ok(), objects::OBJECT_NAME_MAX),
                (tally_durable::queues::check_name(&s).is_ok(), tally_durable::queues::QUEUE_NAME_MAX),
                (tally_durable::locks::check_name(&s).is_ok(), tally_durable::locks::LOCK_NAME_MAX),
            ];
            names.iter().all(|&(ok, max)| agrees(ok, (1..=max).contains(&s.len()), &s))
        }
        5 => objects::parse_path(&s).is_ok_and(|tokens| {
            // A pointer written from its tokens reads as them.
            let written: String = tokens.iter().map(|t| format!("/{}", t.replace('~', "~0").replace('/', "~1"))).collect();
            assert_eq!(objects::parse_path(&written).as_ref().ok(), Some(&tokens), "{s:?} as {written:?}");
            true
        }),
        6 => agrees(InvocationKey::new(s.clone(), true).is_ok(), (1..=tally_durable::INVOCATION_KEY_MAX).contains(&s.len()), &s),
        7 => InstanceId::parse_generated(&s).is_ok_and(|id| {
            assert!(id.is_root() && id.to_string() == s, "{s:?} read as {id}");
            assert!((1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
            true
        }),
        8 => s.parse::<Protocol>().is_ok_and(|p| {
            assert_eq!(p.name(), s, "a protocol named otherwise");
            true
        }),
        _ => {
            let rule = (1..=128).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            agrees(tally_durable::check_schedule_name(&s).is_ok(), rule, &s)
        }
    }
}

/// A check's verdict is the rule's; returns it.
fn agrees(ok: bool, rule: bool, input: &str) -> bool {
    assert_eq!(ok, rule, "the check says {ok}, its rule {rule}, for {input:?}");
    ok
}

pub const OBJECTS: Target = Target {
    name: "objects",
    what: "a guest's durable-object operations (set, incr, push, remove at a JSON pointer, with JSON text) checked \
           and applied to an object: a refused operation leaves the object as it was (durable objects.rs)",
    seeds: objects_seeds,
    dictionary: &[b"/", b"-", b"0", b"~1", b"null", b"[", b"]", b"{", b"}", b"\"", b":", b",", b"1e308", b"-0"],
    run: objects,
};

fn objects_seeds() -> Vec<Vec<u8>> {
    let object = br#"{"a":{"b":[1,2,{"c":null}]},"n":9007199254740993,"s":"x","f":1.5}"#;
    [
        (0u8, "/a/b/2/c", "[true]"),
        (1, "/n", "9223372036854775807"),
        (1, "/f", "-2"),
        (2, "/a/b", r#"{"d":"e"}"#),
        (2, "/a/b/-", "3"),
        (3, "/a/b/0", ""),
        (0, "/x/y/z", "1"),
        (0, "", "[]"),
    ]
    .iter()
    .map(|(kind, path, arg)| picked(*kind, &join(&[path.as_bytes(), arg.as_bytes(), object])))
    .collect()
}

fn objects(data: &[u8]) -> bool {
    let Some((kind, bytes)) = pick(data, 4) else { return false };
    let [path, arg, object] = fields(bytes);
    let Ok(mut value) = serde_json::from_slice::<Value>(object) else { return false };
    let (path, arg) = (text(path), text(arg));
    let op = match kind {
        0 => ObjOp::Set { path, json: arg },
        1 => ObjOp::Incr { path, by: arg.trim().parse().unwrap_or(i64::MIN) },
        2 => ObjOp::Push { path, json: arg },
        _ => ObjOp::Remove { path },
    };
    let checked = op.check();
    let before = value.clone();
    match objects::apply(&mut value, &op) {
        Ok(()) => {
            // What applies passes the check, but for the check's bound on JSON text.
            let json_len = match &op {
                ObjOp::Set { json, .. } | ObjOp::Push { json, .. } => json.len(),
                _ => 0,
            };
            assert!(checked.is_ok() || json_len > tally_durable::VALUE_MAX, "{op:?} applied but its check says {checked:?}");
            let len = serde_json::to_string(&before).expect("JSON").len();
            let mut folding = objects::Folding::new(before, len);
            if folding.apply(&op).is_ok() {
                assert_eq!(folding.value, value, "{op:?} folded otherwise than applied");
                let len = serde_json::to_string(&folding.value).expect("JSON").len();
                assert!(len <= objects::OBJECT_MAX, "{op:?} folded to {len} bytes");
            }
            true
        }
        Err(why) => {
            assert_eq!(value, before, "{op:?} failed ({why}) but changed the object");
            false
        }
    }
}
