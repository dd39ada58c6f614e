//! Movie reviews: the media workload of DeathStarBench as Beldi ported it (Boki §7.2),
//! as a Tally workflow. A request's frontend invocation runs each step as a child
//! invocation of this same function, exactly-once (a re-execution of the frontend gets
//! a finished step's logged output instead of running the step again), and the steps
//! keep movies, reviewers and reviews in BokiStore objects.
//!
//! | input                                  | output                                                       |
//! |----------------------------------------|--------------------------------------------------------------|
//! | `init <movies> <users>`                | makes movies `m0`, `m1`, ... and reviewers `u0`, ... with no reviews; `ok` |
//! | `compose <user> <movie> <rating> <text>` | stores a review (rating 0 to 10, any text); `composed <id>` |
//! | `reviews <movie>`                      | `<count> <rating sum>`, then a line `<id> <user> <rating> <text as a JSON string>` per review |
//! | `reviews-by <user>`                    | the user's review IDs, a JSON array                          |
//! | `audit`                                | `reviews <n>` if every movie's and user's lists and ratings agree, read in one snapshot; else `inconsistent: ...` |
//!
//! Names are 1 to 64 of `A-Z a-z 0-9 - _`; `init` names everything after its index.
//! Running `init` again starts from scratch (the unsafe baseline below keeps the reviews:
//! use a fresh book).
//!
//! `compose` is the workflow, DeathStarBench's ComposeReview: the step `unique-id` makes
//! the review's ID (its own invocation ID), the steps `user` and `movie` check that both
//! exist, and the step `store` writes, in one BokiStore transaction, the review, its ID
//! in the user's list and in the movie's, and the movie's rating sum and count: all of
//! it or nothing, in one commit record. Its writes are blind (it reads nothing), so
//! concurrent reviews of one movie never conflict. `reviews` and `audit` read in one
//! read-only transaction, so they never see half a review.
//!
//! **The unsafe baseline** (Boki Figure 12): deployed under a name ending in `-unsafe`,
//! the function runs the same steps as plain calls within one invocation (no child
//! invocations, no step log), keeps its data in the state table `movie`, which the deploy
//! must declare `unsafe`, and reads and writes it plainly: no transaction. Concurrent
//! reviews of one movie may lose each other's list entries and rating updates, and a
//! crash may leave a review in the user's list but not in the movie's.

use anyhow::{bail, ensure, Context};
use tally_sdk::{context, invoke, objects, state};

/// The suffix of a function name that runs the unsafe baseline.
const UNSAFE_SUFFIX: &str = "-unsafe";
/// The state table of the unsafe baseline: a key per field of the objects of the safe
/// mode, `<object>/<field>`.
const TABLE: &str = "movie";
/// The object with how many movies and reviewers `init` made.
const CATALOG: &str = "movies:catalog";
/// The longest name.
const NAME_BYTES_MAX: usize = 64;
/// The longest review text, in bytes.
const TEXT_BYTES_MAX: usize = 4096;
/// The highest rating.
const RATING_MAX: i64 = 10;

/// How the function runs, from the name it was deployed under.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Steps as child invocations, objects and transactions.
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
        movies: u32,
        users: u32,
    },
    Compose {
        user: &'a str,
        movie: &'a str,
        rating: i64,
        text: &'a str,
    },
    Reviews {
        movie: &'a str,
    },
    ReviewsBy {
        user: &'a str,
    },
    Audit,
    /// A step of a workflow, which the frontend invokes.
    Step(Step<'a>),
}

/// A step of a workflow, as a child invocation's input: `step <name> <arguments>`.
enum Step<'a> {
    /// A new review ID.
    UniqueId,
    /// Fails unless reviewer `user` exists.
    User { user: &'a str },
    /// Fails unless `movie` exists.
    Movie { movie: &'a str },
    /// Stores review `id` everywhere it belongs.
    Store { id: &'a str, user: &'a str, movie: &'a str, rating: i64, text: &'a str },
}

impl Request<'_> {
    fn parse(input: &[u8]) -> anyhow::Result<Request<'_>> {
        let input = std::str::from_utf8(input).context("the input is not UTF-8")?;
        let words: Vec<&str> = input.split_whitespace().collect();
        Ok(match words[..] {
            ["init", movies, users] => Request::Init { movies: number(movies)?, users: number(users)? },
            ["compose", ..] => {
                let ([user, movie, rating], text) = words_then_text(input)?;
                Request::Compose { user: name(user)?, movie: name(movie)?, rating: rating_of(rating)?, text }
            }
            ["reviews", movie] => Request::Reviews { movie: name(movie)? },
            ["reviews-by", user] => Request::ReviewsBy { user: name(user)? },
            ["audit"] => Request::Audit,
            ["step", "unique-id"] => Request::Step(Step::UniqueId),
            ["step", "user", user] => Request::Step(Step::User { user: name(user)? }),
            ["step", "movie", movie] => Request::Step(Step::Movie { movie: name(movie)? }),
            ["step", "store", ..] => {
                let ([_, id, user, movie, rating], text) = words_then_text(input)?;
                Request::Step(Step::Store {
                    id: review_id(id)?,
                    user: name(user)?,
                    movie: name(movie)?,
                    rating: rating_of(rating)?,
                    text,
                })
            }
            _ => bail!(
                "expected `init <movies> <users>`, `compose <user> <movie> <rating> <text>`, \
                 `reviews <movie>`, `reviews-by <user>` or `audit`"
            ),
        })
    }
}

impl Step<'_> {
    /// The input of the child invocation that runs this step.
    fn input(&self) -> String {
        match self {
            Step::UniqueId => "step unique-id".into(),
            Step::User { user } => format!("step user {user}"),
            Step::Movie { movie } => format!("step movie {movie}"),
            Step::Store { id, user, movie, rating, text } => format!("step store {id} {user} {movie} {rating} {text}"),
        }
    }
}

fn handle(input: Vec<u8>) -> anyhow::Result<String> {
    let mode = Mode::of_function();
    match Request::parse(&input)? {
        Request::Init { movies, users } => init(mode, movies, users),
        Request::Compose { user, movie, rating, text } => {
            let id = call(mode, Step::UniqueId)?;
            call(mode, Step::User { user })?;
            call(mode, Step::Movie { movie })?;
            call(mode, Step::Store { id: &id, user, movie, rating, text })
        }
        Request::Reviews { movie } => snapshot(mode, || reviews(mode, movie)),
        Request::ReviewsBy { user } => get(mode, &reviewer(user), "/reviews")?.with_context(|| format!("no user {user:?}")),
        Request::Audit => snapshot(mode, || audit(mode)),
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
        // Unique among invocations, and the same in every execution of this one.
        Step::UniqueId => Ok(context::invocation_id()),
        Step::User { user } => exists(mode, &reviewer(user), "/reviews"),
        Step::Movie { movie } => exists(mode, &movie_object(movie), "/reviews"),
        Step::Store { id, user, movie, rating, text } => {
            let rating_json = rating.to_string();
            let (user_json, movie_json) = (objects::json_string(user), objects::json_string(movie));
            let review = [
                ("user", user_json.as_str()),
                ("movie", &movie_json),
                ("rating", &rating_json),
                ("text", &objects::json_string(text)),
            ];
            let (listed, by_movie) = (objects::json_string(id), objects::json_string(&format!("{id}:{rating}")));
            let (review_object, movie) = (review_object(id), movie_object(movie));
            match mode {
                Mode::Tally => {
                    let review = review.map(|(name, json)| format!("\"{name}\":{json}")).join(",");
                    objects::transaction(|| -> anyhow::Result<()> {
                        objects::set(&review_object, "", &format!("{{{review}}}"))?;
                        objects::push(&reviewer(user), "/reviews", &listed)?;
                        objects::push(&movie, "/reviews", &by_movie)?;
                        objects::increment(&movie, "/rating_sum", rating)?;
                        objects::increment(&movie, "/rating_count", 1)?;
                        Ok(())
                    })?
                    .context("a transaction of blind writes conflicted")?;
                }
                Mode::Unsafe => {
                    for (name, json) in review {
                        state::put(TABLE, field(&review_object, &format!("/{name}")), json)?;
                    }
                    push_unsafe(&reviewer(user), &listed)?;
                    push_unsafe(&movie, &by_movie)?;
                    for (path, by) in [("/rating_sum", rating), ("/rating_count", 1)] {
                        let value = get_i64(mode, &movie, path)?.unwrap_or(0);
                        state::put_i64(TABLE, field(&movie, path), value + by)?;
                    }
                }
            }
            Ok(format!("composed {id}"))
        }
    }
}

/// `ok` if `path` of `object` exists; fails otherwise.
fn exists(mode: Mode, object: &str, path: &str) -> anyhow::Result<String> {
    ensure!(get(mode, object, path)?.is_some(), "no {object}");
    Ok("ok".into())
}

/// Appends `json` to the JSON array at `/reviews` of `object` in the unsafe table, by
/// reading it and writing it back.
fn push_unsafe(object: &str, json: &str) -> anyhow::Result<()> {
    let list = get(Mode::Unsafe, object, "/reviews")?.with_context(|| format!("no {object}"))?;
    let list = match list.as_str() {
        "[]" => format!("[{json}]"),
        _ => format!("{},{json}]", list.strip_suffix(']').context("a list is a JSON array")?),
    };
    state::put(TABLE, field(object, "/reviews"), list)?;
    Ok(())
}

/// The object of movie `name`: `{"reviews": ["<id>:<rating>", ...], "rating_sum": <n>,
/// "rating_count": <n>}`.
fn movie_object(name: &str) -> String {
    format!("movie:{name}")
}

/// The object of reviewer `user`: `{"reviews": ["<id>", ...]}`.
fn reviewer(user: &str) -> String {
    format!("reviewer:{user}")
}

/// The object of review `id`: `{"user", "movie", "rating", "text"}`.
fn review_object(id: &str) -> String {
    format!("review:{id}")
}

/// The key of the unsafe table that holds `path` of `object`.
fn field(object: &str, path: &str) -> String {
    format!("{object}{path}")
}

/// The JSON text at `path` of `object`, a field's key in the unsafe table.
fn get(mode: Mode, object: &str, path: &str) -> anyhow::Result<Option<String>> {
    Ok(match mode {
        Mode::Tally => objects::get(object, path)?,
        Mode::Unsafe => state::get(TABLE, field(object, path))?
            .map(|value| String::from_utf8(value).context("a value is UTF-8"))
            .transpose()?,
    })
}

fn get_i64(mode: Mode, object: &str, path: &str) -> anyhow::Result<Option<i64>> {
    get(mode, object, path)?.map(|json| json.parse().with_context(|| format!("{path} of {object} is {json}"))).transpose()
}

/// How many movies or reviewers there are.
fn catalog(mode: Mode, path: &str) -> anyhow::Result<u32> {
    let count = get_i64(mode, CATALOG, path)?.context("nothing to review: run `init` first")?;
    u32::try_from(count).context("a count of the catalog is out of range")
}

/// Runs `body` in one read-only transaction, or plainly in the unsafe baseline.
fn snapshot(mode: Mode, body: impl FnOnce() -> anyhow::Result<String>) -> anyhow::Result<String> {
    match mode {
        Mode::Tally => objects::read_only(body),
        Mode::Unsafe => body(),
    }
}

/// Makes the catalog, every movie and every reviewer with no reviews. Not a
/// transaction: a setup, which may make more objects than one transaction holds.
fn init(mode: Mode, movies: u32, users: u32) -> anyhow::Result<String> {
    let movie = r#"{"reviews":[],"rating_sum":0,"rating_count":0}"#;
    let catalog = format!(r#"{{"movies":{movies},"users":{users}}}"#);
    let made = (0..movies)
        .map(|i| (movie_object(&format!("m{i}")), movie))
        .chain((0..users).map(|i| (reviewer(&format!("u{i}")), r#"{"reviews":[]}"#)))
        .chain([(CATALOG.to_string(), catalog.as_str())]);
    for (object, json) in made {
        match mode {
            Mode::Tally => objects::set(&object, "", json)?,
            // The baseline keeps each field of the safe mode's object under a key.
            Mode::Unsafe => {
                for (path, value) in top_level_fields(json) {
                    state::put(TABLE, field(&object, &path), value)?;
                }
            }
        }
    }
    Ok("ok".into())
}

/// The fields of a flat JSON object whose values are numbers or empty arrays, as
/// (`/name`, value) pairs: what `init` writes.
fn top_level_fields(json: &str) -> Vec<(String, &str)> {
    json.trim_matches(|c| c == '{' || c == '}')
        .split(',')
        .filter_map(|pair| pair.split_once(':'))
        .map(|(name, value)| (format!("/{}", name.trim_matches('"')), value))
        .collect()
}

/// `<count> <rating sum>`, then a line per review of `movie`.
fn reviews(mode: Mode, movie: &str) -> anyhow::Result<String> {
    let object = movie_object(movie);
    let count = get_i64(mode, &object, "/rating_count")?.with_context(|| format!("no movie {movie:?}"))?;
    let mut lines = vec![format!("{count} {}", get_i64(mode, &object, "/rating_sum")?.unwrap_or(0))];
    for entry in json_strings(&get(mode, &object, "/reviews")?.unwrap_or_default()) {
        let (id, _) = entry.split_once(':').context("a movie's list holds <id>:<rating>")?;
        let review = review_object(id);
        let field = |path| get(mode, &review, path)?.with_context(|| format!("no {review} of movie {movie}"));
        let (user, rating, text) = (field("/user")?, field("/rating")?, field("/text")?);
        lines.push(format!("{id} {} {rating} {text}", user.trim_matches('"')));
    }
    Ok(lines.join("\n"))
}

/// Whether every movie's list, rating sum and count and every user's list agree: the
/// same review IDs, each once.
fn audit(mode: Mode) -> anyhow::Result<String> {
    let mut by_movies = Vec::new();
    for i in 0..catalog(mode, "/movies")? {
        let object = movie_object(&format!("m{i}"));
        let list = get(mode, &object, "/reviews")?.with_context(|| format!("no {object}"))?;
        let (mut count, mut sum) = (0, 0);
        for entry in json_strings(&list) {
            let (id, rating) = entry.split_once(':').context("a movie's list holds <id>:<rating>")?;
            by_movies.push(id.to_string());
            count += 1;
            sum += rating_of(rating)?;
        }
        let counted = (get_i64(mode, &object, "/rating_count")?, get_i64(mode, &object, "/rating_sum")?);
        if counted != (Some(count), Some(sum)) {
            return Ok(format!("inconsistent: {object} lists {count} reviews rated {sum} in all, but counts {counted:?}"));
        }
    }
    let mut by_users = Vec::new();
    for i in 0..catalog(mode, "/users")? {
        let object = reviewer(&format!("u{i}"));
        let list = get(mode, &object, "/reviews")?.with_context(|| format!("no {object}"))?;
        by_users.extend(json_strings(&list).into_iter().map(str::to_string));
    }
    by_movies.sort();
    by_users.sort();
    if by_movies.windows(2).any(|pair| pair[0] == pair[1]) {
        return Ok("inconsistent: a review is listed twice by the movies".into());
    }
    if by_movies != by_users {
        return Ok(format!(
            "inconsistent: the movies list {} reviews, the users {}, not the same",
            by_movies.len(),
            by_users.len()
        ));
    }
    Ok(format!("reviews {}", by_movies.len()))
}

/// The strings of a JSON array of strings without escapes or commas (review IDs,
/// `<id>:<rating>`).
fn json_strings(array: &str) -> Vec<&str> {
    array
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().trim_matches('"'))
        .filter(|s| !s.is_empty())
        .collect()
}

/// The `N` words after the command word, and the text after them.
fn words_then_text<const N: usize>(input: &str) -> anyhow::Result<([&str; N], &str)> {
    let mut rest = input.trim_start();
    // The command word itself.
    rest = rest[rest.find(char::is_whitespace).unwrap_or(rest.len())..].trim_start();
    let mut words = [""; N];
    for word in &mut words {
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        ensure!(end > 0, "expected {N} words and a text after {:?}", input.split_whitespace().next());
        *word = &rest[..end];
        rest = rest[end..].trim_start();
    }
    let text = rest.trim_end();
    ensure!(!text.is_empty() && text.len() <= TEXT_BYTES_MAX, "a review's text is 1 to {TEXT_BYTES_MAX} bytes");
    Ok((words, text))
}

/// A name: 1 to 64 of `A-Z a-z 0-9 - _`, which needs no escaping in a JSON string.
fn name(word: &str) -> anyhow::Result<&str> {
    let ok = word.len() <= NAME_BYTES_MAX && word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    ensure!(ok, "{word:?} is not a name: 1 to {NAME_BYTES_MAX} of A-Z a-z 0-9 - _");
    Ok(word)
}

/// A review ID as `unique-id` makes it: an invocation ID, hex digits and `/`.
fn review_id(word: &str) -> anyhow::Result<&str> {
    let ok = word.len() <= 2 * NAME_BYTES_MAX && word.bytes().all(|b| b.is_ascii_hexdigit() || b == b'/');
    ensure!(ok, "{word:?} is not a review ID");
    Ok(word)
}

fn rating_of(word: &str) -> anyhow::Result<i64> {
    match word.parse() {
        Ok(rating) if (0..=RATING_MAX).contains(&rating) => Ok(rating),
        _ => bail!("{word:?} is not a rating from 0 to {RATING_MAX}"),
    }
}

fn number(word: &str) -> anyhow::Result<u32> {
    word.parse().ok().with_context(|| format!("{word:?} is not a count"))
}
