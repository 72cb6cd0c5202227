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
