//! Taking the files a tool named into the job's artefact store, after its call: from a
//! local server, read directly but only from inside its own staging directory; from any
//! other server, through `get_file`. A file not taken is recorded with the server's words.

use std::path::Path;

use maljan_confine::Root;
use maljan_mcp_proto::maljan::{ToolAnswer, files_in};
use maljan_staging::{
    CHUNK_BYTES, DownloadError, Origin, Reach, StoredArtefact, ToolCaller, download,
};

use crate::context::ConnectionContext;
use crate::events::RunEvent;
use crate::job::file_name;
use crate::job::{Job, TakenFile};
use crate::reach::ServerReach;

/// Takes every file `answer` names, through `caller` where it must.
pub(crate) async fn take_files(
    caller: &impl ToolCaller,
    place: &ServerReach,
    job: &Job,
    context: &ConnectionContext,
    tool: &str,
    answer: &ToolAnswer,
    step: Option<&str>,
) -> Vec<TakenFile> {
    let server = place.server.as_str();
    let mut out = Vec::new();
    for file in files_in(&answer.value) {
        let origin = Origin {
            step: step.map(str::to_owned),
            server: server.to_owned(),
            tool: tool.to_owned(),
        };
        let result = if matches!(place.reach(), Reach::Local) {
            read_local(job, server, &file.path, origin)
        } else {
            download(
                caller,
                &file.path,
                job.store(),
                origin,
                CHUNK_BYTES,
                |done, total| {
                    context.report_progress("download", &file.path, done, total);
                },
            )
            .await
            .map_err(|e| match e {
                DownloadError::NotServed { words, .. } => words,
                other => other.to_string(),
            })
        };
        let taken = match result {
            Ok(stored)
                if file
                    .sha256
                    .as_deref()
                    .is_some_and(|s| !s.eq_ignore_ascii_case(&stored.sha256)) =>
            {
                TakenFile::NotTaken {
                    server: server.to_owned(),
                    path: file.path.clone(),
                    reason: format!(
                        "its bytes have sha256 {}, not the {} the tool stated",
                        stored.sha256,
                        file.sha256.unwrap_or_default()
                    ),
                }
            }
            Ok(stored) => TakenFile::Taken {
                server: server.to_owned(),
                path: file.path.clone(),
                sha256: stored.sha256,
                size: stored.size,
            },
            Err(reason) => TakenFile::NotTaken {
                server: server.to_owned(),
                path: file.path.clone(),
                reason,
            },
        };
        context.record(&RunEvent::FileTaken(&taken));
        out.push(taken);
    }
    out
}

/// Reads a file a local server wrote, only from inside its staging directory: opened
/// beneath it in one step (no `..`, no symlink out, nothing but a regular file), and
/// read from that descriptor, so the name cannot be swapped once checked.
fn read_local(
    job: &Job,
    server: &str,
    path: &str,
    origin: Origin,
) -> Result<StoredArtefact, String> {
    let server_dir = Root::open(job.server_dir(server))
        .map_err(|e| format!("the server's staging directory cannot be read: {e}"))?;
    let file = server_dir.open_file(path).map_err(|refusal| {
        format!(
            "{path} is refused: {refusal} (files are taken only from the server's staging \
             directory {})",
            server_dir.path().display()
        )
    })?;
    job.store()
        .add_reader(file, &file_name(Path::new(path)), origin)
        .map_err(|e| format!("{path} could not be stored: {e}"))
}
