//! Tokens kept in the log, so that every node agrees on them.
//!
//! ```text
//!   PLATFORM_BOOK, tag TOKENS
//!     {"op":"grant", "grant": Grant, "name", "by", "at_ms"}    a new token (its hash)
//!     {"op":"revoke", "id", "by", "at_ms"}                     a token refused from now on
//! ```
//!
//! [`Grants`] is what the records say, applied in log order: a grant of an ID seen
//! before is ignored (so a bootstrap grant appended by several nodes at once, or a
//! revoked token granted again, changes nothing), a revocation is for ever. Operations
//! of a newer node are skipped.
//!
//! [`Tokens`] reads the records into [`Grants`] before every check, so a revocation is
//! refused by a node as soon as its index has the record: on a node that indexes the
//! platform book's log the engine answers the read in place (no wait, a lookup under
//! its lock), elsewhere the reads wait for the engine one at a time.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Mutex, RwLock};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use tally_logsvc::{Context, LogClient, SeqNum};

use super::{parse, Action, Denied, Grant, Target};

/// A token record.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum TokenOp {
    Grant {
        grant: Grant,
        /// What the token is for, as its creator said.
        #[serde(default)]
        name: String,
        /// The ID of the token that created it (`bootstrap` for the first admin token).
        by: String,
        at_ms: u64,
    },
    Revoke {
        id: String,
        by: String,
        at_ms: u64,
    },
    /// An operation of a newer node.
    #[serde(other)]
    Unknown,
}

/// A token as listed: its grant (no secret), who made it and, once revoked, who did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Listed {
    #[serde(flatten)]
    pub grant: Grant,
    pub name: String,
    pub created_by: String,
    pub created_at_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at_ms: Option<u64>,
    /// Where its grant is in the platform book.
    pub seqnum: u64,
}

/// One change of the tokens, for the audit listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    pub seqnum: u64,
    pub at_ms: u64,
    pub by: String,
    /// `token.grant` or `token.revoke`.
    pub op: &'static str,
    pub token: String,
}

/// What the token records say, applied in log order.
#[derive(Default)]
pub struct Grants {
    by_id: BTreeMap<String, Listed>,
    changes: Vec<Change>,
}

impl Grants {
    pub fn apply(&mut self, seqnum: u64, op: TokenOp) {
        match op {
            TokenOp::Grant { grant, name, by, at_ms } => {
                if self.by_id.contains_key(&grant.id) {
                    return;
                }
                let token = grant.id.clone();
                self.changes.push(Change { seqnum, at_ms, by: by.clone(), op: "token.grant", token: token.clone() });
                let listed =
                    Listed { grant, name, created_by: by, created_at_ms: at_ms, revoked_by: None, revoked_at_ms: None, seqnum };
                self.by_id.insert(token, listed);
            }
            TokenOp::Revoke { id, by, at_ms } => {
                let Some(listed) = self.by_id.get_mut(&id).filter(|l| l.revoked_by.is_none()) else { return };
                listed.revoked_by = Some(by.clone());
                listed.revoked_at_ms = Some(at_ms);
                self.changes.push(Change { seqnum, at_ms, by, op: "token.revoke", token: id });
            }
            TokenOp::Unknown => tracing::warn!(seqnum, "skipping a token operation of a newer node"),
        }
    }

    /// Checks a presented token (`tally_<id>_<secret>`) for `action` on `target`;
    /// `verified` says its secret matched its grant before (the hash is skipped).
    pub fn check(&self, token: &str, verified: bool, action: Action, target: &Target, now_ms: u64) -> Result<&Listed, Denied> {
        let (id, secret) = parse(token)?;
        let listed = self.by_id.get(id).ok_or(Denied::Unauthenticated("unknown token"))?;
        if !verified && !listed.grant.verify(secret) {
            return Err(Denied::Unauthenticated("unknown token"));
        }
        if listed.revoked_by.is_some() {
            return Err(Denied::Unauthenticated("the token was revoked"));
        }
        listed.grant.allows(action, target, now_ms)?;
        Ok(listed)
    }

    pub fn get(&self, id: &str) -> Option<&Listed> {
        self.by_id.get(id)
    }

    pub fn list(&self) -> Vec<Listed> {
        self.by_id.values().cloned().collect()
    }

    pub fn changes(&self) -> &[Change] {
        &self.changes
    }
}

struct Cursor {
    ctx: Context,
    next: SeqNum,
}

/// The tokens of the platform, read from the log.
pub struct Tokens {
    log: LogClient,
    /// Held only without awaiting: a read the engine answers in place.
    cursor: Mutex<Cursor>,
    /// Serializes reads that must wait for the engine.
    waiting: tokio::sync::Mutex<()>,
    grants: RwLock<Grants>,
    /// Tokens whose secret matched their grant: SHA-256 is skipped for them (about a
    /// microsecond of each request). Emptied when full; revocation and expiry are
    /// checked on every request regardless.
    verified: Mutex<HashSet<String>>,
}

/// Tokens [`Tokens::verified`] holds at most.
const VERIFIED_MAX: usize = 4096;

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Tokens {
    /// The tokens over the platform's log client, every record read.
    pub async fn start(log: LogClient) -> tally_logsvc::Result<Tokens> {
        let tokens = Tokens {
            log,
            cursor: Mutex::new(Cursor { ctx: Context::new(), next: SeqNum::MIN }),
            waiting: tokio::sync::Mutex::new(()),
            grants: RwLock::new(Grants::default()),
            verified: Mutex::new(HashSet::new()),
        };
        tokens.refresh().await?;
        Ok(tokens)
    }

    fn apply(&self, cursor: &mut Cursor, record: tally_logsvc::LogRecord) {
        cursor.next = SeqNum(record.seqnum.0 + 1);
        match serde_json::from_slice::<TokenOp>(&record.data) {
            Ok(op) => self.grants.write().expect("not poisoned").apply(record.seqnum.0, op),
            Err(e) => tracing::error!(seqnum = %record.seqnum, "skipping a malformed token record: {e}"),
        }
    }

    /// Reads every token record the node's index has now. On a node that indexes the
    /// platform book's log the engine answers in place, without a wait: every check
    /// reads, and no two checks wait for each other. Elsewhere reads wait for the
    /// engine, one at a time.
    pub async fn refresh(&self) -> tally_logsvc::Result<()> {
        if let Some(done) = self.refresh_in_place() {
            return done;
        }
        let _one = self.waiting.lock().await;
        loop {
            let (mut ctx, next) = {
                let c = self.cursor.lock().expect("not poisoned");
                (c.ctx.clone(), c.next)
            };
            let read = self.log.read_next(&mut ctx, tally_durable::PLATFORM_BOOK, tally_durable::TOKENS, next).await?;
            let mut c = self.cursor.lock().expect("not poisoned");
            c.ctx.merge(&ctx);
            match read {
                // Applied unless a read in place went past it meanwhile.
                Some(record) if c.next == next => self.apply(&mut c, record),
                Some(_) => {}
                None => return Ok(()),
            }
        }
    }

    /// [`Tokens::refresh`], having read at least as far as `seen`. A read that must wait
    /// for a position runs apart from the shared cursor's, so that a client's position
    /// the log never reaches holds up no one else's check.
    async fn refresh_to(&self, seen: &Context) -> tally_logsvc::Result<()> {
        let behind = !self.cursor.lock().expect("not poisoned").ctx.covers(seen);
        if behind {
            loop {
                let (mut ctx, next) = {
                    let c = self.cursor.lock().expect("not poisoned");
                    (c.ctx.clone(), c.next)
                };
                ctx.merge(seen);
                let read = self.log.read_next(&mut ctx, tally_durable::PLATFORM_BOOK, tally_durable::TOKENS, next).await?;
                let mut c = self.cursor.lock().expect("not poisoned");
                match read {
                    Some(record) if c.next == next => self.apply(&mut c, record),
                    Some(_) => {}
                    None => {
                        c.ctx.merge(&ctx);
                        break;
                    }
                }
            }
        }
        self.refresh().await
    }

    /// [`Tokens::refresh`] if the engine answers every read in place; `None` if one
    /// would wait.
    fn refresh_in_place(&self) -> Option<tally_logsvc::Result<()>> {
        use futures_util::FutureExt as _;
        let mut c = self.cursor.lock().expect("not poisoned");
        loop {
            let mut ctx = c.ctx.clone();
            let next = c.next;
            let read = self.log.read_next(&mut ctx, tally_durable::PLATFORM_BOOK, tally_durable::TOKENS, next).now_or_never()?;
            c.ctx.merge(&ctx);
            match read {
                Ok(Some(record)) => self.apply(&mut c, record),
                Ok(None) => return Some(Ok(())),
                Err(e) => return Some(Err(e)),
            }
        }
    }

    /// Checks `token` for `action` on `target` as of now: the token's ID and what it may
    /// do. A log that cannot be read is a refusal (503) rather than an answer from an old
    /// view.
    ///
    /// A client's position (`Tally-Position`, say the answer of a revocation through
    /// another node) makes the read reach at least that far first.
    pub async fn check(&self, token: &str, action: Action, target: &Target<'_>, seen: &Context) -> Result<Listed, Refused> {
        parse(token)?;
        self.refresh_to(seen).await.map_err(Refused::Log)?;
        let verified = self.verified.lock().expect("not poisoned").contains(token);
        let grants = self.grants.read().expect("not poisoned");
        let checked = grants.check(token, verified, action, target, now_ms());
        // A secret that matched, whatever the role or scope allowed.
        if !verified && !matches!(checked, Err(Denied::Unauthenticated("unknown token"))) {
            let mut v = self.verified.lock().expect("not poisoned");
            if v.len() >= VERIFIED_MAX {
                v.clear();
            }
            v.insert(token.to_string());
        }
        Ok(checked?.clone())
    }

    /// Appends `op` and reads it back: once this returns, this node refuses a revoked
    /// token, and every other node does as soon as its index has the record (or at once
    /// for a request that sends the returned position).
    pub async fn append(&self, op: &TokenOp) -> tally_logsvc::Result<Context> {
        let body = serde_json::to_vec(op).expect("token records serialize");
        let mut ctx = self.cursor.lock().expect("not poisoned").ctx.clone();
        self.log.append(&mut ctx, tally_durable::PLATFORM_BOOK, &[tally_durable::TOKENS], Bytes::from(body)).await?;
        self.cursor.lock().expect("not poisoned").ctx.merge(&ctx);
        self.refresh().await?;
        Ok(ctx)
    }

    /// A new token: its record appended, the token (shown once) returned, with the
    /// position a request sends for any node to know it at once.
    pub async fn create(
        &self,
        role: super::Role,
        scope: super::Scope,
        expires_at_ms: Option<u64>,
        name: String,
        by: &str,
    ) -> anyhow::Result<(Listed, String, Context)> {
        let mut random = [0u8; 40];
        getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no randomness for a token: {e}"))?;
        let (grant, token) = Grant::mint(role, scope, expires_at_ms, random);
        let id = grant.id.clone();
        let at = self.append(&TokenOp::Grant { grant, name, by: by.to_string(), at_ms: now_ms() }).await?;
        let listed = self.grants.read().expect("not poisoned").get(&id).cloned();
        Ok((listed.ok_or_else(|| anyhow::anyhow!("the grant of token {id} was not applied"))?, token, at))
    }

    /// Grants `token` (the bootstrap admin token of a data directory or cluster) unless
    /// its ID was granted before: idempotent, and a revoked bootstrap token stays revoked.
    pub async fn bootstrap(&self, token: &str, grant: Grant) -> anyhow::Result<()> {
        parse(token).map_err(|e| anyhow::anyhow!("the admin token file: {e}"))?;
        if self.grants.read().expect("not poisoned").get(&grant.id).is_some() {
            return Ok(());
        }
        let name = "admin (bootstrap)".to_string();
        self.append(&TokenOp::Grant { grant, name, by: "bootstrap".into(), at_ms: now_ms() }).await?;
        Ok(())
    }

    /// Revokes token `id`: the position of the revocation, or `None` if there is no
    /// such token.
    pub async fn revoke(&self, id: &str, by: &str) -> tally_logsvc::Result<Option<Context>> {
        self.refresh().await?;
        if self.grants.read().expect("not poisoned").get(id).is_none() {
            return Ok(None);
        }
        Ok(Some(self.append(&TokenOp::Revoke { id: id.to_string(), by: by.to_string(), at_ms: now_ms() }).await?))
    }

    pub async fn list(&self) -> tally_logsvc::Result<Vec<Listed>> {
        self.refresh().await?;
        Ok(self.grants.read().expect("not poisoned").list())
    }

    pub async fn changes(&self) -> tally_logsvc::Result<Vec<Change>> {
        self.refresh().await?;
        Ok(self.grants.read().expect("not poisoned").changes().to_vec())
    }
}

/// Why a check refused a request.
#[derive(Debug)]
pub enum Refused {
    Denied(Denied),
    /// The token records could not be read.
    Log(tally_logsvc::Error),
}

impl From<Denied> for Refused {
    fn from(d: Denied) -> Self {
        Refused::Denied(d)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Role, Scope};
    use super::*;

    fn grant(seed: u8) -> (Grant, String) {
        Grant::mint(Role::Admin, Scope::default(), None, [seed; 40])
    }

    #[test]
    fn a_revocation_is_for_ever_and_a_second_grant_of_an_id_changes_nothing() {
        let mut g = Grants::default();
        let (admin, token) = grant(1);
        let op = |grant: &Grant, by: &str| TokenOp::Grant { grant: grant.clone(), name: String::new(), by: by.into(), at_ms: 1 };
        g.apply(10, op(&admin, "bootstrap"));
        assert!(g.check(&token, false, Action::Admin, &Target::default(), 0).is_ok());
        g.apply(11, TokenOp::Revoke { id: admin.id.clone(), by: admin.id.clone(), at_ms: 2 });
        assert_eq!(
            g.check(&token, false, Action::Read, &Target::default(), 0),
            Err(Denied::Unauthenticated("the token was revoked"))
        );
        // The bootstrap grant appended again (another node, a restart) does not bring it back.
        g.apply(12, op(&admin, "bootstrap"));
        assert!(g.check(&token, false, Action::Read, &Target::default(), 0).is_err());
        let ops: Vec<_> = g.changes().iter().map(|c| (c.seqnum, c.op)).collect();
        assert_eq!(ops, [(10, "token.grant"), (11, "token.revoke")]);
    }

    #[test]
    fn an_unknown_token_and_a_wrong_secret_are_the_same_refusal() {
        let mut g = Grants::default();
        let (admin, token) = grant(1);
        g.apply(1, TokenOp::Grant { grant: admin, name: String::new(), by: "bootstrap".into(), at_ms: 1 });
        let (_, other) = grant(2);
        let mut wrong = token.clone();
        wrong.replace_range(token.len() - 1.., if token.ends_with('0') { "1" } else { "0" });
        for t in [other, wrong] {
            assert_eq!(g.check(&t, false, Action::Read, &Target::default(), 0), Err(Denied::Unauthenticated("unknown token")));
        }
    }

    #[test]
    fn records_of_a_newer_node_are_skipped() {
        let op: TokenOp = serde_json::from_str(r#"{"op":"rotate","id":"x"}"#).unwrap();
        assert!(matches!(op, TokenOp::Unknown));
        let mut g = Grants::default();
        g.apply(1, op);
        assert!(g.list().is_empty());
    }
}
