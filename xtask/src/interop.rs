//! `cargo xtask interop`: our client against third-party MCP servers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{npm_install, root, run};

/// The TypeScript SDK's reference server, pinned.
const EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// The official filesystem server (works on the host's files where they are), pinned.
const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
/// The Python SDK of the legacy era, pinned.
const PYTHON_MCP: &str = "mcp==1.30.0";
/// The Python SDK of both eras (2.x speaks 2026-07-28 first), pinned.
const PYTHON_MCP_2: &str = "mcp==2.3.0";
/// The official git server (PyPI), pinned.
const GIT_SERVER: &str = "mcp-server-git==2026.10.19";
/// The official time server (PyPI), pinned.
const TIME_SERVER: &str = "mcp-server-time==2026.10.19";
/// The official memory server (npm), pinned.
const MEMORY: &str = "@modelcontextprotocol/server-memory@2026.8.31";

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
        let entry_of = |package: &str| {
            prefix.join(format!(
                "node_modules/@modelcontextprotocol/{package}/dist/index.js"
            ))
        };
        let servers = [
            ("server-everything", EVERYTHING, "MALJAN_INTEROP_EVERYTHING"),
            ("server-filesystem", FILESYSTEM, "MALJAN_INTEROP_FILESYSTEM"),
            ("server-memory", MEMORY, "MALJAN_INTEROP_MEMORY"),
        ];
        if servers
            .iter()
            .any(|(package, _, _)| !entry_of(package).is_file())
        {
            let pinned: Vec<&str> = servers.iter().map(|(_, pinned, _)| *pinned).collect();
            npm_install(&prefix, &pinned)?;
        }
        env.push(("MALJAN_INTEROP_NODE".into(), "node".into()));
        for (package, pinned, variable) in servers {
            let entry = entry_of(package);
            if !entry.is_file() {
                return Err(format!(
                    "npm installed {pinned} but {} is missing",
                    entry.display()
                ));
            }
            env.push((variable.into(), entry.display().to_string()));
        }
    } else {
        println!(
            "xtask interop: SKIPPED server-everything and server-filesystem: node or npm is not installed"
        );
        skip.push("server_everything");
        skip.push("server_filesystem");
    }

    if works("python3", "--version") {
        for (venv, packages, import, variable) in [
            (
                "venv",
                &[PYTHON_MCP][..],
                "mcp.server.fastmcp",
                "MALJAN_INTEROP_PYTHON",
            ),
            (
                "venv-2",
                &[PYTHON_MCP_2][..],
                "mcp.server.mcpserver",
                "MALJAN_INTEROP_PYTHON2",
            ),
            (
                "venv-official",
                &[GIT_SERVER, TIME_SERVER][..],
                "mcp_server_git, mcp_server_time",
                "MALJAN_INTEROP_OFFICIAL_PYTHON",
            ),
        ] {
            let python = python_with(&cache.join(venv), packages, import)?;
            env.push((variable.into(), python.display().to_string()));
        }
    } else {
        println!("xtask interop: SKIPPED the Python SDK servers: python3 is not installed");
        skip.push("python_sdk");
    }

    // rmcp's echo server and client, from their own pinned lock file, into the one target
    // directory (what they share with the workspace is built once).
    let target = crate::target_dir();
    run(crate::cargo_command()
        .args(["build", "--locked", "--manifest-path"])
        .arg(root().join("tests/rmcp-peer/Cargo.toml"))
        .arg("--target-dir")
        .arg(&target))?;
    for (variable, binary) in [
        ("MALJAN_INTEROP_RMCP_SERVER", "rmcp-echo-server"),
        ("MALJAN_INTEROP_RMCP_CLIENT", "rmcp-client"),
    ] {
        env.push((
            variable.into(),
            target.join("debug").join(binary).display().to_string(),
        ));
    }

    // The libraries against the peers, then the `maljan` command as a user runs it.
    for package in ["maljan-e2e", "maljan-cli"] {
        let mut test = crate::cargo_command();
        test.args([
            "test",
            "-p",
            package,
            "--test",
            "interop",
            "--",
            "--ignored",
            "--test-threads=1",
        ])
        .envs(env.iter().cloned())
        .current_dir(root());
        for name in &skip {
            test.args(["--skip", name]);
        }
        run(&mut test)?;
    }
    Ok(())
}

/// The interop cache's virtual environment with the pinned Python SDK (1.x, FastMCP), made
/// when missing; its interpreter, or `None` without python3.
pub(crate) fn python_sdk() -> Result<Option<PathBuf>, String> {
    if !works("python3", "--version") {
        return Ok(None);
    }
    let venv = root().join("target/interop/venv");
    python_with(&venv, &[PYTHON_MCP], "mcp.server.fastmcp").map(Some)
}

/// The pinned `server-everything`'s entry point in the interop cache, installed when
/// missing; `None` without node and npm.
pub(crate) fn server_everything() -> Result<Option<PathBuf>, String> {
    if !(works("node", "--version") && works("npm", "--version")) {
        return Ok(None);
    }
    let prefix = root().join("target/interop/npm");
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.is_file() {
        npm_install(&prefix, &[EVERYTHING])?;
    }
    Ok(Some(entry))
}

/// A virtual environment at `venv` with the Python SDK `sdk` (which has the module
/// `import`), made when missing; its interpreter.
fn python_with(venv: &Path, packages: &[&str], import: &str) -> Result<PathBuf, String> {
    let python = venv.join("bin/python");
    if !python.is_file() {
        run(Command::new("python3").args(["-m", "venv"]).arg(venv))?;
    }
    if !imports(&python, import) {
        run(Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(packages))?;
    }
    Ok(python)
}

fn imports(python: &Path, module: &str) -> bool {
    Command::new(python)
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
