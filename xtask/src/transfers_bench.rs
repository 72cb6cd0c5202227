//! `cargo xtask bench --transfers [--runs N]`: the 256 MiB transfer benchmark
//! (`maljan-sidecar`'s `transfer`: uploads and downloads over stdio and over Streamable HTTP
//! on loopback, beside the single-core limit) run N times (5 by default), each run's
//! transfers as a share of the limit measured in the same run, then the worst and the
//! median of each, and the client's peak memory.
//!
//! The limit a transfer is set against is the faster of the run's two measurements (before
//! and after the transfers): a machine that sped up or slowed down during the run does not
//! flatter the transfers.
//!
//! The bench also times the disk alone (256 MiB written and made durable as the transfers
//! write theirs, back to back), before and after the transfers, given here as a share of
//! the limit (the faster of its two measurements): how fast, in that run, the device wrote
//! that the transfers' writes wait on. It is not a bound (a transfer leaves the device gaps
//! between its writes, and was seen to beat it), and the target stays the share of the
//! limit.
//!
//! `--in-memory` puts every file of the run (the sample, the sidecar's uploads, the
//! downloads, the disk row's) in `/dev/shm`, through the bench's and the sidecar's
//! `TMPDIR`: what the transfers reach with no device to wait on, the code's own share of
//! the limit. It says nothing of the disk, and the summary says so.

use std::path::{Path, PathBuf};

use crate::{cargo_command, target_dir};

/// The criterion group of the benchmark.
const GROUP: &str = "transfer_256_mib";
/// The transfers, as criterion names them.
const TRANSFERS: [&str; 8] = [
    "upload_chunked_over_stdio",
    "upload_digest_at_finish_over_stdio",
    "upload_hashed_first_over_stdio",
    "download_over_stdio",
    "upload_chunked_over_http",
    "upload_digest_at_finish_over_http",
    "upload_hashed_first_over_http",
    "download_over_http",
];
const LIMITS: [&str; 2] = [
    "single_core_limit_before_transfers",
    "single_core_limit_after_transfers",
];
/// The disk alone, as criterion names it.
const DISKS: [&str; 2] = ["disk_alone_before_transfers", "disk_alone_after_transfers"];
/// How the bench's line about a wire's peak memory begins.
const PEAK_LINE: &str = "client peak resident memory during the transfers over ";
/// What each transfer must reach, as a share of the limit.
const TARGET_SHARE: f64 = 0.5;
/// The client's peak resident memory must stay under this.
const PEAK_MIB_BOUND: u64 = 64;

/// One run: each transfer's share of the limit, the disk's, and the client's peaks (MiB)
/// by wire.
struct Run {
    shares: Vec<f64>,
    disk_share: f64,
    peaks: Vec<(String, u64)>,
}

/// Where `--in-memory` puts the run's files.
const IN_MEMORY: &str = "/dev/shm";

/// Reads `--runs N` and `--in-memory`, runs the benchmark N times and prints each run and
/// the summary; fails when a transfer fell under half the limit or the client's peak
/// reached the bound.
pub(crate) fn run_from_args(args: &[String]) -> Result<(), String> {
    const USAGE: &str = "usage: cargo xtask bench --transfers [--runs N] [--in-memory]";
    let mut runs = 5;
    let mut in_memory = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--runs" => {
                runs = args
                    .next()
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| *n > 0)
                    .ok_or("--runs takes a number above 0")?;
            }
            "--in-memory" => in_memory = true,
            _ => return Err(format!("{arg}: not an option; {USAGE}")),
        }
    }
    if in_memory && !Path::new(IN_MEMORY).is_dir() {
        return Err(format!(
            "--in-memory puts the files in {IN_MEMORY}, which this machine has not"
        ));
    }
    let criterion = target_dir().join("criterion").join(GROUP);
    let mut results = Vec::with_capacity(runs);
    for number in 1..=runs {
        println!("xtask bench --transfers: run {number} of {runs}");
        let mut bench = cargo_command();
        bench.args(["bench", "-p", "maljan-sidecar", "--bench", "transfer"]);
        if in_memory {
            bench.env("TMPDIR", IN_MEMORY);
        }
        let output = bench
            // Criterion's report as it goes; stderr, which says the peaks, is read after.
            .stdout(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cargo bench did not start: {e}"))?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() {
            return Err(format!("the transfer benchmark failed:\n{stderr}"));
        }
        let run = read_run(&criterion, &stderr)?;
        // The bench's own account of each wire: its peaks and each side's CPU per transfer.
        for line in stderr.lines().skip_while(|l| !l.starts_with(PEAK_LINE)) {
            println!("  {line}");
        }
        println!("{}", describe(&run));
        results.push(run);
    }
    summarize(&results, runs, in_memory)
}

/// The median time of one benchmark of the last run, in nanoseconds, from criterion's
/// estimates.
fn median_ns(criterion: &Path, name: &str) -> Result<f64, String> {
    let path: PathBuf = criterion.join(name).join("new").join("estimates.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("{} cannot be read: {e}", path.display()))?;
    let estimates: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    estimates["median"]["point_estimate"]
        .as_f64()
        .filter(|ns| *ns > 0.0)
        .ok_or_else(|| format!("{} holds no median", path.display()))
}

/// The faster of a measurement's two medians (before and after the transfers).
fn fastest_ns(criterion: &Path, names: [&str; 2]) -> Result<f64, String> {
    let [before, after] = names.map(|name| median_ns(criterion, name));
    Ok(before?.min(after?))
}

fn read_run(criterion: &Path, stderr: &str) -> Result<Run, String> {
    let limit_ns = fastest_ns(criterion, LIMITS)?;
    let disk_ns = fastest_ns(criterion, DISKS)?;
    let shares = TRANSFERS
        .iter()
        .map(|name| median_ns(criterion, name).map(|ns| limit_ns / ns))
        .collect::<Result<Vec<_>, _>>()?;
    // "client peak resident memory during the transfers over stdio: 41 MiB since ..."
    let peaks = stderr
        .lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(PEAK_LINE)?;
            let (wire, rest) = rest.split_once(": ")?;
            let mib = rest.split_whitespace().next()?.parse().ok()?;
            Some((wire.to_owned(), mib))
        })
        .collect::<Vec<_>>();
    if peaks.is_empty() {
        return Err("the benchmark did not say the client's peak memory".to_owned());
    }
    Ok(Run {
        shares,
        disk_share: limit_ns / disk_ns,
        peaks,
    })
}

fn describe(run: &Run) -> String {
    let shares = TRANSFERS
        .iter()
        .zip(&run.shares)
        .map(|(name, share)| format!("{name} {:.0} %", share * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    let peaks = run
        .peaks
        .iter()
        .map(|(wire, mib)| format!("{wire} {mib} MiB"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "  of the single-core limit: {shares}; the disk alone {:.0} %; client peak: {peaks}",
        run.disk_share * 100.0
    )
}

fn summarize(results: &[Run], runs: usize, in_memory: bool) -> Result<(), String> {
    println!("\n{runs} runs; each transfer as a share of the single-core limit of its own run");
    if in_memory {
        println!(
            "every file in {IN_MEMORY} (--in-memory): no device to wait on, the disk row is memory's"
        );
    }
    println!(
        "| transfer | worst | median | runs at {:.0} % or more |",
        TARGET_SHARE * 100.0
    );
    println!("|---|---|---|---|");
    let mut short = Vec::new();
    for (i, name) in TRANSFERS.iter().enumerate() {
        let shares = sorted(results.iter().map(|run| run.shares[i]));
        let met = shares.iter().filter(|s| **s >= TARGET_SHARE).count();
        println!(
            "| {name} | {} | {} | {met}/{runs} |",
            percent(shares[0]),
            percent(shares[shares.len() / 2]),
        );
        if met < runs {
            short.push(*name);
        }
    }
    let disk = sorted(results.iter().map(|run| run.disk_share));
    let met = disk.iter().filter(|s| **s >= TARGET_SHARE).count();
    println!(
        "| (the disk alone, no transfer) | {} | {} | {met}/{runs} |",
        percent(disk[0]),
        percent(disk[disk.len() / 2])
    );
    let peak = results
        .iter()
        .flat_map(|run| run.peaks.iter().map(|(_, mib)| *mib))
        .max()
        .unwrap_or(0);
    println!("client peak resident memory, the highest of every run: {peak} MiB");
    if peak >= PEAK_MIB_BOUND {
        short.push("the client's peak memory");
    }
    if short.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "under the target in some run: {} (half the limit; a peak under {PEAK_MIB_BOUND} MiB)",
            short.join(", ")
        ))
    }
}

fn sorted(shares: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut shares: Vec<f64> = shares.collect();
    shares.sort_by(f64::total_cmp);
    shares
}

fn percent(share: f64) -> String {
    format!("{:.0} %", share * 100.0)
}
