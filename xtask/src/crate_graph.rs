//! The crate graph in the workspace README, checked against the crates' manifests.
//!
//! The README holds, between `<!-- crate graph -->` markers, one line per published crate:
//! `NAME → DEP, DEP` (its workspace dependencies, sorted) or `NAME` alone.

use std::collections::BTreeMap;

use serde_json::Value;

const MARKER: &str = "<!-- crate graph -->";

/// The workspace's published packages (those without `publish = false`), as `cargo
/// metadata` describes them.
pub(crate) fn published_packages() -> Result<Vec<Value>, String> {
    let output = crate::cargo_command()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .output()
        .map_err(|e| format!("cargo metadata could not run: {e}"))?;
    let metadata: Value = serde_json::from_slice(&output.stdout)
        .map_err(|e| format!("cargo metadata's output is not JSON: {e}"))?;
    let packages = metadata["packages"].as_array().cloned().unwrap_or_default();
    Ok(packages
        .into_iter()
        .filter(|p| p["publish"].as_array().is_none_or(|r| !r.is_empty()))
        .collect())
}

/// Each workspace crate but the unpublished ones, with its normal workspace dependencies.
fn graph_of_manifests() -> Result<BTreeMap<String, Vec<String>>, String> {
    let packages = published_packages()?;
    let names: Vec<String> = packages
        .iter()
        .filter_map(|p| p["name"].as_str().map(str::to_owned))
        .collect();
    Ok(packages
        .iter()
        .map(|p| {
            let mut deps: Vec<String> = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].is_null())
                .filter_map(|d| d["name"].as_str())
                .filter(|d| names.iter().any(|n| n == d))
                .map(str::to_owned)
                .collect();
            deps.sort();
            deps.dedup();
            (p["name"].as_str().unwrap_or_default().to_owned(), deps)
        })
        .collect())
}

/// The graph the README draws.
fn graph_of_readme(readme: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let block = readme
        .split(MARKER)
        .nth(1)
        .ok_or_else(|| format!("README.md has no block between {MARKER} markers"))?;
    Ok(block
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("maljan-"))
        .map(|line| match line.split_once('→') {
            Some((name, deps)) => {
                let mut deps: Vec<String> = deps.split(',').map(|d| d.trim().to_owned()).collect();
                deps.sort();
                (name.trim().to_owned(), deps)
            }
            None => (line.to_owned(), Vec::new()),
        })
        .collect())
}

/// Fails, naming each difference, when the README's graph is not the manifests'.
pub(crate) fn check() -> Result<(), String> {
    let readme = std::fs::read_to_string(crate::root().join("README.md"))
        .map_err(|e| format!("README.md cannot be read: {e}"))?;
    let drawn = graph_of_readme(&readme)?;
    let actual = graph_of_manifests()?;
    if drawn == actual {
        println!("xtask: the README's crate graph matches the manifests");
        return Ok(());
    }
    let mut differences = Vec::new();
    for (name, deps) in &actual {
        match drawn.get(name) {
            Some(d) if d == deps => {}
            Some(d) => differences.push(format!("{name}: README {d:?}, manifests {deps:?}")),
            None => differences.push(format!("{name} is not in the README ({deps:?})")),
        }
    }
    for name in drawn.keys().filter(|n| !actual.contains_key(*n)) {
        differences.push(format!("{name} is in the README but is no published crate"));
    }
    Err(format!(
        "the README's crate graph differs from the manifests; mend README.md:\n  {}",
        differences.join("\n  ")
    ))
}
