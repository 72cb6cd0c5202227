//! What each pick of the workspace pulls in, beside rmcp's: the small downstream crates in
//! `tests/picks` each pick one part, and their normal dependency trees are counted (the
//! picking crate itself included, as `cargo tree` lists it). A pick over its bound, one that
//! pulls a crate it must not, or one with two versions of a crate fails the task. Each pick
//! is also linted alone, so that the parts build, warning-free, with only the features it
//! names (a workspace build unifies every member's features and would hide it). The whole
//! workspace's tree may hold two versions only of the crates listed, each with why.

use std::collections::BTreeSet;

/// One pick: its crate in `tests/picks`, its bound, what it must not pull, and the rmcp
/// pick it is set beside.
struct Pick {
    package: &'static str,
    what: &'static str,
    at_most: Option<usize>,
    never: &'static [&'static str],
    rmcp_features: Option<&'static str>,
}

const PICKS: &[Pick] = &[
    Pick {
        package: "pick-classifier",
        what: "stdout classifier alone",
        at_most: Some(15),
        never: &["tokio"],
        rmcp_features: None,
    },
    Pick {
        package: "pick-breaker",
        what: "breaker core",
        at_most: Some(5),
        never: &["tokio"],
        rmcp_features: None,
    },
    Pick {
        package: "pick-stdio-session",
        what: "stdio session",
        at_most: Some(45),
        never: &["reqwest", "hyper", "axum"],
        rmcp_features: None,
    },
    Pick {
        package: "pick-client-stdio",
        what: "maljan-client, stdio only",
        at_most: Some(61),
        never: &["reqwest", "hyper", "axum", "toml", "globset"],
        rmcp_features: Some("child-process"),
    },
    Pick {
        package: "pick-client-http",
        what: "maljan-client, stdio and HTTP",
        at_most: Some(109),
        never: &["axum", "toml", "globset"],
        rmcp_features: Some("streamable-http"),
    },
    Pick {
        package: "pick-kit-stdio",
        what: "server kit, stdio only",
        at_most: None,
        never: &["axum", "hyper", "reqwest"],
        rmcp_features: None,
    },
];

/// `cargo ARGS` run for its standard output.
fn cargo_output(args: &[&str]) -> Result<String, String> {
    let output = crate::cargo_command()
        .args(args)
        .output()
        .map_err(|e| format!("could not run cargo {}: {e}", args.join(" ")))?;
    if !output.status.success() {
        return Err(format!(
            "cargo {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The crates of a tree printed without prefixes, each once (`name vX.Y.Z`).
fn crates_of(tree: &str) -> BTreeSet<String> {
    tree.lines()
        .map(|line| {
            let mut words = line.split_whitespace();
            format!(
                "{} {}",
                words.next().unwrap_or_default(),
                words.next().unwrap_or_default()
            )
        })
        .filter(|krate| !krate.trim().is_empty())
        .collect()
}

fn tree(package_args: &[&str]) -> Result<BTreeSet<String>, String> {
    let mut args = vec!["tree", "-e", "normal", "--prefix", "none"];
    args.extend_from_slice(package_args);
    cargo_output(&args).map(|out| crates_of(&out))
}

/// The crates of which the tree `selection` names holds two versions (`name version`).
fn duplicates(selection: &[&str]) -> Result<BTreeSet<String>, String> {
    let mut args = vec!["tree", "--duplicates", "--depth", "0", "--prefix", "none"];
    args.extend_from_slice(selection);
    cargo_output(&args).map(|out| crates_of(&out))
}

/// Counts each pick beside rmcp's and checks its bounds.
pub(crate) fn check() -> Result<(), String> {
    let rmcp_manifest = crate::root().join("tests/picks/rmcp/Cargo.toml");
    let rmcp_manifest = rmcp_manifest.display().to_string();
    for pick in PICKS {
        crate::cargo(&["clippy", "-p", pick.package, "--", "-D", "warnings"], &[])?;
    }
    let mut problems = Vec::new();
    println!(
        "{:<34} {:>6} {:>8} {:>10}",
        "pick", "crates", "at most", "rmcp 3.11"
    );
    for pick in PICKS {
        let crates = tree(&["-p", pick.package])?;
        let rmcp = match pick.rmcp_features {
            Some(features) => tree(&[
                "--manifest-path",
                &rmcp_manifest,
                "--locked",
                "--features",
                features,
            ])?
            .len()
            .to_string(),
            None => "-".to_owned(),
        };
        let bound = pick.at_most.map_or("-".to_owned(), |n| n.to_string());
        println!(
            "{:<34} {:>6} {:>8} {:>10}",
            pick.what,
            crates.len(),
            bound,
            rmcp
        );
        if let Some(at_most) = pick.at_most
            && crates.len() > at_most
        {
            problems.push(format!(
                "{} pulls {} crates, more than {at_most}",
                pick.what,
                crates.len()
            ));
        }
        for krate in &crates {
            let name = krate.split(' ').next().unwrap_or_default();
            if pick.never.contains(&name) {
                problems.push(format!("{} pulls {krate}, which it must not", pick.what));
            }
        }
        let duplicated = duplicates(&["-p", pick.package, "-e", "normal"])?;
        if !duplicated.is_empty() {
            let list: Vec<&str> = duplicated.iter().map(String::as_str).collect();
            problems.push(format!(
                "{} holds two versions of a crate: {}",
                pick.what,
                list.join(", ")
            ));
        }
    }
    problems.extend(whole_tree_duplicates()?);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("the picks: {}", problems.join("; ")))
    }
}

/// Crates of which the whole workspace (the CLI and the sidecar beside the libraries) holds two
/// versions because no released version of their dependents unifies them, with why. A
/// duplicate not listed fails the task, and so does a listed one that is gone, so the list
/// stays what the tree is.
const KNOWN_DUPLICATES: &[(&str, &str)] = &[
    (
        "getrandom",
        "ring 0.17 (rustls's provider) needs 0.2 and zip 9 needs 0.4 for any feature set; \
         zip 8, which makes it optional, lacks 9.0's fixes for hostile archives",
    ),
    (
        "syn",
        "zip 9 (zeroize_derive), oauth2 5.0 (thiserror 1) and object_store 0.14 (tracing's \
         attributes, on by its default features) derive with 2; clap_derive and the rest are on 3",
    ),
    (
        "base64",
        "sqlx 0.9 (maljan-fleet) and oauth2 5.0 are on 0.22, object_store 0.14's reqwest 0.13 \
         on 0.23",
    ),
    (
        "hashbrown",
        "sqlx 0.9's statement cache (hashlink) is on 0.16, indexmap on 0.17",
    ),
    (
        "reqwest",
        "oauth2 5.0 (its latest release; maljan-mcp-http's `oauth` feature) is on 0.12, \
         object_store 0.14 (maljan-fleet's S3 client) on 0.13",
    ),
    (
        "sha2",
        "oauth2 5.0's PKCE is on 0.10 and sqlx 0.9's SCRAM login on 0.11: moving the \
         workspace's own hashing would not remove either",
    ),
    ("digest", "sha2 0.10 and 0.11 (see sha2)"),
    ("block-buffer", "sha2 0.10 and 0.11 (see sha2)"),
    ("crypto-common", "sha2 0.10 and 0.11 (see sha2)"),
    ("cpufeatures", "sha2 0.10 and 0.11 (see sha2)"),
    (
        "thiserror",
        "oauth2 5.0 (see reqwest) is on 1, the workspace on 2",
    ),
    ("thiserror-impl", "thiserror 1 and 2 (see thiserror)"),
    (
        "rand",
        "oauth2 5.0 (see reqwest) draws its PKCE verifiers and states with 0.8; object_store \
         0.14 and sqlx 0.9 are on 0.10",
    ),
    ("rand_core", "rand 0.8 and 0.10 (see rand)"),
];

/// Every crate of which the workspace's normal and build dependencies hold two versions,
/// checked against [`KNOWN_DUPLICATES`].
fn whole_tree_duplicates() -> Result<Vec<String>, String> {
    // cargo lists a crate built both for the host and the target (a build dependency's
    // libc, say) even at one version: only names with two versions count.
    let mut versions: std::collections::BTreeMap<String, BTreeSet<String>> = Default::default();
    for krate in duplicates(&["--workspace", "-e", "normal,build"])? {
        let mut words = krate.split_whitespace();
        if let (Some(name), Some(version)) = (words.next(), words.next()) {
            versions
                .entry(name.to_owned())
                .or_default()
                .insert(version.to_owned());
        }
    }
    let names: BTreeSet<String> = versions
        .into_iter()
        .filter(|(_, versions)| versions.len() > 1)
        .map(|(name, _)| name)
        .collect();
    let mut problems = Vec::new();
    for name in &names {
        if !KNOWN_DUPLICATES.iter().any(|(known, _)| known == name) {
            problems.push(format!(
                "the workspace holds two versions of {name}: align the dependents' versions"
            ));
        }
    }
    for (known, why) in KNOWN_DUPLICATES {
        if names.contains(*known) {
            println!("xtask picks: two versions of {known} in the whole workspace: {why}");
        } else {
            problems.push(format!(
                "{known} is no longer duplicated: remove it from KNOWN_DUPLICATES"
            ));
        }
    }
    Ok(problems)
}
