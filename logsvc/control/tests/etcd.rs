//! The control plane against a real etcd (`TempEtcd`: Debian's etcd on loopback).
//!
//! Every wait is bounded; the bounds leave room for a loaded two-core machine. A few
//! waits check that something does *not* happen for a while (a candidate keeps waiting
//! while another leads): those are the only fixed pauses, and they are short. Set
//! `TALLY_KEEP_DIR=1` to keep a failed test's etcd directory (its path is printed).

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use etcd_client::{Client, LeaseGrantOptions, PutOptions};
use tally_control::{ControlPlane, Error, Member, MemberRole, Revision, Settings, TempEtcd};
use tally_log_core::{Configuration, LogId, LogTermConfig, NodeId, Term, TermConfig};
use tokio::sync::watch;
use tokio::time::{sleep, timeout, Instant};

/// The longest any single step may take before the test fails.
const STEP: Duration = Duration::from_secs(10);

/// A configuration whose current term is `term`, with `engine` as its only engine, so
/// two writers' configurations differ.
fn config(term: u16, engine: u32) -> Configuration {
    Configuration {
        n_logs: 1,
        controller: NodeId(1),
        terms: vec![TermConfig {
            term: Term(term),
            logs: vec![LogTermConfig { log: LogId(0), sequencers: vec![NodeId(2)], shards: vec![] }],
            engines: vec![NodeId(engine)],
            storage: vec![NodeId(3)],
            sealed: None,
            version: 0,
        }],
        indexers: vec![vec![]],
        tier: None,
    }
}

fn member(id: u32, role: MemberRole) -> Member {
    Member {
        id: NodeId(id),
        role,
        addr: format!("127.0.0.1:{}", 7000 + id),
        http: None,
        process: format!("node-{id}"),
        pid: 1000 + id,
        incarnation: 1,
    }
}

async fn raw_client(etcd: &TempEtcd) -> anyhow::Result<Client> {
    Ok(Client::connect(etcd.endpoints(), None).await?)
}

/// Calls `f` until it succeeds, retrying transient errors (etcd restarting, a leader
/// being elected) until `STEP` has passed.
async fn until_ok<T, F, Fut>(what: &str, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = tally_control::Result<T>>,
{
    let deadline = Instant::now() + STEP;
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_transient() && Instant::now() < deadline => sleep(Duration::from_millis(100)).await,
            Err(e) => return Err(e).with_context(|| format!("{what} (retried transient errors for {STEP:?})")),
        }
    }
}

/// Waits until the watched member map satisfies `ok`; returns it.
async fn members_until(
    rx: &mut watch::Receiver<BTreeMap<NodeId, Member>>,
    what: &str,
    ok: impl Fn(&BTreeMap<NodeId, Member>) -> bool,
) -> anyhow::Result<BTreeMap<NodeId, Member>> {
    let waited = match timeout(STEP, rx.wait_for(|m| ok(m))).await {
        Ok(Ok(m)) => Some(m.clone()),
        Ok(Err(_)) => bail!("the member watch stopped while waiting until {what}"),
        Err(_) => None,
    };
    waited.with_context(|| format!("not within {STEP:?}: {what}; members: {:?}", ids(&rx.borrow())))
}

fn ids(m: &BTreeMap<NodeId, Member>) -> Vec<u32> {
    m.keys().map(|id| id.0).collect()
}

#[tokio::test]
async fn cas_lets_exactly_one_of_two_writers_install_a_configuration() -> anyhow::Result<()> {
    let mut etcd = TempEtcd::start().await?;
    let a = ControlPlane::connect(&etcd.endpoints(), "cas").await?;
    let b = ControlPlane::connect(&etcd.endpoints(), "cas").await?;
    assert!(a.load_config().await?.is_none());

    // Both start from "nothing stored".
    let first = a.cas_config(Revision::ABSENT, &config(1, 10)).await?;
    assert!(first > Revision::ABSENT);
    let e = b.cas_config(Revision::ABSENT, &config(1, 20)).await.unwrap_err();
    assert!(matches!(e, Error::Superseded), "{e}");
    assert!(!e.is_transient());

    // Both load the same revision and race for the next term, at the same moment.
    let (seen_a, ra) = a.load_config().await?.context("stored")?;
    let (seen_b, rb) = b.load_config().await?.context("stored")?;
    assert_eq!((ra, rb), (first, first));
    assert_eq!(seen_a, config(1, 10));
    assert_eq!(seen_b, seen_a);
    let (next_a, next_b) = (config(2, 10), config(2, 20));
    let (wa, wb) = tokio::join!(a.cas_config(ra, &next_a), b.cas_config(rb, &next_b));
    let (winner, loser, won) = match (wa, wb) {
        (Ok(r), Err(Error::Superseded)) => (next_a, &b, r),
        (Err(Error::Superseded), Ok(r)) => (next_b, &a, r),
        other => bail!("exactly one writer must win, the other be superseded: {other:?}"),
    };
    let (stored, at) = a.load_config().await?.context("stored")?;
    assert_eq!((stored, at), (winner, won));

    // The loser reloads and decides again; its stale revision stays refused.
    let e = loser.cas_config(first, &config(3, 30)).await.unwrap_err();
    assert!(matches!(e, Error::Superseded), "{e}");
    let (_, current) = loser.load_config().await?.context("stored")?;
    let third = loser.cas_config(current, &config(3, 30)).await?;
    assert!(third > current);

    // The stored configuration survives etcd being killed and restarted over its data.
    etcd.kill();
    let e = a.load_config().await.unwrap_err();
    assert!(e.is_transient(), "{e}");
    etcd.restart().await?;
    let (stored, at) = until_ok("reading after the restart", || a.load_config()).await?.context("stored")?;
    assert_eq!((stored, at), (config(3, 30), third));
    let fourth = a.cas_config(third, &config(4, 10)).await?;
    assert!(fourth > third);
    Ok(())
}

#[tokio::test]
async fn settings_are_written_once() -> anyhow::Result<()> {
    let etcd = TempEtcd::start().await?;
    let plane = ControlPlane::connect(&etcd.endpoints(), "settings").await?;
    assert_eq!(plane.settings().await?, None);
    let s =
        |n_meta| Settings { n_logs: 2, n_meta, n_data: 3, failure_timeout_ms: 1500, index: None, metalog: Default::default() };
    let (three, five) = (s(3), s(5));
    let (x, y) = tokio::join!(plane.init_settings(&three), plane.init_settings(&five));
    let (x, y) = (x?, y?);
    assert_eq!(x, y, "two first controllers agree on one value");
    assert_eq!(plane.init_settings(&s(7)).await?, x, "a later init returns the stored settings");
    assert_eq!(plane.settings().await?, Some(x.clone()));

    // Logs are only added.
    let fewer = plane.set_n_logs(1).await;
    assert!(matches!(fewer, Err(tally_control::Error::InvalidArgument(_))), "{fewer:?}");
    assert!(matches!(plane.set_n_logs(300).await, Err(tally_control::Error::InvalidArgument(_))));
    assert_eq!(plane.set_n_logs(3).await?.n_logs, 3);
    assert_eq!(plane.set_n_logs(4).await?.n_logs, 4);
    let stored = plane.settings().await?.expect("stored");
    assert_eq!((stored.n_logs, stored.n_meta), (4, x.n_meta), "only the logs changed");
    assert_eq!(plane.set_n_logs(4).await?, stored, "asking for what is there changes nothing");
    Ok(())
}

#[tokio::test]
async fn members_come_and_go_with_their_leases() -> anyhow::Result<()> {
    let mut etcd = TempEtcd::start().await?;
    let plane = ControlPlane::connect(&etcd.endpoints(), "members").await?;
    let mut rx = plane.watch_members().await?;
    assert!(rx.borrow().is_empty());

    // Short TTLs for the members that should expire, long ones for those that must
    // not (so a removal within a second is a revoke, not an expiry).
    let one = plane.register(member(1, MemberRole::Controller), 2).await?;
    let two = plane.register(member(2, MemberRole::Storage), 1).await?;
    let three = plane.register(Member { addr: String::new(), ..member(3, MemberRole::Gateway) }, 60).await?;
    let seen = members_until(&mut rx, "three members are registered", |m| m.len() == 3).await?;
    assert_eq!(seen[&NodeId(3)], Member { addr: String::new(), ..member(3, MemberRole::Gateway) });
    assert_eq!(plane.members().await?, seen);

    // A registration dropped without revoke (its process killed) goes once its lease
    // expires, not before the TTL's last two thirds.
    let dropped = Instant::now();
    drop(two);
    members_until(&mut rx, "member 2's lease expired", |m| !m.contains_key(&NodeId(2))).await?;
    let took = dropped.elapsed();
    assert!(took >= Duration::from_millis(500) && took <= Duration::from_secs(4), "member 2 went after {took:?} (TTL 1 s)");

    // A revoke removes the member at once, long before its 60 s TTL.
    let revoked = Instant::now();
    three.revoke().await?;
    members_until(&mut rx, "member 3 was revoked", |m| !m.contains_key(&NodeId(3))).await?;
    assert!(revoked.elapsed() < Duration::from_secs(3), "revoke took {:?}", revoked.elapsed());
    assert_eq!(ids(&plane.members().await?), vec![1]);

    // A lease revoked behind the registration's back: the member goes, then comes back
    // under a fresh lease, and the registration counts it.
    let mut again = one.reregistrations();
    let mut raw = raw_client(&etcd).await?;
    for lease in raw.leases().await?.leases() {
        raw.lease_revoke(lease.id()).await?;
    }
    timeout(STEP, again.wait_for(|n| *n >= 1)).await.context("no re-registration after the lease was revoked")??;
    members_until(&mut rx, "member 1 is back", |m| m.contains_key(&NodeId(1))).await?;
    assert_eq!(plane.members().await?[&NodeId(1)], member(1, MemberRole::Controller));

    // etcd killed for longer than the TTL and restarted: the registration registers
    // again, and the watch (which lists again after the break) shows it.
    let before = *again.borrow();
    etcd.kill();
    sleep(Duration::from_secs(3)).await; // The outage: longer than the 2 s TTL.
    etcd.restart().await?;
    timeout(STEP, again.wait_for(|n| *n > before)).await.context("no re-registration after the outage")??;
    let four = until_ok("registering after the restart", || plane.register(member(4, MemberRole::Engine), 2)).await?;
    let seen = members_until(&mut rx, "members 1 and 4 after the restart", |m| ids(m) == [1, 4]).await?;
    assert_eq!(seen[&NodeId(1)], member(1, MemberRole::Controller));
    four.revoke().await?;
    members_until(&mut rx, "member 4 revoked after the restart", |m| ids(m) == [1]).await?;
    drop(one);
    Ok(())
}

#[tokio::test]
async fn a_later_registration_of_the_same_id_wins() -> anyhow::Result<()> {
    let etcd = TempEtcd::start().await?;
    let plane = ControlPlane::connect(&etcd.endpoints(), "twice").await?;
    let mut rx = plane.watch_members().await?;
    let early = plane.register(member(5, MemberRole::Engine), 60).await?;
    let late = plane.register(Member { incarnation: 2, ..member(5, MemberRole::Engine) }, 60).await?;
    members_until(&mut rx, "the later incarnation", |m| m.get(&NodeId(5)).is_some_and(|m| m.incarnation == 2)).await?;
    // The earlier one's revoke does not delete the key the later one holds.
    early.revoke().await?;
    assert_eq!(plane.members().await?[&NodeId(5)].incarnation, 2);
    late.revoke().await?;
    members_until(&mut rx, "member 5 revoked", |m| m.is_empty()).await?;
    Ok(())
}

#[tokio::test]
async fn one_candidate_leads_and_the_next_takes_over() -> anyhow::Result<()> {
    let etcd = TempEtcd::start().await?;
    let a = ControlPlane::connect(&etcd.endpoints(), "election").await?;
    let b = ControlPlane::connect(&etcd.endpoints(), "election").await?;
    assert_eq!(a.leader().await?, None);

    let one = timeout(STEP, a.campaign(NodeId(1), 2)).await??;
    assert_eq!(one.candidate(), NodeId(1));
    assert_eq!(b.leader().await?, Some(NodeId(1)));
    let mut two = tokio::spawn({
        let b = b.clone();
        async move { b.campaign(NodeId(2), 60).await }
    });
    assert!(timeout(Duration::from_millis(700), &mut two).await.is_err(), "a second candidate leads while the first does");
    assert!(!*one.lost().borrow());

    // The leader killed (its Leadership dropped without resigning): the other leads
    // once the lease expires, within the TTL and a second.
    let dropped = Instant::now();
    drop(one);
    let two = timeout(Duration::from_secs(2 + 1), two).await.context("no takeover within TTL + 1 s")???;
    let took = dropped.elapsed();
    assert!(took >= Duration::from_millis(900), "took over after {took:?}, before the 2 s lease could expire");
    assert_eq!(a.leader().await?, Some(NodeId(2)));

    // Resigning hands over at once (the resigning leader's TTL is 60 s).
    let mut one = tokio::spawn({
        let a = a.clone();
        async move { a.campaign(NodeId(1), 60).await }
    });
    assert!(timeout(Duration::from_millis(300), &mut one).await.is_err(), "node 1 leads while node 2 does");
    let resigned = Instant::now();
    two.resign().await?;
    let one = timeout(Duration::from_secs(3), one).await.context("no handover after a resign")???;
    assert!(resigned.elapsed() < Duration::from_secs(3));
    assert_eq!(b.leader().await?, Some(NodeId(1)));

    // The leader key deleted behind the leader's back: `lost` fires.
    let mut lost = one.lost();
    let mut raw = raw_client(&etcd).await?;
    raw.delete("/tally/election/leader", None).await?;
    timeout(Duration::from_secs(3), lost.wait_for(|l| *l)).await.context("`lost` did not fire")??;
    assert_eq!(a.leader().await?, None);
    Ok(())
}

#[tokio::test]
async fn a_leader_whose_lease_is_revoked_loses() -> anyhow::Result<()> {
    let etcd = TempEtcd::start().await?;
    let plane = ControlPlane::connect(&etcd.endpoints(), "lease").await?;
    let leader = plane.campaign(NodeId(7), 60).await?;
    let mut lost = leader.lost();
    let mut raw = raw_client(&etcd).await?;
    for lease in raw.leases().await?.leases() {
        raw.lease_revoke(lease.id()).await?;
    }
    timeout(Duration::from_secs(3), lost.wait_for(|l| *l)).await.context("`lost` did not fire")??;
    // A new campaign of the same node leads again (the revoke deleted the key).
    let again = timeout(STEP, plane.campaign(NodeId(7), 60)).await??;
    assert!(!*again.lost().borrow());
    again.resign().await?;
    assert_eq!(plane.leader().await?, None);
    Ok(())
}

#[tokio::test]
async fn three_member_etcd_survives_losing_its_leader() -> anyhow::Result<()> {
    let mut etcd = TempEtcd::cluster(3).await?;
    let plane = ControlPlane::connect(&etcd.endpoints(), "three").await?;
    let mut rx = plane.watch_members().await?;
    let _one = plane.register(member(1, MemberRole::Sequencer), 2).await?;
    let first = plane.cas_config(Revision::ABSENT, &config(1, 10)).await?;
    members_until(&mut rx, "member 1", |m| ids(m) == [1]).await?;

    // Kill the etcd leader, so the two others must elect a new one, and make it member
    // 0, the one the control plane's calls go to first, so they must fail over.
    let (mut leader, mut leader_id) = etcd_leader(&etcd, None).await?;
    if leader != 0 {
        let first = Client::connect([etcd.endpoint(0)], None).await?.status().await?;
        let first_id = first.header().context("a status header")?.member_id();
        Client::connect([etcd.endpoint(leader)], None).await?.move_leader(first_id).await?;
        let deadline = Instant::now() + STEP;
        while (leader, leader_id) != (0, first_id) {
            ensure!(Instant::now() < deadline, "etcd did not move its leader to member 0");
            (leader, leader_id) = etcd_leader(&etcd, None).await?;
        }
    }
    etcd.kill_member(leader);
    let (_, new_leader_id) = etcd_leader(&etcd, Some(leader)).await?;
    assert_ne!(new_leader_id, leader_id);

    // Once the others have a leader, every call succeeds at its first try: calls that
    // meet the dead member fail over to the next one. Every member is tried in turn.
    for _ in 0..3 {
        assert!(plane.load_config().await?.is_some());
    }
    let second = plane.cas_config(first, &config(2, 10)).await?;
    assert!(second > first);
    let _two = plane.register(member(2, MemberRole::Storage), 2).await?;
    members_until(&mut rx, "members 1 and 2 with one etcd member down", |m| ids(m) == [1, 2]).await?;
    assert_eq!(ids(&plane.members().await?), vec![1, 2]);
    let (stored, at) = plane.load_config().await?.context("stored")?;
    assert_eq!((stored, at), (config(2, 10), second));
    let leading = plane.campaign(NodeId(1), 2).await?;
    assert_eq!(plane.leader().await?, Some(NodeId(1)));
    leading.resign().await?;

    // The killed member rejoins over its data and catches up.
    etcd.restart_member(leader).await?;
    let rejoined = ControlPlane::connect(&[etcd.endpoint(leader)], "three").await?;
    let (stored, _) = until_ok("reading through the rejoined member", || rejoined.load_config()).await?.context("stored")?;
    assert_eq!(stored, config(2, 10));
    Ok(())
}

/// The etcd member that leads (its index and raft id), once every running member other
/// than `down` names the same leader; polls until `STEP` has passed.
async fn etcd_leader(etcd: &TempEtcd, down: Option<usize>) -> anyhow::Result<(usize, u64)> {
    let deadline = Instant::now() + STEP;
    let endpoints = etcd.endpoints();
    loop {
        let mut seen = Vec::new();
        for (i, endpoint) in endpoints.iter().enumerate().filter(|(i, _)| Some(*i) != down) {
            let status = timeout(Duration::from_secs(1), async { Client::connect([endpoint], None).await?.status().await }).await;
            if let Ok(Ok(status)) = status {
                seen.push((i, status.header().map(|h| h.member_id()), status.leader()));
            }
        }
        let agreed = seen.len() == endpoints.len() - usize::from(down.is_some())
            && seen.iter().all(|&(_, _, leader)| leader != 0 && leader == seen[0].2);
        if let Some(&(i, _, id)) = seen.iter().find(|&&(_, me, leader)| agreed && me == Some(leader)) {
            return Ok((i, id));
        }
        ensure!(Instant::now() < deadline, "the etcd members did not agree on a leader within {STEP:?}: {seen:?}");
        sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn bad_names_and_corrupt_values_are_errors() -> anyhow::Result<()> {
    let etcd = TempEtcd::start().await?;
    for bad in ["a/b", "", "Upper", &"x".repeat(65)] {
        let e = ControlPlane::connect(&etcd.endpoints(), bad).await.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{bad:?}: {e}");
    }
    let e = ControlPlane::connect(&etcd.endpoints(), "a/b").await.unwrap_err().to_string();
    assert!(e.contains("cluster name \"a/b\"") && e.contains("'/'"), "{e}");
    let e = ControlPlane::connect(&[], "ok").await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    let plane = ControlPlane::connect(&etcd.endpoints(), "bad").await?;
    let mut raw = raw_client(&etcd).await?;
    raw.put("/tally/bad/config", "garbage", None).await?;
    corrupt(plane.load_config().await, "format byte 103")?;
    raw.put("/tally/bad/config", b"\x01garbage".to_vec(), None).await?;
    corrupt(plane.load_config().await, "decoding the stored configuration")?;
    raw.put("/tally/bad/config", Vec::new(), None).await?;
    corrupt(plane.load_config().await, "empty")?;
    raw.put("/tally/bad/settings", "{\"n_logs\": 1}", None).await?;
    corrupt(plane.settings().await, "settings")?;
    raw.put("/tally/bad/leader", "n1", None).await?;
    corrupt(plane.leader().await, "\"n1\"")?;

    // A corrupt member entry is left out; the others are still listed and watched.
    let mut rx = plane.watch_members().await?;
    let _good = plane.register(member(1, MemberRole::Engine), 60).await?;
    raw.put("/tally/bad/members/2", "{", None).await?;
    raw.put("/tally/bad/members/3", serde_json::to_vec(&member(4, MemberRole::Engine))?, None).await?;
    raw.put("/tally/bad/members/x", serde_json::to_vec(&member(5, MemberRole::Engine))?, None).await?;
    let lease = raw.lease_grant(60, Some(LeaseGrantOptions::new())).await?.id();
    raw.put(
        "/tally/bad/members/6",
        serde_json::to_vec(&member(6, MemberRole::Engine))?,
        Some(PutOptions::new().with_lease(lease)),
    )
    .await?;
    members_until(&mut rx, "the good members 1 and 6", |m| ids(m) == [1, 6]).await?;
    assert_eq!(ids(&plane.members().await?), vec![1, 6]);
    Ok(())
}

fn corrupt<T>(r: tally_control::Result<T>, expect: &str) -> anyhow::Result<()> {
    match r {
        Err(e @ Error::Corrupt(_)) => ensure!(e.to_string().contains(expect), "{e} lacks {expect:?}"),
        Err(e) => bail!("expected a corrupt value ({expect}), got {e}"),
        Ok(_) => bail!("expected a corrupt value ({expect}), got a value"),
    }
    Ok(())
}

/// Runs `call`, giving up after 6 s; returns its answer and how long it took.
async fn timed(call: impl Future<Output = tally_control::Result<()>>) -> (Option<tally_control::Result<()>>, Duration) {
    let started = Instant::now();
    let answer = timeout(Duration::from_secs(6), call).await.ok();
    (answer, started.elapsed())
}

#[tokio::test]
async fn an_unreachable_etcd_is_a_transient_error_in_bounded_time() -> anyhow::Result<()> {
    let mut etcd = TempEtcd::start().await?;
    let endpoints = etcd.endpoints();
    let plane = ControlPlane::connect(&endpoints, "gone").await?;
    etcd.kill();
    // Each call tries again until its 2 s are up; they run side by side.
    let cas = config(1, 1);
    let (connect, load, cas, register, campaign, members) = tokio::join!(
        timed(async { ControlPlane::connect(&endpoints, "gone").await.map(drop) }),
        timed(async { plane.load_config().await.map(drop) }),
        timed(async { plane.cas_config(Revision::ABSENT, &cas).await.map(drop) }),
        timed(async { plane.register(member(1, MemberRole::Engine), 2).await.map(drop) }),
        timed(async { plane.campaign(NodeId(1), 2).await.map(drop) }),
        timed(async { plane.members().await.map(drop) }),
    );
    let answers = [
        ("connect", connect),
        ("load", load),
        ("cas", cas),
        ("register", register),
        ("campaign", campaign),
        ("members", members),
    ];
    for (what, (answer, took)) in answers {
        let e = answer.with_context(|| format!("{what} hung"))?.err().with_context(|| format!("{what} succeeded"))?;
        assert!(e.is_transient(), "{what}: {e}");
        assert!(took < Duration::from_secs(5), "{what} took {took:?}");
    }
    Ok(())
}
