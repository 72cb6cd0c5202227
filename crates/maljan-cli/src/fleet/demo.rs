//! `maljan demo --fleet`: the demo pack over a batch of generated samples, carried out by
//! three workers on this host through the fleet's stores (`[store]`), then where the reports
//! are. What to try once one machine is not enough.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use maljan_fleet::{RunState, Submission};

use super::Fleet;
use crate::config::Config;
use crate::demo::{PACK, sample_archive, serve_http_sidecar};
use crate::error::CliError;
use crate::stdout::{errln, outln};
use crate::{exit_status, ledger_file};

/// How the fleet's demo is run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FleetDemo {
    /// Samples generated (one run each).
    pub(crate) samples: u32,
    /// Workers started on this host.
    pub(crate) workers: u32,
}

fn demo_error(detail: String) -> CliError {
    CliError::Demo(detail)
}

/// The workers' configuration: the user's, and the demo's HTTP sidecar as `remote`.
fn worker_config(config_path: &Path, dir: &Path, remote: &str) -> Result<PathBuf, CliError> {
    let text = std::fs::read_to_string(config_path).map_err(|e| CliError::Config {
        path: config_path.to_owned(),
        detail: format!("cannot read it: {e}"),
    })?;
    let path = dir.join("workers.toml");
    std::fs::write(
        &path,
        format!("{text}\n[servers.remote]\nurl = \"{remote}\"\n"),
    )
    .map_err(|e| demo_error(format!("{} cannot be written: {e}", path.display())))?;
    Ok(path)
}

pub(crate) async fn run(
    config: &Config,
    config_path: Option<&Path>,
    demo: FleetDemo,
) -> Result<ExitCode, CliError> {
    let fleet = Fleet::connect(config).await?;
    let config_path = config_path.ok_or(CliError::NoStore)?;
    if config.server_names().any(|name| name == "remote") {
        return Err(demo_error(
            "the configuration has a server named remote, the name the demo's HTTP sidecar takes; \
             run the demo with a configuration of [store] alone"
                .to_owned(),
        ));
    }
    fleet.queue.migrate().await?;
    let dir = ledger_file::new_job_dir(&ledger_file::default_path()).with_extension("fleet-demo");
    std::fs::create_dir_all(&dir).map_err(|e| CliError::Job {
        path: dir.clone(),
        source: e,
    })?;
    let mut runs = Vec::new();
    for variant in 0..demo.samples {
        let sample = dir.join(format!("sample-{variant}.zip"));
        std::fs::write(&sample, sample_archive(variant)?).map_err(|e| CliError::Job {
            path: sample.clone(),
            source: e,
        })?;
        let stored = fleet.objects.put_sample(&sample).await?;
        let id = fleet
            .queue
            .submit(&Submission {
                pack_origin: "packs/demo.toml".to_owned(),
                pack_text: PACK.to_owned(),
                sample_sha256: stored.sha256,
                sample_name: format!("sample-{variant}.zip"),
                max_attempts: fleet.max_attempts,
            })
            .await?;
        runs.push(id);
    }
    errln!(
        "fleet demo: {} runs queued at {}; starting {} workers",
        runs.len(),
        fleet.settings.postgres.url(),
        demo.workers
    );
    let http = serve_http_sidecar()?;
    let workers_config = worker_config(config_path, &dir, &http.url)?;
    let exe = std::env::current_exe().map_err(CliError::OwnExecutable)?;
    let mut children = Vec::new();
    for n in 0..demo.workers {
        let child = Command::new(&exe)
            .args([
                "worker",
                "--until-empty",
                "--name",
                &format!("demo-worker-{n}"),
            ])
            .arg("--jobs")
            .arg(dir.join(format!("jobs-{n}")))
            .env("MALJAN_CONFIG", &workers_config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| demo_error(format!("a worker could not start: {e}")))?;
        children.push(child);
    }
    // Waited for on a thread each: the runtime goes on.
    let waited = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|mut child| child.wait().map(|status| status.success()))
            .collect::<Vec<_>>()
    })
    .await
    .map_err(|e| demo_error(format!("the workers could not be waited for: {e}")))?;
    drop(http);
    if waited.iter().any(|w| !matches!(w, Ok(true))) {
        return Err(demo_error(
            "a worker failed; its stderr is above".to_owned(),
        ));
    }
    let mut all_completed = true;
    for id in &runs {
        let Some(status) = fleet.queue.status(id).await? else {
            continue;
        };
        all_completed &= status.state == RunState::Completed;
        outln!(
            "{id}  {}  {}  attempts {}  worker {}",
            status.sample_name,
            status.verdict.as_deref().unwrap_or(status.state.as_str()),
            status.attempts,
            status.worker.as_deref().unwrap_or("-")
        );
    }
    outln!(
        "reports: in {} as reports/RUN/report.json; `maljan report RUN` shows one anywhere",
        fleet.settings.objects.url()
    );
    outln!("ledger: `maljan ledger --fleet --run RUN`; runs: `maljan runs`");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(ExitCode::from(if all_completed {
        exit_status::SUCCESS
    } else {
        exit_status::RUN_DEGRADED
    }))
}
