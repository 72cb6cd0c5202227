//! The decisions of a client's set-up, sans-IO, for every driver to share: which version
//! `server/discover` is asked in and what its answers settle ([`EraProbe`]), and when the
//! pages of `tools/list` are done ([`ToolPages`]). The driver sends and waits; these decide.

use crate::jsonrpc::Reply;

use super::{
    DiscoverResult, Era, EraVerdict, ListToolsParams, ListToolsResult, NoCommonGround,
    ProtocolVersion, Tool, read_discover_answer,
};

/// What to do after an answer to `server/discover`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ProbeStep {
    /// Ask `server/discover` again, in this version.
    Ask(ProtocolVersion),
    /// The server is stateless and speaks a version of ours: go on without `initialize`.
    Stateless(DiscoverResult),
    /// The server keeps sessions: send `initialize`.
    Session,
    /// The server is stateless and shares nothing with this client.
    Unusable(NoCommonGround),
}

/// The era probe: `server/discover` in the newest stateless version first; a refusal that
/// lists another stateless version of ours is asked again once, in that version.
///
/// ```
/// use maljan_mcp_proto::mcp::{EraProbe, ProbeStep};
/// let mut probe = EraProbe::new();
/// assert_eq!(probe.version().as_str(), "2026-07-28");
/// // No answer within the wait: a server with sessions.
/// assert_eq!(probe.handle_answer(None), ProbeStep::Session);
/// ```
#[derive(Debug, Clone)]
pub struct EraProbe {
    version: ProtocolVersion,
    asked_again: bool,
}

impl Default for EraProbe {
    fn default() -> Self {
        EraProbe::new()
    }
}

impl EraProbe {
    /// A probe that asks first in the newest stateless version.
    pub fn new() -> Self {
        EraProbe {
            version: ProtocolVersion::newest_of(Era::Stateless),
            asked_again: false,
        }
    }

    /// The version to ask `server/discover` in now.
    pub fn version(&self) -> ProtocolVersion {
        self.version
    }

    /// Reads the answer to the last `server/discover` (`None`: no answer within the wait,
    /// or an HTTP refusal without a JSON-RPC body) and says what comes next.
    pub fn handle_answer(&mut self, answer: Option<&Reply>) -> ProbeStep {
        match read_discover_answer(answer) {
            EraVerdict::Stateless(result) => ProbeStep::Stateless(result),
            EraVerdict::RetryWith(listed) if !self.asked_again => {
                match ProtocolVersion::parse(&listed) {
                    Some(ours) => {
                        self.version = ours;
                        self.asked_again = true;
                        ProbeStep::Ask(ours)
                    }
                    None => self.refused_twice(),
                }
            }
            EraVerdict::RetryWith(_) => self.refused_twice(),
            EraVerdict::Unusable(why) => ProbeStep::Unusable(why),
            _ => ProbeStep::Session,
        }
    }

    fn refused_twice(&self) -> ProbeStep {
        ProbeStep::Unusable(NoCommonGround::ListedVersionRefused(
            self.version.as_str().to_owned(),
        ))
    }
}

/// The pages of `tools/list`, read until a page without a cursor, at most a bound of pages:
/// a server that pages for ever is refused.
///
/// ```
/// use maljan_mcp_proto::mcp::{ListToolsResult, ToolPages};
/// let mut pages = ToolPages::new(10);
/// assert_eq!(pages.next_params().cursor, None);
/// let page: ListToolsResult = serde_json::from_str(
///     r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"2"}"#).unwrap();
/// assert_eq!(pages.handle_page(page), Ok(false));
/// assert_eq!(pages.next_params().cursor.as_deref(), Some("2"));
/// let last: ListToolsResult = serde_json::from_str(r#"{"tools":[]}"#).unwrap();
/// assert_eq!(pages.handle_page(last), Ok(true));
/// assert_eq!(pages.into_tools().len(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct ToolPages {
    tools: Vec<Tool>,
    cursor: Option<String>,
    read: usize,
    max_pages: usize,
}

/// The tool list did not end within this many pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndlessToolList(pub usize);

impl std::fmt::Display for EndlessToolList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the tool list did not end within {} pages", self.0)
    }
}

impl std::error::Error for EndlessToolList {}

impl ToolPages {
    /// A listing of at most `max_pages` pages.
    pub fn new(max_pages: usize) -> Self {
        ToolPages {
            tools: Vec::new(),
            cursor: None,
            read: 0,
            max_pages,
        }
    }

    /// The params of the next page's request.
    pub fn next_params(&self) -> ListToolsParams {
        ListToolsParams {
            cursor: self.cursor.clone(),
        }
    }

    /// Takes a page: `Ok(true)` when it was the last, `Ok(false)` when another is to be
    /// asked for, an error when the bound is reached and the server still pages on.
    pub fn handle_page(&mut self, page: ListToolsResult) -> Result<bool, EndlessToolList> {
        self.read += 1;
        self.tools.extend(page.tools);
        self.cursor = page.next_cursor;
        match &self.cursor {
            None => Ok(true),
            Some(_) if self.read >= self.max_pages => Err(EndlessToolList(self.max_pages)),
            Some(_) => Ok(false),
        }
    }

    /// Every tool read.
    pub fn into_tools(self) -> Vec<Tool> {
        self.tools
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::ErrorObject;

    fn refusal(supported: &[&str]) -> Reply {
        let mut error = ErrorObject::new(-32022, "unsupported version");
        error.data =
            Some(serde_json::value::to_raw_value(&json!({ "supported": supported })).unwrap());
        Reply::Error(error)
    }

    #[test]
    fn a_refusal_listing_our_version_is_asked_again_once() {
        let mut probe = EraProbe::new();
        let ours = probe.version().as_str().to_owned();
        assert_eq!(
            probe.handle_answer(Some(&refusal(&[&ours]))),
            ProbeStep::Ask(probe.version())
        );
        assert!(matches!(
            probe.handle_answer(Some(&refusal(&[&ours]))),
            ProbeStep::Unusable(NoCommonGround::ListedVersionRefused(v)) if v == ours
        ));
    }

    #[test]
    fn a_server_that_pages_past_the_bound_is_refused() {
        let mut pages = ToolPages::new(3);
        let page = || ListToolsResult {
            tools: Vec::new(),
            next_cursor: Some("again".to_owned()),
        };
        assert_eq!(pages.handle_page(page()), Ok(false));
        assert_eq!(pages.handle_page(page()), Ok(false));
        assert_eq!(pages.handle_page(page()), Err(EndlessToolList(3)));
    }
}
