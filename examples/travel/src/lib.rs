//! Travel reservation: the hotel-and-flight workload of DeathStarBench as Beldi ported
//! it (Boki §7.2), as a Tally workflow. A request's frontend invocation runs each step
//! as a child invocation of this same function, exactly-once (a re-execution of the
//! frontend gets a finished step's logged output instead of running the step again),
//! and the steps keep hotels, flights and travellers in BokiStore objects.
//!
//! | input                                             | output                                                      |
//! |---------------------------------------------------|-------------------------------------------------------------|
//! | `init <hotels> <rooms> <flights> <seats> <users>` | makes hotels `h0`, `h1`, ... of `<rooms>` rooms a night, flights `f0`, ... of `<seats>` seats a day and travellers `u0`, ...; `ok` |
//! | `search <date>`                                   | `hotels h0:2 h1:0 ...; flights f0:5 ...`: what is left on `<date>` |
//! | `reserve <user> <hotel> <flight> <date>`          | `reserved <id>`; `full <hotel or flight>` if either has nothing left that day; `busy` if other bookings kept it waiting too long |
//! | `trips <user>`                                    | the user's trips: a JSON array of `"<id> <hotel> <flight> <date>"` |
//! | `audit <date>`                                    | `rooms <r> seats <s> trips <t>`: what is booked on `<date>`, read in one snapshot |
//!
//! Names and dates are 1 to 64 of `A-Z a-z 0-9 - _` (`u3`, `2024-05-01`); `init` names
//! everything after its index. Running `init` again starts from scratch (the unsafe
//! baseline below keeps what was booked: use a fresh book).
//!
//! `reserve` is the workflow: the step `login` checks that the user exists, then the step
//! `book` takes the BokiFlow locks of the hotel and of the flight and runs one BokiStore
//! transaction: it reads how many rooms and seats are left and, if both have one, books
//! the room, the seat and the user's trip in one commit record. So a reservation holds
//! both a room and a seat or neither, never more than a hotel or flight has, and its
//! reservation ID (the frontend's invocation ID, the same in every re-execution) is in
//! its user's trips once. The locks are Beldi's: its transactions lock every key they
//! touch. Here they make bookings of one hotel or flight queue up rather than fail each
//! other: the transaction reads the hotel's and the flight's whole objects, and two
//! concurrent transactions that read an object one of them writes conflict, and retry.
//! They are taken in name order, so that two bookings never wait on each other in a
//! cycle. `search` runs the steps `hotels` and `flights`, each one read-only transaction.
//!
//! **The unsafe baseline** (Boki Figure 12): deployed under a name ending in `-unsafe`,
//! the function runs the same steps as plain calls within one invocation (no child
//! invocations, no step log), keeps its data in the state table `travel`, which the
//! deploy must declare `unsafe`, and reads and writes it plainly: no transaction, no
//! lock. Concurrent bookings may overbook, a crash may leave a room booked without its
//! seat, and the client's retry of a crashed reservation books again.

use std::time::Duration;

use anyhow::{bail, Context};
use tally_sdk::{context, invoke, locks, objects, state};

/// The suffix of a function name that runs the unsafe baseline.
const UNSAFE_SUFFIX: &str = "-unsafe";
/// The state table of the unsafe baseline: a key per field of the objects of the safe
/// mode, `<object>/<field>`.
const TABLE: &str = "travel";
/// The object with how many hotels, flights and travellers `init` made.
const CATALOG: &str = "travel:catalog";
/// How long a booking waits for each of its locks before it answers `busy`.
const LOCK_WAIT: Duration = Duration::from_secs(5);
/// The longest name or date.
const NAME_BYTES_MAX: usize = 64;

/// How the function runs, from the name it was deployed under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Steps as child invocations, objects, locks and transactions.
    Tally,
    /// Steps as plain calls on an unsafe state table.
    Unsafe,
}

impl Mode {
    fn of_function() -> Mode {
        if context::function_name().ends_with(UNSAFE_SUFFIX) {
            Mode::Unsafe
        } else {
            Mode::Tally
        }
    }
}

/// What a client asks for.
enum Request<'a> {
    Init {
        hotels: u32,
        rooms: i64,
        flights: u32,
        seats: i64,
        users: u32,
    },
    Search {
        date: &'a str,
    },
    Reserve {
        user: &'a str,
        hotel: &'a str,
        flight: &'a str,
        date: &'a str,
    },
    Trips {
        user: &'a str,
    },
    Audit {
        date: &'a str,
    },
    /// A step of a workflow, which the frontend invokes.
    Step(Step<'a>),
}

/// A step of a workflow, as a child invocation's input: `step <name> <arguments>`.
enum Step<'a> {
    /// Fails unless `user` exists.
    Login { user: &'a str },
    /// The rooms or seats left on `date` in every hotel or flight.
    Free { kind: Kind, date: &'a str },
    /// Books a room, a seat and the trip `id` of `user`, or none of them.
    Book { id: &'a str, user: &'a str, hotel: &'a str, flight: &'a str, date: &'a str },
}

impl Request<'_> {
    fn parse(input: &[u8]) -> anyhow::Result<Request<'_>> {
        let input = std::str::from_utf8(input).context("the input is not UTF-8")?;
        let words: Vec<&str> = input.split_whitespace().collect();
        Ok(match words[..] {
            ["init", hotels, rooms, flights, seats, users] => Request::Init {
                hotels: number(hotels)?,
                rooms: number(rooms)?,
                flights: number(flights)?,
                seats: number(seats)?,
                users: number(users)?,
            },
            ["search", date] => Request::Search { date: name(date)? },
            ["reserve", user, hotel, flight, date] => {
                Request::Reserve { user: name(user)?, hotel: name(hotel)?, flight: name(flight)?, date: name(date)? }
            }
            ["trips", user] => Request::Trips { user: name(user)? },
            ["audit", date] => Request::Audit { date: name(date)? },
            ["step", "login", user] => Request::Step(Step::Login { user: name(user)? }),
            ["step", "hotels", date] => Request::Step(Step::Free { kind: Kind::Hotel, date: name(date)? }),
            ["step", "flights", date] => Request::Step(Step::Free { kind: Kind::Flight, date: name(date)? }),
            ["step", "book", id, user, hotel, flight, date] => Request::Step(Step::Book {
                id: name(id)?,
                user: name(user)?,
                hotel: name(hotel)?,
                flight: name(flight)?,
                date: name(date)?,
            }),
            _ => bail!(
                "expected `init <hotels> <rooms> <flights> <seats> <users>`, `search <date>`, \
                 `reserve <user> <hotel> <flight> <date>`, `trips <user>` or `audit <date>`"
            ),
        })
    }
}

impl Step<'_> {
    /// The input of the child invocation that runs this step.
    fn input(&self) -> String {
        match self {
            Step::Login { user } => format!("step login {user}"),
            Step::Free { kind: Kind::Hotel, date } => format!("step hotels {date}"),
            Step::Free { kind: Kind::Flight, date } => format!("step flights {date}"),
            Step::Book { id, user, hotel, flight, date } => format!("step book {id} {user} {hotel} {flight} {date}"),
        }
    }
}

fn handle(input: Vec<u8>) -> anyhow::Result<String> {
    let mode = Mode::of_function();
    match Request::parse(&input)? {
        Request::Init { hotels, rooms, flights, seats, users } => init(mode, [hotels, flights, users], rooms, seats),
        Request::Search { date } => {
            let hotels = call(mode, Step::Free { kind: Kind::Hotel, date })?;
            let flights = call(mode, Step::Free { kind: Kind::Flight, date })?;
            Ok(format!("hotels {hotels}; flights {flights}"))
        }
        Request::Reserve { user, hotel, flight, date } => {
            call(mode, Step::Login { user })?;
            let id = context::invocation_id();
            call(mode, Step::Book { id: &id, user, hotel, flight, date })
        }
        Request::Trips { user } => trips(mode, user)?.with_context(|| format!("no user {user:?}")),
        Request::Audit { date } => snapshot(mode, || audit(mode, date)),
        Request::Step(step) => run_step(mode, step),
    }
}

tally_sdk::handler!(handle);

/// Runs `step`: as a child invocation, or as a plain call in the unsafe baseline.
fn call(mode: Mode, step: Step) -> anyhow::Result<String> {
    match mode {
        Mode::Tally => {
            let output = invoke::call(&context::function_name(), step.input())?;
            String::from_utf8(output).context("a step's output is not UTF-8")
        }
        Mode::Unsafe => run_step(mode, step),
    }
}

fn run_step(mode: Mode, step: Step) -> anyhow::Result<String> {
    match step {
        Step::Login { user } => match trips(mode, user)? {
            Some(_) => Ok("ok".into()),
            None => bail!("no user {user:?}"),
        },
        Step::Free { kind, date } => snapshot(mode, || {
            let mut free = Vec::new();
            for i in 0..catalog(mode, kind.catalog_field())? {
                let name = format!("{}{i}", kind.letter());
                let (capacity, booked) = booked(mode, kind, &name, date)?;
                free.push(format!("{name}:{}", capacity - booked));
            }
            Ok(free.join(" "))
        }),
        Step::Book { id, user, hotel, flight, date } => match mode {
            Mode::Tally => book(id, user, hotel, flight, date),
            Mode::Unsafe => book_unsafe(id, user, hotel, flight, date),
        },
    }
}

/// Books a room of `hotel`, a seat of `flight` and the trip `id` of `user` on `date` in
/// one transaction, holding the locks of the hotel and the flight.
fn book(id: &str, user: &str, hotel: &str, flight: &str, date: &str) -> anyhow::Result<String> {
    let mut held = [Kind::Hotel.object(hotel), Kind::Flight.object(flight)];
    held.sort();
    for lock in &held {
        if !locks::acquire(lock, LOCK_WAIT)? {
            return Ok("busy".into());
        }
    }
    let booked = objects::transaction(|| -> anyhow::Result<String> {
        if let Some(full) = full(Mode::Tally, hotel, flight, date)? {
            return Ok(format!("full {full}"));
        }
        objects::increment(&Kind::Hotel.object(hotel), &booked_path(date), 1)?;
        objects::increment(&Kind::Flight.object(flight), &booked_path(date), 1)?;
        objects::push(&traveller(user), "/trips", &objects::json_string(&trip(id, hotel, flight, date)))?;
        Ok(format!("reserved {id}"))
    })?;
    // This step's invocation releases its locks when it finishes, right after this.
    Ok(booked.unwrap_or_else(|| "busy".into()))
}

/// [`book`] without transaction or locks: reads, then writes each count and the trips.
fn book_unsafe(id: &str, user: &str, hotel: &str, flight: &str, date: &str) -> anyhow::Result<String> {
    if let Some(full) = full(Mode::Unsafe, hotel, flight, date)? {
        return Ok(format!("full {full}"));
    }
    for (kind, name) in [(Kind::Hotel, hotel), (Kind::Flight, flight)] {
        let (_, booked) = booked(Mode::Unsafe, kind, name, date)?;
        state::put_i64(TABLE, field(&kind.object(name), &booked_path(date)), booked + 1)?;
    }
    let trips = trips(Mode::Unsafe, user)?.with_context(|| format!("no user {user:?}"))?;
    let trip = objects::json_string(&trip(id, hotel, flight, date));
    let trips = match trips.strip_suffix("[]") {
        Some(_) => format!("[{trip}]"),
        None => format!("{},{trip}]", trips.strip_suffix(']').context("the trips are a JSON array")?),
    };
    state::put(TABLE, field(&traveller(user), "/trips"), trips)?;
    Ok(format!("reserved {id}"))
}

/// The hotel or the flight that has nothing left on `date`, if either.
fn full<'a>(mode: Mode, hotel: &'a str, flight: &'a str, date: &str) -> anyhow::Result<Option<&'a str>> {
    for (kind, name) in [(Kind::Hotel, hotel), (Kind::Flight, flight)] {
        let (capacity, booked) = booked(mode, kind, name, date)?;
        if booked >= capacity {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// A hotel or a flight.
#[derive(Clone, Copy)]
enum Kind {
    Hotel,
    Flight,
}

impl Kind {
    /// The first letter of the names `init` gives.
    fn letter(self) -> char {
        match self {
            Kind::Hotel => 'h',
            Kind::Flight => 'f',
        }
    }

    fn catalog_field(self) -> &'static str {
        match self {
            Kind::Hotel => "/hotels",
            Kind::Flight => "/flights",
        }
    }

    /// The object of hotel or flight `name`, also the name of its lock: `{"capacity":
    /// <rooms or seats>, "booked": {"<date>": <count>, ...}}`.
    fn object(self, name: &str) -> String {
        match self {
            Kind::Hotel => format!("hotel:{name}"),
            Kind::Flight => format!("flight:{name}"),
        }
    }
}

/// The object of traveller `user`: `{"trips": ["<id> <hotel> <flight> <date>", ...]}`.
fn traveller(user: &str) -> String {
    format!("traveller:{user}")
}

fn trip(id: &str, hotel: &str, flight: &str, date: &str) -> String {
    format!("{id} {hotel} {flight} {date}")
}

fn booked_path(date: &str) -> String {
    format!("/booked/{date}")
}

/// The key of the unsafe table that holds `path` of `object`.
fn field(object: &str, path: &str) -> String {
    format!("{object}{path}")
}

/// Reads an integer field.
fn get_i64(mode: Mode, object: &str, path: &str) -> anyhow::Result<Option<i64>> {
    Ok(match mode {
        Mode::Tally => objects::get_i64(object, path)?,
        Mode::Unsafe => state::get_i64(TABLE, field(object, path))?,
    })
}

/// Sets an integer field.
fn set_i64(mode: Mode, object: &str, path: &str, value: i64) -> anyhow::Result<()> {
    match mode {
        Mode::Tally => objects::set(object, path, &value.to_string())?,
        Mode::Unsafe => state::put_i64(TABLE, field(object, path), value)?,
    }
    Ok(())
}

/// How many hotels, flights or travellers there are.
fn catalog(mode: Mode, path: &str) -> anyhow::Result<u32> {
    let count = get_i64(mode, CATALOG, path)?.context("nothing to find: run `init` first")?;
    u32::try_from(count).context("a count of the catalog is out of range")
}

/// The capacity of a hotel or flight and how much of it is booked on `date`.
fn booked(mode: Mode, kind: Kind, name: &str, date: &str) -> anyhow::Result<(i64, i64)> {
    let object = kind.object(name);
    let capacity = get_i64(mode, &object, "/capacity")?.with_context(|| format!("no {object}"))?;
    Ok((capacity, get_i64(mode, &object, &booked_path(date))?.unwrap_or(0)))
}

/// The trips of `user` as a JSON array, `None` for no such user.
fn trips(mode: Mode, user: &str) -> anyhow::Result<Option<String>> {
    Ok(match mode {
        Mode::Tally => objects::get(&traveller(user), "/trips")?,
        Mode::Unsafe => state::get(TABLE, field(&traveller(user), "/trips"))?
            .map(|trips| String::from_utf8(trips).context("trips are UTF-8"))
            .transpose()?,
    })
}

/// Runs `body` in one read-only transaction, or plainly in the unsafe baseline.
fn snapshot(mode: Mode, body: impl FnOnce() -> anyhow::Result<String>) -> anyhow::Result<String> {
    match mode {
        Mode::Tally => objects::read_only(body),
        Mode::Unsafe => body(),
    }
}

/// Makes the catalog, every hotel and flight with nothing booked, and every traveller
/// with no trips. Not a transaction: a setup, which may make more objects than one
/// transaction holds.
fn init(mode: Mode, [hotels, flights, users]: [u32; 3], rooms: i64, seats: i64) -> anyhow::Result<String> {
    for (kind, count, capacity) in [(Kind::Hotel, hotels, rooms), (Kind::Flight, flights, seats)] {
        for i in 0..count {
            let object = kind.object(&format!("{}{i}", kind.letter()));
            match mode {
                Mode::Tally => objects::set(&object, "", &format!(r#"{{"capacity":{capacity},"booked":{{}}}}"#))?,
                // The table keeps what an earlier `init` booked: the baseline does not
                // know which dates to clear.
                Mode::Unsafe => state::put_i64(TABLE, field(&object, "/capacity"), capacity)?,
            }
        }
    }
    for i in 0..users {
        let user = traveller(&format!("u{i}"));
        match mode {
            Mode::Tally => objects::set(&user, "", r#"{"trips":[]}"#)?,
            Mode::Unsafe => state::put(TABLE, field(&user, "/trips"), "[]")?,
        }
    }
    for (path, count) in [("/hotels", hotels), ("/flights", flights), ("/users", users)] {
        set_i64(mode, CATALOG, path, i64::from(count))?;
    }
    Ok("ok".into())
}

/// Rooms, seats and trips booked on `date`.
fn audit(mode: Mode, date: &str) -> anyhow::Result<String> {
    let mut sums = [0i64; 2];
    for (sum, kind) in sums.iter_mut().zip([Kind::Hotel, Kind::Flight]) {
        for i in 0..catalog(mode, kind.catalog_field())? {
            *sum += booked(mode, kind, &format!("{}{i}", kind.letter()), date)?.1;
        }
    }
    let mut trips_on_date = 0;
    for i in 0..catalog(mode, "/users")? {
        let user = format!("u{i}");
        let trips = trips(mode, &user)?.with_context(|| format!("no user {user:?}"))?;
        // Trips are strings of name characters and spaces: no escapes, no commas.
        trips_on_date += trips
            .trim_matches(|c| c == '[' || c == ']')
            .split(',')
            .filter(|trip| trip.trim().trim_matches('"').rsplit(' ').next() == Some(date))
            .count();
    }
    let [rooms, seats] = sums;
    Ok(format!("rooms {rooms} seats {seats} trips {trips_on_date}"))
}

/// A name, date or reservation ID: 1 to 64 of `A-Z a-z 0-9 - _`, which needs no escaping in a JSON
/// pointer, a JSON string or a lock name.
fn name(word: &str) -> anyhow::Result<&str> {
    let ok = word.len() <= NAME_BYTES_MAX && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !ok {
        bail!("{word:?} is not a name: 1 to {NAME_BYTES_MAX} of A-Z a-z 0-9 - _");
    }
    Ok(word)
}

fn number<T: std::str::FromStr>(word: &str) -> anyhow::Result<T> {
    word.parse().ok().with_context(|| format!("{word:?} is not a count"))
}
