//! Reads a JSON Lines ledger (`maljan` writes one per job) and prints each distinct failure
//! once, with how many calls it hit:
//!
//! ```text
//! cargo run -p maljan-ledger --example failure_summary -- ledger.jsonl
//! ```

use maljan_ledger::{failure_summary, read_json_lines, render_summary};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: failure_summary LEDGER.jsonl")?;
    let file = read_json_lines(&path)?;
    for skipped in &file.skipped {
        eprintln!("{skipped:?}");
    }
    println!("{} calls", file.entries.len());
    print!("{}", render_summary(&failure_summary(&file.entries)));
    Ok(())
}
