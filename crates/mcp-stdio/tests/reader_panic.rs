//! A connection over an in-memory stream (its reader a task on the runtime) whose reader
//! panics: the calls waiting on it fail at once instead of waiting for answers nobody reads.

use std::time::Duration;

use maljan_mcp_proto::jsonrpc::RawJson;
use maljan_mcp_stdio::{LostBecause, StdioConfig, StdioError, StdioTransport};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn panicking_end_of_setup(_: &RawJson) -> bool {
    panic!("a callback with a bug")
}

#[tokio::test]
async fn a_reader_task_that_panics_fails_every_pending_call() {
    let (client_side, server_side) = tokio::io::duplex(4096);
    let (client_read, client_write) = tokio::io::split(client_side);
    let connection = StdioTransport::over(client_read, client_write, StdioConfig::named("panicky"));
    // Answers the second request (the setup request) only.
    let (server_read, mut server_write) = tokio::io::split(server_side);
    let server = tokio::spawn(async move {
        let mut lines = BufReader::new(server_read).lines();
        let _never_answered = lines.next_line().await;
        let _setup = lines.next_line().await;
        server_write
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n")
            .await
            .expect("written");
        // Held open: the connection must fail for its own reason, not the stream's end.
        lines.next_line().await
    });
    let never = connection.send_request("ping", None).await.expect("sent");
    let setup = connection
        .send_setup_request("initialize", None, panicking_end_of_setup)
        .await
        .expect("sent");
    // Only a guard against a hang turning into a stuck test run.
    let (never, setup) = tokio::time::timeout(Duration::from_secs(60), async {
        tokio::join!(never, setup)
    })
    .await
    .expect("the calls fail instead of waiting");
    for failed in [never, setup] {
        match failed {
            Err(StdioError::ConnectionLost { cause, .. }) => {
                assert!(matches!(cause, LostBecause::ReaderPanicked), "{cause}");
            }
            other => panic!("{other:?}"),
        }
    }
    connection.close().await;
    server.abort();
}
