//! A throwaway PostgreSQL cluster for the tests that need a real database: Debian's
//! PostgreSQL (installed when missing), a new cluster under `target/services/postgres` made
//! with `initdb` as the `postgres` user (PostgreSQL refuses to run as root), started with
//! `pg_ctl` on a free loopback port, stopped when the guard is dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{empty_service_dir, free_loopback_port, on_path, run};

/// A running throwaway cluster; dropping it stops the server.
#[derive(Debug)]
pub(crate) struct Postgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
}

impl Postgres {
    /// Makes a new cluster and starts it.
    pub(crate) fn start() -> Result<Postgres, String> {
        let bin = server_binaries()?;
        let data = empty_service_dir("postgres")?;
        run(Command::new("chown").arg("postgres:postgres").arg(&data))?;
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                &data.display().to_string(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
            ],
        )?;
        let port = free_loopback_port()?;
        // In the cluster's own configuration, so that a test that stops the server can
        // start it again with a bare `pg_ctl start`.
        let settings = format!(
            "\nport = {port}\nunix_socket_directories = '{}'\nlisten_addresses = '127.0.0.1'\n\
             fsync = off\nmax_connections = 200\n",
            data.display()
        );
        std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .and_then(|mut conf| std::io::Write::write_all(&mut conf, settings.as_bytes()))
            .map_err(|e| format!("could not configure the cluster: {e}"))?;
        let postgres = Postgres { bin, data, port };
        postgres.pg_ctl(&["start"])?;
        Ok(postgres)
    }

    /// Runs `pg_ctl -D DATA -l LOG -w ARGS` as the `postgres` user.
    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let command = self.pg_ctl_command();
        let mut words = command.split(' ');
        let program = words.next().unwrap_or_default();
        let mut all: Vec<&str> = words.collect();
        all.extend_from_slice(args);
        run(Command::new(program).args(all))
    }

    /// The command line (words split by single spaces; the paths hold none) that runs
    /// `pg_ctl` on this cluster, for a test that stops and starts the server.
    pub(crate) fn pg_ctl_command(&self) -> String {
        let pg_ctl = format!(
            "{} -D {} -l {} -w",
            self.bin.join("pg_ctl").display(),
            self.data.display(),
            self.data.join("server.log").display()
        );
        if on_path("runuser") && is_root() {
            format!("runuser -u postgres -- {pg_ctl}")
        } else {
            pg_ctl
        }
    }

    /// The URL a client connects with: the `postgres` user, trusted on loopback.
    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self.pg_ctl(&["-m", "fast", "stop"]);
    }
}

/// `cargo xtask postgres`: starts a cluster, checks it answers, prints its URL and stops it.
pub(crate) fn check() -> Result<(), String> {
    let postgres = Postgres::start()?;
    let url = postgres.url();
    run(Command::new("psql")
        .args(["-X", "-q", "-t", "-c", "select 1"])
        .arg(&url))?;
    println!("xtask postgres: a throwaway cluster answered at {url}");
    Ok(())
}

/// The directory of the newest installed PostgreSQL's server programs, installing Debian's
/// package when there is none.
fn server_binaries() -> Result<PathBuf, String> {
    if let Some(bin) = newest_installed() {
        return Ok(bin);
    }
    println!("xtask: PostgreSQL is missing; installing Debian's postgresql");
    run(Command::new("sh").args([
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql",
    ]))?;
    newest_installed().ok_or_else(|| {
        "PostgreSQL's server programs are not under /usr/lib/postgresql; install them \
         (Debian: apt-get install postgresql)"
            .to_owned()
    })
}

fn newest_installed() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Runs `program ARGS` as the `postgres` user (as is when not root).
fn as_postgres(program: &Path, args: &[&str]) -> Result<(), String> {
    if on_path("runuser") && is_root() {
        run(Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(program)
            .args(args))
    } else {
        run(Command::new(program).args(args))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| out.stdout.trim_ascii() == b"0")
}
