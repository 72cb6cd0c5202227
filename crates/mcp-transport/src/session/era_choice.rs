//! Which protocol era a client speaks to a server: found by asking, or fixed.

/// Which protocol era a client speaks to a server.
///
/// In a configuration: `auto`, `session` (or `legacy`, its older name) or `stateless` (or
/// `modern`).
///
/// ```
/// use maljan_mcp_transport::session::EraChoice;
/// assert_eq!("auto".parse::<EraChoice>().unwrap(), EraChoice::Auto);
/// assert_eq!("legacy".parse::<EraChoice>().unwrap(), EraChoice::Session);
/// let wrong = "2026".parse::<EraChoice>().unwrap_err();
/// assert!(wrong.contains("auto, session or stateless"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum EraChoice {
    /// Ask `server/discover` first and fall back to `initialize` by the spec's rules.
    #[default]
    Auto,
    /// Only `initialize` and a session (2024-11-05 to 2025-11-25), never `server/discover`.
    #[serde(alias = "legacy")]
    Session,
    /// Only stateless (2026-07-28): a server that does not speak it fails its set-up.
    #[serde(alias = "modern")]
    Stateless,
}

impl EraChoice {
    /// `auto`, `session` or `stateless`.
    pub fn as_str(self) -> &'static str {
        match self {
            EraChoice::Auto => "auto",
            EraChoice::Session => "session",
            EraChoice::Stateless => "stateless",
        }
    }
}

impl std::str::FromStr for EraChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "auto" => Ok(EraChoice::Auto),
            "session" | "legacy" => Ok(EraChoice::Session),
            "stateless" | "modern" => Ok(EraChoice::Stateless),
            other => Err(format!(
                "the era {other:?} is not one this client speaks: write auto, session or \
                 stateless"
            )),
        }
    }
}
