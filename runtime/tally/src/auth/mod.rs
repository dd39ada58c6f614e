//! Bearer tokens: the model here, their records in `store.rs`, the check of every
//! request in `guard.rs`.
//!
//! A token is `tally_<id>_<secret>`: `id` (16 hex digits) names it in listings and in
//! the record of who did what, `secret` (64 hex digits, 256 random bits) proves it. Only
//! SHA-256 of the secret is kept, so a copy of the records gives no token; a presented
//! secret is compared with it in constant time.
//!
//! A token has one role and an optional scope:
//!
//! | role     | may                                                                  |
//! |----------|----------------------------------------------------------------------|
//! | `read`   | read: functions, invocations, records, tables, objects, queues, locks, logs, metrics |
//! | `invoke` | `read`, and invoke, cancel, complete promises                        |
//! | `deploy` | `invoke`, and deploy, delete, configure functions, put schedules      |
//! | `admin`  | everything, tokens included                                          |
//!
//! A scope narrows what the role reaches: function names (exact, or a prefix ending in
//! `*`), books, or one promise (a completion link handed to a third party). A token
//! past its expiry is refused as a revoked one is.

use std::collections::BTreeSet;

pub mod guard;
pub mod store;

pub use store::{Grants, Listed, TokenOp, Tokens};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// What a token's holder may do, each role including the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Read,
    Invoke,
    Deploy,
    Admin,
}

impl Role {
    pub fn parse(text: &str) -> Result<Role, String> {
        match text {
            "read" => Ok(Role::Read),
            "invoke" => Ok(Role::Invoke),
            "deploy" => Ok(Role::Deploy),
            "admin" => Ok(Role::Admin),
            other => Err(format!("unknown role {other:?}: read, invoke, deploy or admin")),
        }
    }
}

/// What a request asks to do: the least role it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Read,
    Invoke,
    Deploy,
    Admin,
}

impl Action {
    fn needs(self) -> Role {
        match self {
            Action::Read => Role::Read,
            Action::Invoke => Role::Invoke,
            Action::Deploy => Role::Deploy,
            Action::Admin => Role::Admin,
        }
    }
}

/// What a request reaches, as far as a scope can tell.
#[derive(Clone, Copy, Debug, Default)]
pub struct Target<'a> {
    pub function: Option<&'a str>,
    pub book: Option<u64>,
    pub promise: Option<&'a str>,
}

/// What a token reaches; empty lists reach everything of their kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scope {
    /// Function names, or prefixes ending in `*`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub books: BTreeSet<u64>,
    /// One promise: the token completes it and does nothing else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promise: Option<String>,
}

impl Scope {
    fn reaches(&self, action: Action, target: &Target) -> bool {
        let book_ok = self.books.is_empty() || target.book.is_some_and(|b| self.books.contains(&b));
        if let Some(promise) = &self.promise {
            return action == Action::Invoke && target.promise == Some(promise.as_str()) && target.function.is_none() && book_ok;
        }
        let function_ok = self.functions.is_empty()
            || target.function.is_some_and(|f| {
                self.functions.iter().any(|s| match s.strip_suffix('*') {
                    Some(prefix) => f.starts_with(prefix),
                    None => s == f,
                })
            });
        function_ok && book_ok
    }
}

/// A token as the platform keeps it: no secret, its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    pub id: String,
    /// Hex of SHA-256 of the secret.
    pub secret_sha256: String,
    pub role: Role,
    #[serde(default)]
    pub scope: Scope,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

/// Why a request is refused: 401 (no valid token) or 403 (not this).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Denied {
    Unauthenticated(&'static str),
    Forbidden,
}

impl std::fmt::Display for Denied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Denied::Unauthenticated(why) => write!(f, "no valid token: {why}"),
            Denied::Forbidden => f.write_str("the token's role or scope does not allow this"),
        }
    }
}

/// A token as presented: its ID and secret, or why it is not one.
pub fn parse(text: &str) -> Result<(&str, &str), Denied> {
    let malformed = Denied::Unauthenticated("not a Tally token (tally_<id>_<secret>)");
    let rest = text.strip_prefix("tally_").ok_or(malformed.clone())?;
    let (id, secret) = rest.split_once('_').ok_or(malformed.clone())?;
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !hex(id, 16) || !hex(secret, 64) {
        return Err(malformed);
    }
    Ok((id, secret))
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
pub(crate) fn equal_in_constant_time(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

impl Grant {
    /// A new token of `role` over `scope`: the grant to keep, and the token to hand out
    /// once (`random` gives 8 + 32 bytes).
    pub fn mint(role: Role, scope: Scope, expires_at_ms: Option<u64>, random: [u8; 40]) -> (Grant, String) {
        let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let (id, secret) = (hex(&random[..8]), hex(&random[8..]));
        let token = format!("tally_{id}_{secret}");
        (Grant { id, secret_sha256: sha256_hex(&secret), role, scope, expires_at_ms }, token)
    }

    /// The admin grant of an existing token (a bootstrap token file's).
    pub fn admin_of(token: &str) -> Result<Grant, Denied> {
        let (id, secret) = parse(token)?;
        Ok(Grant {
            id: id.to_string(),
            secret_sha256: sha256_hex(secret),
            role: Role::Admin,
            scope: Scope::default(),
            expires_at_ms: None,
        })
    }

    /// Whether `secret` is this grant's, compared in constant time.
    pub fn verify(&self, secret: &str) -> bool {
        equal_in_constant_time(sha256_hex(secret).as_bytes(), self.secret_sha256.as_bytes())
    }

    /// Whether the presented `secret` is this grant's and lets its holder do `action` on
    /// `target` at `now_ms`.
    pub fn check(&self, secret: &str, action: Action, target: &Target, now_ms: u64) -> Result<(), Denied> {
        if !self.verify(secret) {
            return Err(Denied::Unauthenticated("unknown token"));
        }
        self.allows(action, target, now_ms)
    }

    /// Whether the holder of this grant (its secret verified) may do `action` on
    /// `target` at `now_ms`.
    pub fn allows(&self, action: Action, target: &Target, now_ms: u64) -> Result<(), Denied> {
        if self.expires_at_ms.is_some_and(|t| now_ms >= t) {
            return Err(Denied::Unauthenticated("the token expired"));
        }
        if self.role < action.needs() || !self.scope.reaches(action, target) {
            return Err(Denied::Forbidden);
        }
        Ok(())
    }
}

/// Reads the bootstrap admin token at `path`, making one (mode 0600) if it is missing
/// and `make`, and grants it in the log unless it was granted before (a revoked one
/// stays revoked: delete the file for a new one).
pub async fn bootstrap(tokens: &Tokens, path: &std::path::Path, make: bool) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let token = match std::fs::read_to_string(path) {
        Ok(text) => text.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && make => {
            let mut random = [0u8; 40];
            getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
            let (_, token) = Grant::mint(Role::Admin, Scope::default(), None, random);
            write_secret(path, &token)?;
            token
        }
        Err(e) => return Err(e).with_context(|| format!("reading the admin token {}", path.display())),
    };
    let grant = Grant::admin_of(&token).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if tokens.list().await?.iter().any(|l| l.grant.id == grant.id && l.revoked_by.is_some()) {
        tracing::warn!("the admin token in {} was revoked; delete the file for a new one", path.display());
    }
    tokens.bootstrap(&token, grant).await?;
    Ok(token)
}

/// Writes `text` to a new file at `path` that only its owner may read (0600), in a
/// directory made if missing.
pub fn write_secret(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
    f.write_all(format!("{text}\n").as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mint(role: Role, scope: Scope, expires: Option<u64>) -> (Grant, String) {
        Grant::mint(role, scope, expires, [7; 40])
    }

    fn check(grant: &Grant, token: &str, action: Action, target: Target, now: u64) -> Result<(), Denied> {
        let (id, secret) = parse(token)?;
        assert_eq!(id, grant.id);
        grant.check(secret, action, &target, now)
    }

    #[test]
    fn tokens_are_parsed_strictly_and_kept_only_as_hashes() {
        let (grant, token) = mint(Role::Read, Scope::default(), None);
        assert!(token.starts_with("tally_0707070707070707_"));
        assert!(!serde_json::to_string(&grant).unwrap().contains(&token[23..]), "the secret is not kept");
        for bad in ["", "tally_", "bearer x", &token[..token.len() - 1], &token.to_uppercase(), &format!("{token}0")] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let (_, secret) = parse(&token).unwrap();
        let mut wrong = secret.to_string();
        wrong.replace_range(..1, "1");
        assert_eq!(grant.check(&wrong, Action::Read, &Target::default(), 0), Err(Denied::Unauthenticated("unknown token")));
    }

    #[test]
    fn roles_include_the_ones_below_and_expiry_is_a_refusal() {
        let t = Target::default();
        let (read, token) = mint(Role::Read, Scope::default(), Some(100));
        assert_eq!(check(&read, &token, Action::Read, t, 99), Ok(()));
        assert_eq!(check(&read, &token, Action::Invoke, t, 99), Err(Denied::Forbidden));
        assert!(matches!(check(&read, &token, Action::Read, t, 100), Err(Denied::Unauthenticated(_))));
        let (deploy, token) = mint(Role::Deploy, Scope::default(), None);
        for action in [Action::Read, Action::Invoke, Action::Deploy] {
            assert_eq!(check(&deploy, &token, action, t, 0), Ok(()), "{action:?}");
        }
        assert_eq!(check(&deploy, &token, Action::Admin, t, 0), Err(Denied::Forbidden));
        assert_eq!(Role::parse("admin"), Ok(Role::Admin));
        assert!(Role::parse("root").is_err());
    }

    #[test]
    fn scopes_narrow_functions_books_and_promises() {
        let scope = Scope { functions: vec!["shop-*".into(), "billing".into()], books: [3].into(), promise: None };
        let (grant, token) = mint(Role::Invoke, scope, None);
        let at = |function: Option<&'static str>, book: Option<u64>| Target { function, book, promise: None };
        assert_eq!(check(&grant, &token, Action::Invoke, at(Some("shop-cart"), Some(3)), 0), Ok(()));
        assert_eq!(check(&grant, &token, Action::Invoke, at(Some("billing"), Some(3)), 0), Ok(()));
        assert_eq!(check(&grant, &token, Action::Invoke, at(Some("billing2"), Some(3)), 0), Err(Denied::Forbidden));
        assert_eq!(check(&grant, &token, Action::Invoke, at(Some("shop-cart"), Some(4)), 0), Err(Denied::Forbidden));
        assert_eq!(
            check(&grant, &token, Action::Read, at(None, Some(3)), 0),
            Err(Denied::Forbidden),
            "a scoped read names its function"
        );

        let link = Scope { promise: Some("p-17".into()), ..Scope::default() };
        let (grant, token) = mint(Role::Invoke, link, None);
        let promise = |p| Target { promise: Some(p), ..Target::default() };
        assert_eq!(check(&grant, &token, Action::Invoke, promise("p-17"), 0), Ok(()));
        assert_eq!(check(&grant, &token, Action::Invoke, promise("p-18"), 0), Err(Denied::Forbidden));
        assert_eq!(check(&grant, &token, Action::Read, promise("p-17"), 0), Err(Denied::Forbidden));
        assert_eq!(check(&grant, &token, Action::Invoke, at(Some("shop-cart"), None), 0), Err(Denied::Forbidden));
    }
}
