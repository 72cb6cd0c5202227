//! Reads a server's stdout from stdin and says what each line was: a protocol message, a
//! stray line left out, an invalid message and why. The classifier alone, no tokio:
//!
//! ```text
//! some-mcp-server < requests.jsonl | cargo run -p maljan-mcp-stdio --example classify
//! ```

use std::io::Read;

use maljan_mcp_stdio::{Event, LineClassifier};

fn main() -> std::io::Result<()> {
    let mut classifier = LineClassifier::default();
    let mut stdin = std::io::stdin().lock();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let read = stdin.read(&mut chunk)?;
        if read == 0 {
            classifier.handle_eof();
        } else {
            classifier.handle_bytes(&chunk[..read]);
        }
        while let Some(event) = classifier.poll_event() {
            match event {
                Event::Message(message) => println!("message: {}", message.to_json()),
                other => println!("{other:?}"),
            }
        }
        if read == 0 {
            break;
        }
    }
    let counts = classifier.counts();
    println!(
        "{} messages, {} stray lines, {} invalid",
        counts.messages, counts.stray, counts.invalid
    );
    Ok(())
}
