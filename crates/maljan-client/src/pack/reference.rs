//! References in a step's arguments: `$sample`, `$job`, and `$STEP/NAME` (a file an earlier
//! step took, by name or glob).

use globset::{Glob, GlobMatcher};

/// What a string argument refers to.
#[derive(Debug, Clone)]
pub(crate) enum Reference {
    /// The job's sample.
    Sample,
    /// The job's directory.
    Job,
    /// Files an earlier step took.
    Output(OutputReference),
}

/// Files of an earlier step, by name or glob.
#[derive(Debug, Clone)]
pub(crate) struct OutputReference {
    /// The reference as written: `$unpack/*.js`.
    pub(crate) written: String,
    /// The step's id.
    pub(crate) step: String,
    /// The name or glob as written.
    pub(crate) pattern: String,
    /// Whether it is a glob: more than one file may match.
    pub(crate) is_glob: bool,
    matcher: GlobMatcher,
}

impl OutputReference {
    /// Whether a file name matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        self.matcher.is_match(name)
    }
}

/// Why a string is not a reference it looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BadReference {
    pub(crate) message: String,
    pub(crate) remedy: &'static str,
}

const REFERENCE_REMEDY: &str = "write $sample, $job or $STEP/NAME (NAME a file name or a glob such \
                                as *.js), and $$ for a literal $";

/// Whether `pattern` is a glob (has `*`, `?`, `[` or `{`).
pub(crate) fn is_glob(pattern: &str) -> bool {
    pattern.contains(['*', '?', '[', '{'])
}

/// A matcher of file names for `pattern` (a name or a glob); `/` is not allowed: outputs
/// are matched by file name.
pub(crate) fn name_matcher(pattern: &str) -> Result<GlobMatcher, String> {
    if pattern.is_empty() || pattern.contains('/') || pattern == "." || pattern == ".." {
        return Err(format!("{pattern:?} is not a file name or a glob of one"));
    }
    Glob::new(pattern)
        .map(|g| g.compile_matcher())
        .map_err(|e| format!("{pattern:?} is not a valid glob: {e}"))
}

/// Reads one string argument: `Ok(None)` when it is plain text (a leading `$$` stands for a
/// literal `$`: see [`unescape`]).
pub(crate) fn parse(text: &str) -> Result<Option<Reference>, BadReference> {
    let Some(rest) = text.strip_prefix('$') else {
        return Ok(None);
    };
    if rest.starts_with('$') {
        return Ok(None);
    }
    match rest {
        "sample" => return Ok(Some(Reference::Sample)),
        "job" => return Ok(Some(Reference::Job)),
        _ => {}
    }
    let bad = |message: String| BadReference {
        message,
        remedy: REFERENCE_REMEDY,
    };
    let Some((step, pattern)) = rest.split_once('/') else {
        return Err(bad(format!("{text:?} is not a reference")));
    };
    if !is_step_id(step) {
        return Err(bad(format!("{text:?} does not name a step before its /")));
    }
    let matcher = name_matcher(pattern).map_err(bad)?;
    Ok(Some(Reference::Output(OutputReference {
        written: text.to_owned(),
        step: step.to_owned(),
        pattern: pattern.to_owned(),
        is_glob: is_glob(pattern),
        matcher,
    })))
}

/// A plain string argument as sent: `$$x` is `$x`.
pub(crate) fn unescape(text: &str) -> &str {
    if text.starts_with("$$") {
        &text[1..]
    } else {
        text
    }
}

/// Whether `id` may name a step: ASCII letters, digits, `-` and `_`, not empty.
pub(crate) fn is_step_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_read_and_plain_text_is_left_alone() {
        assert!(matches!(parse("$sample"), Ok(Some(Reference::Sample))));
        assert!(matches!(parse("$job"), Ok(Some(Reference::Job))));
        assert!(matches!(parse("hello"), Ok(None)));
        assert!(matches!(parse("$$sample"), Ok(None)));
        assert_eq!(unescape("$$sample"), "$sample");
        let Ok(Some(Reference::Output(out))) = parse("$unpack/*.js") else {
            panic!("an output reference");
        };
        assert_eq!(out.step, "unpack");
        assert!(out.is_glob);
        assert!(out.matches("payload.js"));
        assert!(!out.matches("payload.txt"));
        let Ok(Some(Reference::Output(out))) = parse("$unpack/a.txt") else {
            panic!("an output reference");
        };
        assert!(!out.is_glob);
    }

    #[test]
    fn what_looks_like_a_reference_and_is_not_is_refused() {
        for text in [
            "$",
            "$samples",
            "$unpack",
            "$un pack/a",
            "$unpack/",
            "$unpack/a/b",
            "$a/[x",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
