//! The workspace's tasks, run as `cargo xtask TASK`.
//!
//! - `ci`: everything CI checks, in order: test dependencies, formatting, clippy with
//!   warnings denied, the tests, and the docs with warnings denied.

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("ci") => ci(),
        Some(other) => Err(format!("unknown task {other:?}; the tasks are: ci")),
        None => Err("name a task: cargo xtask ci".to_owned()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn ci() -> Result<(), String> {
    ensure_test_programs()?;
    cargo(&["fmt", "--all", "--", "--check"], &[])?;
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
    cargo(&["test", "--workspace", "--no-fail-fast"], &[])?;
    cargo(
        &["doc", "--workspace", "--no-deps"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    println!("xtask ci: all steps passed");
    Ok(())
}

/// Runs `cargo ARGS`, failing with the command named.
fn cargo(args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    println!("xtask: cargo {}", args.join(" "));
    let status = Command::new(&cargo)
        .args(args)
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("could not run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// The reference sidecar's optional-program tool is tested with its program present:
/// `zipinfo`, from Debian's `unzip`. Installs it when missing and running as root.
fn ensure_test_programs() -> Result<(), String> {
    if on_path("zipinfo") {
        return Ok(());
    }
    println!("xtask: zipinfo is missing; installing Debian's unzip");
    let installed = Command::new("sh")
        .args([
            "-c",
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq unzip",
        ])
        .status()
        .map_err(|e| format!("could not run apt-get: {e}"))?;
    if installed.success() && on_path("zipinfo") {
        Ok(())
    } else {
        Err("zipinfo is needed by the tests; install it (Debian: apt-get install unzip)".to_owned())
    }
}
