//! The workspace's tasks, run as `cargo xtask TASK`.
//!
//! - `ci`: everything CI checks, in order: test programs, `rust-version` against the
//!   toolchain, formatting, the README's crate graph against the manifests, each pick's
//!   crates, clippy with warnings denied (the sans-IO cores also without their defaults),
//!   the tests (fuzz corpora replayed among them), the docs with warnings denied, each
//!   pick's example against the reference sidecar, the published crates packaged and their packages' tests run offline, the interop tests, the
//!   MCP conformance suite, the run report's page in headless Chromium (Debian's package,
//!   installed when missing; its screenshot kept in `target/tmp/report-page.png`), a
//!   throwaway PostgreSQL cluster started and stopped, then a
//!   short real fuzz run of each target when a nightly toolchain is present.
//! - `fuzz [TARGET] [--time SECONDS]`: runs fuzz targets on nightly (all by default, 60 s
//!   each), installing cargo-fuzz when it is missing.
//! - `bench`: the criterion benchmarks.
//! - `bench --peers [--calls N] [--repetitions R] [--in-flight K] [--busy]`: echo calls of
//!   every bench client (ours, rmcp's, the Python SDK's) against every echo server (our kit,
//!   rmcp, the Python SDK, server-everything), over stdio and Streamable HTTP, repetitions
//!   interleaved; prints the medians, their spread and our ratios to each peer; `--busy`
//!   measures with threads spinning beside the bench (one for every two cores).
//! - `bench --transfers [--runs N] [--in-memory]`: the 256 MiB transfer benchmark (stdio and
//!   Streamable HTTP) run N times (5), each transfer as a share of its own run's single-core
//!   limit; the worst and the median, the client's peak memory; fails under half the limit or
//!   at 64 MiB. `--in-memory`: every file in `/dev/shm`, the code's share without the disk.
//! - `graph`: checks the README's crate graph against the manifests.
//! - `examples`: builds and runs each pick's example (a stdio and an HTTP session, the
//!   classifier, the breaker, the ledger, the kit's echo server) and checks what it prints.
//! - `package`: packages every published crate and runs the packaged crates' tests offline,
//!   in a workspace of their own under `target/packaged`.
//! - `picks`: counts the crates each pick of the workspace pulls in (`tests/picks`), beside
//!   rmcp's, and fails when a pick is over its bound, pulls what it must not (tokio in a
//!   sans-IO core, HTTP in a stdio-only client or kit) or holds two versions of a crate.
//! - `interop`: installs `@modelcontextprotocol/server-everything`, `server-filesystem` and
//!   `server-memory` (npm), the Python `mcp` SDK and the official git and time servers (PyPI)
//!   into `target/interop`, then runs our client against them over stdio and Streamable
//!   HTTP, and the `maljan` command (calls and a pack over the official servers); it says
//!   what it skipped when node/npm or python are missing.
//! - `postgres`: starts a throwaway PostgreSQL cluster (Debian's, installed when missing)
//!   on a free loopback port, checks it answers, and stops it.
//! - `garage`: starts a throwaway Garage node (an S3-compatible object store; installed once
//!   into cargo's bin directory when missing), puts and gets an object with signed requests,
//!   and stops it.
//! - `fleet`: starts a throwaway PostgreSQL and Garage node and runs the fleet's tests
//!   (queue, ledger, object store, workers killed and databases restarted) against them.
//! - `fleet-bench [RUNS]`: the fleet under load (1,000 runs by default) with 1, 2 and 4
//!   workers against a throwaway PostgreSQL and Garage, beside a local `maljan run`.
//! - `screenshot`: regenerates the README's screenshot of the report page
//!   (`docs/demo-report.png`) from a fresh `maljan demo`, in headless Chromium.
//! - `conformance`: installs the MCP conformance suite (and Node 22 when the system's is
//!   older) into `target/conformance` and runs its client scenarios against our client and
//!   its tool-server scenarios against the kit; prints `N passed, N failed` for each.

mod browser;
mod conformance;
mod crate_graph;
mod examples;
mod fleet;
mod fleet_bench;
mod fuzz;
mod garage;
mod interop;
mod packaging;
mod peers_bench;
mod picks;
mod postgres;
mod transfers_bench;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some("fuzz") => fuzz::run_from_args(&args[1..]),
        Some("bench") if args.get(1).is_some_and(|a| a == "--peers") => {
            peers_bench::run_from_args(&args[2..])
        }
        Some("bench") if args.get(1).is_some_and(|a| a == "--transfers") => {
            transfers_bench::run_from_args(&args[2..])
        }
        Some("bench") => cargo(&["bench", "--workspace"], &[]),
        Some("interop") => interop::run_interop(),
        Some("conformance") => conformance::run_conformance(),
        Some("graph") => crate_graph::check(),
        Some("picks") => picks::check(),
        Some("package") => packaging::check(),
        Some("examples") => examples::run(),
        Some("screenshot") => browser::screenshot(),
        Some("postgres") => postgres::check(),
        Some("garage") => garage::check(),
        Some("fleet-bench") => fleet_bench::run(args.get(1).map(String::as_str)),
        Some("fleet") => fleet::run_fleet_tests(args.get(1).map(String::as_str)),
        Some(other) => Err(format!(
            "unknown task {other:?}; the tasks are: ci, fuzz, bench, interop, conformance, graph, picks, package, examples, screenshot, postgres, garage, fleet, fleet-bench"
        )),
        None => {
            Err("name a task: cargo xtask ci | fuzz [TARGET] [--time SECONDS] | bench".to_owned())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_owned)
        .unwrap_or_default()
}

/// Where cargo builds: `CARGO_TARGET_DIR`, else the workspace's `target`.
pub(crate) fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

fn ci() -> Result<(), String> {
    ensure_test_programs()?;
    packaging::check_rust_version()?;
    cargo(&["fmt", "--all", "--", "--check"], &[])?;
    crate_graph::check()?;
    picks::check()?;
    cargo(
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    // The stdout classifier alone (as the server kit uses it): no tokio, no process code.
    cargo(
        &[
            "clippy",
            "-p",
            "maljan-mcp-stdio",
            "--no-default-features",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    // The breaker's sans-IO core alone: no tokio, no dependency at all.
    cargo(
        &[
            "clippy",
            "-p",
            "maljan-breaker",
            "--no-default-features",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo(&["test", "--workspace", "--no-fail-fast"], &[])?;
    // The client for stdio servers only, its own tests: what needs runs or HTTP is left out.
    cargo(
        &[
            "test",
            "-p",
            "maljan-client",
            "--no-default-features",
            "--features",
            "stdio",
        ],
        &[],
    )?;
    cargo(
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    examples::run()?;
    packaging::check()?;
    fleet::run_fleet_tests(None)?;
    interop::run_interop()?;
    conformance::run_conformance()?;
    browser::run_report_page()?;
    if fuzz::nightly_available() {
        for target in fuzz::TARGETS {
            fuzz::run_target(target, fuzz::CI_SECONDS)?;
        }
    } else {
        println!(
            "xtask: SKIPPED the fuzz runs: no nightly toolchain here \
             (rustup toolchain install nightly); the corpora were still replayed by the tests"
        );
    }
    println!("xtask ci: all steps passed");
    Ok(())
}

/// Runs `cargo ARGS` with the toolchain running this task, failing with the command named.
pub(crate) fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    run(cargo_command().args(args).envs(env.iter().copied()))
}

/// `cargo` of the toolchain running this task, in the workspace root. Its builds are not
/// incremental: a task builds once, and incremental caches would add a third to the target
/// directory on CI's disk of finite size.
pub(crate) fn cargo_command() -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = Command::new(cargo);
    command.env("CARGO_INCREMENTAL", "0").current_dir(root());
    command
}

/// Runs a command, failing with it named.
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    println!("xtask: {shown}");
    let status = command
        .status()
        .map_err(|e| format!("could not run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// `npm install`s `packages` into `prefix`, quietly.
pub(crate) fn npm_install(prefix: &Path, packages: &[&str]) -> Result<(), String> {
    run(Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(prefix)
        .args(packages))
}

/// `target/services/NAME`, made new and empty: where a throwaway test service keeps its
/// data.
pub(crate) fn empty_service_dir(name: &str) -> Result<PathBuf, String> {
    let dir = root().join("target/services").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("could not clear {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// A loopback port nothing listens on now.
pub(crate) fn free_loopback_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

pub(crate) fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The reference sidecar's optional-program tool is tested with its program present:
/// `zipinfo`, from Debian's `unzip`. Installs it when missing.
fn ensure_test_programs() -> Result<(), String> {
    if on_path("zipinfo") {
        return Ok(());
    }
    println!("xtask: zipinfo is missing; installing Debian's unzip");
    let installed = run(Command::new("sh").args([
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip",
    ]));
    match installed {
        Ok(()) if on_path("zipinfo") => Ok(()),
        _ => Err(
            "zipinfo is needed by the tests; install it (Debian: apt-get install unzip)".to_owned(),
        ),
    }
}
