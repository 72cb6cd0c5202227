//! `maljan runs` and `maljan report RUN`, over whichever run index holds the runs: the jobs
//! directory on this host, or the fleet of `[store]`.

use std::process::ExitCode;

use maljan_client::{IndexError, RunIndex};

use crate::error::CliError;
use crate::stdout::{out, outln};
use crate::{Format, print_json};

fn index_error(run: &str, e: IndexError) -> CliError {
    match e {
        // A fleet's store out of reach keeps its own exit status.
        IndexError::Unreadable(source) => match source.downcast::<maljan_fleet::FleetError>() {
            Ok(fleet) => CliError::Fleet(*fleet),
            Err(source) => CliError::Index { source },
        },
        refused => CliError::BadArgument {
            argument: run.to_owned(),
            detail: refused.to_string(),
        },
    }
}

/// Lists the index's latest `limit` runs and how many it holds in each state.
pub(crate) async fn list(
    index: &impl RunIndex,
    limit: u32,
    format: Format,
) -> Result<ExitCode, CliError> {
    let listing = index
        .latest(usize::try_from(limit).unwrap_or(usize::MAX))
        .await
        .map_err(|e| index_error("runs", e))?;
    if format == Format::Json {
        let runs: Vec<_> = listing
            .latest
            .iter()
            .map(|r| {
                serde_json::json!({
                    "run": r.run, "state": r.state, "attempts": r.attempts,
                    "sample": r.sample, "sha256": r.sha256, "verdict": r.verdict,
                    "why": r.why, "place": r.place,
                })
            })
            .collect();
        let counts: serde_json::Map<_, _> = listing
            .counts
            .iter()
            .map(|(state, n)| (state.clone(), serde_json::Value::from(*n)))
            .collect();
        print_json(&serde_json::json!({"runs": runs, "counts": counts}));
        return Ok(ExitCode::SUCCESS);
    }
    let summary: Vec<String> = listing
        .counts
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    outln!(
        "runs: {}",
        if summary.is_empty() {
            "none".to_owned()
        } else {
            summary.join(", ")
        }
    );
    for run in &listing.latest {
        let end = match (&run.verdict, &run.why) {
            (Some(verdict), _) => verdict.clone(),
            (None, Some(why)) => format!("({why})"),
            (None, None) => String::new(),
        };
        let attempts = run
            .attempts
            .map(|n| format!("attempts {n}  "))
            .unwrap_or_default();
        out!(
            "{}  {:<9}  {attempts}{}  {}\n",
            run.run,
            run.state,
            run.sample.as_deref().unwrap_or("-"),
            end
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows the report of the run `run`: its Markdown, or its JSON.
pub(crate) async fn show_report(
    index: &impl RunIndex,
    run: &str,
    format: Format,
) -> Result<ExitCode, CliError> {
    let report = index.report(run).await.map_err(|e| index_error(run, e))?;
    match format {
        Format::Json => {
            crate::stdout::write_json(&serde_json::to_string_pretty(&report).unwrap_or_default())
        }
        Format::Text => crate::stdout::write_out(&report.to_markdown()),
    }
    Ok(ExitCode::SUCCESS)
}
