//! A server process: how it is started (its own process group, killed with the client) and
//! stopped (stdin closed, grace, SIGTERM, grace, SIGKILL).

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use super::StdioTransport;
use super::stderr::{StderrTail, drain_stderr};
use super::{SpawnError, StdioConfig};
use maljan_mcp_transport::StoppedBy;

/// How to start a stdio server.
///
/// ```
/// use maljan_mcp_stdio::ServerCommand;
/// let command = ServerCommand::new("maljan-sidecar").arg("--stdio").env("RUST_LOG", "info");
/// assert_eq!(command.args, ["--stdio"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerCommand {
    /// The program, found on PATH when it has no slash.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set on top of the client's own.
    pub env: Vec<(String, String)>,
    /// The working directory; the client's when `None`.
    pub cwd: Option<PathBuf>,
}

impl ServerCommand {
    /// A command with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        ServerCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            cwd: None,
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Sets an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }
}

#[derive(Debug)]
pub(crate) struct ServerChild {
    child: Child,
}

impl ServerChild {
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Waits up to `grace` for the child to exit by itself.
    pub(crate) async fn wait_exit(&mut self, grace: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(grace, self.child.wait())
            .await
            .ok()?
            .ok()
    }

    /// Waits for the child to exit after its stdin closed; then SIGTERM; then SIGKILL.
    pub(crate) async fn stop(&mut self, grace: Duration) -> (Option<ExitStatus>, StoppedBy) {
        if let Ok(Ok(status)) = tokio::time::timeout(grace, self.child.wait()).await {
            return (Some(status), StoppedBy::StdinClosed);
        }
        if let Some(pid) = self.pid() {
            signal(pid, Signal::SIGTERM);
            if let Ok(Ok(status)) = tokio::time::timeout(grace, self.child.wait()).await {
                return (Some(status), StoppedBy::Terminated);
            }
        }
        let _ = self.child.kill().await;
        (self.child.try_wait().ok().flatten(), StoppedBy::Killed)
    }
}

/// Signals the server's process group (the server and what it started): it leads a group
/// of its own (see [`die_with_client`]).
fn signal(pid: u32, signal: Signal) {
    if let Ok(pid) = i32::try_from(pid) {
        // The child is not reaped before `stop` returns, so its pid, which is its group's
        // id, cannot have been reused.
        let _ = kill(Pid::from_raw(-pid), signal);
    }
}

/// Sets the server up to go with this client, whatever way the client goes.
///
/// The server leads a process group of its own: stopping it reaches the programs it started,
/// and a terminal's Ctrl-C reaches the client alone, which stops its servers in order. And
/// the kernel sends the server SIGKILL when the client's thread that started it ends, so a
/// client killed outright (SIGKILL leaves it no chance to stop anything) leaves no server
/// behind. That thread is a runtime worker, which lives as long as the runtime: servers are
/// not to be started from a thread that ends sooner (a `spawn_blocking` task's).
fn die_with_client(cmd: &mut Command) {
    cmd.process_group(0);
    let client = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe calls are allowed: it makes two system calls, prctl(2) and
    // getppid(2), which neither allocate nor take a lock, and it captures one integer.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // A client that died before the line above sends no signal: go now.
            if u32::try_from(nix::unistd::getppid().as_raw()) != Ok(client) {
                return Err(std::io::Error::other("the client that started it is gone"));
            }
            Ok(())
        });
    }
}

/// Kills the child (and what it started) at once (a protocol violation); it is reaped by
/// `close` or on drop.
pub(crate) fn kill_now(pid: u32) {
    signal(pid, Signal::SIGKILL);
}

impl StdioTransport {
    /// Starts a server process with piped stdin, stdout and stderr and connects to it.
    ///
    /// Stderr is drained continuously, logged under the server's name, and its last lines
    /// are kept ([`StdioTransport::stderr_tail`]). Must be called within a tokio runtime.
    pub fn spawn(
        command: &ServerCommand,
        config: StdioConfig,
    ) -> Result<StdioTransport, SpawnError> {
        let mut cmd = Command::new(&command.program);
        cmd.args(&command.args)
            .envs(command.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        die_with_client(&mut cmd);
        if let Some(cwd) = &command.cwd {
            cmd.current_dir(cwd);
        }
        let spawn_error = |source| SpawnError {
            server: config.name.clone(),
            program: command.program.display().to_string(),
            source,
        };
        let mut child = cmd.spawn().map_err(spawn_error)?;
        let missing = || std::io::Error::other("a standard stream was not piped");
        let stdin = child
            .stdin
            .take()
            .ok_or_else(missing)
            .map_err(spawn_error)?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(missing)
            .map_err(spawn_error)?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(missing)
            .map_err(spawn_error)?;
        widen_pipe(&stdin);
        widen_pipe(&stdout);
        let tail = Arc::new(Mutex::new(StderrTail::default()));
        let stderr_task = tokio::spawn(drain_stderr(stderr, config.name.clone(), tail.clone()));
        Ok(StdioTransport::start(
            stdout,
            stdin,
            Some((ServerChild { child }, stderr_task, tail)),
            config,
        ))
    }
}

/// How many bytes a pipe to or from a server holds, asked for where the system allows it.
const PIPE_BYTES: i32 = 1 << 20;

/// Asks for a 1 MiB pipe (the default is 64 KiB): a large message then crosses it in 16
/// times fewer wake-ups of the other side. Where the system refuses (a lower
/// `/proc/sys/fs/pipe-max-size`), the pipe stays as it is.
fn widen_pipe(pipe: &impl std::os::fd::AsFd) {
    use nix::fcntl::{FcntlArg, fcntl};
    if let Err(e) = fcntl(pipe, FcntlArg::F_SETPIPE_SZ(PIPE_BYTES)) {
        tracing::debug!("the pipe keeps its size: {e}");
    }
}

#[cfg(test)]
mod tests {
    use nix::fcntl::{FcntlArg, fcntl};

    use super::*;

    #[test]
    fn a_pipe_is_widened_as_far_as_the_system_allows() {
        let (read, write) = nix::unistd::pipe().expect("a pipe");
        let before = fcntl(&write, FcntlArg::F_GETPIPE_SZ).expect("its size");
        let allowed: i32 = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(before);
        widen_pipe(&write);
        let after = fcntl(&read, FcntlArg::F_GETPIPE_SZ).expect("its size");
        if allowed >= PIPE_BYTES {
            assert_eq!(
                after, PIPE_BYTES,
                "from {before}, the system allowing {allowed}"
            );
        } else {
            // Refused, unless the process may pass the limit (root may).
            assert!(
                after == before || after == PIPE_BYTES,
                "{before} -> {after}"
            );
        }
    }
}
