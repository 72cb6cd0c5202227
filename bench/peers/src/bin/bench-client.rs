//! The workspace's bench client: a [`Session`] of `maljan-mcp-stdio` or `maljan-mcp-http`
//! making `echo` calls, as `cargo xtask bench --peers` asks (see the library's docs).
//!
//! ```text
//! bench-client --calls 2000 --in-flight 4 -- target/release/bench-echo
//! bench-client --calls 2000 --in-flight 4 --url http://127.0.0.1:8080/mcp
//! ```

use std::time::{Duration, Instant};

use maljan_bench_peers::{BenchArgs, BenchServer, WARM_UP_CALLS, report};
use maljan_mcp_stdio::{
    ServerCommand, Session, SessionError, SessionSettings, StdioConfig, StdioTransport,
};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = BenchArgs::parse(std::env::args().skip(1))?;
    let session = match &args.server {
        BenchServer::Program(program) => {
            let command = program[1..]
                .iter()
                .fold(ServerCommand::new(&program[0]), |c, arg| c.arg(arg));
            let server = StdioTransport::spawn(&command, StdioConfig::named("echo"))?;
            Session::set_up(server, SessionSettings::default()).await?
        }
        BenchServer::Url(url) => {
            let server =
                maljan_mcp_http::HttpTransport::new(maljan_mcp_http::HttpConfig::new("echo", url))?;
            Session::set_up(server, SessionSettings::default()).await?
        }
    };
    let echo = || session.call_tool("echo", json!({"message": "hello"}), DEADLINE);
    for _ in 0..WARM_UP_CALLS {
        echo().await?;
    }
    let mut latencies = Vec::with_capacity(args.calls);
    let serial_start = Instant::now();
    for _ in 0..args.calls {
        let start = Instant::now();
        echo().await?;
        latencies.push(start.elapsed());
    }
    let serial_total = serial_start.elapsed();
    let per_worker = args.calls.div_ceil(args.in_flight);
    let parallel_start = Instant::now();
    let workers = (0..args.in_flight).map(|_| async {
        for _ in 0..per_worker {
            echo().await?;
        }
        Ok::<_, SessionError>(())
    });
    for outcome in futures::future::join_all(workers).await {
        outcome?;
    }
    let parallel_total = parallel_start.elapsed();
    println!(
        "{}",
        report(
            &mut latencies,
            serial_total,
            per_worker * args.in_flight,
            parallel_total
        )
    );
    session.close().await;
    Ok(())
}
