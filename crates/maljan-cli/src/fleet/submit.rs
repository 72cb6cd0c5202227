//! `maljan submit PACK SAMPLE…`: each sample stored once in the object store (by its
//! sha256) and a run of the pack queued for each.

use std::path::PathBuf;
use std::process::ExitCode;

use maljan_client::Pack;
use maljan_fleet::Submission;

use super::Fleet;
use crate::config::Config;
use crate::error::CliError;
use crate::stdout::{errln, outln};
use crate::{Format, exit_status, print_json};

/// The `submit` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct SubmitCommand {
    /// The triage pack (TOML), checked before anything is stored.
    pack: PathBuf,
    /// The samples: one run each.
    #[arg(required = true)]
    samples: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

pub(crate) async fn run(config: Config, options: SubmitCommand) -> Result<ExitCode, CliError> {
    let pack = match Pack::load(&options.pack) {
        Ok(pack) => pack,
        Err(errors) => {
            errln!("error: {errors}");
            return Ok(ExitCode::from(exit_status::USAGE));
        }
    };
    if let Err(errors) = pack.check_servers(config.server_names()) {
        errln!("error: {errors}");
        return Ok(ExitCode::from(exit_status::USAGE));
    }
    for sample in &options.samples {
        if !sample.is_file() {
            return Err(CliError::BadArgument {
                argument: sample.display().to_string(),
                detail: "the sample is not a readable file; name the files to triage".to_owned(),
            });
        }
    }
    // Read once: the text queued is the text checked.
    let pack_text = std::fs::read_to_string(&options.pack).map_err(|e| CliError::BadArgument {
        argument: options.pack.display().to_string(),
        detail: format!("the pack cannot be read: {e}"),
    })?;
    if let Err(errors) = Pack::parse(&pack_text, pack.origin()) {
        errln!("error: {errors}");
        return Ok(ExitCode::from(exit_status::USAGE));
    }
    let fleet = Fleet::connect(&config).await?;
    // A new database gets its schema from its first submission as from its first worker.
    fleet.queue.migrate().await?;
    let mut queued = Vec::new();
    for sample in &options.samples {
        let stored = fleet.objects.put_sample(sample).await?;
        let name = sample
            .file_name()
            .map_or_else(|| "sample".to_owned(), |n| n.to_string_lossy().into_owned());
        let id = fleet
            .queue
            .submit(&Submission {
                pack_origin: pack.origin().to_owned(),
                pack_text: pack_text.clone(),
                sample_sha256: stored.sha256.clone(),
                sample_name: name.clone(),
                max_attempts: fleet.max_attempts,
            })
            .await?;
        if options.format == Format::Text {
            outln!(
                "{id}  {name}  sha256 {}{}",
                stored.sha256,
                if stored.uploaded {
                    ""
                } else {
                    " (stored already)"
                }
            );
        }
        queued.push(serde_json::json!({
            "run": id, "sample": name, "sha256": stored.sha256, "size": stored.size,
            "uploaded": stored.uploaded,
        }));
    }
    if options.format == Format::Json {
        print_json(&serde_json::json!({"queued": queued}));
    }
    Ok(ExitCode::SUCCESS)
}
