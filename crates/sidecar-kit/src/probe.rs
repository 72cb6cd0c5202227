//! A tool's optional dependency, probed at start: present, or the tool unavailable with why.

use std::path::{Path, PathBuf};

/// How a tool's optional dependency is found at start: probed, never asserted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A program on PATH.
    Program(String),
    /// An environment variable that must be set and not empty.
    EnvVar(String),
    /// A file that must exist.
    File(PathBuf),
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    /// Found; for a program, its full path; for a variable, its value; for a file, its path.
    Found(String),
    /// Not found, with why.
    Missing(String),
}

impl Probe {
    /// The dependency's name, as the manifest shows it.
    pub fn name(&self) -> String {
        match self {
            Probe::Program(p) | Probe::EnvVar(p) => p.clone(),
            Probe::File(f) => f.display().to_string(),
        }
    }

    /// Runs the probe.
    ///
    /// ```
    /// use maljan_sidecar_kit::{Probe, ProbeResult};
    /// assert!(matches!(Probe::Program("sh".into()).run(), ProbeResult::Found(_)));
    /// assert!(matches!(
    ///     Probe::Program("surely-not-a-program-here".into()).run(),
    ///     ProbeResult::Missing(_)
    /// ));
    /// ```
    pub fn run(&self) -> ProbeResult {
        match self {
            Probe::Program(name) => match find_on_path(name) {
                Some(path) => ProbeResult::Found(path.display().to_string()),
                None => ProbeResult::Missing(format!("{name} is not on PATH")),
            },
            Probe::EnvVar(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => ProbeResult::Found(v),
                _ => ProbeResult::Missing(format!("the environment variable {var} is not set")),
            },
            Probe::File(path) => {
                if path.exists() {
                    ProbeResult::Found(path.display().to_string())
                } else {
                    ProbeResult::Missing(format!("{} does not exist", path.display()))
                }
            }
        }
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return is_executable(Path::new(program)).then(|| PathBuf::from(program));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
