//! Taking the files a tool named into the job's artefact store, after its call: from a
//! local server, read directly but only from inside its own staging directory; from any
//! other server, through `get_file`. A resource the answer links or embeds is taken too,
//! under its name. A file not taken is recorded with the server's words.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use maljan_confine::Root;
use maljan_mcp_proto::jsonrpc::{Reply, error_codes};
use maljan_mcp_proto::maljan::{ToolAnswer, files_in, resources_in};
use maljan_mcp_proto::mcp::{EmbeddedResource, methods};
use maljan_mcp_transport::OutgoingRequest;
use maljan_staging::{
    CHUNK_BYTES, DownloadError, Origin, Reach, StoredArtefact, ToolCaller, download,
};
use serde_json::json;

use crate::context::ConnectionContext;
use crate::events::RunEvent;
use crate::job::file_name;
use crate::job::{Job, TakenFile};
use crate::reach::ServerReach;
use crate::timeout::{RequestService, Unanswered};

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
            Ok(stored) => {
                job.keep(&stored).await;
                TakenFile::Taken {
                    server: server.to_owned(),
                    path: file.path.clone(),
                    sha256: stored.sha256,
                    size: stored.size,
                }
            }
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

/// Takes every resource `answer` names (its `resource_link` and embedded `resource`
/// blocks) into the job's artefact store under its name: an embedded one from the answer,
/// a linked one read with `resources/read` over `wire`. Each is checked against the size
/// its link states and recorded like a file the tool named. `call` says which call (its
/// server, tool and step) gave the answer.
pub(crate) async fn take_resources(
    wire: &impl RequestService,
    job: &Job,
    context: &ConnectionContext,
    call: &Origin,
    answer: &ToolAnswer,
    wait: Duration,
) -> Vec<TakenFile> {
    let server = call.server.as_str();
    let mut out = Vec::new();
    for resource in resources_in(&answer.value) {
        let origin = call.clone();
        let contents = match resource.embedded {
            Some(embedded) => Ok(embedded),
            None => read_resource(wire, &resource.uri, wait).await,
        };
        let stored = contents.and_then(|contents| {
            let bytes = resource_bytes(&contents)?;
            if let Some(stated) = resource.size.filter(|s| *s != bytes.len() as u64) {
                return Err(format!(
                    "it holds {} bytes, not the {stated} its link stated",
                    bytes.len()
                ));
            }
            job.store()
                .add_reader(
                    bytes.as_slice(),
                    &file_name(Path::new(&resource.name)),
                    origin,
                )
                .map_err(|e| format!("it could not be stored: {e}"))
        });
        let taken = match stored {
            Ok(stored) => {
                job.keep(&stored).await;
                TakenFile::Taken {
                    server: server.to_owned(),
                    path: resource.name,
                    sha256: stored.sha256,
                    size: stored.size,
                }
            }
            Err(reason) => TakenFile::NotTaken {
                server: server.to_owned(),
                path: resource.name,
                reason: format!("the resource {}: {reason}", resource.uri),
            },
        };
        context.record(&RunEvent::FileTaken(&taken));
        out.push(taken);
    }
    out
}

/// The first contents `resources/read` gives for `uri`, or why there are none.
async fn read_resource(
    wire: &impl RequestService,
    uri: &str,
    wait: Duration,
) -> Result<EmbeddedResource, String> {
    let request = OutgoingRequest::new(methods::RESOURCES_READ, Some(json!({ "uri": uri })));
    let raw = match wire.request(request, wait, true).await {
        Ok(Reply::Result(raw)) => raw,
        Ok(Reply::Error(e)) if e.code == error_codes::METHOD_NOT_FOUND => {
            return Err(format!(
                "the server does not serve resources/read ({}); have the tool name the file \
                 in its files list instead",
                e.message
            ));
        }
        Ok(Reply::Error(e)) => return Err(format!("resources/read failed: {}", e.message)),
        Err(Unanswered::TimedOut(waited)) => {
            return Err(format!(
                "resources/read got no answer within {} s",
                waited.as_secs_f64()
            ));
        }
        Err(Unanswered::Failed(failure)) => return Err(format!("resources/read: {failure}")),
        Err(Unanswered::Ended(failure)) => return Err(failure.message),
    };
    #[derive(serde::Deserialize)]
    struct ReadResult {
        contents: Vec<EmbeddedResource>,
    }
    let read: ReadResult = serde_json::from_str(raw.get())
        .map_err(|e| format!("the resources/read answer is not a resource: {e}"))?;
    read.contents
        .into_iter()
        .next()
        .ok_or_else(|| "resources/read gave no contents".to_owned())
}

/// A resource's bytes: its text, or its blob decoded.
fn resource_bytes(contents: &EmbeddedResource) -> Result<Vec<u8>, String> {
    match (&contents.text, &contents.blob) {
        (Some(text), _) => Ok(text.as_bytes().to_vec()),
        (None, Some(blob)) => base64::engine::general_purpose::STANDARD
            .decode(blob.trim())
            .map_err(|e| format!("its blob is not base64: {e}")),
        (None, None) => Err("it has neither text nor a blob".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contents(text: Option<&str>, blob: Option<&str>) -> EmbeddedResource {
        EmbeddedResource {
            uri: "demo://r".to_owned(),
            mime_type: None,
            text: text.map(str::to_owned),
            blob: blob.map(str::to_owned),
        }
    }

    #[test]
    fn a_resources_bytes_are_its_text_or_its_decoded_blob_and_nothing_else() {
        assert_eq!(
            resource_bytes(&contents(Some("hi"), None)).expect("text"),
            b"hi"
        );
        assert_eq!(
            resource_bytes(&contents(None, Some("aGk="))).expect("blob"),
            b"hi"
        );
        let bad = resource_bytes(&contents(None, Some("not base64!"))).expect_err("refused");
        assert!(bad.contains("not base64"), "{bad}");
        let empty = resource_bytes(&contents(None, None)).expect_err("refused");
        assert!(empty.contains("neither text nor a blob"), "{empty}");
    }
}
