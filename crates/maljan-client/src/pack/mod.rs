//! Triage packs: a TOML file of steps a [`Run`](crate::run::Run) carries out.
//!
//! ```
//! let pack = maljan_client::Pack::parse(r#"
//! [pack]
//! name = "archive triage"
//!
//! [[step]]
//! id = "unpack"
//! server = "sidecar"
//! tool = "unpack"
//! arguments = { path = "$sample" }
//! outputs = ["*"]
//!
//! [[step]]
//! id = "scripts"
//! server = "remote"
//! tool = "strings"
//! arguments = { path = "$unpack/*.js", search = "eval" }
//! timeout_s = 30
//! "#, "triage.toml").unwrap();
//! assert_eq!(pack.steps().len(), 2);
//! assert_eq!(pack.steps()[1].dependencies(), ["unpack"]);
//! ```

mod check;
pub(crate) mod reference;
pub(crate) mod template;

use std::fmt;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use toml::Spanned;

/// The longest per-step timeout a pack may set: a day.
pub const MAX_STEP_TIMEOUT_S: f64 = 86_400.0;

/// A checked triage pack: its steps form a graph without cycles whose every reference names
/// a declared step and output.
#[derive(Debug, Clone)]
pub struct Pack {
    origin: String,
    name: Option<String>,
    description: Option<String>,
    steps: Vec<Step>,
}

/// One step of a pack: a tool of a server called with arguments that may refer to the
/// sample, the job's directory and files earlier steps took.
#[derive(Debug, Clone)]
pub struct Step {
    id: String,
    server: String,
    tool: String,
    arguments: Value,
    /// The arguments compiled: what a run fills in.
    compiled: template::Compiled,
    outputs: Vec<String>,
    /// The outputs, compiled: which files of an answer the step takes.
    output_matchers: Vec<globset::GlobMatcher>,
    timeout: Option<Duration>,
    line: usize,
    dependencies: Vec<String>,
}

impl Step {
    /// Its id, unique in the pack.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The server it calls, by its configured name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The tool it calls.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    /// Its arguments as written (a JSON object), references included.
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// The names or globs of the files it declares: those the run takes from its answer.
    pub fn outputs(&self) -> &[String] {
        &self.outputs
    }

    /// How long its call waits, when not the tool's own timeout.
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    /// The line of the pack file where it starts.
    pub fn line(&self) -> usize {
        self.line
    }

    /// The steps whose files it refers to, each once, in the order first referred to.
    pub fn dependencies(&self) -> &[String] {
        &self.dependencies
    }

    /// Its arguments, compiled when the pack was loaded.
    pub(crate) fn compiled(&self) -> &template::Compiled {
        &self.compiled
    }

    /// Whether it declares a file of this name among its outputs.
    pub(crate) fn declares(&self, file_name: &str) -> bool {
        self.output_matchers.iter().any(|m| m.is_match(file_name))
    }
}

/// A pack refused: where in the file, what is wrong, and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}:{line}: {message}; {remedy}")]
#[non_exhaustive]
pub struct PackError {
    /// The pack file.
    pub origin: String,
    /// The line (from 1; 0 when the file could not be read).
    pub line: usize,
    /// What is wrong.
    pub message: String,
    /// What to do.
    pub remedy: String,
}

/// Every error found in a pack, in the order of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackErrors(Vec<PackError>);

impl PackErrors {
    /// `Err` with `errors` when there are any.
    pub(crate) fn refuse_if_any(errors: Vec<PackError>) -> Result<(), PackErrors> {
        if errors.is_empty() {
            Ok(())
        } else {
            Err(PackErrors(errors))
        }
    }

    /// The errors.
    pub fn errors(&self) -> &[PackError] {
        &self.0
    }
}

impl fmt::Display for PackErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "the pack was refused ({n} error{}):",
            if n == 1 { "" } else { "s" }
        )?;
        for error in &self.0 {
            write!(f, "\n  {error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for PackErrors {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PackFile {
    #[serde(default)]
    pack: Option<Header>,
    #[serde(default)]
    step: Vec<Spanned<StepTable>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepTable {
    id: Spanned<String>,
    server: Spanned<String>,
    tool: Spanned<String>,
    #[serde(default)]
    arguments: Option<Spanned<toml::Table>>,
    #[serde(default)]
    outputs: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    timeout_s: Option<Spanned<toml::Value>>,
}

/// Where each part of a step was written, for errors found after parsing.
#[derive(Debug, Clone)]
pub(crate) struct StepLines {
    pub(crate) id: usize,
    pub(crate) server: usize,
    pub(crate) tool: usize,
    pub(crate) arguments: usize,
    pub(crate) outputs: usize,
}

/// Collects a pack's errors with their lines.
pub(crate) struct Findings<'a> {
    text: &'a str,
    origin: &'a str,
    errors: Vec<PackError>,
}

impl<'a> Findings<'a> {
    fn new(text: &'a str, origin: &'a str) -> Self {
        Findings {
            text,
            origin,
            errors: Vec::new(),
        }
    }

    fn line_of(&self, span: Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text.as_bytes()[..end]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    pub(crate) fn at_line(&mut self, line: usize, message: String, remedy: impl Into<String>) {
        self.errors.push(PackError {
            origin: self.origin.to_owned(),
            line,
            message,
            remedy: remedy.into(),
        });
    }

    fn at(&mut self, span: Range<usize>, message: String, remedy: impl Into<String>) {
        let line = self.line_of(span);
        self.at_line(line, message, remedy);
    }

    fn into_errors(mut self) -> PackErrors {
        self.errors.sort_by_key(|e| e.line);
        PackErrors(self.errors)
    }

    fn into_result<T>(self, value: T) -> Result<T, PackErrors> {
        if self.errors.is_empty() {
            Ok(value)
        } else {
            Err(self.into_errors())
        }
    }
}

impl Pack {
    /// Reads and checks a pack file.
    pub fn load(path: impl AsRef<Path>) -> Result<Pack, PackErrors> {
        let path = path.as_ref();
        let origin = path.display().to_string();
        match std::fs::read_to_string(path) {
            Ok(text) => Pack::parse(&text, origin),
            Err(e) => Err(PackErrors(vec![PackError {
                origin,
                line: 0,
                message: format!("the pack cannot be read: {e}"),
                remedy: "name a readable TOML file of [[step]] tables".to_owned(),
            }])),
        }
    }

    /// Parses and checks a pack's text; `origin` names it in errors. Everything that can be
    /// checked without the servers is: each value, the references between steps (to a
    /// declared step and a declared output), cycles. Every error found is returned, each
    /// with its line.
    pub fn parse(text: &str, origin: impl Into<String>) -> Result<Pack, PackErrors> {
        let origin = origin.into();
        let mut findings = Findings::new(text, &origin);
        let file: PackFile = match toml::from_str(text) {
            Ok(file) => file,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                findings.at(
                    span,
                    e.message().trim().to_owned(),
                    "see the pack format in the README: [pack] name, then [[step]] tables \
                     with id, server, tool, arguments, outputs and timeout_s",
                );
                return Err(findings.into_errors());
            }
        };
        if file.step.is_empty() {
            findings.at_line(
                1,
                "the pack has no step".to_owned(),
                "add [[step]] tables with id, server and tool",
            );
        }
        let mut steps = Vec::new();
        let mut lines = Vec::new();
        for table in file.step {
            let start = findings.line_of(table.span());
            let table = table.into_inner();
            let step_lines = StepLines {
                id: findings.line_of(table.id.span()),
                server: findings.line_of(table.server.span()),
                tool: findings.line_of(table.tool.span()),
                arguments: table
                    .arguments
                    .as_ref()
                    .map_or(start, |a| findings.line_of(a.span())),
                outputs: table
                    .outputs
                    .as_ref()
                    .map_or(start, |o| findings.line_of(o.span())),
            };
            let timeout = table.timeout_s.and_then(|t| {
                let line = findings.line_of(t.span());
                check::timeout(&mut findings, line, t.get_ref())
            });
            let arguments = match table.arguments {
                Some(arguments) => match serde_json::to_value(arguments.into_inner()) {
                    Ok(value) => value,
                    Err(e) => {
                        findings.at_line(
                            step_lines.arguments,
                            format!("the arguments cannot be read as JSON: {e}"),
                            "write arguments as strings, numbers, booleans, arrays and tables",
                        );
                        Value::Object(Default::default())
                    }
                },
                None => Value::Object(Default::default()),
            };
            let id = table.id.into_inner();
            let compiled = template::compile(&arguments, &mut |bad| {
                findings.at_line(
                    step_lines.arguments,
                    format!("step {id}: {}", bad.message),
                    bad.remedy,
                );
            });
            let outputs: Vec<String> = table.outputs.map(Spanned::into_inner).unwrap_or_default();
            let output_matchers = outputs
                .iter()
                .filter_map(|pattern| reference::name_matcher(pattern).ok())
                .collect();
            steps.push(Step {
                id,
                server: table.server.into_inner(),
                tool: table.tool.into_inner(),
                arguments,
                compiled,
                outputs,
                output_matchers,
                timeout,
                line: start,
                dependencies: Vec::new(),
            });
            lines.push(step_lines);
        }
        check::steps(&mut findings, &mut steps, &lines);
        let (name, description) = file
            .pack
            .map(|h| (h.name, h.description))
            .unwrap_or_default();
        findings.into_result(Pack {
            origin: origin.clone(),
            name,
            description,
            steps,
        })
    }

    /// The file it was read from (or the origin given).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Its name, when it has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// What it is for, when it says.
    pub fn description(&self) -> Option<&str> {
        self.description.as_deref()
    }

    /// Its steps, in the order of the file.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// Checks that every step's server is one of `known` (the configured servers' names).
    pub fn check_servers<'a>(
        &self,
        known: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), PackErrors> {
        let known: Vec<&str> = known.into_iter().collect();
        let errors: Vec<PackError> = self
            .steps
            .iter()
            .filter(|step| !known.contains(&step.server.as_str()))
            .map(|step| PackError {
                origin: self.origin.clone(),
                line: step.line,
                message: format!(
                    "step {} calls server {}, which the configuration does not name",
                    step.id, step.server
                ),
                remedy: format!(
                    "use one of the configured servers ({}) or add [servers.{}] to the \
                     configuration",
                    known.join(", "),
                    step.server
                ),
            })
            .collect();
        PackErrors::refuse_if_any(errors)
    }

    /// Checks that every step on `server` calls one of `tools` (its model-facing tools, as
    /// listed at setup).
    pub fn check_tools<'a>(
        &self,
        server: &str,
        tools: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), PackErrors> {
        let tools: Vec<&str> = tools.into_iter().collect();
        let errors: Vec<PackError> = self
            .steps
            .iter()
            .filter(|step| step.server == server && !tools.contains(&step.tool.as_str()))
            .map(|step| PackError {
                origin: self.origin.clone(),
                line: step.line,
                message: format!(
                    "step {} calls tool {} of server {server}, which does not offer it",
                    step.id, step.tool
                ),
                remedy: format!("use one of its tools: {}", tools.join(", ")),
            })
            .collect();
        PackErrors::refuse_if_any(errors)
    }
}
