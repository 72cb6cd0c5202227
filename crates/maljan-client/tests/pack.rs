//! Triage packs: what is accepted, and every error refused before anything runs, with its
//! line and what to do.

use maljan_client::{Pack, PackErrors};
use proptest::prelude::*;

const GOOD: &str = r#"[pack]
name = "archive triage"

[[step]]
id = "unpack"
server = "local"
tool = "unpack"
arguments = { path = "$sample" }
outputs = ["*"]

[[step]]
id = "info"
server = "remote"
tool = "file_info"
arguments = { path = "$unpack/*" }

[[step]]
id = "scripts"
server = "remote"
tool = "strings"
arguments = { paths = ["$unpack/*.js"], search = "$$eval", nested = { in = "$job" } }
timeout_s = 2.5
"#;

fn refused(text: &str) -> PackErrors {
    Pack::parse(text, "p.toml").expect_err("refused")
}

/// The single error of a refused pack: its line and text.
fn one_error(text: &str) -> (usize, String) {
    let errors = refused(text);
    assert_eq!(errors.errors().len(), 1, "{errors}");
    let e = &errors.errors()[0];
    (e.line, e.to_string())
}

#[test]
fn a_good_pack_is_read_with_its_graph() {
    let pack = Pack::parse(GOOD, "p.toml").expect("accepted");
    assert_eq!(pack.name(), Some("archive triage"));
    let steps = pack.steps();
    assert_eq!(steps.len(), 3);
    assert_eq!(steps[0].dependencies(), Vec::<String>::new().as_slice());
    assert_eq!(steps[1].dependencies(), ["unpack"]);
    assert_eq!(steps[2].dependencies(), ["unpack"]);
    assert_eq!(
        steps[2].timeout(),
        Some(std::time::Duration::from_millis(2500))
    );
    assert_eq!(steps[1].line(), 11);
    assert!(pack.check_servers(["local", "remote"]).is_ok());
    assert!(pack.check_tools("remote", ["file_info", "strings"]).is_ok());
}

#[test]
fn a_toml_error_names_its_line() {
    let (line, text) = one_error("[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \n");
    assert_eq!(line, 4, "{text}");
    assert!(text.starts_with("p.toml:4: "), "{text}");
}

#[test]
fn an_unknown_field_is_refused_with_its_line() {
    let (line, text) =
        one_error("[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \"t\"\noutput = [\"*\"]\n");
    assert_eq!(line, 5, "{text}");
    assert!(text.contains("output"), "{text}");
}

#[test]
fn a_pack_without_steps_is_refused() {
    let (_, text) = one_error("[pack]\nname = \"empty\"\n");
    assert!(text.contains("no step"), "{text}");
}

#[test]
fn ids_must_be_usable_and_unique() {
    let text = "[[step]]\nid = \"a b\"\nserver = \"s\"\ntool = \"t\"\n\
                [[step]]\nid = \"x\"\nserver = \"s\"\ntool = \"t\"\n\
                [[step]]\nid = \"x\"\nserver = \"s\"\ntool = \"t\"\n";
    let errors = refused(text);
    let lines: Vec<usize> = errors.errors().iter().map(|e| e.line).collect();
    assert_eq!(lines, [2, 10], "{errors}");
    assert!(
        errors.errors()[1]
            .message
            .contains("used twice (first at line 6)")
    );
}

#[test]
fn a_reference_to_an_undeclared_step_or_output_is_refused() {
    let base =
        "[[step]]\nid = \"unpack\"\nserver = \"s\"\ntool = \"unpack\"\noutputs = [\"*.js\"]\n";
    let (line, text) = one_error(&format!(
        "{base}[[step]]\nid = \"b\"\nserver = \"s\"\ntool = \"t\"\narguments = {{ path = \"$nope/a.js\" }}\n"
    ));
    assert_eq!(line, 10);
    assert!(text.contains("no step has the id nope"), "{text}");
    let (_, text) = one_error(&format!(
        "{base}[[step]]\nid = \"b\"\nserver = \"s\"\ntool = \"t\"\narguments = {{ path = \"$unpack/a.txt\" }}\n"
    ));
    assert!(text.contains("does not declare"), "{text}");
    assert!(
        text.contains("add \"a.txt\" to step unpack's outputs"),
        "{text}"
    );
    let accepted = format!(
        "{base}[[step]]\nid = \"b\"\nserver = \"s\"\ntool = \"t\"\narguments = {{ path = \"$unpack/x.js\", all = [\"$unpack/*.js\"] }}\n"
    );
    assert!(Pack::parse(&accepted, "p.toml").is_ok());
}

#[test]
fn a_cycle_is_refused_with_its_steps() {
    let text = "[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \"t\"\noutputs = [\"*\"]\narguments = { p = \"$b/x\" }\n\
                [[step]]\nid = \"b\"\nserver = \"s\"\ntool = \"t\"\noutputs = [\"*\"]\narguments = { p = \"$a/x\" }\n";
    let (_, text) = one_error(text);
    assert!(text.contains("cycle: a -> b -> a"), "{text}");
    let own = "[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \"t\"\noutputs = [\"*\"]\narguments = { p = \"$a/x\" }\n";
    assert!(one_error(own).1.contains("cycle: a -> a"));
}

#[test]
fn bad_values_are_refused() {
    let step =
        |extra: &str| format!("[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \"t\"\n{extra}\n");
    for (extra, says) in [
        ("timeout_s = 0", "timeout_s = 0"),
        ("timeout_s = -3", "timeout_s = -3"),
        ("timeout_s = 100000", "at most a day"),
        ("timeout_s = \"soon\"", "timeout_s"),
        ("outputs = [\"a/b\"]", "not a file name"),
        ("outputs = [\"[\"]", "not a valid glob"),
        ("arguments = { p = \"$samples\" }", "not a reference"),
    ] {
        let (line, text) = one_error(&step(extra));
        assert_eq!(line, 5, "{extra}: {text}");
        assert!(text.contains(says), "{extra}: {text}");
    }
    let (line, text) = one_error("[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \"get_file\"\n");
    assert_eq!(line, 4);
    assert!(text.contains("platform primitive"), "{text}");
}

#[test]
fn two_globs_to_run_once_per_file_of_are_refused() {
    let text = "[[step]]\nid = \"u\"\nserver = \"s\"\ntool = \"t\"\noutputs = [\"*\"]\n\
                [[step]]\nid = \"b\"\nserver = \"s\"\ntool = \"t\"\narguments = { p = \"$u/*.js\", q = \"$u/*.txt\" }\n";
    let (_, text) = one_error(text);
    assert!(text.contains("put the others inside a list"), "{text}");
}

#[test]
fn unknown_servers_and_tools_are_refused_with_the_steps_line() {
    let pack = Pack::parse(GOOD, "p.toml").expect("accepted");
    let errors = pack.check_servers(["local"]).expect_err("remote unknown");
    assert_eq!(errors.errors().len(), 2);
    assert_eq!(errors.errors()[0].line, 11);
    assert!(
        errors.to_string().contains("add [servers.remote]"),
        "{errors}"
    );
    let errors = pack
        .check_tools("remote", ["file_info"])
        .expect_err("no strings");
    assert_eq!(errors.errors()[0].line, 17);
    assert!(
        errors
            .to_string()
            .contains("use one of its tools: file_info")
    );
}

#[test]
fn an_unreadable_pack_says_so() {
    let errors = Pack::load("/nonexistent/pack.toml").expect_err("missing");
    assert!(errors.to_string().contains("cannot be read"), "{errors}");
}

proptest! {
    /// Whatever a pack file holds, it is read or refused with errors on lines of the file.
    #[test]
    fn any_text_is_read_or_refused_with_lines_in_the_file(text in "(\\PC|\n|\\[\\[step\\]\\]|id = |\"\\$[a-z]{0,3}/?\\*?\"){0,60}") {
        match Pack::parse(&text, "p.toml") {
            Ok(pack) => prop_assert!(!pack.steps().is_empty()),
            Err(errors) => {
                let lines = text.lines().count().max(1);
                for e in errors.errors() {
                    prop_assert!(e.line >= 1 && e.line <= lines + 1, "line {} of {}", e.line, lines);
                }
            }
        }
    }

    /// Packs of any shape of references: accepted exactly when every reference names an
    /// earlier-or-later declared step without a cycle.
    #[test]
    fn references_between_generated_steps_are_accepted_or_refused_without_panic(
        refs in prop::collection::vec(prop::collection::vec(0usize..6, 0..3), 1..6),
    ) {
        let mut text = String::new();
        for (i, to) in refs.iter().enumerate() {
            let args: Vec<String> = to.iter().enumerate().map(|(k, t)| format!("a{k} = \"$s{t}/x\"")).collect();
            text.push_str(&format!(
                "[[step]]\nid = \"s{i}\"\nserver = \"x\"\ntool = \"t\"\noutputs = [\"x\"]\narguments = {{ {} }}\n",
                args.join(", ")
            ));
        }
        let result = Pack::parse(&text, "p.toml");
        let undeclared = refs.iter().flatten().any(|&t| t >= refs.len());
        if undeclared {
            prop_assert!(result.is_err());
        }
        if let Ok(pack) = result {
            // Accepted: the steps can be put in an order where each comes after its references.
            let mut done: Vec<&str> = Vec::new();
            while done.len() < pack.steps().len() {
                let next = pack.steps().iter().find(|s| {
                    !done.contains(&s.id()) && s.dependencies().iter().all(|d| done.contains(&d.as_str()))
                });
                prop_assert!(next.is_some(), "no cycle in an accepted pack");
                done.push(next.map(|s| s.id()).unwrap_or_default());
            }
        }
    }
}
