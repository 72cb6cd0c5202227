//! `maljan artefact SHA256 --out PATH`: a file a run took, by its digest, from whichever
//! archive keeps it: the fleet's object store, or the jobs beside the ledger.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use maljan_staging::{ArtefactArchive, ArtefactStore};

use crate::config::Config;
use crate::error::CliError;
use crate::stdout::outln;
use crate::{fleet, ledger_file};

/// The `artefact` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct ArtefactCommand {
    /// The file's sha256 (64 lowercase hex digits), as a run's report lists it.
    sha256: String,
    /// Where to write it; refused when something is there already.
    #[arg(long, value_name = "PATH")]
    out: PathBuf,
    /// The ledger whose jobs are searched, when there is no `[store]`.
    #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH")]
    ledger: Option<PathBuf>,
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The artefact from the first job beside the ledger that holds it.
async fn from_jobs(jobs: &Path, sha256: &str, out: &Path) -> std::io::Result<Option<u64>> {
    let entries = match std::fs::read_dir(jobs) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    for entry in entries.flatten() {
        let store = entry.path().join("artefacts");
        let is_job = entry.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::symlink_metadata(&store).is_ok_and(|m| m.is_dir());
        if !is_job {
            continue;
        }
        if let Some(size) = ArtefactStore::open(store)?.fetch(sha256, out).await? {
            return Ok(Some(size));
        }
    }
    Ok(None)
}

pub(crate) async fn run(config: &Config, options: ArtefactCommand) -> Result<ExitCode, CliError> {
    let bad = |argument: &Path, detail: &str| CliError::BadArgument {
        argument: argument.display().to_string(),
        detail: detail.to_owned(),
    };
    if !is_sha256(&options.sha256) {
        return Err(bad(
            Path::new(&options.sha256),
            "not a sha256; name a file by the 64 lowercase hex digits a run's report lists",
        ));
    }
    if std::fs::symlink_metadata(&options.out).is_ok() {
        return Err(bad(
            &options.out,
            "something is there already; name a new path",
        ));
    }
    let (found, searched) = if config.store.is_some() {
        let fleet = fleet::Fleet::connect(config).await?;
        let found = fleet.objects.fetch(&options.sha256, &options.out).await;
        (found, fleet.settings.objects.url().to_owned())
    } else {
        let ledger = options.ledger.unwrap_or_else(ledger_file::default_path);
        let jobs = ledger_file::jobs_dir(&ledger);
        let found = from_jobs(&jobs, &options.sha256, &options.out).await;
        (found, format!("the jobs in {}", jobs.display()))
    };
    match found.map_err(CliError::Output)? {
        Some(size) => {
            outln!("{} ({size} bytes)", options.out.display());
            Ok(ExitCode::SUCCESS)
        }
        None => Err(bad(
            Path::new(&options.sha256),
            &format!("{searched} hold no file of that sha256"),
        )),
    }
}
