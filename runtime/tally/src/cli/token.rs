//! `tally token create|list|revoke`, `tally audit`, and the token every request of the
//! CLI carries.
//!
//! The token is the first of: `TALLY_TOKEN`; the file `TALLY_TOKEN_FILE` names; the
//! file saved for the gateway's address, `<config>/tokens/<host:port>`, which
//! `tally dev` and `tally cluster up` write (`<config>` is `TALLY_CONFIG_DIR`, else
//! `$XDG_CONFIG_HOME/tally`, else `~/.config/tally`). Without one the request goes
//! without, which `tally dev` on loopback takes.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::output::{text, Table};
use crate::{agent, finish, get_json, show, url_escape, Json, Remote};

/// Where the CLI's own files are.
pub fn config_dir() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    var("TALLY_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("tally")))
        .or_else(|| var("HOME").map(|d| d.join(".config").join("tally")))
}

/// The file of the token saved for the gateway at `authority` (`host:port`).
pub fn saved(authority: &str) -> Option<PathBuf> {
    let safe = authority.bytes().all(|b| b.is_ascii_alphanumeric() || b".-:[]".contains(&b)) && !authority.starts_with('.');
    safe.then(|| config_dir().map(|d| d.join("tokens").join(authority)))?
}

/// The file of the CA saved for the gateway at `authority` (`tally cluster up`).
pub fn saved_ca(authority: &str) -> Option<PathBuf> {
    let file = saved(authority)?;
    Some(file.parent()?.parent()?.join("ca").join(format!("{authority}.pem")))
}

/// What an https gateway at `url` must show: a certificate of the CA in the file
/// `TALLY_CA` names, else of the CA saved for its address, else of the web's roots.
pub fn tls_for(url: &str) -> anyhow::Result<ureq::tls::TlsConfig> {
    use anyhow::Context as _;
    let authority = url.split_once("://").map_or(url, |(_, rest)| rest).split('/').next().unwrap_or("");
    let file = std::env::var_os("TALLY_CA")
        .filter(|f| !f.is_empty())
        .map(PathBuf::from)
        .or_else(|| saved_ca(authority).filter(|f| f.exists()));
    let pem = file.as_ref().map(|f| std::fs::read(f).with_context(|| format!("reading the CA {}", f.display()))).transpose()?;
    tally::tls::ureq_tls(pem.as_deref())
}

/// The token for a request to `authority`, if there is one.
pub fn for_authority(authority: &str) -> Option<String> {
    if let Some(token) = std::env::var("TALLY_TOKEN").ok().filter(|t| !t.trim().is_empty()) {
        return Some(token.trim().to_string());
    }
    let file = std::env::var_os("TALLY_TOKEN_FILE").filter(|f| !f.is_empty()).map(PathBuf::from).or_else(|| saved(authority))?;
    let token = std::fs::read_to_string(file).ok()?;
    Some(token.trim().to_string()).filter(|t| !t.is_empty())
}

/// ureq middleware: adds the token of the request's gateway (see the module's doc).
pub fn authorize(
    mut request: ureq::http::Request<ureq::SendBody>,
    next: ureq::middleware::MiddlewareNext,
) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
    let authority = request.uri().authority().map(|a| a.as_str().to_string());
    if !request.headers().contains_key("authorization") {
        if let Some(token) = authority.as_deref().and_then(for_authority) {
            if let Ok(value) = ureq::http::HeaderValue::from_str(&format!("Bearer {token}")) {
                request.headers_mut().insert("authorization", value);
            }
        }
    }
    next.handle(request)
}

#[derive(Subcommand)]
pub enum TokenVerb {
    /// Make a token and print it (it is shown this once; only its hash is kept).
    Create(CreateArgs),
    /// List the tokens (IDs, roles, scopes, who made and revoked them; never secrets).
    List(ListArgs),
    /// Revoke a token by ID: every node refuses it from now on.
    Revoke(RevokeArgs),
}

#[derive(Args)]
pub struct CreateArgs {
    /// read, invoke, deploy or admin (each allows what the ones before it do).
    #[arg(long)]
    role: String,
    /// What the token is for (shown in listings).
    #[arg(long, default_value = "")]
    name: String,
    /// Only these functions: a name, or a prefix ending in * (repeatable).
    #[arg(long = "function", value_name = "NAME|PREFIX*")]
    functions: Vec<String>,
    /// Only these books (repeatable).
    #[arg(long = "book")]
    books: Vec<u64>,
    /// Refused after this long: milliseconds, or a number with ms, s, m, h or d.
    #[arg(long)]
    expires: Option<String>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
pub struct ListArgs {
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
pub struct RevokeArgs {
    id: String,
    #[command(flatten)]
    remote: Remote,
}

pub fn run(verb: TokenVerb) -> anyhow::Result<()> {
    match verb {
        TokenVerb::Create(a) => {
            let expires_in_ms = a.expires.as_deref().map(super::duration_ms).transpose()?;
            let body = json!({
                "role": a.role, "name": a.name, "functions": a.functions, "books": a.books, "expires_in_ms": expires_in_ms,
            });
            let response = agent(&a.remote.url)
                .post(format!("{}/v1/tokens", a.remote.url))
                .header("content-type", "application/json")
                .send(body.to_string().as_bytes())?;
            show(&finish(response)?, &a.json, |v| format!("{}\n", text(&v["token"])))
        }
        TokenVerb::List(a) => get_json(&a.remote, "/v1/tokens", &a.json, listing),
        TokenVerb::Revoke(a) => {
            finish(agent(&a.remote.url).delete(format!("{}/v1/tokens/{}", a.remote.url, url_escape(&a.id))).call()?)?;
            println!("revoked token {}", a.id);
            Ok(())
        }
    }
}

/// `tally audit`.
pub fn audit_of(a: ListArgs) -> anyhow::Result<()> {
    get_json(&a.remote, "/v1/audit", &a.json, audit)
}

/// A time in milliseconds since the epoch, as UTC (`-` for none).
fn time(ms: &Value) -> String {
    match ms.as_u64() {
        Some(ms) if ms > 0 => super::output::utc(ms),
        _ => "-".into(),
    }
}

fn scope(g: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(f) = g["scope"]["functions"].as_array().filter(|f| !f.is_empty()) {
        parts.push(format!("functions {}", f.iter().map(text).collect::<Vec<_>>().join(",")));
    }
    if let Some(b) = g["scope"]["books"].as_array().filter(|b| !b.is_empty()) {
        parts.push(format!("books {}", b.iter().map(text).collect::<Vec<_>>().join(",")));
    }
    if let Some(p) = g["scope"]["promise"].as_str() {
        parts.push(format!("promise {p}"));
    }
    if parts.is_empty() {
        "all".into()
    } else {
        parts.join("; ")
    }
}

pub fn listing(body: &Value) -> String {
    let mut t = Table::new(&["ID", "ROLE", "SCOPE", "EXPIRES", "CREATED", "BY", "REVOKED", "NAME"]);
    for g in body["tokens"].as_array().into_iter().flatten() {
        let revoked = match g["revoked_by"].as_str() {
            Some(by) => format!("{} by {by}", time(&g["revoked_at_ms"])),
            None => "-".into(),
        };
        t.row(vec![
            text(&g["id"]),
            text(&g["role"]),
            scope(g),
            time(&g["expires_at_ms"]),
            time(&g["created_at_ms"]),
            text(&g["created_by"]),
            revoked,
            text(&g["name"]),
        ]);
    }
    t.render()
}

/// `GET /v1/audit`: one row per change, in log order.
pub fn audit(body: &Value) -> String {
    let mut t = Table::new(&["SEQNUM", "TIME", "BY", "CHANGE", "OF"]);
    for c in body["changes"].as_array().into_iter().flatten() {
        let mut of = text(if c["function"].is_null() { &c["token"] } else { &c["function"] });
        if let Some(v) = c["version"].as_u64() {
            of.push_str(&format!(" v{v}"));
        }
        if let Some(keys) = c["settings"].as_array().filter(|k| !k.is_empty()) {
            of.push_str(&format!(" ({})", keys.iter().map(text).collect::<Vec<_>>().join(", ")));
        }
        let by = if c["by"].is_null() { "-".to_string() } else { text(&c["by"]) };
        t.row(vec![text(&c["seqnum"]), time(&c["at_ms"]), by, text(&c["op"]), of]);
    }
    t.render()
}
