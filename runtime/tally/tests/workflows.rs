//! The `travel` and `movie` examples (Beldi's DeathStarBench workflows, Boki §7.2) over
//! HTTP, with crashes injected (`Tally-Crash-After`) into their frontends and the child
//! invocations of their steps.
//!
//! Travel: reservations on scarce rooms and seats never overbook; each one holds a room
//! and a seat or neither, also as seen in the middle of a crashed one; the rooms, seats
//! and trips booked add up to the reservations the clients were told of; and a crashed
//! reservation retried under its key is booked once. Movie: every composed review is in
//! its user's and its movie's lists exactly once, and the movies' rating sums and counts
//! match their reviews, also in the middle of a crashed compose.
//!
//! After every injected crash, before the client retries, an `audit` reads the example's
//! data in one snapshot: it must be consistent, which only a transaction makes it (a
//! step that wrote its objects one by one could be cut between two writes).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::Duration;

use common::{guest, node_with, Node, Rng};

/// What a request got: its answer, after as many crashes and retries as it took.
struct Answered {
    text: String,
    /// The crash point it was first sent with, if it crashed there.
    crashed_at: Option<u64>,
}

/// POSTs `input` to `function` on `book` under the key `key`, first with a crash after
/// `crash_after` effects; after a crash runs `check` (with the node), then retries the
/// key without a crash until it is answered 200.
fn invoke_crashing(
    n: &Node,
    function: &str,
    book: u64,
    input: &str,
    key: &str,
    crash_after: Option<u64>,
    check: impl Fn(&Node),
) -> Answered {
    let path = format!("/v1/functions/{function}/invoke?book={book}");
    let mut crashed_at = None;
    if let Some(k) = crash_after {
        let (status, body) =
            n.post_with(&path, input.as_bytes(), &[("idempotency-key", key), ("tally-crash-after", &k.to_string())]);
        let body = String::from_utf8_lossy(&body).to_string();
        match status {
            200 => return Answered { text: body, crashed_at: None },
            500 if body.contains("injected_crash") => {
                crashed_at = Some(k);
                check(n);
            }
            _ => panic!("{input:?} with a crash after {k}: {status} {body}"),
        }
    }
    let text = common::until_ok(|| n.url.clone(), &path, input, key, Duration::from_millis(10));
    Answered { text, crashed_at }
}

/// Sends `input` under a key of its own, crashed after its 1st, 2nd, ... effect (in the
/// frontend or in a step's child invocation) and retried each time, until a run has
/// fewer effects than the crash point. Runs `check` in the middle of every crash (with
/// `None`) and after every answer (with the number of answers so far). Returns the
/// answers, one per crash point and the last one uncrashed.
fn crash_everywhere(n: &Node, function: &str, book: u64, input: &str, check: impl Fn(&Node, Option<usize>)) -> Vec<String> {
    let mut answers = Vec::new();
    for k in 1.. {
        let answered = invoke_crashing(n, function, book, input, &format!("sweep-{k}"), Some(k), |n| check(n, None));
        answers.push(answered.text);
        check(n, Some(answers.len()));
        if answered.crashed_at.is_none() {
            break;
        }
    }
    eprintln!("{function}: {input:?} crashed at each of its {} effects", answers.len() - 1);
    answers
}

/// Runs `client` on `count` threads at once, each with its index and a generator of
/// its own, against the node at `n`'s URL; returns what each returned.
fn concurrently<T: Send + 'static>(n: &Node, count: u64, client: fn(&Node, u64, &mut Rng) -> T) -> Vec<T> {
    let threads: Vec<_> = (0..count)
        .map(|c| {
            let url = n.url.clone();
            thread::spawn(move || client(&Node::attach(&url), c, &mut Rng(0x9e37_79b9_7f4a_7c15 ^ (c + 1))))
        })
        .collect();
    threads.into_iter().map(|t| t.join().expect("a client")).collect()
}

fn node() -> (tempfile::TempDir, Node) {
    node_with(&["--crash-injection", "true"])
}

/// `rooms R seats S trips T` of the travel audit, which must agree.
fn travel_audit(n: &Node, book: u64, date: &str) -> i64 {
    let audit = n.invoke_ok("travel", book, &format!("audit {date}"));
    let counts: Vec<i64> = audit.split(' ').skip(1).step_by(2).map(|c| c.parse().unwrap()).collect();
    assert_eq!(counts.len(), 3, "{audit}");
    assert!(counts[0] == counts[1] && counts[1] == counts[2], "a reservation holds a room and a seat or neither: {audit}");
    counts[0]
}

/// What `search` says is left: name -> rooms or seats.
fn travel_left(n: &Node, book: u64, date: &str) -> BTreeMap<String, i64> {
    let search = n.invoke_ok("travel", book, &format!("search {date}"));
    search
        .split([' ', ';'])
        .filter_map(|word| word.split_once(':'))
        .map(|(name, left)| (name.to_string(), left.parse().unwrap_or_else(|_| panic!("{search}"))))
        .collect()
}

/// The reservation IDs in `user`'s trips, each with its trip.
fn travel_trips(n: &Node, book: u64, user: &str) -> Vec<(String, String)> {
    let trips: Vec<String> = serde_json::from_str(&n.invoke_ok("travel", book, &format!("trips {user}"))).unwrap();
    trips.into_iter().map(|trip| (trip.split(' ').next().unwrap().to_string(), trip)).collect()
}

/// One reservation, crashed after its 1st, 2nd, ... effect (in the frontend or in a
/// step's child invocation) and retried each time, until a run has fewer effects than
/// the crash point: in the middle of every crash both the room and the seat are booked
/// or neither, and every retry books the trip once.
#[test]
fn a_reservation_crashed_anywhere_books_a_room_and_a_seat_once() {
    let (_dir, n) = node();
    n.deploy("travel", &guest("travel"), "");
    let book = 40;
    assert_eq!(n.invoke_ok("travel", book, "init 2 50 2 50 2"), "ok");
    let answers = crash_everywhere(&n, "travel", book, "reserve u0 h1 f0 d1", |n, answered| {
        let booked = travel_audit(n, book, "d1");
        if let Some(answered) = answered {
            assert_eq!(booked, answered as i64, "a retried reservation is booked once");
        }
    });
    assert!(answers.len() >= 6, "a reservation has only {} effects", answers.len() - 1);
    let reserved: Vec<&str> = answers.iter().map(|a| a.strip_prefix("reserved ").unwrap_or_else(|| panic!("{a}"))).collect();
    let ids: Vec<String> = travel_trips(&n, book, "u0").into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, reserved, "every reservation once, in order");
    let left = travel_left(&n, book, "d1");
    let k = reserved.len() as i64;
    assert_eq!((left["h1"], left["f0"], left["h0"], left["f1"]), (50 - k, 50 - k, 50, 50), "{left:?}");
}

/// Clients reserving at once on scarce rooms and seats, every third request crashed at
/// a random point and retried: no hotel or flight overbooked, and what is booked is
/// exactly what the clients were told they reserved.
#[test]
fn concurrent_crashing_reservations_never_overbook() {
    const CLIENTS: u64 = 8;
    const REQUESTS: u64 = 8;
    const ROOMS: i64 = 2;
    const SEATS: i64 = 3;
    let (_dir, n) = node();
    n.deploy("travel", &guest("travel"), "");
    const BOOK: u64 = 41;
    // 3 hotels of 2 rooms and 2 flights of 3 seats: 6 of each a day for 64 requests
    // over 2 days.
    assert_eq!(n.invoke_ok("travel", BOOK, &format!("init 3 {ROOMS} 2 {SEATS} {CLIENTS}")), "ok");
    let answers = concurrently(&n, CLIENTS, |n, c, rng| {
        let mut answers = Vec::new();
        for r in 0..REQUESTS {
            let (hotel, flight, date) = (rng.below(3), rng.below(2), 1 + rng.below(2));
            let input = format!("reserve u{c} h{hotel} f{flight} d{date}");
            let crash = (r % 3 == c % 3).then(|| 1 + rng.below(10));
            let answered = invoke_crashing(n, "travel", BOOK, &input, &format!("c{c}-r{r}"), crash, |n| {
                travel_audit(n, BOOK, &format!("d{date}"));
            });
            answers.push((format!("d{date}"), answered.text, answered.crashed_at.is_some()));
        }
        answers
    });
    let crashed = answers.iter().flatten().filter(|(_, _, crashed)| *crashed).count();
    let busy = answers.iter().flatten().filter(|(_, text, _)| text == "busy").count();
    eprintln!("{crashed} reservations crashed, {busy} busy");
    assert!(crashed >= 8, "only {crashed} requests crashed");
    let mut reserved_on: BTreeMap<String, i64> = BTreeMap::new();
    for (c, answers) in answers.iter().enumerate() {
        let mut told = BTreeSet::new();
        for (date, text, _) in answers {
            match text.split_once(' ') {
                Some(("reserved", id)) => {
                    assert!(told.insert(id.to_string()), "client {c} was given reservation {id} twice");
                    *reserved_on.entry(date.clone()).or_default() += 1;
                }
                // Full, or kept waiting for a lock too long: neither is booked.
                Some(("full", _)) => {}
                None if text == "busy" => {}
                _ => panic!("client {c}: {text:?}"),
            }
        }
        let trips = travel_trips(&n, BOOK, &format!("u{c}"));
        let booked: BTreeSet<String> = trips.iter().map(|(id, _)| id.clone()).collect();
        assert_eq!(booked.len(), trips.len(), "client {c}: a trip booked twice: {trips:?}");
        assert_eq!(booked, told, "client {c}: the trips booked are the reservations it was told of");
    }
    for date in ["d1", "d2"] {
        let booked = travel_audit(&n, BOOK, date);
        assert_eq!(booked, reserved_on.get(date).copied().unwrap_or(0), "{date}");
        let left = travel_left(&n, BOOK, date);
        assert!(left.values().all(|&l| l >= 0), "{date}: overbooked: {left:?}");
        let capacity = |prefix: char, each: i64| {
            left.iter().filter(|(name, _)| name.starts_with(prefix)).map(|(_, l)| each - l).sum::<i64>()
        };
        assert_eq!((capacity('h', ROOMS), capacity('f', SEATS)), (booked, booked), "{date}: {left:?}");
    }
    // Scarce: some requests found a hotel or flight full.
    let full = answers.iter().flatten().filter(|(_, text, _)| text.starts_with("full")).count();
    assert!(full > 0, "no request found anything full");
}

/// `reviews-by <user>` as a list of review IDs.
fn reviews_by(n: &Node, book: u64, user: &str) -> Vec<String> {
    serde_json::from_str(&n.invoke_ok("movie", book, &format!("reviews-by {user}"))).unwrap()
}

/// The movie audit, which must find every list and rating consistent: the number of
/// reviews.
fn movie_audit(n: &Node, book: u64) -> usize {
    let audit = n.invoke_ok("movie", book, "audit");
    let count = audit.strip_prefix("reviews ").unwrap_or_else(|| panic!("{audit}"));
    count.parse().unwrap()
}

/// A review as a movie lists it: its ID, its user and its rating.
type Review = (String, String, i64);

/// A movie's `reviews`: the count and rating sum it keeps, and its reviews.
fn movie_reviews(n: &Node, book: u64, movie: &str) -> ((i64, i64), Vec<Review>) {
    let text = n.invoke_ok("movie", book, &format!("reviews {movie}"));
    let mut lines = text.lines();
    let head: Vec<i64> = lines.next().unwrap().split(' ').map(|w| w.parse().unwrap()).collect();
    let reviews = lines
        .map(|line| {
            let words: Vec<&str> = line.splitn(4, ' ').collect();
            (words[0].to_string(), words[1].to_string(), words[2].parse().unwrap())
        })
        .collect();
    ((head[0], head[1]), reviews)
}

/// One review crashed after its 1st, 2nd, ... effect, then reviews composed at once by
/// several clients, half of them crashed at random points, each retried: every review composed
/// is in its user's and its movie's lists exactly once, each movie's count and rating
/// sum are those of its reviews, and no audit in the middle of a crash sees half a
/// review.
#[test]
fn crashed_compositions_are_listed_once_with_matching_ratings() {
    const CLIENTS: u64 = 6;
    const REQUESTS: u64 = 8;
    let (_dir, n) = node();
    n.deploy("movie", &guest("movie"), "");
    const BOOK: u64 = 42;
    assert_eq!(n.invoke_ok("movie", BOOK, &format!("init 3 {CLIENTS}")), "ok");
    // One compose crashed at every point in turn.
    let answers = crash_everywhere(&n, "movie", BOOK, "compose u0 m0 7 every point", |n, answered| {
        let listed = movie_audit(n, BOOK);
        if let Some(answered) = answered {
            assert_eq!(listed, answered, "a retried compose is listed once");
        }
    });
    assert!(answers.len() >= 5, "a compose has only {} effects", answers.len() - 1);
    let swept: Vec<String> =
        answers.iter().map(|a| a.strip_prefix("composed ").unwrap_or_else(|| panic!("{a}")).to_string()).collect();
    // Then clients at once, on three movies.
    let composed = concurrently(&n, CLIENTS, |n, c, rng| {
        let mut composed = Vec::new();
        for r in 0..REQUESTS {
            let (movie, rating) = (rng.below(3), rng.below(11) as i64);
            let input = format!("compose u{c} m{movie} {rating} review {r} by u{c}, \"quoted\"");
            let crash = (r % 2 == 0).then(|| 1 + rng.below(12));
            let answered = invoke_crashing(n, "movie", BOOK, &input, &format!("c{c}-r{r}"), crash, |n| {
                movie_audit(n, BOOK);
            });
            let id = answered.text.strip_prefix("composed ").unwrap_or_else(|| panic!("{}", answered.text));
            composed.push((id.to_string(), format!("m{movie}"), rating));
        }
        composed
    });
    let total = swept.len() + composed.iter().map(Vec::len).sum::<usize>();
    assert_eq!(movie_audit(&n, BOOK), total);
    // Every user's list: exactly the reviews its client composed, each once.
    let mut want_by_movie: BTreeMap<String, Vec<Review>> = BTreeMap::new();
    for id in &swept {
        want_by_movie.entry("m0".into()).or_default().push((id.clone(), "u0".into(), 7));
    }
    for (c, composed) in composed.iter().enumerate() {
        let user = format!("u{c}");
        let mut want: Vec<String> = composed.iter().map(|(id, _, _)| id.clone()).collect();
        if c == 0 {
            want.splice(0..0, swept.iter().cloned());
        }
        assert_eq!(reviews_by(&n, BOOK, &user), want, "{user}: its reviews, once each, in order");
        for (id, movie, rating) in composed {
            want_by_movie.entry(movie.clone()).or_default().push((id.clone(), user.clone(), *rating));
        }
    }
    // Every movie's reviews: each once, with its user and rating, and the movie's count
    // and sum are theirs.
    for (movie, mut want) in want_by_movie {
        let ((count, sum), mut got) = movie_reviews(&n, BOOK, &movie);
        assert_eq!(count, got.len() as i64, "{movie}");
        assert_eq!(sum, got.iter().map(|(_, _, rating)| rating).sum::<i64>(), "{movie}");
        got.sort();
        want.sort();
        assert_eq!(got, want, "{movie}");
    }
}

/// The unsafe baselines answer the same commands, on their unsafe tables.
#[test]
fn the_unsafe_baselines_run_the_same_commands() {
    let (_dir, n) = node();
    n.deploy("travel-unsafe", &guest("travel"), "?tables=travel:unsafe");
    n.deploy("movie-unsafe", &guest("movie"), "?tables=movie:unsafe");
    let book = 43;
    assert_eq!(n.invoke_ok("travel-unsafe", book, "init 2 1 1 1 2"), "ok");
    let reserved = n.invoke_ok("travel-unsafe", book, "reserve u1 h1 f0 d1");
    let id = reserved.strip_prefix("reserved ").unwrap_or_else(|| panic!("{reserved}"));
    assert_eq!(n.invoke_ok("travel-unsafe", book, "reserve u0 h0 f0 d1"), "full f0");
    assert_eq!(n.invoke_ok("travel-unsafe", book, "search d1"), "hotels h0:1 h1:0; flights f0:0");
    assert_eq!(n.invoke_ok("travel-unsafe", book, "trips u1"), format!("[\"{id} h1 f0 d1\"]"));
    assert_eq!(n.invoke_ok("travel-unsafe", book, "audit d1"), "rooms 1 seats 1 trips 1");
    assert_eq!(n.invoke_ok("movie-unsafe", book, "init 2 2"), "ok");
    let composed = n.invoke_ok("movie-unsafe", book, "compose u1 m1 9 Fine.");
    let id = composed.strip_prefix("composed ").unwrap_or_else(|| panic!("{composed}"));
    assert_eq!(n.invoke_ok("movie-unsafe", book, "reviews m1"), format!("1 9\n{id} u1 9 \"Fine.\""));
    assert_eq!(n.invoke_ok("movie-unsafe", book, "reviews-by u1"), format!("[\"{id}\"]"));
    assert_eq!(n.invoke_ok("movie-unsafe", book, "audit"), "reviews 1");
}
