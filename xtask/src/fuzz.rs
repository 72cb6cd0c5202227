//! `cargo xtask fuzz`: the cargo-fuzz targets in `fuzz/`, on nightly.

use std::process::{Command, Stdio};

use crate::root;

/// Every fuzz target.
pub(crate) const TARGETS: [&str; 3] = ["classifier", "validator", "sse"];
/// How long `ci` runs each target.
pub(crate) const CI_SECONDS: u64 = 60;

/// Whether `cargo +nightly` works here.
pub(crate) fn nightly_available() -> bool {
    Command::new("cargo")
        .args(["+nightly", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `fuzz [TARGET] [--time SECONDS]`.
pub(crate) fn run_from_args(args: &[String]) -> Result<(), String> {
    let mut target = None;
    let mut seconds = CI_SECONDS;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "--time" => {
                seconds = rest
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--time takes a number of seconds")?;
            }
            name if TARGETS.contains(&name) => target = Some(name.to_owned()),
            other => {
                return Err(format!(
                    "unknown fuzz target {other:?}; the targets are: {}",
                    TARGETS.join(", ")
                ));
            }
        }
    }
    if !nightly_available() {
        return Err(
            "fuzzing needs a nightly toolchain: rustup toolchain install nightly".to_owned(),
        );
    }
    match target {
        Some(t) => run_target(&t, seconds),
        None => TARGETS.iter().try_for_each(|t| run_target(t, seconds)),
    }
}

fn ensure_cargo_fuzz() -> Result<(), String> {
    let present = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if present {
        return Ok(());
    }
    println!("xtask: cargo-fuzz is missing; installing it");
    crate::cargo(&["install", "cargo-fuzz", "--locked"], &[])
}

/// Runs one target for `seconds`, growing its corpus in `fuzz/corpus/TARGET`.
pub(crate) fn run_target(target: &str, seconds: u64) -> Result<(), String> {
    ensure_cargo_fuzz()?;
    let corpus = format!("corpus/{target}");
    let time = format!("-max_total_time={seconds}");
    run_command(
        Command::new("cargo")
            .args([
                "+nightly",
                "fuzz",
                "run",
                "--sanitizer",
                "none",
                target,
                &corpus,
            ])
            .args(["--", &time, "-print_final_stats=1"])
            .current_dir(root().join("fuzz")),
    )
}

fn run_command(command: &mut Command) -> Result<(), String> {
    // The outer cargo's toolchain choice must not leak into the nightly build.
    crate::run(command.env_remove("RUSTUP_TOOLCHAIN").env_remove("CARGO"))
}
