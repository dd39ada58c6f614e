//! The `auth` suite: what checking a token costs an invocation. One `tally dev` node in
//! this process, the `hello` echo deployed, invoked by the same clients as the `invoke`
//! suite's in interleaved slices:
//!
//! ```text
//!   no-token   POST /v1/functions/hello/invoke            taken on loopback (`auth = local`)
//!   token      the same with `Authorization: Bearer <admin token>`: parsed, hashed
//!              (SHA-256), the token records read up to now, the grant checked
//!   scoped     the same with an `invoke` token scoped to `hello` and book 0
//! ```
//!
//! Every request of each goes through the same route layer; the difference is the
//! token's check. The suite records each target's p50, p99 and throughput at 1 and 32
//! clients, and the ratios of `token` and `scoped` to `no-token`.

use std::time::Instant;

use anyhow::{ensure, Context as _};
use tally::dev::DevNode;

use crate::invoke::{case, deploy_agent, measure, Plan, Target, CLIENTS};
use crate::report::{round_to, Report};
use crate::RunOptions;

const TARGETS: [&str; 3] = ["no-token", "token", "scoped"];

pub async fn run(options: &RunOptions) -> anyhow::Result<()> {
    let plan = Plan::new(options);
    let started = Instant::now();
    let guests = crate::invoke::guests().await?;
    let hello = std::fs::read(guests.join("hello.wasm")).context("reading hello.wasm")?;
    let data = tempfile::tempdir().context("creating a temporary data directory")?;
    let config = tally_runtime::Config { data_dir: data.path().join("data"), listen: "127.0.0.1:0".into(), ..Default::default() };
    let node = DevNode::start(config).await.context("starting a Tally dev node")?;
    let (url, admin) = (node.url(), node.admin_token.clone());
    let result = tokio::task::spawn_blocking(move || measure_auth(&plan, &url, &admin, &hello)).await;
    node.shutdown().await;
    let report = result??;
    report.print_table();
    eprintln!("auth: done in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn measure_auth(plan: &Plan, url: &str, admin: &str, hello: &[u8]) -> anyhow::Result<Report> {
    let agent = deploy_agent();
    let mut response = agent.put(format!("{url}/v1/functions/hello")).send(hello).context("deploying hello")?;
    ensure!(response.status() == 201, "deploying hello: {}", response.body_mut().read_to_string().unwrap_or_default());
    let spec = r#"{"role": "invoke", "functions": ["hello"], "books": [0], "name": "bench"}"#;
    let mut response = agent
        .post(format!("{url}/v1/tokens"))
        .header("authorization", &format!("Bearer {admin}"))
        .send(spec.as_bytes())
        .context("making a scoped token")?;
    let made: serde_json::Value = serde_json::from_slice(&response.body_mut().read_to_vec()?)?;
    let scoped = made["token"].as_str().context("a token")?.to_string();
    let headers = [String::new(), format!("Authorization: Bearer {admin}\r\n"), format!("Authorization: Bearer {scoped}\r\n")];
    let targets: Vec<Target> = TARGETS
        .iter()
        .zip(headers)
        .map(|(name, headers)| Target { headers, ..Target::new(name, format!("{url}/v1/functions/hello/invoke?book=0")) })
        .collect();
    let mut report = Report::new("auth", "hello invoked without a token (loopback), with the admin token, with a scoped token");
    measure(&mut report, &targets, plan, |_, _| Ok(()))?;
    for clients in CLIENTS {
        for target in &TARGETS[1..] {
            for metric in ["invoke_p50_us", "invoke_p99_us", "invoke_throughput"] {
                let value = |t: &str| report.value(&case(t, clients), metric).expect("measured above");
                let ratio = value(target) / value("no-token");
                let name = match metric {
                    "invoke_p50_us" => "p50_ratio",
                    "invoke_p99_us" => "p99_ratio",
                    _ => "throughput_ratio",
                };
                report.record(&format!("{target}/no-token,clients={clients}"), name, round_to(ratio, 3), "ratio")?;
            }
        }
    }
    Ok(report)
}
