//! `cargo xtask interop`: our client against third-party MCP servers.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::{npm_install, root, run};

/// The TypeScript SDK's reference server, pinned.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// The Python SDK, pinned.
const PYTHON_MCP: &str = "mcp==1.30.0";

fn works(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Installs the peers into `target/interop` (when missing) and runs the interop tests
/// against those that could be installed, saying which were skipped and why.
pub(crate) fn run_interop() -> Result<(), String> {
    let cache = root().join("target").join("interop");
    std::fs::create_dir_all(&cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    let mut env: Vec<(String, String)> = Vec::new();
    let mut skip: Vec<&str> = Vec::new();

    if works("node", "--version") && works("npm", "--version") {
        let prefix = cache.join("npm");
        let entry =
            prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if !entry.is_file() {
            npm_install(&prefix, &[EVERYTHING])?;
        }
        if !entry.is_file() {
            return Err(format!(
                "npm installed {EVERYTHING} but {} is missing",
                entry.display()
            ));
        }
        env.push(("MALJAN_INTEROP_NODE".into(), "node".into()));
        env.push((
            "MALJAN_INTEROP_EVERYTHING".into(),
            entry.display().to_string(),
        ));
    } else {
        println!("xtask interop: SKIPPED server-everything: node or npm is not installed");
        skip.push("server_everything");
    }

    if works("python3", "--version") {
        let venv = cache.join("venv");
        let python = venv.join("bin/python");
        if !python.is_file() {
            run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
        }
        if !has_python_mcp(&python) {
            run(Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                PYTHON_MCP,
            ]))?;
        }
        env.push(("MALJAN_INTEROP_PYTHON".into(), python.display().to_string()));
    } else {
        println!("xtask interop: SKIPPED the Python SDK server: python3 is not installed");
        skip.push("python_sdk");
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut test = Command::new(cargo);
    test.args([
        "test",
        "-p",
        "maljan-e2e",
        "--test",
        "interop",
        "--",
        "--ignored",
        "--test-threads=1",
    ])
    .envs(env)
    .current_dir(root());
    for name in skip {
        test.args(["--skip", name]);
    }
    run(&mut test)
}

fn has_python_mcp(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "import mcp.server.fastmcp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
