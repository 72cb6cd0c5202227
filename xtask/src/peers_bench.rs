//! `cargo xtask bench --peers [--calls N] [--repetitions R] [--busy]`: every bench client against
//! every echo server, over stdio and over Streamable HTTP on loopback, with the repetitions
//! interleaved (each repetition runs every pair once before the next starts, so a busy spell
//! of the machine touches every pair alike); then the medians and spreads, and our ratios to
//! each peer.
//!
//! The peers, pinned and installed by the project's scripts: rmcp's client and echo server
//! (`tests/rmcp-peer`, its own lock file), the Python SDK's (`bench/peers/python`, in the
//! interop virtual environment) and the TypeScript SDK's `server-everything` (npm, a server
//! only). Ours are `bench/peers` (`bench-client` on a session of the stdio or HTTP
//! transport, `bench-echo` on the kit). A peer whose runtime (python3, node) is missing is
//! left out and named.
//!
//! With `--busy` the matrix runs on a busy machine: threads of the xtask spin beside the
//! bench, one for every two cores (at least one), so that each pair is measured while
//! another program wants a share of the CPU, as on a shared build machine.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{cargo_command, free_loopback_port, interop, root, run, target_dir};

/// One measured run of a client against a server.
#[derive(Debug, Clone, Copy)]
struct Sample {
    serial_calls_per_s: f64,
    serial_p50_us: f64,
    parallel_calls_per_s: f64,
}

/// A bench client: how to start it, before its own arguments.
struct Client {
    name: &'static str,
    program: Vec<String>,
}

/// An echo server: its command over stdio, and over HTTP given a port.
struct Server {
    name: &'static str,
    stdio: Vec<String>,
    http: Box<dyn Fn(u16) -> Command>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Wire {
    Stdio,
    Http,
}

impl Wire {
    fn as_str(self) -> &'static str {
        match self {
            Wire::Stdio => "stdio",
            Wire::Http => "Streamable HTTP (loopback)",
        }
    }
}

/// Reads `--calls N` and `--repetitions R`, builds and installs the peers, runs the matrix
/// and prints it.
pub(crate) fn run_from_args(args: &[String]) -> Result<(), String> {
    let (mut calls, mut repetitions, mut in_flight) = (2000_usize, 3_usize, 4_usize);
    let mut busy = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut number = |name: &str| {
            args.next()
                .and_then(|value| value.parse::<usize>().ok())
                .filter(|value| *value > 0)
                .ok_or_else(|| format!("{name} takes a number above 0"))
        };
        match arg.as_str() {
            "--calls" => calls = number("--calls")?,
            "--repetitions" => repetitions = number("--repetitions")?,
            "--in-flight" => in_flight = number("--in-flight")?,
            "--busy" => busy = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?}: bench --peers [--calls N] [--repetitions R] [--in-flight K] [--busy]"
                ));
            }
        }
    }
    let (clients, servers) = install()?;
    let load = busy.then(BackgroundLoad::start);
    let mut samples: BTreeMap<(Wire, usize, usize), Vec<Sample>> = BTreeMap::new();
    for repetition in 1..=repetitions {
        println!("xtask bench --peers: repetition {repetition} of {repetitions}");
        for wire in [Wire::Stdio, Wire::Http] {
            for (s, server) in servers.iter().enumerate() {
                for (c, client) in clients.iter().enumerate() {
                    let sample = measure(client, server, wire, calls, in_flight)?;
                    samples.entry((wire, c, s)).or_default().push(sample);
                }
            }
        }
    }
    let load = load.map(BackgroundLoad::stop);
    print_table(&clients, &servers, &samples, calls, in_flight, repetitions);
    match load {
        Some(threads) => println!(
            "\nMachine busy: {threads} thread(s) spinning beside every measurement, of {} cores.",
            cores()
        ),
        None => println!(
            "\nMachine as found: nothing of the xtask's own beside the measurements (--busy adds load)."
        ),
    }
    Ok(())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Threads that keep a share of the cores busy until stopped: the load of `--busy`.
struct BackgroundLoad {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl BackgroundLoad {
    /// One spinning thread for every two cores, at least one.
    fn start() -> BackgroundLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..(cores() / 2).max(1))
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut state = 1_u64;
                    while !stop.load(Ordering::Relaxed) {
                        state = std::hint::black_box(
                            state
                                .wrapping_mul(6_364_136_223_846_793_005)
                                .wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        BackgroundLoad { stop, threads }
    }

    /// Stops the threads; how many there were.
    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        let count = self.threads.len();
        for thread in self.threads {
            let _ = thread.join();
        }
        count
    }
}

/// Builds ours and rmcp's programs (release), and the Python SDK and server-everything
/// where their runtimes are present.
fn install() -> Result<(Vec<Client>, Vec<Server>), String> {
    let target = target_dir();
    run(cargo_command().args(["build", "--release", "-p", "maljan-bench-peers"]))?;
    run(cargo_command()
        .args(["build", "--release", "--locked", "--manifest-path"])
        .arg(root().join("tests/rmcp-peer/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target))?;
    let release = target.join("release");
    let path = |name: &str| release.join(name).display().to_string();
    let mut clients = vec![
        Client {
            name: "ours",
            program: vec![path("bench-client")],
        },
        Client {
            name: "rmcp",
            program: vec![path("rmcp-bench-client")],
        },
    ];
    let mut servers = vec![
        Server {
            name: "our kit",
            stdio: vec![path("bench-echo")],
            http: http_server(path("bench-echo"), &[]),
        },
        Server {
            name: "rmcp",
            stdio: vec![path("rmcp-echo-server")],
            http: http_server(path("rmcp-echo-server"), &[]),
        },
    ];
    match interop::python_sdk()? {
        Some(python) => {
            let python = python.display().to_string();
            let script = |name: &str| {
                root()
                    .join("bench/peers/python")
                    .join(name)
                    .display()
                    .to_string()
            };
            clients.push(Client {
                name: "python",
                program: vec![python.clone(), script("bench_client.py")],
            });
            servers.push(Server {
                name: "python",
                stdio: vec![python.clone(), script("echo_server.py")],
                http: http_server(python, &[script("echo_server.py")]),
            });
        }
        None => println!("xtask bench --peers: SKIPPED the Python SDK: python3 is not installed"),
    }
    match interop::server_everything()? {
        Some(entry) => {
            let entry = entry.display().to_string();
            let node = entry.clone();
            servers.push(Server {
                name: "everything",
                stdio: vec!["node".into(), entry, "stdio".into()],
                http: Box::new(move |port| {
                    let mut command = Command::new("node");
                    command
                        .args([node.as_str(), "streamableHttp"])
                        .env("PORT", port.to_string());
                    command
                }),
            });
        }
        None => {
            println!("xtask bench --peers: SKIPPED server-everything: node or npm is not installed")
        }
    }
    Ok((clients, servers))
}

/// A server started as `PROGRAM [ARG…] http PORT`.
fn http_server(program: String, args: &[String]) -> Box<dyn Fn(u16) -> Command> {
    let args = args.to_vec();
    Box::new(move |port| {
        let mut command = Command::new(&program);
        command.args(&args).args(["http", &port.to_string()]);
        command
    })
}

/// One run of `client` against `server`: over stdio the client starts the server; over
/// HTTP the server is started here, on a free port, and stopped after.
fn measure(
    client: &Client,
    server: &Server,
    wire: Wire,
    calls: usize,
    in_flight: usize,
) -> Result<Sample, String> {
    let mut command = Command::new(&client.program[0]);
    command
        .args(&client.program[1..])
        .args(["--calls", &calls.to_string()])
        .args(["--in-flight", &in_flight.to_string()])
        .stderr(Stdio::null());
    let _running = match wire {
        Wire::Stdio => {
            command.arg("--").args(&server.stdio);
            None
        }
        Wire::Http => {
            let port = free_loopback_port()?;
            let running = RunningServer::start((server.http)(port), port)?;
            command.args(["--url", &format!("http://127.0.0.1:{port}/mcp")]);
            Some(running)
        }
    };
    let shown = format!(
        "{} client × {} server over {}",
        client.name,
        server.name,
        wire.as_str()
    );
    let output = command
        .output()
        .map_err(|e| format!("{shown}: could not start the client: {e}"))?;
    if !output.status.success() {
        return Err(format!("{shown}: the client failed ({})", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let read: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| format!("{shown}: not the bench's JSON line ({e}): {line:?}"))?;
    let field = |name: &str| {
        read.get(name)
            .and_then(serde_json::Value::as_f64)
            .ok_or_else(|| format!("{shown}: {name} missing from {line:?}"))
    };
    let sample = Sample {
        serial_calls_per_s: field("serial_calls_per_s")?,
        serial_p50_us: field("serial_p50_us")?,
        parallel_calls_per_s: field("parallel_calls_per_s")?,
    };
    println!(
        "xtask bench --peers: {shown}: {:.0} calls/s one at a time, p50 {:.0} µs, {:.0} calls/s {in_flight} in flight",
        sample.serial_calls_per_s, sample.serial_p50_us, sample.parallel_calls_per_s
    );
    Ok(sample)
}

/// An HTTP echo server for one run, killed when dropped.
struct RunningServer(Child);

impl RunningServer {
    /// Starts `command` and waits (at most 60 s) until `port` takes connections.
    fn start(mut command: Command, port: u16) -> Result<Self, String> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("could not start {command:?}: {e}"))?;
        let mut server = RunningServer(child);
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_err() {
            if let Ok(Some(status)) = server.0.try_wait() {
                return Err(format!("{command:?} exited before listening ({status})"));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{command:?} did not listen on port {port} within 60 s"
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The median of `values` and their spread (the largest distance from it, as a share of it).
fn median_and_spread(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let spread = values
        .iter()
        .map(|value| (value - median).abs() / median.max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max);
    (median, spread)
}

fn print_table(
    clients: &[Client],
    servers: &[Server],
    samples: &BTreeMap<(Wire, usize, usize), Vec<Sample>>,
    calls: usize,
    in_flight: usize,
    repetitions: usize,
) {
    let medians: BTreeMap<(Wire, usize, usize), Sample> = samples
        .iter()
        .map(|(key, runs)| {
            let pick = |f: fn(&Sample) -> f64| median_and_spread(runs.iter().map(f).collect());
            let (serial, _) = pick(|s| s.serial_calls_per_s);
            let (p50, _) = pick(|s| s.serial_p50_us);
            let (parallel, _) = pick(|s| s.parallel_calls_per_s);
            (
                *key,
                Sample {
                    serial_calls_per_s: serial,
                    serial_p50_us: p50,
                    parallel_calls_per_s: parallel,
                },
            )
        })
        .collect();
    println!();
    println!(
        "{calls} echo calls per phase, medians of {repetitions} interleaved repetitions (± the largest distance from the median)"
    );
    for wire in [Wire::Stdio, Wire::Http] {
        println!();
        println!("## {}", wire.as_str());
        println!();
        println!(
            "| client × server | calls/s one at a time | p50 µs | calls/s {in_flight} in flight |"
        );
        println!("|---|---|---|---|");
        for (s, server) in servers.iter().enumerate() {
            for (c, client) in clients.iter().enumerate() {
                let runs = &samples[&(wire, c, s)];
                let cell = |f: fn(&Sample) -> f64| {
                    let (median, spread) = median_and_spread(runs.iter().map(f).collect());
                    format!("{median:.0} ±{:.0} %", spread * 100.0)
                };
                println!(
                    "| {} × {} | {} | {} | {} |",
                    client.name,
                    server.name,
                    cell(|s| s.serial_calls_per_s),
                    cell(|s| s.serial_p50_us),
                    cell(|s| s.parallel_calls_per_s)
                );
            }
        }
        println!();
        let ours_both = medians[&(wire, 0, 0)];
        for (peer, client) in clients.iter().enumerate().skip(1) {
            let Some(server) = servers.iter().position(|s| s.name == client.name) else {
                continue;
            };
            let theirs = medians[&(wire, peer, server)];
            let ours_against_theirs = medians[&(wire, 0, server)];
            println!(
                "ours × our kit against {0} × {0}: {1:.2}× one at a time, p50 {2:.2}×, {3:.2}× {in_flight} in flight; \
                 our client against {0}'s server: {4:.2}× {0}'s own client one at a time, {5:.2}× in flight",
                client.name,
                ours_both.serial_calls_per_s / theirs.serial_calls_per_s,
                ours_both.serial_p50_us / theirs.serial_p50_us,
                ours_both.parallel_calls_per_s / theirs.parallel_calls_per_s,
                ours_against_theirs.serial_calls_per_s / theirs.serial_calls_per_s,
                ours_against_theirs.parallel_calls_per_s / theirs.parallel_calls_per_s,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::median_and_spread;

    #[test]
    fn the_median_is_the_middle_run_and_the_spread_its_largest_distance() {
        let (median, spread) = median_and_spread(vec![90.0, 100.0, 120.0]);
        assert_eq!(median, 100.0);
        assert!((spread - 0.2).abs() < 1e-9);
    }
}
