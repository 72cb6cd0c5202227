//! What the peers' bench clients share: the calls a phase makes and what is printed of them.
//!
//! Every client of `cargo xtask bench --peers` (ours here, rmcp's, the Python SDK's) sets up
//! a session with an echo server, makes warm-up calls, then two phases of `echo` calls: one
//! at a time (each call's latency kept), then `in_flight` at once. It prints one JSON line:
//! `{"serial_calls_per_s":…,"serial_p50_us":…,"parallel_calls_per_s":…}`.

use std::time::Duration;

/// What a bench client is asked to do, read from its arguments:
/// `--calls N --in-flight K (--url URL | -- PROGRAM [ARG…])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchArgs {
    /// Calls per phase.
    pub calls: usize,
    /// Calls at once in the second phase.
    pub in_flight: usize,
    /// The server: a Streamable HTTP endpoint or a program to start.
    pub server: BenchServer,
}

/// Where a bench client finds its echo server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchServer {
    /// A Streamable HTTP endpoint.
    Url(String),
    /// A program and its arguments, served over its stdio.
    Program(Vec<String>),
}

impl BenchArgs {
    /// Reads `--calls N --in-flight K (--url URL | -- PROGRAM [ARG…])`.
    ///
    /// ```
    /// use maljan_bench_peers::{BenchArgs, BenchServer};
    /// let args = ["--calls", "10", "--in-flight", "4", "--", "echo-server"].map(String::from);
    /// let read = BenchArgs::parse(args).unwrap();
    /// assert_eq!(read.server, BenchServer::Program(vec!["echo-server".into()]));
    /// assert!(BenchArgs::parse(["--calls".to_owned()]).is_err());
    /// ```
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut args = args.into_iter();
        let (mut calls, mut in_flight, mut server) = (2000, 4, None);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--calls" => calls = number(args.next(), "--calls")?,
                "--in-flight" => in_flight = number(args.next(), "--in-flight")?,
                "--url" => server = args.next().map(BenchServer::Url),
                "--" => server = Some(BenchServer::Program(args.by_ref().collect())),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        match server {
            Some(BenchServer::Program(program)) if program.is_empty() => {
                Err("no program after --".to_owned())
            }
            Some(server) if calls > 0 && in_flight > 0 => Ok(Self {
                calls,
                in_flight,
                server,
            }),
            Some(_) => Err("--calls and --in-flight must be above 0".to_owned()),
            None => {
                Err("usage: --calls N --in-flight K (--url URL | -- PROGRAM [ARG…])".to_owned())
            }
        }
    }
}

fn number(value: Option<String>, name: &str) -> Result<usize, String> {
    value
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{name} takes a number"))
}

/// Calls made before the phases, so that both sides' buffers, caches and connections are warm.
pub const WARM_UP_CALLS: usize = 200;

/// The JSON line a bench client prints: calls per second one at a time and their median
/// latency, then calls per second with several in flight.
///
/// ```
/// use std::time::Duration;
/// let line = maljan_bench_peers::report(
///     &mut [Duration::from_micros(300), Duration::from_micros(100), Duration::from_micros(200)],
///     Duration::from_micros(600),
///     3,
///     Duration::from_micros(300),
/// );
/// assert_eq!(
///     line,
///     r#"{"parallel_calls_per_s":10000.0,"serial_calls_per_s":5000.0,"serial_p50_us":200.0,"serial_p90_us":300.0,"serial_p99_us":300.0}"#
/// );
/// ```
pub fn report(
    serial: &mut [Duration],
    serial_total: Duration,
    parallel_calls: usize,
    parallel_total: Duration,
) -> String {
    serial.sort_unstable();
    let p50 = serial.get(serial.len() / 2).copied().unwrap_or_default();
    let tenths = |x: f64| (x * 10.0).round() / 10.0;
    let rate = |calls: usize, total: Duration| tenths(calls as f64 / total.as_secs_f64().max(1e-9));
    let at = |share: f64| {
        let index = ((serial.len() as f64 * share) as usize).min(serial.len().saturating_sub(1));
        serial
            .get(index)
            .map_or(0.0, |d| tenths(d.as_secs_f64() * 1e6))
    };
    serde_json::json!({
        "serial_calls_per_s": rate(serial.len(), serial_total),
        "serial_p50_us": tenths(p50.as_secs_f64() * 1e6),
        "serial_p90_us": at(0.9),
        "serial_p99_us": at(0.99),
        "parallel_calls_per_s": rate(parallel_calls, parallel_total),
    })
    .to_string()
}
