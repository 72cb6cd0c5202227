//! rmcp's bench client for `cargo xtask bench --peers`: `--calls N --in-flight K (--url URL | -- PROGRAM [ARG…])`, printing
//! the same JSON line as the workspace's `bench-client`.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::Peer;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};

const WARM_UP_CALLS: usize = 200;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (calls, in_flight, url, program) = arguments()?;
    let client = match (url, program) {
        (Some(url), _) => ().serve(StreamableHttpClientTransport::from_uri(url)).await?,
        (None, program) => {
            let mut command = tokio::process::Command::new(&program[0]);
            command.args(&program[1..]);
            ().serve(TokioChildProcess::new(command)?).await?
        }
    };
    let peer = client.peer().clone();
    for _ in 0..WARM_UP_CALLS {
        echo(&peer).await?;
    }
    let mut latencies = Vec::with_capacity(calls);
    let serial_start = Instant::now();
    for _ in 0..calls {
        let start = Instant::now();
        echo(&peer).await?;
        latencies.push(start.elapsed());
    }
    let serial_total = serial_start.elapsed();
    let per_worker = calls.div_ceil(in_flight);
    let parallel_start = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..in_flight {
        let peer = peer.clone();
        workers.spawn(async move {
            for _ in 0..per_worker {
                echo(&peer).await?;
            }
            Ok::<_, rmcp::ServiceError>(())
        });
    }
    while let Some(outcome) = workers.join_next().await {
        outcome??;
    }
    let parallel_total = parallel_start.elapsed();
    latencies.sort_unstable();
    let tenths = |x: f64| (x * 10.0).round() / 10.0;
    let rate = |n: usize, total: Duration| tenths(n as f64 / total.as_secs_f64().max(1e-9));
    let line = serde_json::json!({
        "serial_calls_per_s": rate(latencies.len(), serial_total),
        "serial_p50_us": tenths(latencies[latencies.len() / 2].as_secs_f64() * 1e6),
        "parallel_calls_per_s": rate(per_worker * in_flight, parallel_total),
    });
    println!("{line}");
    client.cancel().await?;
    Ok(())
}

async fn echo(peer: &Peer<RoleClient>) -> Result<CallToolResult, rmcp::ServiceError> {
    let mut arguments = serde_json::Map::new();
    arguments.insert("message".into(), "hello".into());
    peer.call_tool(CallToolRequestParams::new("echo").with_arguments(arguments))
        .await
}

type Arguments = (usize, usize, Option<String>, Vec<String>);

fn arguments() -> Result<Arguments, String> {
    let mut args = std::env::args().skip(1);
    let (mut calls, mut in_flight, mut url, mut program) = (2000, 4, None, Vec::new());
    while let Some(arg) = args.next() {
        let number = |value: Option<String>| value.and_then(|v| v.parse().ok());
        match arg.as_str() {
            "--calls" => calls = number(args.next()).ok_or("--calls takes a number")?,
            "--in-flight" => in_flight = number(args.next()).ok_or("--in-flight takes a number")?,
            "--url" => url = args.next(),
            "--" => program = args.by_ref().collect(),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if url.is_none() && program.is_empty() || calls == 0 || in_flight == 0 {
        return Err("usage: --calls N --in-flight K (--url URL | -- PROGRAM [ARG…])".into());
    }
    Ok((calls, in_flight, url, program))
}
