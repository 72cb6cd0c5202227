//! A step's compiled arguments filled in at run time: `$sample`, `$job`, and the files
//! earlier steps took (one run per matching file for a glob given as an argument's value,
//! all of them for a glob inside a list).

use std::collections::HashMap;

use serde_json::Value;

use crate::job::Job;
use crate::outcome::HandedFile;
use crate::pack::Step;
use crate::pack::reference::OutputReference;
use crate::pack::template::Template;

/// How an earlier step ended, as later steps see it.
#[derive(Debug)]
pub(super) struct EarlierStep {
    /// Whether at least one of its runs completed.
    pub(super) completed: bool,
    /// Why not, when none did: "failed: …", "was skipped: …".
    pub(super) reason: String,
    /// The files it took and handed on.
    pub(super) outputs: Vec<HandedFile>,
}

impl EarlierStep {
    /// A step none of whose runs has finished yet.
    pub(super) fn not_yet() -> Self {
        EarlierStep {
            completed: false,
            reason: String::new(),
            outputs: Vec::new(),
        }
    }
}

/// One run of a step.
#[derive(Debug)]
pub(super) struct Instance {
    /// The file it runs for, when the step runs once per matching file.
    pub(super) label: Option<String>,
    /// Its arguments, references read.
    pub(super) arguments: Value,
}

/// Why a step does not run.
#[derive(Debug)]
pub(super) enum NotRun {
    /// An input never came: the reason.
    Skipped(String),
    /// Its glob matched this many files, more than a step may run for.
    TooMany(usize),
}

impl From<String> for NotRun {
    fn from(reason: String) -> Self {
        NotRun::Skipped(reason)
    }
}

/// The runs of `step` now that the steps it refers to are finished, at most `most` of
/// them; `Err` says why it does not run.
pub(super) fn instances(
    step: &Step,
    job: &Job,
    finished: &HashMap<String, EarlierStep>,
    most: usize,
) -> Result<Vec<Instance>, NotRun> {
    let resolver = Resolver { job, finished };
    let compiled = step.compiled();
    let Some(fan_out) = &compiled.fan_out else {
        let arguments = resolver.value(&compiled.template, None)?;
        return Ok(vec![Instance {
            label: None,
            arguments,
        }]);
    };
    let files = resolver.matching(fan_out)?;
    if files.len() > most {
        return Err(NotRun::TooMany(files.len()));
    }
    files
        .into_iter()
        .map(|file| {
            Ok(Instance {
                label: Some(file.name.clone()),
                arguments: resolver.value(&compiled.template, Some((fan_out, file)))?,
            })
        })
        .collect()
}

struct Resolver<'a> {
    job: &'a Job,
    finished: &'a HashMap<String, EarlierStep>,
}

impl<'a> Resolver<'a> {
    /// The files of an earlier step `reference` names, at least one.
    fn matching(&self, reference: &OutputReference) -> Result<Vec<&'a HandedFile>, String> {
        let text = &reference.written;
        let Some(producer) = self.finished.get(&reference.step) else {
            return Err(format!(
                "its input {text} never came: step {} did not run",
                reference.step
            ));
        };
        if !producer.completed {
            return Err(format!(
                "its input {text} never came: step {} {}",
                reference.step, producer.reason
            ));
        }
        let files: Vec<&HandedFile> = producer
            .outputs
            .iter()
            .filter(|f| reference.matches(&f.name))
            .collect();
        if files.is_empty() {
            let taken: Vec<&str> = producer.outputs.iter().map(|f| f.name.as_str()).collect();
            return Err(format!(
                "its input {text} never came: step {} took no file {} {} (it took: {})",
                reference.step,
                if reference.is_glob {
                    "matching"
                } else {
                    "named"
                },
                reference.pattern,
                if taken.is_empty() {
                    "none".to_owned()
                } else {
                    taken.join(", ")
                }
            ));
        }
        Ok(files)
    }

    fn path(file: &HandedFile) -> Value {
        Value::String(file.path.display().to_string())
    }

    /// `template` filled in; `fan` is the glob the step runs once per file of, with this
    /// run's file.
    fn value(
        &self,
        template: &Template,
        fan: Option<(&OutputReference, &HandedFile)>,
    ) -> Result<Value, String> {
        Ok(match template {
            Template::Literal(value) => value.clone(),
            Template::Sample => match self.job.sample() {
                Some(sample) => Value::String(sample.path.display().to_string()),
                None => {
                    return Err("its input $sample never came: the run has no sample".to_owned());
                }
            },
            Template::Job => Value::String(self.job.dir().display().to_string()),
            Template::Output(out) => match fan {
                Some((fanned, file)) if fanned.written == out.written => Self::path(file),
                _ => Self::path(self.matching(out)?[0]),
            },
            Template::EveryOutput(out) => {
                Value::Array(self.matching(out)?.into_iter().map(Self::path).collect())
            }
            Template::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    match (item, self.value(item, fan)?) {
                        (Template::EveryOutput(_), Value::Array(files)) => out.extend(files),
                        (_, value) => out.push(value),
                    }
                }
                Value::Array(out)
            }
            Template::Table(members) => {
                let mut out = serde_json::Map::with_capacity(members.len());
                for (key, item) in members {
                    out.insert(key.clone(), self.value(item, fan)?);
                }
                Value::Object(out)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::pack::Pack;

    fn finished(names: &[&str]) -> HashMap<String, EarlierStep> {
        let outputs = names
            .iter()
            .map(|name| HandedFile {
                name: (*name).to_owned(),
                path: PathBuf::from(format!("/job/outputs/u/{name}")),
                sha256: String::new(),
            })
            .collect();
        HashMap::from([(
            "u".to_owned(),
            EarlierStep {
                completed: true,
                reason: String::new(),
                outputs,
            },
        )])
    }

    fn step(arguments: &str) -> Pack {
        let text = format!(
            "[[step]]\nid = \"u\"\nserver = \"s\"\ntool = \"t\"\noutputs = [\"*\"]\n\
             [[step]]\nid = \"b\"\nserver = \"s\"\ntool = \"t\"\narguments = {arguments}\n"
        );
        Pack::parse(&text, "p.toml").expect("pack")
    }

    fn job() -> (tempfile::TempDir, Job) {
        let dir = tempfile::tempdir().expect("temp dir");
        let job = Job::create(dir.path()).expect("job");
        (dir, job)
    }

    #[test]
    fn a_glob_in_a_list_is_every_matching_file_in_one_run() {
        let (_dir, job) = job();
        let pack =
            step(r#"{ paths = ["$u/*.js", "$u/a.txt", "$$x"], deep = { in = ["$u/*.txt"] } }"#);
        let runs = instances(
            &pack.steps()[1],
            &job,
            &finished(&["a.js", "b.js", "a.txt"]),
            10,
        )
        .expect("ready");
        assert_eq!(runs.len(), 1);
        assert_eq!(
            runs[0].arguments,
            json!({"paths": ["/job/outputs/u/a.js", "/job/outputs/u/b.js", "/job/outputs/u/a.txt", "$x"],
                   "deep": {"in": ["/job/outputs/u/a.txt"]}})
        );
    }

    #[test]
    fn a_glob_as_a_value_is_one_run_per_matching_file() {
        let (_dir, job) = job();
        let pack = step(r#"{ path = "$u/*.js", job = "$job" }"#);
        let runs = instances(
            &pack.steps()[1],
            &job,
            &finished(&["a.js", "b.js", "c.txt"]),
            10,
        )
        .expect("ready");
        let labels: Vec<_> = runs.iter().filter_map(|r| r.label.as_deref()).collect();
        assert_eq!(labels, ["a.js", "b.js"]);
        assert_eq!(runs[1].arguments["path"], "/job/outputs/u/b.js");
        assert_eq!(runs[1].arguments["job"], job.dir().display().to_string());
    }

    fn skip_reason(runs: Result<Vec<Instance>, NotRun>) -> String {
        match runs {
            Err(NotRun::Skipped(reason)) => reason,
            other => panic!("not skipped: {other:?}"),
        }
    }

    #[test]
    fn a_glob_over_more_files_than_allowed_is_not_resolved_at_all() {
        let (_dir, job) = job();
        let pack = step(r#"{ path = "$u/*.js" }"#);
        let runs = instances(
            &pack.steps()[1],
            &job,
            &finished(&["a.js", "b.js", "c.js"]),
            2,
        );
        assert!(matches!(runs, Err(NotRun::TooMany(3))), "{runs:?}");
    }

    #[test]
    fn a_missing_input_says_what_the_step_took_instead() {
        let (_dir, job) = job();
        let pack = step(r#"{ path = "$u/payload.js" }"#);
        let reason = skip_reason(instances(&pack.steps()[1], &job, &finished(&["a.txt"]), 10));
        assert!(
            reason.contains("took no file named payload.js (it took: a.txt)"),
            "{reason}"
        );
        let pack = step(r#"{ path = "$sample" }"#);
        let reason = skip_reason(instances(&pack.steps()[1], &job, &finished(&[]), 10));
        assert!(reason.contains("the run has no sample"), "{reason}");
    }
}
