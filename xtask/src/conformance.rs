//! `cargo xtask conformance`: the MCP conformance suite against our client and our kit.
//!
//! Installs `@modelcontextprotocol/conformance` (pinned) into `target/conformance`, with
//! Node 22 from npm's `node` package when the system's Node is older (the suite needs 22),
//! then runs (a) every client scenario against `conformance-client` (the Maljan client;
//! the authorization scenarios with its OAuth, by group), (b) the client scenarios of
//! 2026-07-28 of the suite's 0.2.0 line (pinned, in `target/conformance-2026`), by group,
//! and (c) the server scenarios that apply to a tool server against `conformance-server`
//! (the sidecar kit over Streamable HTTP).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{cargo, npm_install, root};

/// The conformance suite, pinned.
const SUITE: &str = "@modelcontextprotocol/conformance@0.1.16";
/// The suite's 0.2.0 line, pinned: the client scenarios of 2026-07-28.
const SUITE_2026: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
/// Node 22 as an npm package, pinned: for machines whose Node is older.
const NODE_22: &str = "node@22.23.3";

/// Every client scenario that needs no authorization.
const CLIENT_SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

/// The authorization scenarios, by group: all 22 of the suite's, against our client's
/// OAuth (`maljan_mcp_http::oauth`).
const AUTH_GROUPS: [(&str, &[&str]); 4] = [
    (
        "discovery",
        &[
            "auth/metadata-default",
            "auth/metadata-var1",
            "auth/metadata-var2",
            "auth/metadata-var3",
            "auth/2025-03-26-oauth-metadata-backcompat",
            "auth/2025-03-26-oauth-endpoint-fallback",
            "auth/resource-mismatch",
        ],
    ),
    (
        "registration and token endpoint authentication",
        &[
            "auth/basic-cimd",
            "auth/pre-registration",
            "auth/token-endpoint-auth-basic",
            "auth/token-endpoint-auth-post",
            "auth/token-endpoint-auth-none",
        ],
    ),
    (
        "scopes",
        &[
            "auth/scope-from-www-authenticate",
            "auth/scope-from-scopes-supported",
            "auth/scope-omitted-when-undefined",
            "auth/scope-step-up",
            "auth/scope-retry-limit",
            "auth/offline-access-scope",
            "auth/offline-access-not-supported",
        ],
    ),
    (
        "unattended",
        &[
            "auth/client-credentials-basic",
            "auth/client-credentials-jwt",
            "auth/cross-app-access-complete-flow",
        ],
    ),
];

/// Every client scenario the 0.2.0 line requires of 2026-07-28 (`list --client
/// --spec-version 2026-07-28`), by group. Its extensions (DPoP, workload identity) are not
/// among them, and the client does not declare them.
const GROUPS_2026: [(&str, &[&str]); 5] = [
    (
        "tools, request metadata and request state",
        &[
            "tools_call",
            "request-metadata",
            "sep-2322-client-request-state",
        ],
    ),
    (
        "HTTP headers",
        &[
            "http-standard-headers",
            "http-custom-headers",
            "http-invalid-tool-headers",
        ],
    ),
    (
        "JSON Schema",
        &[
            "json-schema-ref-no-deref",
            "json-schema-2020-12-preservation",
        ],
    ),
    (
        "authorization: discovery and the issuer",
        &[
            "auth/metadata-default",
            "auth/metadata-var1",
            "auth/metadata-var2",
            "auth/metadata-var3",
            "auth/resource-mismatch",
            "auth/authorization-server-migration",
            "auth/metadata-issuer-mismatch",
            "auth/iss-supported",
            "auth/iss-not-advertised",
            "auth/iss-supported-missing",
            "auth/iss-wrong-issuer",
            "auth/iss-unexpected",
            "auth/iss-normalized",
        ],
    ),
    (
        "authorization: registration, scopes and tokens",
        &[
            "auth/basic-cimd",
            "auth/pre-registration",
            "auth/token-endpoint-auth-basic",
            "auth/token-endpoint-auth-post",
            "auth/token-endpoint-auth-none",
            "auth/scope-from-www-authenticate",
            "auth/scope-from-scopes-supported",
            "auth/scope-omitted-when-undefined",
            "auth/scope-step-up",
            "auth/scope-retry-limit",
            "auth/offline-access-scope",
            "auth/offline-access-not-supported",
        ],
    ),
];

/// The server scenarios that apply to a tool server built with the kit.
const SERVER_SCENARIOS: [&str; 6] = [
    "server-initialize",
    "ping",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-error",
    "dns-rebinding-protection",
];

/// Checks passed and failed.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    passed: u32,
    failed: u32,
}

fn node_major(node: &Path) -> Option<u32> {
    let out = Command::new(node).arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .trim_start_matches('v')
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// Installs the suite (and Node 22 when needed); gives the node to run it with and the
/// suite's entry point.
fn install(prefix: &Path) -> Result<(PathBuf, PathBuf), String> {
    let system_node = PathBuf::from("node");
    let needs_node = node_major(&system_node).is_none_or(|major| major < 22);
    let entry = prefix.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    let local_node = prefix.join("node_modules/node/bin/node");
    let mut packages = Vec::new();
    if !entry.is_file() {
        packages.push(SUITE);
    }
    if needs_node && !local_node.is_file() {
        packages.push(NODE_22);
    }
    if !packages.is_empty() {
        npm_install(prefix, &packages)?;
    }
    let node = if needs_node { local_node } else { system_node };
    match node_major(&node) {
        Some(major) if major >= 22 => Ok((node, entry)),
        found => Err(format!(
            "the conformance suite needs Node 22 or newer; {} is {found:?}",
            node.display()
        )),
    }
}

/// Runs one scenario and reads its `Passed: N/M, K failed` line. A scenario that ends
/// without one, or whose process fails, counts as one failed check.
fn scenario(node: &Path, entry: &Path, dir: &Path, args: &[&str]) -> Result<Tally, String> {
    let shown = args.join(" ");
    println!("xtask conformance: {shown}");
    let out = Command::new(node)
        .arg(entry)
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("could not run the conformance suite: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The client mode writes its summary on stderr, the server mode on stdout.
    let tally = stdout.lines().chain(stderr.lines()).find_map(|line| {
        let rest = line.trim().strip_prefix("Passed: ")?;
        let (passed, rest) = rest.split_once('/')?;
        let failed = rest.split_once(", ")?.1.split_once(' ')?.0;
        Some(Tally {
            passed: passed.parse().ok()?,
            failed: failed.parse().ok()?,
        })
    });
    let ended_well = out.status.success() && tally.is_some();
    let mut tally = tally.unwrap_or_default();
    if !ended_well {
        tally.failed = tally.failed.max(1);
    }
    if tally.failed > 0 {
        println!(
            "{stdout}{stderr}\nxtask conformance: {shown}: ended with {}",
            out.status
        );
    }
    Ok(tally)
}

fn add(total: &mut Tally, one: Tally) {
    total.passed += one.passed;
    total.failed += one.failed;
}

/// Runs each group's client scenarios (with `extra` arguments) against `client`: the
/// checks failed in all, and a line per group saying how many scenarios passed.
fn run_groups(
    node: &Path,
    entry: &Path,
    dir: &Path,
    client: &str,
    groups: &[(&str, &[&str])],
    extra: &[&str],
    what: &str,
) -> Result<(u32, Vec<String>), String> {
    let mut failed = 0;
    let mut lines = Vec::new();
    for (group, names) in groups {
        let mut tally = Tally::default();
        let mut scenarios_passed = 0;
        for name in *names {
            let mut args = vec!["client", "--command", client, "--scenario", name];
            args.extend_from_slice(extra);
            let one = scenario(node, entry, dir, &args)?;
            if one.failed == 0 {
                scenarios_passed += 1;
            }
            add(&mut tally, one);
        }
        failed += tally.failed;
        lines.push(format!(
            "xtask conformance: {what}, {group}: {scenarios_passed} of {} scenarios passed ({} checks passed, {} failed)",
            names.len(),
            tally.passed,
            tally.failed
        ));
    }
    Ok((failed, lines))
}

/// A running `conformance-server`, stopped when dropped.
struct KitServer(std::process::Child);

impl Drop for KitServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Installs the suite, builds the adapters, runs every scenario, prints the counts; fails
/// when any check failed.
pub(crate) fn run_conformance() -> Result<(), String> {
    let dir = root().join("target").join("conformance");
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let (node, entry) = install(&dir)?;
    cargo(&["build", "-p", "maljan-conformance"], &[])?;
    let target = crate::target_dir();
    let client = target.join("debug/conformance-client");
    let client = client.display().to_string();

    let mut clients = Tally::default();
    for name in CLIENT_SCENARIOS {
        let args = ["client", "--command", &client, "--scenario", name];
        add(&mut clients, scenario(&node, &entry, &dir, &args)?);
    }

    let (auth_failed, auth_lines) = run_groups(
        &node,
        &entry,
        &dir,
        &client,
        &AUTH_GROUPS,
        &[],
        "our client's authorization, 0.1.16",
    )?;
    let dir_2026 = root().join("target").join("conformance-2026");
    std::fs::create_dir_all(&dir_2026)
        .map_err(|e| format!("creating {}: {e}", dir_2026.display()))?;
    let entry_2026 = dir_2026.join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if !entry_2026.is_file() {
        npm_install(&dir_2026, &[SUITE_2026])?;
    }
    let (failed_2026, lines_2026) = run_groups(
        &node,
        &entry_2026,
        &dir_2026,
        &client,
        &GROUPS_2026,
        &["--spec-version", "2026-07-28"],
        "our client at 2026-07-28 (0.2.0-alpha.12)",
    )?;

    let mut child = Command::new(target.join("debug/conformance-server"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("could not start conformance-server: {e}"))?;
    let stdout = child.stdout.take();
    let server = KitServer(child);
    let mut url = String::new();
    if let Some(stdout) = stdout {
        BufReader::new(stdout)
            .read_line(&mut url)
            .map_err(|e| format!("reading conformance-server's URL: {e}"))?;
    }
    let url = url.trim().to_owned();
    if !url.starts_with("http://") {
        return Err(format!(
            "conformance-server printed {url:?}, not its URL; see its stderr above"
        ));
    }
    let mut servers = Tally::default();
    for name in SERVER_SCENARIOS {
        let args = ["server", "--url", &url, "--scenario", name];
        add(&mut servers, scenario(&node, &entry, &dir, &args)?);
    }
    drop(server);

    println!(
        "xtask conformance: our client, {} scenarios: {} passed, {} failed",
        CLIENT_SCENARIOS.len(),
        clients.passed,
        clients.failed
    );
    for line in auth_lines.iter().chain(&lines_2026) {
        println!("{line}");
    }
    println!(
        "xtask conformance: the kit, {} scenarios: {} passed, {} failed",
        SERVER_SCENARIOS.len(),
        servers.passed,
        servers.failed
    );
    if clients.failed + auth_failed + failed_2026 + servers.failed > 0 {
        return Err("the conformance suite found failures (their output is above)".to_owned());
    }
    Ok(())
}
