//! The run report's page in a real headless browser: Debian's Chromium, installed when
//! missing, then the ignored `report_page` test with `MALJAN_CHROMIUM` naming it.

use std::process::Command;

use crate::{cargo, on_path, run};

/// Where Debian's package puts the browser.
const CHROMIUM: &str = "chromium";

/// Installs Chromium when missing (Debian: `apt-get install chromium`).
fn ensure_chromium() -> Result<(), String> {
    if on_path(CHROMIUM) {
        return Ok(());
    }
    println!("xtask: chromium is missing; installing Debian's chromium");
    let installed = run(Command::new("sh").args([
        "-c",
        "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
    ]));
    match installed {
        Ok(()) if on_path(CHROMIUM) => Ok(()),
        _ => Err(
            "the report page is tested in Chromium; install it (Debian: apt-get install \
             chromium)"
                .to_owned(),
        ),
    }
}

/// Runs the report page's browser test (its screenshot is kept in
/// `target/tmp/report-page.png`).
pub(crate) fn run_report_page() -> Result<(), String> {
    ensure_chromium()?;
    cargo(
        &[
            "test",
            "-p",
            "maljan-cli",
            "--test",
            "report_page",
            "--",
            "--ignored",
            "--nocapture",
        ],
        &[("MALJAN_CHROMIUM", CHROMIUM)],
    )
}

/// Regenerates the README's screenshot of the report page (`docs/demo-report.png`) from a
/// fresh `maljan demo`.
pub(crate) fn screenshot() -> Result<(), String> {
    ensure_chromium()?;
    cargo(&["build", "-p", "maljan-cli"], &[])?;
    let work = crate::root().join("target/screenshot");
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .map_err(|e| format!("could not clear {}: {e}", work.display()))?;
    }
    let job = work.join("job");
    run(Command::new(crate::root().join("target/debug/maljan"))
        .arg("demo")
        .arg("--job")
        .arg(&job)
        .arg("--ledger")
        .arg(work.join("ledger.jsonl"))
        .env_remove("MALJAN_CONFIG"))?;
    let shot = crate::root().join("docs/demo-report.png");
    run(Command::new(CHROMIUM)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
            "--window-size=1280,1800",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", job.join("report.html").display())))?;
    println!("xtask: the README's screenshot is {}", shot.display());
    Ok(())
}
