//! The classifier against `serde_json::from_slice::<Value>` on the same bytes: stray text,
//! typical 200-byte responses, and one line holding a 4 MiB base64 answer.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use base64::Engine;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use maljan_mcp_stdio::{Event, LineClassifier};
use serde_json::{Value, json};

const CHUNK: usize = 64 * 1024;

/// Feeds the stream in 64 KiB reads, as the transport does, and counts messages.
fn classify(stream: &[u8]) -> (u64, usize) {
    let mut classifier = LineClassifier::default();
    let mut messages = 0;
    let mut most_buffered = 0;
    for chunk in stream.chunks(CHUNK) {
        classifier.handle_bytes(chunk);
        while let Some(event) = classifier.poll_event() {
            if let Event::Message(m) = event {
                messages += 1;
                std::hint::black_box(m);
            }
        }
        most_buffered = most_buffered.max(classifier.buffered());
    }
    (messages, most_buffered)
}

/// Parses each line into a `Value` (failing fast on text), as a naive reader would.
fn parse_values(stream: &[u8]) -> u64 {
    let mut parsed = 0;
    for line in stream.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        if let Ok(v) = serde_json::from_slice::<Value>(line) {
            parsed += 1;
            std::hint::black_box(v);
        }
    }
    parsed
}

fn stray_text() -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0u64;
    while out.len() < 4 << 20 {
        out.extend_from_slice(
            format!("2026-12-02T10:00:00Z INFO worker[3]: processed item {i} in 3.2ms\n")
                .as_bytes(),
        );
        i += 1;
    }
    out
}

fn responses() -> (Vec<u8>, usize) {
    let mut out = Vec::new();
    let mut lines = 0;
    for id in 0..20_000u64 {
        let line = json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": "{\"size\":1234,\"sha256\":\"ab12\"}"}],
            "structuredContent": {"size": 1234, "sha256": "ab12cd34ef56ab12cd34ef56ab12cd34ef56ab12cd34ef5"},
        }})
        .to_string();
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
        lines += 1;
    }
    let average = out.len() / lines;
    (out, average)
}

fn base64_answer() -> Vec<u8> {
    let payload: Vec<u8> = (0..3 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let encoded = base64::engine::general_purpose::STANDARD.encode(&payload);
    let mut line = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "size": payload.len(), "offset": 0, "content_base64": encoded}})
    .to_string()
    .into_bytes();
    line.push(b'\n');
    line
}

fn bench(c: &mut Criterion) {
    let (responses, average) = responses();
    let cases = [
        ("stray_text", stray_text()),
        ("responses_200b", responses),
        ("base64_4mib_line", base64_answer()),
    ];
    eprintln!("responses_200b: average line {average} bytes");
    for (name, stream) in &cases {
        let (messages, most_buffered) = classify(stream);
        eprintln!(
            "{name}: {} bytes, {messages} messages, at most {most_buffered} bytes buffered by the classifier",
            stream.len()
        );
        let mut group = c.benchmark_group(*name);
        group.throughput(Throughput::Bytes(stream.len() as u64));
        group.sample_size(20);
        group.bench_with_input(BenchmarkId::new("classifier", name), stream, |b, s| {
            b.iter(|| classify(s))
        });
        group.bench_with_input(
            BenchmarkId::new("serde_json_value", name),
            stream,
            |b, s| b.iter(|| parse_values(s)),
        );
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
