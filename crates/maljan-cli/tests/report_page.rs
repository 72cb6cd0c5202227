//! The run report's page in a real headless browser: it loads with no console message, its
//! header lists the run's failures, and a screenshot is kept (target/report-page.png).
//!
//! Needs Chromium: `cargo xtask ci` installs Debian's package when missing and runs this
//! with `MALJAN_CHROMIUM` naming it (`cargo test -p maljan-cli --test report_page --
//! --ignored`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MALJAN: &str = env!("CARGO_BIN_EXE_maljan");

/// A pack over the bundled sidecar with a step that fails (a file the job does not hold)
/// and one that is skipped for it.
const PACK: &str = r#"
[pack]
name = "report page"

[[step]]
id = "info"
server = "sidecar"
tool = "file_info"
arguments = { path = "$sample" }

[[step]]
id = "texts"
server = "sidecar"
tool = "strings"
arguments = { path = "$sample", search = "sample author" }

[[step]]
id = "missing"
server = "sidecar"
tool = "unpack"
arguments = { path = "not-there.zip" }
outputs = ["*"]

[[step]]
id = "after"
server = "sidecar"
tool = "strings"
arguments = { path = "$missing/*" }
"#;

fn chromium() -> PathBuf {
    std::env::var_os("MALJAN_CHROMIUM")
        .map(PathBuf::from)
        .expect("MALJAN_CHROMIUM names Chromium (cargo xtask ci installs it)")
}

fn headless(page: &Path, extra: &[&str]) -> Output {
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs")
}

#[test]
#[ignore = "needs Chromium: run by cargo xtask ci, which installs it"]
fn the_report_page_loads_cleanly_and_its_header_lists_the_failures() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("pack.toml");
    std::fs::write(&pack, PACK).expect("pack");
    let sample = dir.path().join("sample.txt");
    // A script line (its text must show escaped), then enough lines for a long answer.
    let mut text = "<script>alert('a sample author wrote this')</script>\n".to_owned();
    for line in 0..200 {
        text.push_str(&format!("line {line} of the sample\n"));
    }
    std::fs::write(&sample, text).expect("sample");
    let job = dir.path().join("job");
    let ran = Command::new(MALJAN)
        .args([
            "run",
            &pack.display().to_string(),
            &sample.display().to_string(),
        ])
        .args(["--job", &job.display().to_string()])
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LEDGER", dir.path().join("ledger.jsonl"))
        .output()
        .expect("maljan runs");
    assert_eq!(
        ran.status.code(),
        Some(3),
        "degraded: {}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let page = job.join("report.html");

    let dom = headless(&page, &["--dump-dom"]);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    let header = &dom_text[dom_text.find("<header>").expect("a header")
        ..dom_text.find("</header>").expect("its end")];
    assert!(header.contains("id=\"verdict\">degraded<"), "{header}");
    assert!(
        header.contains("no_such_file"),
        "the failure's code in the header: {header}"
    );
    assert!(
        header.contains(">missing<"),
        "the failing step in the header: {header}"
    );
    assert!(
        !dom_text.contains("<script>"),
        "the sample's text is escaped"
    );
    // The tools' answers are on the page: the strings step's match is visible, its long
    // answer folded; the short file_info answer open.
    let answers = &dom_text[dom_text.find("id=\"answers\"").expect("an answers section")..];
    let folded = answers
        .split("<details")
        .find(|d| d.contains("texts — sidecar/strings"))
        .expect("the strings step's answer");
    assert!(
        folded.contains("&lt;script&gt;alert('a sample author wrote this')")
            || folded.contains("&lt;script&gt;alert(&#39;a sample author wrote this&#39;)"),
        "the matched string, escaped: {folded}"
    );
    assert!(
        !folded.starts_with(" class=\"answer\" open"),
        "folded: {folded}"
    );
    let open = answers
        .split("<details")
        .find(|d| d.contains("info — sidecar/file_info"))
        .expect("the file_info step's answer");
    assert!(open.starts_with(" class=\"answer\" open"), "open: {open}");
    assert!(open.contains("entropy"), "{open}");
    let console: Vec<&str> = std::str::from_utf8(&dom.stderr)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("CONSOLE"))
        .collect();
    assert!(console.is_empty(), "console messages: {console:#?}");

    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report-page.png");
    let _ = std::fs::remove_file(&shot);
    let screenshot = headless(
        &page,
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,1400",
            "--hide-scrollbars",
        ],
    );
    assert!(
        screenshot.status.success(),
        "{}",
        String::from_utf8_lossy(&screenshot.stderr)
    );
    let png = std::fs::read(&shot).expect("the screenshot");
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    println!("screenshot: {}", shot.display());
}
