//! The HTTP transport against a scripted server: each test says how the server answers.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use axum::routing::any;
use maljan_mcp_http::{HttpConfig, HttpError, HttpTransport};
use maljan_mcp_proto::jsonrpc::{DecodedLine, Message, Reply, RequestId, decode_line};
use serde_json::json;

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    method: Method,
    headers: HeaderMap,
    body: String,
    at: Instant,
}

type Script = dyn Fn(&Seen, usize) -> Response + Send + Sync;

#[derive(Clone)]
struct Scripted {
    script: Arc<Script>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

async fn handle(
    State(s): State<Scripted>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let seen = Seen {
        method,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        at: Instant::now(),
    };
    let index = {
        let mut all = s.seen.lock().expect("lock");
        all.push(seen.clone());
        all.len() - 1
    };
    (s.script)(&seen, index)
}

async fn serve(
    script: impl Fn(&Seen, usize) -> Response + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let state = Scripted {
        script: Arc::new(script),
        seen: seen.clone(),
    };
    let app = Router::new().route("/mcp", any(handle)).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/mcp"), seen)
}

fn request_id(seen: &Seen) -> Option<RequestId> {
    match decode_line(seen.body.as_bytes(), false) {
        DecodedLine::Message(Message::Request(r)) => Some(r.id),
        _ => None,
    }
}

fn json_reply(body: serde_json::Value) -> Response {
    Response::builder()
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .expect("response")
}

fn sse_reply(body: String) -> Response {
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .expect("response")
}

fn status(code: StatusCode) -> Response {
    Response::builder()
        .status(code)
        .body(Body::empty())
        .expect("response")
}

fn connect(
    url: &str,
) -> (
    HttpTransport,
    tokio::sync::mpsc::Receiver<maljan_mcp_proto::jsonrpc::Notification>,
) {
    let http = HttpTransport::new(HttpConfig::new("scripted", url)).expect("a connection");
    let notifications = http.take_notifications().expect("taken once");
    (http, notifications)
}

fn result_of(reply: Reply) -> serde_json::Value {
    match reply {
        Reply::Result(r) => serde_json::from_str(r.get()).expect("JSON"),
        Reply::Error(e) => panic!("an error reply: {e:?}"),
    }
}

#[tokio::test]
async fn a_json_reply_a_session_kept_and_echoed_and_the_version_sent_after_setup() {
    let (url, seen) = serve(|s, _| {
        let id = request_id(s);
        let mut response = json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {"ok": true}}));
        response
            .headers_mut()
            .insert("mcp-session-id", "s-123".parse().expect("header"));
        response
    })
    .await;
    let (http, _) = connect(&url);
    let reply = http
        .request(http.next_id(), "initialize", None)
        .await
        .expect("answered");
    assert_eq!(result_of(reply), json!({"ok": true}));
    assert_eq!(http.session_id().as_deref(), Some("s-123"));
    http.set_protocol_version("2025-11-25");
    http.request(http.next_id(), "tools/list", None)
        .await
        .expect("answered");
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen[0].headers.get("accept").expect("accept"),
        "application/json, text/event-stream"
    );
    assert!(seen[0].headers.get("mcp-session-id").is_none());
    assert_eq!(
        seen[1].headers.get("mcp-session-id").expect("echoed"),
        "s-123"
    );
    assert_eq!(
        seen[1]
            .headers
            .get("mcp-protocol-version")
            .expect("version"),
        "2025-11-25"
    );
}

#[tokio::test]
async fn an_sse_reply_delivers_notifications_before_the_response() {
    let (url, _) = serve(|s, _| {
        let id = request_id(s);
        let note = |n: u32| {
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
            "params": {"progressToken": 1, "progress": n}})
        };
        let response = json!({"jsonrpc": "2.0", "id": id, "result": {"done": true}});
        sse_reply(format!(
            "data: {}\n\ndata: {}\n\ndata: {response}\n\n",
            note(1),
            note(2)
        ))
    })
    .await;
    let (http, mut notes) = connect(&url);
    let reply = http
        .request(http.next_id(), "tools/call", None)
        .await
        .expect("answered");
    assert_eq!(result_of(reply), json!({"done": true}));
    for n in 1..=2 {
        let note = notes.try_recv().expect("a notification");
        assert_eq!(note.method, "notifications/progress");
        assert!(
            note.params
                .expect("params")
                .get()
                .contains(&format!("\"progress\":{n}"))
        );
    }
}

#[tokio::test]
async fn a_cut_stream_is_resumed_with_last_event_id_after_the_retry_delay() {
    let (url, seen) = serve(|s, index| match (s.method.clone(), index) {
        (Method::POST, _) => sse_reply(
            "id: e1\nretry: 200\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n"
                .to_owned(),
        ),
        (Method::GET, _) if s.headers.get("last-event-id").is_some_and(|v| v == "e1") => {
            sse_reply("id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resumed\":true}}\n\n".to_owned())
        }
        _ => status(StatusCode::BAD_REQUEST),
    })
    .await;
    let (http, _) = connect(&url);
    let reply = http
        .request(RequestId::Integer(1), "tools/call", None)
        .await
        .expect("answered");
    assert_eq!(result_of(reply), json!({"resumed": true}));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].method, Method::GET);
    assert!(
        seen[1].at - seen[0].at >= Duration::from_millis(200),
        "the client waited the retry delay"
    );
}

#[tokio::test]
async fn a_404_on_a_session_is_an_expired_session() {
    let (url, _) = serve(|s, _| {
        if s.headers.get("mcp-session-id").is_some() {
            return status(StatusCode::NOT_FOUND);
        }
        let mut response = json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}}));
        response
            .headers_mut()
            .insert("mcp-session-id", "gone-soon".parse().expect("header"));
        response
    })
    .await;
    let (http, _) = connect(&url);
    http.request(http.next_id(), "initialize", None)
        .await
        .expect("answered");
    let error = http
        .request(http.next_id(), "tools/list", None)
        .await
        .expect_err("expired");
    assert!(
        matches!(&error, HttpError::SessionExpired { session, .. } if session == "gone-soon"),
        "{error}"
    );
    assert!(error.to_string().contains("connect again"));
}

#[tokio::test]
async fn notifications_get_202_and_a_405_on_delete_is_tolerated() {
    let (url, seen) = serve(|s, _| match s.method {
        Method::DELETE | Method::GET => status(StatusCode::METHOD_NOT_ALLOWED),
        _ if request_id(s).is_none() => status(StatusCode::ACCEPTED),
        _ => {
            let mut response =
                json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}}));
            response
                .headers_mut()
                .insert("mcp-session-id", "keep".parse().expect("header"));
            response
        }
    })
    .await;
    let (http, _) = connect(&url);
    http.request(http.next_id(), "initialize", None)
        .await
        .expect("answered");
    http.notify("notifications/initialized", None)
        .await
        .expect("202 accepted");
    http.close().await;
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.last().expect("the DELETE").method, Method::DELETE);
    assert_eq!(
        seen.last()
            .expect("the DELETE")
            .headers
            .get("mcp-session-id")
            .expect("session"),
        "keep"
    );
}

#[tokio::test]
async fn an_sse_event_over_the_bound_is_refused_and_the_response_still_read() {
    let (url, _) = serve(|s, _| {
        let big = "x".repeat(1 << 20);
        let response = json!({"jsonrpc": "2.0", "id": request_id(s), "result": {"small": true}});
        sse_reply(format!("data: {{\"jsonrpc\":\"2.0\",\"method\":\"n\",\"params\":{{\"big\":\"{big}\"}}}}\n\ndata: {response}\n\n"))
    })
    .await;
    let mut config = HttpConfig::new("scripted", &url);
    config.max_event_bytes = 4096;
    let http = HttpTransport::new(config).expect("a connection");
    let reply = http
        .request(http.next_id(), "tools/call", None)
        .await
        .expect("answered");
    assert_eq!(result_of(reply), json!({"small": true}));
    assert_eq!(http.counts().oversized, 1);
}

/// A JSON reply whose result holds a string of `len` bytes: long enough, past 1 MiB, to be
/// read by a task of its own.
fn long_json_reply(seen: &Seen, len: usize) -> Response {
    let long: String = (0..len)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    json_reply(json!({"jsonrpc": "2.0", "id": request_id(seen), "result": {"long": long}}))
}

#[tokio::test]
async fn a_long_json_reply_is_read_whole_by_calls_in_flight_together() {
    let (url, _) = serve(|s, i| long_json_reply(s, (3 << 20) + i)).await;
    let (http, _) = connect(&url);
    let calls = (0..3).map(|_| http.request(http.next_id(), "tools/call", None));
    let mut lengths: Vec<usize> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|reply| {
            let result = result_of(reply.expect("answered"));
            let long = result["long"].as_str().expect("the string");
            assert!(
                long.bytes()
                    .enumerate()
                    .all(|(i, b)| b == b'a' + (i % 26) as u8)
            );
            long.len()
        })
        .collect();
    lengths.sort_unstable();
    assert_eq!(lengths, [3 << 20, (3 << 20) + 1, (3 << 20) + 2]);
}

#[tokio::test]
async fn a_long_json_reply_over_the_bound_is_refused_and_counted() {
    let (url, _) = serve(|s, _| long_json_reply(s, 3 << 20)).await;
    let mut config = HttpConfig::new("scripted", &url);
    config.max_event_bytes = 2 << 20;
    let http = HttpTransport::new(config).expect("a connection");
    let refused = http
        .request(http.next_id(), "tools/call", None)
        .await
        .expect_err("over the bound");
    assert!(
        refused.to_string().contains("over the 2097152-byte bound"),
        "{refused}"
    );
    assert_eq!(http.counts().oversized, 1);
}

#[tokio::test]
async fn an_invalid_answer_naming_the_request_fails_it_at_once() {
    let (url, _) = serve(|s, _| {
        let id = request_id(s);
        sse_reply(format!(
            "data: {}\n\n",
            json!({"jsonrpc": "2.0", "id": id, "result": {}, "error": {"code": 1, "message": "m"}})
        ))
    })
    .await;
    let (http, _) = connect(&url);
    let error = http
        .request(http.next_id(), "tools/call", None)
        .await
        .expect_err("invalid");
    assert!(matches!(error, HttpError::InvalidAnswer { .. }), "{error}");
    assert!(error.to_string().contains("both result and error"));
    assert_eq!(http.counts().invalid, 1);
}

#[tokio::test]
async fn the_get_stream_delivers_server_notifications_and_a_405_is_tolerated() {
    let (url, _) = serve(|s, _| match s.method {
        Method::GET => sse_reply(
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"
                .to_owned(),
        ),
        _ => status(StatusCode::ACCEPTED),
    })
    .await;
    let (http, mut notes) = connect(&url);
    let listening = http.listen();
    assert_eq!(
        notes.recv().await.expect("a notification").method,
        "notifications/tools/list_changed"
    );
    http.close().await;
    assert!(listening.await.is_err(), "closing ends the stream's task");

    let (url, seen) = serve(|_, _| status(StatusCode::METHOD_NOT_ALLOWED)).await;
    let (http, mut notes) = connect(&url);
    http.listen().await.expect("a 405 ends the task quietly");
    assert!(notes.try_recv().is_err());
    assert_eq!(seen.lock().expect("lock")[0].method, Method::GET);
}

#[tokio::test]
async fn the_bearer_token_and_extra_headers_are_sent_and_never_shown() {
    let (url, seen) =
        serve(|s, _| json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}})))
            .await;
    let mut config = HttpConfig::new("scripted", &url);
    config.bearer_token = Some("s3cret-token".into());
    config.headers = vec![("X-Team".into(), "triage".into())];
    assert!(!format!("{config:?}").contains("s3cret-token"));
    let http = HttpTransport::new(config).expect("a connection");
    assert!(!format!("{http:?}").contains("s3cret-token"));
    http.request(http.next_id(), "ping", None)
        .await
        .expect("answered");
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen[0].headers.get("authorization").expect("auth"),
        "Bearer s3cret-token"
    );
    assert_eq!(seen[0].headers.get("x-team").expect("extra"), "triage");
}

#[tokio::test]
async fn a_request_with_json_params_sends_the_body_serde_would_and_reads_the_reply() {
    let (url, seen) = serve(|s, _| {
        let id = request_id(s);
        json_reply(json!({"jsonrpc": "2.0", "id": id, "result": {"received": 4}}))
    })
    .await;
    let (http, _) = connect(&url);
    // A chunk's base64 among other arguments, and a string that needs escaping.
    let params = json!({"name": "put_sample_chunk", "arguments": {
        "upload_id": 1, "offset": 0, "content_base64": "AAECAw==".repeat(1000),
        "note": "a \"quoted\"\n line \u{1}"
    }});
    let id = http.next_id();
    let expected = Message::Request(maljan_mcp_proto::jsonrpc::Request {
        id: id.clone(),
        method: "tools/call".to_owned(),
        params: serde_json::value::to_raw_value(&params).ok(),
    })
    .to_line();
    let reply = http
        .request_json(id, "tools/call", params, None)
        .await
        .expect("answered");
    assert_eq!(result_of(reply), json!({"received": 4}));
    let seen = seen.lock().expect("lock");
    assert_eq!(seen[0].body.as_bytes(), expected.as_slice());
    assert_eq!(
        seen[0].headers.get("content-type").expect("content type"),
        "application/json"
    );
}

#[tokio::test]
async fn an_answer_on_the_get_stream_reaches_its_call_and_an_unknown_id_is_only_counted() {
    type GetStream = tokio::sync::mpsc::UnboundedSender<Result<Bytes, std::io::Error>>;
    let get_stream: Arc<Mutex<Option<GetStream>>> = Arc::default();
    let slot = get_stream.clone();
    let (url, _) = serve(move |s, _| match s.method {
        Method::GET => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            *slot.lock().expect("lock") = Some(tx);
            let body = futures_util::stream::unfold(rx, |mut rx| async move {
                rx.recv().await.map(|chunk| (chunk, rx))
            });
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from_stream(body))
                .expect("response")
        }
        _ => match request_id(s) {
            None => status(StatusCode::ACCEPTED),
            Some(id) => {
                let get = slot
                    .lock()
                    .expect("lock")
                    .clone()
                    .expect("the GET stream is open");
                for answered in [json!(99), json!(id)] {
                    let event = json!({"jsonrpc": "2.0", "id": answered, "result": {"on": "get"}});
                    let _ = get.send(Ok(Bytes::from(format!("data: {event}\n\n"))));
                }
                // The POST's own stream ends with no answer and no event id to resume from.
                sse_reply(": the answer goes elsewhere\n\n".to_owned())
            }
        },
    })
    .await;
    let (http, _) = connect(&url);
    http.notify("notifications/initialized", None)
        .await
        .expect("accepted, and the GET stream opened");
    assert!(get_stream.lock().expect("lock").is_some());
    let reply = http
        .request(RequestId::Integer(1), "tools/call", None)
        .await
        .expect("answered on the GET stream");
    assert_eq!(result_of(reply), json!({"on": "get"}));
    let counts = http.counts();
    assert_eq!((counts.messages, counts.unmatched), (2, 1));
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_refused_and_the_credentials_stay_home() {
    // The other origin: a second server that must never be reached.
    let (elsewhere, reached) =
        serve(|s, _| json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}})))
            .await;
    let target = elsewhere.replace("127.0.0.1", "localhost");
    let (url, _) = serve(move |_, _| {
        Response::builder()
            .status(StatusCode::TEMPORARY_REDIRECT)
            .header("location", target.clone())
            .body(Body::empty())
            .expect("response")
    })
    .await;
    let mut config = HttpConfig::new("scripted", &url);
    config.bearer_token = Some("s3cret-token".into());
    config.headers = vec![("X-Api-Key".into(), "k3y".into())];
    let http = HttpTransport::new(config).expect("a connection");
    let error = http
        .request(http.next_id(), "ping", None)
        .await
        .expect_err("refused");
    let text = format!("{error} {:?}", std::error::Error::source(&error));
    assert!(text.contains("another origin"), "{text}");
    assert!(text.contains("localhost"), "names the target: {text}");
    assert!(
        reached.lock().expect("lock").is_empty(),
        "nothing reached it"
    );
}

#[test]
fn credentials_in_the_url_beside_a_token_are_a_configuration_error() {
    let mut config = HttpConfig::new("scripted", "http://ann:pw@127.0.0.1:9/mcp");
    config.bearer_token = Some("s3cret-token".into());
    let error = HttpTransport::new(config).expect_err("refused");
    let text = error.to_string();
    assert!(text.contains("keep one"), "{text}");
    assert!(!text.contains("pw@"), "{text}");
}

#[tokio::test]
async fn a_token_file_is_read_for_each_request_so_a_rotated_token_is_sent() {
    let (url, seen) =
        serve(|s, _| json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}})))
            .await;
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("token");
    std::fs::write(&file, "first-token\n").expect("write");
    let mut config = HttpConfig::new("scripted", &url);
    config.bearer_token = Some(maljan_mcp_http::BearerToken::File(file.clone()));
    let http = HttpTransport::new(config).expect("a connection");
    http.request(http.next_id(), "ping", None)
        .await
        .expect("answered");
    std::fs::write(&file, "second-token").expect("rotate");
    http.request(http.next_id(), "ping", None)
        .await
        .expect("answered");
    let seen = seen.lock().expect("lock");
    let sent: Vec<_> = seen
        .iter()
        .map(|s| s.headers.get("authorization").cloned())
        .collect();
    assert_eq!(sent[0].as_ref().expect("auth"), "Bearer first-token");
    assert_eq!(sent[1].as_ref().expect("auth"), "Bearer second-token");
}

#[tokio::test]
async fn a_token_that_cannot_be_had_fails_the_request_with_its_cause_and_sends_nothing() {
    let (url, seen) =
        serve(|s, _| json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}})))
            .await;
    let mut config = HttpConfig::new("scripted", &url);
    config.bearer_token = Some(maljan_mcp_http::BearerToken::from_fn(|| {
        Err("the vault is sealed".into())
    }));
    let http = HttpTransport::new(config).expect("a connection");
    let error = http
        .request(http.next_id(), "ping", None)
        .await
        .expect_err("no token");
    assert!(error.to_string().contains("the vault is sealed"), "{error}");
    assert!(seen.lock().expect("lock").is_empty());
}

#[tokio::test]
async fn a_callers_own_client_carries_the_requests_with_the_headers_and_token_added() {
    let (url, seen) =
        serve(|s, _| json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}})))
            .await;
    let mut config = HttpConfig::new("scripted", &url);
    let own = reqwest::Client::builder()
        .user_agent("the-callers-client/1")
        .build()
        .expect("a client");
    config.client = Some(own);
    config.bearer_token = Some("s3cret-token".into());
    config.headers = vec![("X-Team".into(), "triage".into())];
    let http = HttpTransport::new(config).expect("a connection");
    http.request(http.next_id(), "ping", None)
        .await
        .expect("answered");
    let seen = seen.lock().expect("lock");
    assert_eq!(
        seen[0].headers.get("user-agent").expect("agent"),
        "the-callers-client/1"
    );
    assert_eq!(
        seen[0].headers.get("authorization").expect("auth"),
        "Bearer s3cret-token"
    );
    assert_eq!(seen[0].headers.get("x-team").expect("extra"), "triage");
}

#[tokio::test]
async fn a_set_up_request_a_gateway_refuses_is_tried_again_and_a_call_is_not() {
    // The first two POSTs get 503, as from a gateway before a server still starting.
    let (url, seen) = serve(|s, index| {
        if index < 2 {
            status(StatusCode::SERVICE_UNAVAILABLE)
        } else {
            json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "s", "version": "1"}}}))
        }
    })
    .await;
    let (http, _) = connect(&url);
    http.request(http.next_id(), "initialize", None)
        .await
        .expect("answered on the third try");
    assert_eq!(seen.lock().expect("lock").len(), 3);

    let (url, seen) = serve(|_, _| status(StatusCode::SERVICE_UNAVAILABLE)).await;
    let (http, _) = connect(&url);
    let error = http
        .request(http.next_id(), "tools/call", None)
        .await
        .expect_err("refused");
    assert!(error.is_status(), "{error}");
    assert_eq!(
        seen.lock().expect("lock").len(),
        1,
        "a call is never sent twice"
    );
}

#[tokio::test]
async fn a_set_up_request_to_a_server_that_never_listens_gives_up_after_its_tries() {
    // A port just freed: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    drop(listener);
    let (http, _) = connect(&url);
    let error = http
        .request(http.next_id(), "initialize", None)
        .await
        .expect_err("nobody there");
    assert!(error.is_unreachable(), "{error}");
}

#[tokio::test]
async fn a_get_stream_the_server_closes_is_opened_again_after_its_last_event() {
    let (url, seen) = serve(|s, index| match s.method {
        Method::GET if index == 0 => sse_reply(
            "id: 7\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/first\"}\n\n".to_owned(),
        ),
        Method::GET => sse_reply(
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/second\"}\n\n".to_owned(),
        ),
        _ => status(StatusCode::ACCEPTED),
    })
    .await;
    let (http, mut notes) = connect(&url);
    let _listening = http.listen();
    for expected in ["notifications/first", "notifications/second"] {
        assert_eq!(notes.recv().await.expect("a notification").method, expected);
    }
    http.close().await;
    let seen = seen.lock().expect("lock");
    assert_eq!(seen[0].headers.get("last-event-id"), None);
    assert_eq!(
        seen[1]
            .headers
            .get("last-event-id")
            .expect("resumed after event 7"),
        "7"
    );
}

/// An authorizer that hands out `token-N` on its Nth authorization and keeps each challenge.
#[derive(Debug, Default)]
struct Counting {
    challenges: Mutex<Vec<maljan_mcp_http::Challenge>>,
    refuse: bool,
}

impl maljan_mcp_http::Authorizer for Counting {
    fn token(&self) -> Option<maljan_mcp_http::AccessToken> {
        let n = self.challenges.lock().expect("lock").len();
        (n > 0).then(|| maljan_mcp_http::AccessToken::new(format!("token-{n}")))
    }

    fn authorize<'a>(
        &'a self,
        challenge: &'a maljan_mcp_http::Challenge,
    ) -> maljan_mcp_http::AuthorizeFuture<'a> {
        self.challenges
            .lock()
            .expect("lock")
            .push(challenge.clone());
        let refuse = self.refuse;
        Box::pin(async move {
            if refuse {
                Err(maljan_mcp_http::AuthorizationError::new(
                    "no authorization server answered",
                    "check the server's metadata",
                ))
            } else {
                Ok(())
            }
        })
    }
}

fn refusal(code: StatusCode, challenge: &str) -> Response {
    Response::builder()
        .status(code)
        .header("www-authenticate", challenge)
        .body(Body::empty())
        .expect("response")
}

fn connect_with(url: &str, authorizer: Arc<Counting>) -> HttpTransport {
    let mut config = HttpConfig::new("scripted", url);
    config.authorizer = Some(authorizer);
    HttpTransport::new(config).expect("a connection")
}

#[tokio::test]
async fn a_refused_request_is_sent_again_with_the_token_the_authorizer_obtained() {
    let (url, seen) =
        serve(
            |s, _| match s.headers.get("authorization").and_then(|v| v.to_str().ok()) {
                None => refusal(
                    StatusCode::UNAUTHORIZED,
                    r#"Bearer resource_metadata="http://x/prm", scope="a""#,
                ),
                Some("Bearer token-1") => refusal(
                    StatusCode::FORBIDDEN,
                    r#"Bearer error="insufficient_scope", scope="a b""#,
                ),
                Some(_) => json_reply(json!({"jsonrpc": "2.0", "id": request_id(s), "result": {}})),
            },
        )
        .await;
    let authorizer = Arc::new(Counting::default());
    let http = connect_with(&url, authorizer.clone());
    http.request(http.next_id(), "ping", None)
        .await
        .expect("answered once authorized");
    let challenges = authorizer.challenges.lock().expect("lock").clone();
    assert_eq!(challenges.len(), 2);
    assert_eq!(challenges[0].status, 401);
    assert_eq!(
        challenges[0].resource_metadata.as_deref(),
        Some("http://x/prm")
    );
    assert!(challenges[1].wants_more_scope());
    assert_eq!(challenges[1].scopes(), ["a", "b"]);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.len(), 3, "the same request, sent three times");
    assert!(seen.iter().all(|s| s.body == seen[0].body));
}

#[tokio::test]
async fn a_server_that_refuses_every_token_gets_three_authorizations_and_its_refusal_stands() {
    let (url, seen) =
        serve(|_, _| refusal(StatusCode::UNAUTHORIZED, r#"Bearer error="invalid_token""#)).await;
    let authorizer = Arc::new(Counting::default());
    let http = connect_with(&url, authorizer.clone());
    let failed = http
        .request(http.next_id(), "ping", None)
        .await
        .expect_err("refused");
    assert!(
        matches!(failed, HttpError::Status { status: 401, .. }),
        "{failed}"
    );
    assert_eq!(
        authorizer.challenges.lock().expect("lock").len(),
        maljan_mcp_http::MAX_AUTHORIZATIONS as usize
    );
    assert_eq!(seen.lock().expect("lock").len(), 4);
}

#[tokio::test]
async fn a_forbidden_request_that_asks_for_no_scope_and_a_failed_authorization_are_not_retried() {
    let (url, seen) = serve(|_, _| refusal(StatusCode::FORBIDDEN, "Bearer error=\"other\"")).await;
    let authorizer = Arc::new(Counting::default());
    let http = connect_with(&url, authorizer.clone());
    let failed = http.request(http.next_id(), "ping", None).await;
    assert!(matches!(failed, Err(HttpError::Status { status: 403, .. })));
    assert!(authorizer.challenges.lock().expect("lock").is_empty());
    assert_eq!(seen.lock().expect("lock").len(), 1);

    let (url, seen) = serve(|_, _| refusal(StatusCode::UNAUTHORIZED, "Bearer")).await;
    let refusing = Arc::new(Counting {
        refuse: true,
        ..Counting::default()
    });
    let http = connect_with(&url, refusing);
    let failed = http
        .request(http.next_id(), "ping", None)
        .await
        .expect_err("unauthorized");
    assert!(matches!(failed, HttpError::Unauthorized { .. }), "{failed}");
    assert!(
        failed.to_string().contains("check the server's metadata"),
        "{failed}"
    );
    assert_eq!(seen.lock().expect("lock").len(), 1);
}

/// The bytes a streamed body had produced when hyper dropped it, sent on drop.
struct Produced {
    bytes: usize,
    report: Option<tokio::sync::oneshot::Sender<usize>>,
}

impl Drop for Produced {
    fn drop(&mut self) {
        if let Some(report) = self.report.take() {
            let _ = report.send(self.bytes);
        }
    }
}

#[tokio::test]
async fn a_long_reply_given_up_on_is_not_read_on() {
    // Past what loopback sockets buffer: once half is produced, the client is reading the
    // body (on the task of its own that a long body gets), not waiting for its headers.
    const STATED: usize = 64 << 20;
    const PIECE: usize = 1 << 20;
    let (halfway_tx, halfway) = tokio::sync::oneshot::channel::<()>();
    let (report, dropped_at) = tokio::sync::oneshot::channel::<usize>();
    let given_up = Arc::new(tokio::sync::Notify::new());
    let start = Mutex::new(Some((halfway_tx, report, given_up.clone())));
    let (url, _) = serve(move |_, _| {
        let (halfway, report, given_up) = start.lock().expect("lock").take().expect("one call");
        let produced = Produced {
            bytes: 0,
            report: Some(report),
        };
        // The second half is produced only once the test has given the call up: a client
        // that reads on gets all of it, one that stopped makes a write fail.
        let pieces = futures_util::stream::unfold(
            (produced, Some(halfway), given_up),
            |(mut produced, mut halfway, given_up)| async move {
                if produced.bytes >= STATED {
                    return None;
                }
                if produced.bytes >= STATED / 2
                    && let Some(halfway) = halfway.take()
                {
                    let _ = halfway.send(());
                    given_up.notified().await;
                }
                produced.bytes += PIECE;
                let piece = Bytes::from(vec![b'a'; PIECE]);
                Some((
                    Ok::<_, std::io::Error>(piece),
                    (produced, halfway, given_up),
                ))
            },
        );
        Response::builder()
            .header("content-type", "application/json")
            .header("content-length", STATED)
            .body(Body::from_stream(pieces))
            .expect("response")
    })
    .await;
    let mut config = HttpConfig::new("scripted", &url);
    config.max_event_bytes = 2 * STATED;
    let http = HttpTransport::new(config).expect("a connection");
    tokio::select! {
        reply = http.request(http.next_id(), "tools/call", None) => {
            panic!("the call ended before it was given up: {:?}", reply.err());
        }
        _ = halfway => {}
    }
    given_up.notify_one();
    let produced = tokio::time::timeout(Duration::from_secs(60), dropped_at)
        .await
        .expect("the server's body ended")
        .expect("its size reported");
    assert!(
        produced < STATED,
        "the body of a call given up on was read to its end ({produced} bytes)"
    );
}
