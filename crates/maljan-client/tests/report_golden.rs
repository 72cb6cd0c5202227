//! `report.json` v1 pinned: the report of a fixed in-memory run, its changing parts (the
//! job's directory, the run's id, durations) put in words and its lists in a fixed order,
//! must equal `tests/golden/report.v1.json` byte for byte. A renamed or reshaped runtime
//! type cannot change the schema without this test saying so. `MALJAN_BLESS=1` writes the
//! golden file anew (for a deliberate change of the schema, with its version).

mod support;

use maljan_client::{PackInfo, RunReport};
use serde_json::Value;
use support::memory_run::run_pack;

const GOLDEN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/report.v1.json");

/// Puts the parts that change from run to run in words, and sorts what is in the order
/// things finished.
fn fixed(mut report: Value, dir: &str) -> Value {
    report["run"] = Value::from("RUN");
    for step in report["steps"].as_array_mut().into_iter().flatten() {
        step["duration_ms"] = Value::from(0);
        step["queued_ms"] = Value::from(0);
    }
    let mut text = report.to_string().replace(dir, "DIR");
    let mut report: Value = serde_json::from_str(&text).expect("JSON");
    let key = |v: &Value| v.to_string();
    for list in ["steps", "failures", "disclosures", "degradations"] {
        if let Some(items) = report[list].as_array_mut() {
            items.sort_by_key(key);
        }
    }
    text = serde_json::to_string_pretty(&report).expect("JSON");
    serde_json::from_str(&text).expect("JSON")
}

#[tokio::test(start_paused = true)]
async fn report_json_v1_is_pinned_by_its_golden_file() {
    let run = run_pack().await;
    let report = run.report.report(
        PackInfo {
            origin: "in-memory.toml".to_owned(),
            name: Some("in-memory triage".to_owned()),
        },
        &run.job,
        &run.end,
        false,
    );
    let json = serde_json::to_value(&report).expect("JSON");
    let dir = run.dir.path().display().to_string();
    let got = serde_json::to_string_pretty(&fixed(json, &dir)).expect("JSON") + "\n";
    if std::env::var_os("MALJAN_BLESS").is_some() {
        std::fs::write(GOLDEN, &got).expect("golden written");
    }
    let golden = std::fs::read_to_string(GOLDEN).expect("the golden file");
    // A reader of report.json v1 reads it back whole.
    let read: RunReport = serde_json::from_str(&golden).expect("report.json v1 reads back");
    assert_eq!(
        serde_json::to_value(&read).expect("JSON"),
        serde_json::from_str::<Value>(&golden).expect("JSON")
    );
    assert!(
        got == golden,
        "report.json v1 changed; if on purpose, raise REPORT_SCHEMA_VERSION and run with \
         MALJAN_BLESS=1:\n{got}"
    );
}
