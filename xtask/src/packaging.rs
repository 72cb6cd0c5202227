//! The published crates as crates.io would get them: each packaged (`cargo package`), the
//! packages unpacked side by side into a workspace of their own (each other's dependencies
//! patched to the unpacked copies, the workspace's lock file kept), and their tests run
//! offline there. A test that reads a file outside its crate, or a file the package leaves
//! out, fails here first.

use std::path::Path;
use std::process::Command;

/// The workspace's published crates, by name and version.
fn published() -> Result<Vec<(String, String)>, String> {
    Ok(crate::crate_graph::published_packages()?
        .iter()
        .filter_map(|p| {
            Some((
                p["name"].as_str()?.to_owned(),
                p["version"].as_str()?.to_owned(),
            ))
        })
        .collect())
}

/// Packages every published crate and runs the packaged crates' tests, offline.
pub(crate) fn check() -> Result<(), String> {
    let root = crate::root();
    let crates = published()?;
    let mut args = vec!["package", "--no-verify", "--allow-dirty"];
    for (name, _) in &crates {
        args.extend(["-p", name.as_str()]);
    }
    crate::cargo(&args, &[])?;
    let unpacked = root.join("target/packaged");
    if unpacked.exists() {
        std::fs::remove_dir_all(&unpacked)
            .map_err(|e| format!("could not clear {}: {e}", unpacked.display()))?;
    }
    std::fs::create_dir_all(&unpacked)
        .map_err(|e| format!("could not create {}: {e}", unpacked.display()))?;
    let mut members = Vec::new();
    let mut patches = Vec::new();
    for (name, version) in &crates {
        let file = root.join(format!("target/package/{name}-{version}.crate"));
        crate::run(
            Command::new("tar")
                .arg("-xzf")
                .arg(&file)
                .arg("-C")
                .arg(&unpacked),
        )?;
        members.push(format!("\"{name}-{version}\""));
        patches.push(format!("{name} = {{ path = \"{name}-{version}\" }}"));
    }
    let workspace_manifest = std::fs::read_to_string(root.join("Cargo.toml"))
        .map_err(|e| format!("could not read the workspace manifest: {e}"))?;
    // The same profiles as the workspace's, so the packaged crates share its dependencies'
    // build artefacts instead of building them all a second time.
    let manifest = format!(
        "[workspace]\nresolver = \"3\"\nmembers = [{}]\n\n[patch.crates-io]\n{}\n\n{}",
        members.join(", "),
        patches.join("\n"),
        profile_sections(&workspace_manifest)
    );
    write(&unpacked.join("Cargo.toml"), &manifest)?;
    std::fs::copy(root.join("Cargo.lock"), unpacked.join("Cargo.lock"))
        .map_err(|e| format!("could not copy the lock file: {e}"))?;
    let target = root.join("target");
    let manifest_path = unpacked.join("Cargo.toml");
    crate::cargo(
        &[
            "test",
            "--offline",
            "--workspace",
            "--manifest-path",
            &manifest_path.display().to_string(),
            "--target-dir",
            &target.display().to_string(),
        ],
        &[],
    )
}

/// The `[profile.*]` tables of a manifest, as written.
fn profile_sections(manifest: &str) -> String {
    let mut in_profile = false;
    let mut sections = String::new();
    for line in manifest.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            in_profile = trimmed.starts_with("[profile.");
        }
        if in_profile && !trimmed.starts_with('#') {
            sections.push_str(line);
            sections.push('\n');
        }
    }
    sections
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("could not write {}: {e}", path.display()))
}

/// Checks that the workspace's `rust-version` names the toolchain building it: the only
/// toolchain these machines have, so the only one CI proves.
pub(crate) fn check_rust_version() -> Result<(), String> {
    let manifest = std::fs::read_to_string(crate::root().join("Cargo.toml"))
        .map_err(|e| format!("could not read the workspace manifest: {e}"))?;
    let declared = manifest
        .lines()
        .find_map(|line| line.trim().strip_prefix("rust-version = "))
        .map(|v| v.trim_matches('"').to_owned())
        .ok_or("the workspace manifest names no rust-version")?;
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let output = Command::new(rustc)
        .arg("--version")
        .output()
        .map_err(|e| format!("could not run rustc: {e}"))?;
    let version = String::from_utf8_lossy(&output.stdout);
    let building = version
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.rsplit_once('.').map(|(minor, _)| minor.to_owned()))
        .ok_or_else(|| format!("rustc printed no version: {version}"))?;
    if building == declared {
        println!("xtask: rust-version {declared} is the toolchain building the workspace");
        Ok(())
    } else {
        Err(format!(
            "the workspace declares rust-version {declared} but builds with Rust {building}: \
             set rust-version in Cargo.toml to the toolchain CI builds with ({building}), \
             the only one proven"
        ))
    }
}
