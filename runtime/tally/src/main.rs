//! `tally`: runs a development node or the nodes of a cluster, and talks to a gateway
//! over HTTP.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Args, Parser, Subcommand};
pub(crate) use tally::gateway::url_escape;
use tally::node::{Node, NodeConfig};

mod cli;

/// mimalloc rather than glibc's malloc: a loaded node spent ~13% of its CPU in malloc
/// and free (many small, short-lived buffers across threads), where mimalloc's
/// thread-local free lists cost a fraction of that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "tally", version, about = "Tally: Wasm functions on a shared log")]
struct Cli {
    #[command(subcommand)]
    command: Verb,
}

#[derive(Subcommand)]
enum Verb {
    /// Run every role in one process on loopback, with its data under --data-dir.
    Dev(Box<cli::dev::DevArgs>),
    /// Deploy a component as the next version of a function.
    Deploy(DeployArgs),
    /// Invoke a function and print its output.
    Invoke(InvokeArgs),
    /// List the deployed functions.
    Functions(FunctionsArgs),
    /// Print the records of a book.
    Book(BookArgs),
    /// List a book's invocations (what is kept of them), by function, status, key, time
    /// and duration.
    Invocations(cli::inspect::InvocationsArgs),
    /// Show an invocation's logged steps: seqnum, kind, table, key, protocol, value.
    Steps(cli::inspect::StepsArgs),
    /// Run a read-only SQL query over functions, invocations, steps, records, state,
    /// tables, objects, queues, schedules and logs (`AS OF <seqnum>` reads the past).
    Sql(cli::inspect::SqlArgs),
    /// Who wrote a value: the invocation, attempt and step, its seqnum, input, key and
    /// trace, and the value before (a state key, or a durable object with --object).
    Why(cli::inspect::WhyArgs),
    /// Show a state table's protocol, or switch it with --protocol.
    Table(TableArgs),
    /// Create, inspect, pause, resume, trigger and delete schedules.
    #[command(subcommand)]
    Schedule(cli::schedule::ScheduleVerb),
    /// Set, unset and list a function's settings and secrets (wasi:config, the
    /// environment), without a redeploy.
    #[command(subcommand)]
    Config(cli::config::ConfigVerb),
    /// Print what a function's guests printed (stdout, stderr) and the platform's lines
    /// about them, per invocation and attempt; --follow for new ones.
    Logs(cli::logs::LogsArgs),
    /// Complete a promise (what an invocation's promise-await gets), once.
    Complete(CompleteArgs),
    /// Cancel an invocation and its children (they see `cancelled` at their next step).
    Cancel(CancelArgs),
    /// Print a durable object of a book (its JSON value, or the value at --path).
    Object(ObjectArgs),
    /// Show how many messages wait in a queue of a book, per shard.
    Queue(NamedArgs),
    /// Show which invocation holds a lock of a book.
    Lock(NamedArgs),
    /// Make a new function project that echoes its input: Rust, Python, JavaScript,
    /// TypeScript, Go or C.
    New(NewArgs),
    /// Build the function project in a directory (any language) and print the component's
    /// path as the last line.
    Build(BuildArgs),
    /// Install the JavaScript build tools `tally build` uses and print their bin
    /// directory (for the SDK's own tests).
    #[command(hide = true)]
    JsTools,
    /// Run one node of a cluster: the roles its configuration file names.
    Node(NodeArgs),
    /// Make, start, inspect and stop a cluster of node processes in a directory.
    #[command(subcommand)]
    Cluster(cli::cluster::ClusterVerb),
    /// Create, list and revoke API tokens (admins only). The CLI sends TALLY_TOKEN, or
    /// the file TALLY_TOKEN_FILE names, or the token `tally dev` saved for the gateway.
    #[command(subcommand)]
    Token(cli::token::TokenVerb),
    /// Who deployed, configured or deleted which function, and made or revoked which
    /// token, in log order (admins only).
    Audit(cli::token::ListArgs),
}

#[derive(Args)]
struct NodeArgs {
    /// The node's configuration (written by `tally cluster init`).
    #[arg(long, short)]
    config: PathBuf,
}

/// Where the gateway is.
#[derive(Args)]
struct Remote {
    /// The gateway's URL.
    #[arg(long, env = "TALLY_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
}

/// `--json`: the gateway's JSON as is, instead of a table for people.
#[derive(Args)]
struct Json {
    /// Print the gateway's JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct FunctionsArgs {
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct DeployArgs {
    /// The component (.wasm).
    file: PathBuf,
    /// The function's name.
    #[arg(long)]
    name: String,
    /// Limit overrides, e.g. --limit timeout_ms=500 --limit memory_bytes=67108864.
    #[arg(long = "limit", value_name = "KEY=VALUE")]
    limits: Vec<String>,
    /// The protocol of a state table, e.g. --table accounts=write-optimized.
    #[arg(long = "table", value_name = "TABLE=PROTOCOL")]
    tables: Vec<String>,
    /// A destination the function may send requests to, e.g. --outbound
    /// https://api.example.com (repeatable; none by default). See docs/http.md.
    #[arg(long = "outbound", value_name = "SCHEME://HOST[:PORT]")]
    outbound: Vec<String>,
    /// A route of an HTTP function, e.g. --route /api or --route shop.example.com/@7
    /// (repeatable; the function is always at /fn/NAME too). See docs/http.md.
    #[arg(long = "route", value_name = "[HOST]/PREFIX[@BOOK]")]
    routes: Vec<String>,
    /// A setting the function reads through wasi:config or its environment (repeatable;
    /// `tally config` changes them later).
    #[arg(long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
    /// A secret setting: sealed at rest, never listed or logged (repeatable).
    #[arg(long = "secret", value_name = "KEY=VALUE")]
    secrets: Vec<String>,
    /// An HTTP function anyone may call without a token (webhooks, web pages).
    #[arg(long)]
    public: bool,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct InvokeArgs {
    name: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    /// The input, as text.
    #[arg(long, conflicts_with = "file")]
    data: Option<String>,
    /// The input, from a file.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Start the invocation and print its ID instead of waiting.
    #[arg(long = "async")]
    background: bool,
    /// Makes the invocation exactly-once across retries with the same key: a retry
    /// gets the first one's result.
    #[arg(long, conflicts_with = "background")]
    idempotency_key: Option<String>,
    /// Start the function this much later (durably): milliseconds, or a number with
    /// ms, s, m, h or d.
    #[arg(long)]
    delay: Option<String>,
    /// Address the invocation to a key: it runs alone among the function's invocations
    /// with that key (per-key serialization).
    #[arg(long)]
    key: Option<String>,
    /// With --key: run concurrently with the key's other invocations (a read-only
    /// handler).
    #[arg(long, requires = "key")]
    shared: bool,
    /// Of an HTTP function: send a request with this method (default POST) to it at
    /// /fn/NAME and print its response's body (see docs/http.md).
    #[arg(long, conflicts_with_all = ["background", "delay", "key"])]
    method: Option<String>,
    /// Of an HTTP function: the request's path below the function, with its query.
    #[arg(long, conflicts_with_all = ["background", "delay", "key"])]
    path: Option<String>,
    /// Of an HTTP function: a request header, NAME:VALUE (repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE", conflicts_with_all = ["background", "delay", "key"])]
    headers: Vec<String>,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct ObjectArgs {
    /// The object's name.
    name: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    /// A JSON pointer into the object (`/field/0`).
    #[arg(long, default_value = "")]
    path: String,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct NamedArgs {
    /// The queue's or lock's name.
    name: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct CancelArgs {
    /// The invocation's ID.
    id: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct CompleteArgs {
    /// The promise's ID (what promise-create returned).
    promise: String,
    #[arg(long, default_value_t = 0)]
    book: u64,
    /// The value, as text.
    #[arg(long, conflicts_with = "file")]
    data: Option<String>,
    /// The value, from a file.
    #[arg(long)]
    file: Option<PathBuf>,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct BookArgs {
    book: u64,
    /// A tag number or name (names are hashed as the SDKs do).
    #[arg(long)]
    tag: Option<String>,
    /// The first seqnum.
    #[arg(long)]
    from: Option<u64>,
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct TableArgs {
    book: u64,
    table: String,
    /// Switch to read-optimized or write-optimized (without pausing invocations), or
    /// let the runtime choose with auto.
    #[arg(long)]
    protocol: Option<String>,
    #[command(flatten)]
    json: Json,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct BuildArgs {
    /// The project's directory.
    #[arg(default_value = ".")]
    dir: PathBuf,
    /// The project's language, if its files do not tell.
    #[arg(long, value_enum)]
    lang: Option<cli::build::Lang>,
}

#[derive(Args)]
struct NewArgs {
    /// The language.
    #[arg(long, value_enum)]
    lang: cli::build::Lang,
    /// An HTTP function: a wasi:http proxy component that answers requests at
    /// /fn/NAME/... (see docs/http.md), instead of `handle(bytes) -> bytes`.
    #[arg(long)]
    http: bool,
    /// The project's name; a directory of this name is made for it.
    name: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Verb::Dev(a) => cli::dev::dev(*a),
        Verb::Deploy(a) => deploy(a),
        Verb::Invoke(a) => invoke(a),
        Verb::Functions(a) => get_json(&a.remote, "/v1/functions", &a.json, cli::output::functions),
        Verb::Book(a) => book(a),
        Verb::Invocations(a) => cli::inspect::invocations(a),
        Verb::Steps(a) => cli::inspect::steps(a),
        Verb::Sql(a) => cli::inspect::sql(a),
        Verb::Why(a) => cli::inspect::why(a),
        Verb::Table(a) => table(a),
        Verb::Schedule(v) => cli::schedule::run(v),
        Verb::Config(v) => cli::config::run(v),
        Verb::Logs(a) => cli::logs::run(a),
        Verb::Complete(a) => complete(a),
        Verb::Cancel(a) => cancel(a),
        Verb::Object(a) => object(a),
        Verb::Queue(a) => {
            let path = format!("/v1/books/{}/queues/{}", a.book, url_escape(&a.name));
            get_json(&a.remote, &path, &a.json, cli::output::queue)
        }
        Verb::Lock(a) => {
            let path = format!("/v1/books/{}/locks/{}", a.book, url_escape(&a.name));
            get_json(&a.remote, &path, &a.json, cli::output::lock)
        }
        Verb::New(a) => cli::new::new(a.lang, a.http, &a.name),
        Verb::Build(a) => cli::build::build(&a.dir, a.lang).map(|built| {
            for path in built {
                println!("{}", path.display());
            }
        }),
        Verb::JsTools => cli::sdk::Sdk::materialize()
            .and_then(|sdk| cli::tools::node_tools(&sdk.lang("js").join("tools")))
            .map(|tools| println!("{}", tools.bin().display())),
        Verb::Node(a) => node(a),
        Verb::Cluster(v) => cli::cluster::run(v),
        Verb::Token(v) => cli::token::run(v),
        Verb::Audit(a) => cli::token::audit_of(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tally: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn node(args: NodeArgs) -> anyhow::Result<()> {
    init_tracing();
    let config = NodeConfig::load(&args.config)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let node = Node::start(config).await?;
        if let Some((_, addr)) = &node.function {
            println!("tally node {}: http api at http://{addr}", node.config.name);
        } else {
            println!("tally node {}: started", node.config.name);
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let stopped = tokio::select! {
            r = tokio::signal::ctrl_c() => r.map(|()| None)?,
            _ = term.recv() => None,
            role = node.role_stopped() => Some(role),
        };
        eprintln!("tally node: stopping");
        node.shutdown().await;
        if let Some(role) = stopped {
            anyhow::bail!("the node's {role:?} role stopped (the log above says why); restart the node over its data");
        }
        Ok(())
    })
}

fn init_tracing() {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info,quinn=warn".into()))
        .with_writer(std::io::stderr)
        // Node logs go to files under a cluster directory: no colour codes there.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}

/// The CLI's HTTP client for the gateway at `url`: every request carries its token,
/// and an https gateway must show a certificate of its CA (`cli/token.rs`).
fn agent(url: &str) -> ureq::Agent {
    let tls = cli::token::tls_for(url).unwrap_or_else(|e| {
        eprintln!("tally: {e:#}");
        std::process::exit(1)
    });
    ureq::Agent::config_builder().http_status_as_error(false).middleware(cli::token::authorize).tls_config(tls).build().into()
}

/// Prints a response body; a status other than 2xx is an error with the body's message.
fn finish(mut response: ureq::http::Response<ureq::Body>) -> anyhow::Result<Vec<u8>> {
    let status = response.status();
    let body = response.body_mut().with_config().limit(1 << 30).read_to_vec()?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        bail!("{status}: {}", text.trim());
    }
    Ok(body)
}

fn print(body: &[u8]) {
    use std::io::Write;
    let mut out = std::io::stdout();
    let _ = out.write_all(body);
    if !body.ends_with(b"\n") {
        let _ = out.write_all(b"\n");
    }
}

/// Prints a gateway's JSON answer, as is with `--json`, else rendered by `render`.
fn show(body: &[u8], json: &Json, render: fn(&serde_json::Value) -> String) -> anyhow::Result<()> {
    if json.json {
        print(body);
    } else {
        let value: serde_json::Value = serde_json::from_slice(body).context("the gateway's answer is not JSON")?;
        print!("{}", render(&value));
    }
    Ok(())
}

fn get_json(remote: &Remote, path: &str, json: &Json, render: fn(&serde_json::Value) -> String) -> anyhow::Result<()> {
    let response = agent(&remote.url).get(format!("{}{path}", remote.url)).call()?;
    show(&finish(response)?, json, render)
}

fn deploy(args: DeployArgs) -> anyhow::Result<()> {
    let component = std::fs::read(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let mut query = Vec::new();
    for kv in &args.limits {
        if !kv.contains('=') {
            bail!("--limit takes KEY=VALUE, got {kv:?}");
        }
        query.push(kv.clone());
    }
    let mut tables = Vec::new();
    for tp in &args.tables {
        let Some((table, protocol)) = tp.split_once('=') else {
            bail!("--table takes TABLE=PROTOCOL, got {tp:?}");
        };
        tables.push(format!("{table}:{protocol}"));
    }
    if !tables.is_empty() {
        query.push(format!("tables={}", tables.join(",")));
    }
    if !args.outbound.is_empty() {
        query.push(format!("outbound={}", url_escape(&args.outbound.join(","))));
    }
    if !args.routes.is_empty() {
        query.push(format!("routes={}", url_escape(&args.routes.join(","))));
    }
    if args.public {
        query.push("public=true".into());
    }
    let url = format!("{}/v1/functions/{}?{}", args.remote.url, args.name, query.join("&"));
    let mut request = agent(&url).put(&url).header("content-type", "application/wasm");
    if !args.config.is_empty() || !args.secrets.is_empty() {
        let mut settings = cli::config::settings(&args.config, false)?;
        settings.extend(cli::config::settings(&args.secrets, true)?);
        request = request.header(tally::gateway::SETTINGS, serde_json::to_string(&settings)?);
    }
    let response = request.send(&component[..])?;
    show(&finish(response)?, &args.json, cli::output::deployed)
}

/// `--data TEXT` or `--file PATH` (or nothing).
fn data_or_file(data: &Option<String>, file: &Option<PathBuf>) -> anyhow::Result<Vec<u8>> {
    Ok(match (data, file) {
        (Some(d), _) => d.clone().into_bytes(),
        (None, Some(f)) => std::fs::read(f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) => Vec::new(),
    })
}

/// `NAME:VALUE` headers as pairs.
fn headers(items: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|h| match h.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() => Ok((name.trim().to_string(), value.trim().to_string())),
            _ => bail!("--header takes NAME:VALUE, got {h:?}"),
        })
        .collect()
}

/// `tally invoke` of an HTTP function: the request at /fn/NAME, its body printed, a
/// status of 400 or more an error.
fn invoke_http(args: &InvokeArgs, input: Vec<u8>) -> anyhow::Result<()> {
    let path = args.path.as_deref().unwrap_or("/");
    if !path.starts_with('/') {
        bail!("--path must start with /, got {path:?}");
    }
    let url = format!("{}/fn/{}{path}", args.remote.url, args.name);
    let method = args.method.as_deref().unwrap_or("POST").to_ascii_uppercase();
    let mut request = ureq::http::Request::builder().method(method.as_str()).uri(&url);
    for (name, value) in headers(&args.headers)? {
        request = request.header(name, value);
    }
    request = request.header(tally::gateway::BOOK, args.book.to_string());
    if let Some(key) = &args.idempotency_key {
        request = request.header("idempotency-key", key);
    }
    let response = agent(&url).run(request.body(input)?)?;
    let status = response.status();
    let body = finish(response)?;
    print(&body);
    if status.is_redirection() {
        eprintln!("tally: the function answered {status}");
    }
    Ok(())
}

fn invoke(args: InvokeArgs) -> anyhow::Result<()> {
    let input = data_or_file(&args.data, &args.file)?;
    if args.method.is_some() || args.path.is_some() || !args.headers.is_empty() {
        return invoke_http(&args, input);
    }
    let mut url = format!("{}/v1/functions/{}/invoke?book={}", args.remote.url, args.name, args.book);
    if args.background {
        url.push_str("&async=true");
    }
    if let Some(delay) = &args.delay {
        url.push_str(&format!("&delay_ms={}", cli::duration_ms(delay)?));
    }
    if let Some(key) = &args.key {
        url.push_str(&format!("&key={}", url_escape(key)));
        if args.shared {
            url.push_str("&shared=true");
        }
    }
    let mut request = agent(&url).post(&url);
    if let Some(key) = &args.idempotency_key {
        request = request.header("idempotency-key", key);
    }
    print(&finish(request.send(&input[..])?)?);
    Ok(())
}

fn complete(args: CompleteArgs) -> anyhow::Result<()> {
    let value = data_or_file(&args.data, &args.file)?;
    let url = format!("{}/v1/promises/{}?book={}", args.remote.url, url_escape(&args.promise), args.book);
    finish(agent(&url).post(&url).send(&value[..])?)?;
    println!("completed promise {}", args.promise);
    Ok(())
}

/// Prints the object's value (pretty JSON), `null` when there is none.
fn object(args: ObjectArgs) -> anyhow::Result<()> {
    let url =
        format!("{}/v1/books/{}/objects/{}?path={}", args.remote.url, args.book, url_escape(&args.name), url_escape(&args.path));
    let body = finish(agent(&url).get(&url).call()?)?;
    let answer: serde_json::Value = serde_json::from_slice(&body).context("the gateway's answer is not JSON")?;
    println!("{}", serde_json::to_string_pretty(&answer["value"])?);
    Ok(())
}

fn cancel(args: CancelArgs) -> anyhow::Result<()> {
    let url = format!("{}/v1/invocations/{}?book={}", args.remote.url, url_escape(&args.id), args.book);
    finish(agent(&url).delete(&url).call()?)?;
    println!("cancelling invocation {} (see tally invocations {})", args.id, args.book);
    Ok(())
}

fn book(args: BookArgs) -> anyhow::Result<()> {
    let mut query = Vec::new();
    if let Some(t) = &args.tag {
        query.push(format!("tag={t}"));
    }
    if let Some(f) = args.from {
        query.push(format!("from={f}"));
    }
    if let Some(l) = args.limit {
        query.push(format!("limit={l}"));
    }
    let path = format!("/v1/books/{}/records?{}", args.book, query.join("&"));
    get_json(&args.remote, &path, &args.json, cli::output::records)
}

fn table(args: TableArgs) -> anyhow::Result<()> {
    let path = format!("/v1/books/{}/tables/{}", args.book, args.table);
    let Some(protocol) = &args.protocol else {
        return get_json(&args.remote, &path, &args.json, cli::output::table_status);
    };
    let body = serde_json::json!({ "protocol": protocol }).to_string();
    let response = agent(&args.remote.url)
        .put(format!("{}{path}", args.remote.url))
        .header("content-type", "application/json")
        .send(body.as_bytes())?;
    show(&finish(response)?, &args.json, cli::output::table_status)
}
