//! Reading a reply stream: its events to their requests, the server's own requests answered
//! and its notifications handed on, a cut stream resumed with `Last-Event-ID`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures_util::StreamExt;
use maljan_mcp_proto::jsonrpc::{
    DecodedLine, ErrorResponse, Message, Reply, Request, RequestId, Response, decode_line,
    decode_line_buffer,
};

use super::{HttpTransport, MAX_RESUMES, MAX_RETRY_DELAY, lock};
use crate::waiting::{Delivery, WaitEnd, Waiting};
use crate::{HttpError, ReplyProblem, SseItem, SseParser, StreamEnd};

impl HttpTransport {
    /// What a request's wait ended with.
    pub(super) fn ended(&self, end: WaitEnd) -> Result<Reply, HttpError> {
        match end {
            WaitEnd::Answered(answer) => answer,
            WaitEnd::Closed => Err(self.stream_ended(StreamEnd::Closed)),
        }
    }

    /// Reads a request's SSE stream until its answer arrives, on this stream or any other.
    /// A stream cut with an event id is resumed by GET with `Last-Event-ID` after the
    /// server's `retry` delay; one cut without is waited out while the GET stream is open
    /// (the answer may come there; the caller's timeout bounds the wait), and fails at once
    /// otherwise.
    pub(super) async fn read_stream(
        &self,
        response: reqwest::Response,
        wait: &mut Waiting,
    ) -> Result<Reply, HttpError> {
        let mut parser = SseParser::new(self.state.config.max_event_bytes);
        let mut retry = Duration::ZERO;
        let mut response = response;
        for attempt in 0..=MAX_RESUMES {
            let mut stream = response.bytes_stream();
            let mut cut = None;
            loop {
                let chunk = tokio::select! {
                    biased;
                    end = wait.answer() => return self.ended(end),
                    chunk = stream.next() => chunk,
                };
                let chunk = match chunk {
                    None => break,
                    Some(Ok(chunk)) => chunk,
                    Some(Err(e)) => {
                        cut = Some(Arc::new(e.without_url()));
                        break;
                    }
                };
                parser.handle_bytes(&chunk);
                while let Some(item) = parser.poll_item() {
                    match item {
                        SseItem::Event(event) => self.handle_line(event.data.as_bytes()).await?,
                        SseItem::Retry(ms) => {
                            retry = Duration::from_millis(ms).min(MAX_RETRY_DELAY);
                        }
                        SseItem::Oversized { length } => {
                            lock(&self.state.counts).oversized += 1;
                            tracing::warn!(
                                server = self.server(),
                                length,
                                "an SSE event over the bound was dropped"
                            );
                        }
                        SseItem::NotUtf8 { offset } => {
                            return Err(self.bad_reply(ReplyProblem::NotUtf8(offset)));
                        }
                    }
                }
            }
            if let Some(end) = wait.try_take() {
                return self.ended(end);
            }
            let Some(last_id) = parser.last_event_id().map(str::to_owned) else {
                if self.state.listening.load(Ordering::Acquire) {
                    return self.ended(wait.answer().await);
                }
                return Err(self.stream_ended(cut.map_or(StreamEnd::NoEventId, StreamEnd::Broken)));
            };
            if attempt == MAX_RESUMES {
                break;
            }
            tokio::select! {
                biased;
                end = wait.answer() => return self.ended(end),
                () = tokio::time::sleep(retry) => {}
            }
            tracing::info!(
                server = self.server(),
                last_id,
                "resuming a cut reply stream"
            );
            parser.handle_eof();
            let sent_session = self.session_id();
            let get = self.get_stream(Some(&last_id))?;
            let resumed = get.send().await.map_err(|e| self.unreachable(e))?;
            response = self.check_status(resumed, sent_session.as_deref()).await?;
        }
        Err(self.stream_ended(StreamEnd::TooManyResumptions(MAX_RESUMES)))
    }

    /// Reads one JSON-RPC line of a reply, from any stream: each answer goes to the request
    /// waiting under its id (an answer to none is counted and dropped), notifications to the
    /// receiver, the server's requests are answered.
    pub(super) async fn handle_line(&self, line: &[u8]) -> Result<(), HttpError> {
        let blank = line.iter().all(u8::is_ascii_whitespace);
        self.handle_decoded(decode_line(line, true), blank).await
    }

    /// Reads a JSON reply's body as [`handle_line`](Self::handle_line) reads a line, its
    /// result kept in the body's own buffer: a file chunk's answer is not copied.
    pub(super) async fn handle_body(&self, body: Vec<u8>) -> Result<(), HttpError> {
        let blank = body.iter().all(u8::is_ascii_whitespace);
        self.handle_decoded(decode_line_buffer(body, true), blank)
            .await
    }

    async fn handle_decoded(&self, decoded: DecodedLine, blank: bool) -> Result<(), HttpError> {
        let messages = match decoded {
            DecodedLine::Message(m) => vec![m],
            DecodedLine::Batch(ms) => ms,
            DecodedLine::Invalid(invalid) => {
                lock(&self.state.counts).invalid += 1;
                tracing::warn!(
                    server = self.server(),
                    "invalid protocol message in a reply: {}",
                    invalid.reason
                );
                if let Some(refusal) = invalid.refusal() {
                    // The server's own request, malformed: refused, so that it does not wait.
                    self.post_answer(refusal).await;
                    return Ok(());
                }
                if let Some(id) = invalid.id.filter(|_| !invalid.request) {
                    let error = HttpError::InvalidAnswer {
                        server: self.server().to_owned(),
                        reason: invalid.reason,
                    };
                    self.state.waiting.deliver(&id, Err(error));
                }
                return Ok(());
            }
            DecodedLine::NotProtocol => {
                if blank {
                    return Ok(());
                }
                return Err(self.bad_reply(ReplyProblem::NotJsonRpc));
            }
        };
        for message in messages {
            lock(&self.state.counts).messages += 1;
            match message {
                Message::Response(Response { id, result }) => {
                    self.route(&id, Reply::Result(result));
                }
                Message::Error(ErrorResponse {
                    id: Some(id),
                    error,
                }) => self.route(&id, Reply::Error(error)),
                Message::Error(ErrorResponse { id: None, error }) => {
                    lock(&self.state.counts).unmatched += 1;
                    tracing::warn!(
                        server = self.server(),
                        code = error.code,
                        "an error answer to no request: {}",
                        error.message
                    );
                }
                Message::Notification(n) => {
                    let _ = self.state.notifications.try_send(n);
                }
                Message::Request(request) => self.answer_server_request(request).await,
            }
        }
        Ok(())
    }

    /// Gives an answer to the request waiting under `id`; one that none waits for is
    /// counted and dropped, never given to another.
    pub(super) fn route(&self, id: &RequestId, reply: Reply) {
        if self.state.waiting.deliver(id, Ok(reply)) == Delivery::Unmatched {
            lock(&self.state.counts).unmatched += 1;
            tracing::debug!(
                server = self.server(),
                %id,
                "an answer to no request waiting (late, or never sent) was dropped"
            );
        }
    }

    pub(super) async fn answer_server_request(&self, request: Request) {
        self.post_answer(self.state.config.server_requests.answer(request))
            .await;
    }

    /// POSTs the answer to a server's request.
    pub(super) async fn post_answer(&self, answer: Message) {
        let Ok(post) = self.post(answer.to_line()) else {
            return;
        };
        if let Ok(response) = post.send().await {
            let _ = self.check_status(response, None).await;
        }
    }
}
