//! A stdio MCP server that misbehaves on purpose, for the client's end-to-end tests.
//!
//! Flags:
//! - `--banners N`: prints N banner lines on stdout before anything else.
//! - `--chatty`: prints a log line and a JSON log record on stdout before every answer.
//! - `--put-sample`: also offers `put_sample` (and none of the chunked upload tools).
//! - `--boast-files`: also offers `get_file`, which says every file is a pebibyte long.
//! - `--glue-setup`: glues its `initialize` answer behind a carriage-return progress bar and
//!   puts a byte-order mark before its `tools/list` answer.
//! - `--discover ANSWER`: how it answers `server/discover` (by default `-32601`, as a legacy
//!   server): `silent` (never), `modern` (a discover result with 2026-07-28), `retry` (first
//!   `-32022` listing 2026-07-28, then as `modern`), `bare-32022` (`-32022` without data),
//!   `empty` (an empty result), `legacy-listed` (a discover result with 2025-11-25 only),
//!   `future` (a discover result with 2099-01-01 only).
//!
//! - `--die-on-call N`: on reading its Nth `tools/call`, leaves it unanswered, reads what
//!   else is already waiting on stdin, logs each call found there as `in flight at death:
//!   TAG`, writes `dying on call N` and exits with status 3.
//!
//! Every `tools/call` it receives is logged on stderr as `received tools/call NAME`, followed
//! by ` tag=TAG` when its arguments hold a `tag`.
//!
//! Tools: `echo` (answers its arguments), `printed` (how many non-protocol lines it printed
//! before this answer), `not_utf8` (prints invalid UTF-8 and never answers), `never` (never
//! answers), `cancelled` (the request ids of the `notifications/cancelled` it received),
//! `slow {ms}` (answers after `ms`, on its own thread), `most_in_flight` (the most `slow`
//! calls it ever had in flight at once), `stderr_flood {bytes}` (writes that much to stderr, then answers), `huge_line
//! {bytes}` (prints a line that long, then answers), `invalid` (answers with both result and
//! error), `glued` (answers behind a progress bar), `ask {method, params}` (sends the
//! client a request of its own, then answers with the client's answer to it),
//! `client_capabilities` (the capabilities the client declared in `initialize`), `meta`
//! (the call's own `_meta`), `needs_input {method, params, always}` (answers
//! `input_required` asking `method` under the key `q` with request state `s1`, then, asked
//! again with the input, what it was given; with `always`, asks for ever), `ask_malformed`
//! (sends the client a request under the call's own id with `params: null`, then answers
//! with the client's answer to it), `stray_answer` (writes an answer to an id never sent,
//! then answers).

use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::{DecodedLine, Message, Request, decode_line};
use serde_json::{Value, json};

struct Behaviour {
    chatty: bool,
    put_sample: bool,
    boast_files: bool,
    glue_setup: bool,
    printed: u64,
    cancelled: Vec<Value>,
    client_capabilities: Value,
    /// The `tools/call` waiting for the client's answer to an `ask`.
    asking: Option<Value>,
    /// How `server/discover` is answered.
    discover: String,
    /// How many `server/discover` requests came.
    discovered: u32,
    /// Exits on reading this many `tools/call`s.
    die_on_call: Option<u64>,
    /// `tools/call`s read so far.
    calls: u64,
}

/// A call's `tag` argument, as the stderr log shows it.
fn tag_of(arguments: &Value) -> String {
    match arguments["tag"].as_str() {
        Some(tag) => format!(" tag={tag}"),
        None => String::new(),
    }
}

/// Reads what is already waiting on stdin, logs each call there as in flight at the
/// server's death, and exits with status 3.
fn die(lines: &mut impl Iterator<Item = std::io::Result<Vec<u8>>>, call: u64) -> ! {
    let stdin = std::io::stdin();
    let flags = nix::fcntl::fcntl(&stdin, nix::fcntl::FcntlArg::F_GETFL)
        .map(nix::fcntl::OFlag::from_bits_truncate)
        .unwrap_or(nix::fcntl::OFlag::empty());
    let _ = nix::fcntl::fcntl(
        &stdin,
        nix::fcntl::FcntlArg::F_SETFL(flags | nix::fcntl::OFlag::O_NONBLOCK),
    );
    // Nothing more waiting ends the lines with WouldBlock.
    for line in lines.by_ref() {
        let Ok(line) = line else { break };
        if let Ok(request) = serde_json::from_slice::<Value>(&line)
            && request["method"] == "tools/call"
        {
            eprintln!(
                "in flight at death:{}",
                tag_of(&request["params"]["arguments"])
            );
        }
    }
    eprintln!("dying on call {call}");
    std::process::exit(3);
}

/// Calls of `slow` in flight now, and the most ever.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
static MOST_IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

fn write_raw(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

impl Behaviour {
    fn stray(&mut self, line: &str) {
        self.printed += 1;
        write_raw(format!("{line}\n").as_bytes());
    }

    fn answer(&mut self, id: &Value, result: Value, prefix: &str) {
        if self.chatty {
            self.stray("INFO handling a request");
            self.stray(r#"{"level":"info","msg":"answering"}"#);
        }
        let line = json!({"jsonrpc": "2.0", "id": id, "result": result});
        write_raw(format!("{prefix}{line}\n").as_bytes());
    }
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn tool_result(value: Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
}

fn handle(b: &mut Behaviour, request: Request) {
    let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
    let params: Value = request
        .params
        .as_ref()
        .and_then(|p| serde_json::from_str(p.get()).ok())
        .unwrap_or(Value::Null);
    match request.method.as_str() {
        "initialize" => {
            b.client_capabilities = params["capabilities"].clone();
            let result = json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "misbehaving-server", "version": "0.0.1"},
            });
            let prefix = if b.glue_setup {
                "Downloading model 50%\r"
            } else {
                ""
            };
            if b.glue_setup {
                b.printed += 1;
            }
            b.answer(&id, result, prefix);
        }
        "tools/list" => {
            let names = [
                "echo",
                "printed",
                "not_utf8",
                "never",
                "cancelled",
                "slow",
                "most_in_flight",
                "stderr_flood",
                "huge_line",
                "invalid",
                "glued",
                "ask",
                "client_capabilities",
                "meta",
                "needs_input",
                "ask_malformed",
                "stray_answer",
            ];
            let extra = match (b.put_sample, b.boast_files) {
                (true, true) => &["put_sample", "get_file"][..],
                (true, false) => &["put_sample"][..],
                (false, true) => &["get_file"][..],
                (false, false) => &[],
            };
            let result =
                json!({"tools": names.iter().chain(extra).map(|n| tool(n)).collect::<Vec<_>>()});
            let prefix = if b.glue_setup { "\u{FEFF}" } else { "" };
            b.answer(&id, result, prefix);
        }
        "ping" => b.answer(&id, json!({}), ""),
        "server/discover" => {
            b.discovered += 1;
            let result = |versions: &[&str]| {
                json!({"supportedVersions": versions, "capabilities": {"tools": {}},
                    "ttlMs": 0, "cacheScope": "private",
                    "_meta": {"io.modelcontextprotocol/serverInfo":
                        {"name": "misbehaving-server", "version": "0.0.1"}}})
            };
            let error = |code: i64, data: Option<Value>| {
                let mut error = json!({"code": code, "message": "refused"});
                if let Some(data) = data {
                    error["data"] = data;
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            };
            let line = match b.discover.as_str() {
                "silent" => return,
                "modern" => json!({"jsonrpc": "2.0", "id": id, "result": result(&["2026-07-28"])}),
                "retry" if b.discovered == 1 => error(
                    -32022,
                    Some(json!({"supported": ["2026-07-28"], "requested": "2026-07-28"})),
                ),
                "retry" => json!({"jsonrpc": "2.0", "id": id, "result": result(&["2026-07-28"])}),
                "bare-32022" => error(-32022, None),
                "empty" => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
                "legacy-listed" => {
                    json!({"jsonrpc": "2.0", "id": id, "result": result(&["2025-11-25"])})
                }
                "future" => json!({"jsonrpc": "2.0", "id": id, "result": result(&["2099-01-01"])}),
                _ => error(-32601, None),
            };
            write_raw(format!("{line}\n").as_bytes());
        }
        "tools/call" => {
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            let args = params["arguments"].clone();
            eprintln!("received tools/call {name}{}", tag_of(&args));
            b.calls += 1;
            if b.die_on_call == Some(b.calls) {
                return;
            }
            match name.as_str() {
                "echo" => b.answer(&id, tool_result(args), ""),
                "printed" => {
                    let printed = b.printed + if b.chatty { 2 } else { 0 };
                    b.answer(&id, tool_result(json!({"printed": printed})), "");
                }
                "not_utf8" => write_raw(b"a line with \xff\xfe in it\n"),
                "get_file" if b.boast_files => {
                    let boast = json!({"size": 1u64 << 50, "sha256": "0".repeat(64),
                        "offset": args["offset"], "content_base64": "AAAA"});
                    b.answer(&id, tool_result(boast), "");
                }
                "never" => {}
                "put_sample" if b.put_sample => {
                    use base64::Engine;
                    use sha2::Digest;
                    let content = args["content_base64"].as_str().unwrap_or_default();
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(content)
                        .unwrap_or_default();
                    let sha = format!("{:x}", sha2::Sha256::digest(&bytes));
                    let name = args["name"].as_str().unwrap_or("sample");
                    let receipt = json!({"path": format!("/uploads/{name}"), "size": bytes.len(), "sha256": sha});
                    b.answer(&id, tool_result(receipt), "");
                }
                "slow" => {
                    let ms = args["ms"].as_u64().unwrap_or(100);
                    std::thread::spawn(move || {
                        let now = IN_FLIGHT.fetch_add(1, Ordering::SeqCst) + 1;
                        MOST_IN_FLIGHT.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(ms));
                        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
                        let line = json!({"jsonrpc": "2.0", "id": id,
                            "result": tool_result(json!({"slept_ms": ms}))});
                        write_raw(format!("{line}\n").as_bytes());
                    });
                }
                "most_in_flight" => {
                    let most = MOST_IN_FLIGHT.load(Ordering::SeqCst);
                    b.answer(&id, tool_result(json!({"most_in_flight": most})), "");
                }
                "cancelled" => {
                    let cancelled = b.cancelled.clone();
                    b.answer(&id, tool_result(json!({"cancelled": cancelled})), "");
                }
                "stderr_flood" => {
                    let bytes = args["bytes"].as_u64().unwrap_or(0) as usize;
                    let line = "e".repeat(1023) + "\n";
                    let mut err = std::io::stderr().lock();
                    for _ in 0..bytes / 1024 {
                        let _ = err.write_all(line.as_bytes());
                    }
                    drop(err);
                    b.answer(&id, tool_result(json!({"flooded": bytes})), "");
                }
                "huge_line" => {
                    let bytes = args["bytes"].as_u64().unwrap_or(0) as usize;
                    let piece = vec![b'x'; 1 << 20];
                    let mut out = std::io::stdout().lock();
                    for _ in 0..bytes / piece.len() {
                        let _ = out.write_all(&piece);
                    }
                    let _ = out.write_all(&piece[..bytes % piece.len()]);
                    let _ = out.write_all(b"\n");
                    let _ = out.flush();
                    drop(out);
                    b.answer(&id, tool_result(json!({"huge": bytes})), "");
                }
                "invalid" => {
                    let line = json!({"jsonrpc": "2.0", "id": id, "result": {},
                        "error": {"code": 1, "message": "both"}});
                    write_raw(format!("{line}\n").as_bytes());
                }
                "ask" => {
                    b.asking = Some(id);
                    let mut line = json!({"jsonrpc": "2.0", "id": "ask", "method": args["method"]});
                    if !args["params"].is_null() {
                        line["params"] = args["params"].clone();
                    }
                    write_raw(format!("{line}\n").as_bytes());
                }
                "ask_malformed" => {
                    // A request under the call's own id, invalid (params null): it must be
                    // refused, and the call must not be failed by it.
                    b.asking = Some(id.clone());
                    let line =
                        json!({"jsonrpc": "2.0", "id": id, "method": "ping", "params": null});
                    write_raw(format!("{line}\n").as_bytes());
                }
                "stray_answer" => {
                    let stray = json!({"jsonrpc": "2.0", "id": 987654321, "result": {}});
                    write_raw(format!("{stray}\n").as_bytes());
                    b.answer(&id, tool_result(json!({"sent": true})), "");
                }
                "meta" => b.answer(&id, tool_result(json!({"meta": params["_meta"]})), ""),
                "needs_input" => {
                    let given = &params["inputResponses"];
                    if given.is_null() || args["always"] == json!(true) {
                        let mut request = json!({"method": args["method"]});
                        if !args["params"].is_null() {
                            request["params"] = args["params"].clone();
                        }
                        let asked = json!({"resultType": "input_required",
                            "inputRequests": {"q": request}, "requestState": "s1"});
                        b.answer(&id, asked, "");
                    } else {
                        let state = params["requestState"].clone();
                        let got = json!({"inputResponses": given, "requestState": state});
                        b.answer(&id, tool_result(got), "");
                    }
                }
                "client_capabilities" => {
                    let declared = b.client_capabilities.clone();
                    b.answer(&id, tool_result(json!({"capabilities": declared})), "");
                }
                "glued" => {
                    b.printed += 1;
                    b.answer(&id, tool_result(json!({"glued": true})), "Working 99%\r");
                }
                other => {
                    let line = json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": format!("unknown tool {other}")}});
                    write_raw(format!("{line}\n").as_bytes());
                }
            }
        }
        _ => {
            let line = json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": "method not found"}});
            write_raw(format!("{line}\n").as_bytes());
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut behaviour = Behaviour {
        chatty: args.iter().any(|a| a == "--chatty"),
        put_sample: args.iter().any(|a| a == "--put-sample"),
        boast_files: args.iter().any(|a| a == "--boast-files"),
        glue_setup: args.iter().any(|a| a == "--glue-setup"),
        printed: 0,
        cancelled: Vec::new(),
        client_capabilities: Value::Null,
        asking: None,
        discover: args
            .iter()
            .position(|a| a == "--discover")
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_default(),
        discovered: 0,
        die_on_call: args
            .iter()
            .position(|a| a == "--die-on-call")
            .and_then(|i| args.get(i + 1))
            .and_then(|n| n.parse().ok()),
        calls: 0,
    };
    if let Some(i) = args.iter().position(|a| a == "--banners") {
        let n: u64 = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(0);
        for k in 0..n {
            behaviour.stray(&format!("misbehaving-server banner line {k}"));
        }
    }
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().split(b'\n');
    while let Some(line) = lines.next() {
        let Ok(line) = line else { break };
        match decode_line(&line, false) {
            DecodedLine::Message(Message::Request(request)) => {
                handle(&mut behaviour, request);
                if behaviour.die_on_call == Some(behaviour.calls) {
                    die(&mut lines, behaviour.calls);
                }
            }
            DecodedLine::Message(Message::Response(response)) => {
                if let Some(call) = behaviour.asking.take() {
                    let answer: Value =
                        serde_json::from_str(response.result.get()).unwrap_or_default();
                    behaviour.answer(&call, tool_result(json!({"answer": answer})), "");
                }
            }
            DecodedLine::Message(Message::Error(error)) => {
                if let Some(call) = behaviour.asking.take() {
                    let refused = json!({"code": error.error.code, "message": error.error.message});
                    behaviour.answer(&call, tool_result(json!({"refused": refused})), "");
                }
            }
            DecodedLine::Message(Message::Notification(n))
                if n.method == "notifications/cancelled" =>
            {
                let params: Value = n
                    .params
                    .and_then(|p| serde_json::from_str(p.get()).ok())
                    .unwrap_or(Value::Null);
                behaviour.cancelled.push(params["requestId"].clone());
            }
            _ => {}
        }
    }
}
