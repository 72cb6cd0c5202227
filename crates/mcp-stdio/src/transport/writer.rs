//! The writer of one stdio connection: lines go to the server's stdin one whole line at a
//! time, in the order they were queued; a request is marked on its way before its line is
//! written, and back to not sent when the write fails.

use std::sync::Arc;

use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::LostBecause;
use super::connection_state::{ConnectionState, OutgoingLine};

/// Writes the queued lines until the queue closes, then shuts stdin.
pub(super) async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut outgoing: mpsc::Receiver<OutgoingLine>,
    shared: Arc<ConnectionState>,
) {
    while let Some(OutgoingLine { line, request }) = outgoing.recv().await {
        // Marked before the write: a server that reads the line and dies at once must find
        // its request in flight, never unsent, even when its death is read first.
        if let Some(id) = &request {
            shared.mark_written(id, true);
        }
        let written = async {
            writer.write_all(&line).await?;
            writer.flush().await
        };
        if let Err(e) = written.await {
            // A write that failed reached no one: the server's stdin has no reader.
            if let Some(id) = &request {
                shared.mark_written(id, false);
            }
            shared.fail(shared.lost(LostBecause::WriteFailed(Arc::new(e))));
            return;
        }
        if request.is_some() {
            shared.busy_poll.arm();
        }
        LARGE_BUFFERS.give(line);
    }
    let _ = writer.shutdown().await;
}
