//! `tally config ...`: a function's settings over `/v1/functions/{name}/config`. A value
//! given as `KEY` alone is read from stdin (so that a secret stays out of the shell's
//! history); listings never show a secret's value.

use std::collections::BTreeMap;
use std::io::Read as _;

use anyhow::{bail, Context as _};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use super::output::{text, Table};
use crate::{agent, finish, get_json, show, url_escape, Json, Remote};

#[derive(Subcommand)]
pub enum ConfigVerb {
    /// Set settings of FUNCTION: KEY=VALUE, or KEY alone to read its value from stdin.
    /// The next invocation reads them; no redeploy.
    Set(SetArgs),
    /// Remove settings of FUNCTION.
    Unset(UnsetArgs),
    /// List FUNCTION's settings (a secret's value is never shown).
    List(ListArgs),
}

#[derive(Args)]
pub struct SetArgs {
    function: String,
    #[arg(required = true, value_name = "KEY[=VALUE]")]
    settings: Vec<String>,
    /// They are secrets: sealed at rest, never listed or logged.
    #[arg(long)]
    secret: bool,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
pub struct UnsetArgs {
    function: String,
    #[arg(required = true, value_name = "KEY")]
    keys: Vec<String>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
pub struct ListArgs {
    function: String,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

pub fn run(verb: ConfigVerb) -> anyhow::Result<()> {
    match verb {
        ConfigVerb::Set(a) => {
            let set = settings(&a.settings, a.secret)?;
            change(&a.remote, &a.function, json!({ "set": set }), &a.json)
        }
        ConfigVerb::Unset(a) => change(&a.remote, &a.function, json!({ "unset": a.keys }), &a.json),
        ConfigVerb::List(a) => get_json(&a.remote, &path(&a.function), &a.json, listing),
    }
}

fn path(function: &str) -> String {
    format!("/v1/functions/{}/config", url_escape(function))
}

fn change(remote: &Remote, function: &str, body: Value, json: &Json) -> anyhow::Result<()> {
    let response = agent(&remote.url)
        .patch(format!("{}{}", remote.url, path(function)))
        .header("content-type", "application/json")
        .send(body.to_string().as_bytes())?;
    show(&finish(response)?, json, listing)
}

/// `KEY=VALUE` (or `KEY`, its value read from stdin) as the API's settings.
pub fn settings(items: &[String], secret: bool) -> anyhow::Result<BTreeMap<String, Value>> {
    let mut set = BTreeMap::new();
    for item in items {
        let (key, value) = match item.split_once('=') {
            Some((key, value)) => (key.to_string(), value.to_string()),
            None => {
                let mut value = String::new();
                std::io::stdin().read_to_string(&mut value).context("reading a value from stdin")?;
                (item.clone(), value.strip_suffix('\n').unwrap_or(&value).to_string())
            }
        };
        if key.is_empty() {
            bail!("{item:?} has no key: use KEY=VALUE");
        }
        set.insert(key, json!({ "value": value, "secret": secret }));
    }
    Ok(set)
}

/// A listing as a table: a secret's value shows as `(secret)`.
pub fn listing(body: &Value) -> String {
    let mut t = Table::new(&["KEY", "VALUE"]);
    for s in body["settings"].as_array().into_iter().flatten() {
        let value = if s["secret"] == true { "(secret)".to_string() } else { text(&s["value"]) };
        t.row(vec![text(&s["key"]), value]);
    }
    format!("{}version {}\n", t.render(), body["version"])
}
