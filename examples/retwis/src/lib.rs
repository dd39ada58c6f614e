//! Retwis, the Twitter clone Boki evaluates BokiStore with (§7.3): users, tweets and
//! timelines as durable JSON objects of the invocation's book, a tweet as one
//! read-write transaction across them, a timeline read as one read-only transaction.
//!
//! | input                                                  | output                                              |
//! |--------------------------------------------------------|-----------------------------------------------------|
//! | `init <first> <count> <followers_per_user> [population]` | creates users first..first+count that do not exist yet; `{"created": n, "existing": m}` |
//! | `login <user> <password>`                              | UserLogin, one read: `ok` or `denied`               |
//! | `profile <user>`                                       | UserProfile, one read: `{"name", "followers", "tweets"}` |
//! | `timeline <user> [n]`                                  | GetTimeline, a read-only transaction: `{"user": u, "tweets": [tweet, ...]}`, the newest `n` (default 8) first |
//! | `tweet <user> <text>`                                  | NewTweet, a read-write transaction: `{"tweet": id, "seq": s}` |
//! | `follow <user> <other>`                                | `user` follows `other` from now on; `ok`             |
//!
//! Users are numbers. User `u` of `init` is named `user<u>`, has password `pw<u>` and
//! is followed by the next `followers_per_user` users, modulo `population` (by default
//! `first + count`), so a bench can create users in batches that agree on who follows
//! whom. `init` creates 30 users per transaction and skips users that exist, so it is
//! idempotent and never undoes later tweets.
//!
//! The objects (Boki's code keeps them likewise):
//!
//! ```text
//!   user:<u>      {"password": "...", "profile": {"name": "...", "followers": [v, ...], "tweets": n}}
//!   timeline:<u>  [id or null, ...]      always TIMELINE_LEN entries, oldest first
//!   tweet:<id>    {"id": "...", "author": u, "seq": s, "text": "..."}
//! ```
//!
//! A tweet reads its author's user object (the followers and the tweet count) and
//! writes the rest blind: it creates the tweet, increments the count, and on the
//! timeline of the author and of every follower pushes the tweet's ID and removes the
//! oldest entry. Since a timeline is created full (of `null`s), push-then-remove keeps
//! it at its length without reading it, and blind writes never conflict: tweets by
//! different authors commit side by side even when they share followers, only two
//! concurrent tweets of one author conflict (and the loser runs again). The commit
//! record applies the pushes in commit order, so every timeline lists its tweets in
//! the one order in which they committed, and `seq`, read in the transaction, numbers
//! each author's tweets 1, 2, 3, ... without gaps. A tweet's ID is the invocation's,
//! the same when the platform runs it again; so is everything it read.
//!
//! Reading a timeline and then its tweets in one snapshot means every tweet it names
//! exists (it was created in the transaction that pushed the ID); a tweet shown as
//! `null` would be a broken snapshot.

use anyhow::{bail, Context};
use tally_sdk::{context, objects};

/// Entries of every timeline: the newest tweets that reached it, oldest first.
const TIMELINE_LEN: usize = 32;
/// Tweets a timeline read returns when the input names no count (as Boki's code).
const TIMELINE_READ_DEFAULT: usize = 8;
/// Users `init` creates per transaction: two objects each, and a transaction touches
/// at most 60 objects (its commit record carries a tag per object, and the log takes
/// at most 64 tags per record).
const INIT_CHUNK: u64 = 30;
/// Followers a user may have: a tweet touches the tweet, its author and the timelines
/// of the author and of every follower, at most 60 objects (see `INIT_CHUNK`).
const FOLLOWERS_MAX: usize = 57;

/// What the input asks for.
enum Command<'a> {
    Init { first: u64, count: u64, followers: u64, population: u64 },
    Login { user: u64, password: &'a str },
    Profile { user: u64 },
    Timeline { user: u64, n: usize },
    Tweet { user: u64, text: &'a str },
    Follow { user: u64, other: u64 },
}

impl Command<'_> {
    fn parse(input: &[u8]) -> anyhow::Result<Command<'_>> {
        let input = std::str::from_utf8(input).context("the input is not UTF-8")?.trim();
        let words: Vec<&str> = input.split_whitespace().collect();
        let number = |word: &str| -> anyhow::Result<u64> { word.parse().with_context(|| format!("{word:?} is not a number")) };
        Ok(match words[..] {
            ["init", first, count, followers, ref population @ ..] if population.len() <= 1 => {
                let (first, count, followers) = (number(first)?, number(count)?, number(followers)?);
                let end = first.checked_add(count).context("the users run past u64")?;
                let population = population.first().map(|p| number(p)).transpose()?.unwrap_or(end);
                if population < end || followers >= population.max(1) || followers > FOLLOWERS_MAX as u64 {
                    bail!(
                        "{population} users cannot hold users up to {end} with {followers} followers each \
                         (at most {FOLLOWERS_MAX})"
                    );
                }
                Command::Init { first, count, followers, population }
            }
            ["login", user, password] => Command::Login { user: number(user)?, password },
            ["profile", user] => Command::Profile { user: number(user)? },
            ["timeline", user] => Command::Timeline { user: number(user)?, n: TIMELINE_READ_DEFAULT },
            ["timeline", user, n] => Command::Timeline { user: number(user)?, n: number(n)?.min(TIMELINE_LEN as u64) as usize },
            ["tweet", user, _, ..] => {
                // The text is everything after the user, as typed.
                let text = input["tweet".len()..].trim_start()[user.len()..].trim();
                Command::Tweet { user: number(user)?, text }
            }
            ["follow", user, other] if user == other => bail!("user {user} cannot follow themselves"),
            ["follow", user, other] => Command::Follow { user: number(user)?, other: number(other)? },
            _ => bail!(
                "expected `init <first> <count> <followers_per_user> [population]`, `login <user> <password>`, \
                 `profile <user>`, `timeline <user> [n]`, `tweet <user> <text>` or `follow <user> <other>`"
            ),
        })
    }
}

fn handle(input: Vec<u8>) -> anyhow::Result<String> {
    match Command::parse(&input)? {
        Command::Init { first, count, followers, population } => init(first, count, followers, population),
        Command::Login { user, password } => {
            let stored = objects::get(&user_object(user), "/password")?;
            let ok = stored.is_some_and(|stored| stored == objects::json_string(password));
            Ok(if ok { "ok" } else { "denied" }.to_owned())
        }
        Command::Profile { user } => objects::get(&user_object(user), "/profile")?.with_context(|| format!("no user {user}")),
        Command::Timeline { user, n } => timeline(user, n),
        Command::Tweet { user, text } => tweet(user, text),
        Command::Follow { user, other } => follow(user, other),
    }
}

tally_sdk::handler!(handle);

fn user_object(user: u64) -> String {
    format!("user:{user}")
}

fn timeline_object(user: u64) -> String {
    format!("timeline:{user}")
}

fn tweet_object(id: &str) -> String {
    format!("tweet:{id}")
}

/// Creates the users of `first..first + count` that do not exist yet, `INIT_CHUNK` to a
/// transaction.
fn init(first: u64, count: u64, followers: u64, population: u64) -> anyhow::Result<String> {
    let empty_timeline = format!("[{}]", vec!["null"; TIMELINE_LEN].join(","));
    let (mut created, mut existing) = (0, 0);
    let end = first + count;
    for chunk in (first..end).step_by(INIT_CHUNK as usize) {
        let users = chunk..end.min(chunk + INIT_CHUNK);
        let (made, found) = objects::transaction(|| -> anyhow::Result<(u64, u64)> {
            let (mut made, mut found) = (0, 0);
            for user in users.clone() {
                if objects::get(&user_object(user), "/password")?.is_some() {
                    found += 1;
                    continue;
                }
                let follower_ids: Vec<String> = (1..=followers).map(|k| ((user + k) % population).to_string()).collect();
                let object = format!(
                    r#"{{"password":{},"profile":{{"name":{},"followers":[{}],"tweets":0}}}}"#,
                    objects::json_string(&format!("pw{user}")),
                    objects::json_string(&format!("user{user}")),
                    follower_ids.join(","),
                );
                objects::set(&user_object(user), "", &object)?;
                objects::set(&timeline_object(user), "", &empty_timeline)?;
                made += 1;
            }
            Ok((made, found))
        })?
        .with_context(|| format!("creating users {users:?} conflicted with every attempt"))?;
        created += made;
        existing += found;
    }
    Ok(format!(r#"{{"created":{created},"existing":{existing}}}"#))
}

/// NewTweet: creates the tweet and puts it on the timelines of its author and of every
/// follower, in one transaction.
fn tweet(user: u64, text: &str) -> anyhow::Result<String> {
    // The same on every execution of this invocation, and unique among invocations.
    let id = context::invocation_id();
    let seq = objects::transaction(|| -> anyhow::Result<i64> {
        let author = user_object(user);
        let followers = objects::get(&author, "/profile/followers")?.with_context(|| format!("no user {user}"))?;
        let followers = numbers(&followers)?;
        let seq = objects::get_i64(&author, "/profile/tweets")?.unwrap_or(0) + 1;
        let tweet = format!(
            r#"{{"id":{},"author":{user},"seq":{seq},"text":{}}}"#,
            objects::json_string(&id),
            objects::json_string(text)
        );
        objects::set(&tweet_object(&id), "", &tweet)?;
        objects::increment(&author, "/profile/tweets", 1)?;
        for reader in std::iter::once(user).chain(followers) {
            let timeline = timeline_object(reader);
            objects::push(&timeline, "", &objects::json_string(&id))?;
            objects::remove(&timeline, "/0")?;
        }
        Ok(seq)
    })?
    .context("the tweet conflicted with every attempt (other tweets of the same user)")?;
    Ok(format!(r#"{{"tweet":{},"seq":{seq}}}"#, objects::json_string(&id)))
}

/// GetTimeline: the newest `n` tweets of the user's timeline, read in one snapshot.
fn timeline(user: u64, n: usize) -> anyhow::Result<String> {
    objects::read_only(|| -> anyhow::Result<String> {
        let ids = objects::get(&timeline_object(user), "")?.with_context(|| format!("no user {user}"))?;
        let ids = tweet_ids(&ids)?;
        let mut tweets = Vec::with_capacity(n);
        for id in ids.iter().rev().take(n) {
            // `null` only if the snapshot were broken: the transaction that pushed the
            // ID created the tweet.
            tweets.push(objects::get(&tweet_object(id), "")?.unwrap_or_else(|| "null".to_owned()));
        }
        Ok(format!(r#"{{"user":{user},"tweets":[{}]}}"#, tweets.join(",")))
    })
}

/// `user` follows `other`: joins its followers unless already among them (which the
/// transaction reads, so that two concurrent follows cannot both add it).
fn follow(user: u64, other: u64) -> anyhow::Result<String> {
    objects::transaction(|| -> anyhow::Result<()> {
        let followed = user_object(other);
        let followers = objects::get(&followed, "/profile/followers")?.with_context(|| format!("no user {other}"))?;
        if objects::get(&user_object(user), "/password")?.is_none() {
            bail!("no user {user}");
        }
        let followers = numbers(&followers)?;
        if !followers.contains(&user) {
            if followers.len() >= FOLLOWERS_MAX {
                bail!("user {other} has {FOLLOWERS_MAX} followers, the most a user may have");
            }
            objects::push(&followed, "/profile/followers", &user.to_string())?;
        }
        Ok(())
    })?
    .context("the follow conflicted with every attempt")?;
    Ok("ok".to_owned())
}

/// The numbers of a JSON array of them, as `init` and `follow` write followers.
fn numbers(json: &str) -> anyhow::Result<Vec<u64>> {
    elements(json)?.map(|n| n.parse().with_context(|| format!("{n:?} in {json} is not a user"))).collect()
}

/// The tweet IDs of a timeline (its `null`s left out): JSON strings of what
/// `context::invocation_id` returns, hex digits and `/`, which need no unescaping.
fn tweet_ids(json: &str) -> anyhow::Result<Vec<&str>> {
    elements(json)?
        .filter(|entry| *entry != "null")
        .map(|entry| {
            entry
                .strip_prefix('"')
                .and_then(|e| e.strip_suffix('"'))
                .filter(|id| !id.contains(['"', '\\']))
                .with_context(|| format!("{entry:?} in a timeline is not a tweet ID"))
        })
        .collect()
}

/// The elements of a flat JSON array whose elements contain no commas.
fn elements(json: &str) -> anyhow::Result<impl Iterator<Item = &str>> {
    let inner =
        json.trim().strip_prefix('[').and_then(|j| j.strip_suffix(']')).with_context(|| format!("{json} is not an array"))?;
    Ok(inner.split(',').map(str::trim).filter(|e| !e.is_empty()))
}
