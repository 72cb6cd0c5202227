//! How `maljan` is authorized by an HTTP server behind OAuth 2.1: unattended with the
//! client's own credentials (`[servers.NAME.oauth]` with a secret or a key), or with the
//! tokens a person obtained by `maljan login NAME`, kept between runs and refreshed before
//! they expire.

mod kept_tokens;
pub(crate) mod login;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use maljan_mcp_http::oauth::{
    OAuth, OAuthClient, OAuthGrant, OAuthSettings, StoredTokens, TokenStore, UserAgent,
};
use maljan_mcp_http::{AccessToken, AuthorizationError, AuthorizeFuture, Authorizer, Challenge};
use url::Url;

use crate::config::OAuthSection;
pub(crate) use kept_tokens::KeptTokens;

/// The authorizer of one configured HTTP server, made when the server is first used: a
/// config naming several servers does not read the secrets of those a command leaves
/// alone, and a missing one stops only the commands that need it.
pub(crate) struct ServerAuthorization {
    name: String,
    url: String,
    section: Option<OAuthSection>,
    oauth: OnceLock<Result<OAuth, AuthorizationError>>,
}

impl fmt::Debug for ServerAuthorization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerAuthorization")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ServerAuthorization {
    pub(crate) fn new(name: &str, url: &str, section: Option<OAuthSection>) -> Self {
        ServerAuthorization {
            name: name.to_owned(),
            url: url.to_owned(),
            section,
            oauth: OnceLock::new(),
        }
    }

    fn oauth(&self) -> &Result<OAuth, AuthorizationError> {
        self.oauth.get_or_init(|| self.make())
    }

    fn make(&self) -> Result<OAuth, AuthorizationError> {
        let name = &self.name;
        if let Some(section) = self.section.as_ref().filter(|s| s.is_unattended()) {
            return section.authorizer(name, &self.url).map_err(|what| {
                AuthorizationError::new(what, "fix the server's [servers.NAME.oauth] settings")
            });
        }
        let kept = self.kept();
        let login = format!("run `maljan login {name}`");
        match kept.load() {
            Ok(Some(_)) => {}
            Ok(None) => {
                return Err(AuthorizationError::new(
                    format!("server {name} asks for authorization and none is kept for it"),
                    login,
                ));
            }
            Err(e) => return Err(e),
        }
        let agent: Arc<dyn UserAgent> = Arc::new(NeedsLogin { name: name.clone() });
        let mut settings = self.settings(OAuthGrant::AuthorizationCode(agent))?;
        settings.store = Some(Arc::new(kept));
        OAuth::new(&self.url, settings)
    }

    /// An authorizer that has a person approve through `agent`, keeping what it obtains
    /// in place of the tokens kept before (kept until then, should the approval fail).
    pub(crate) fn interactive(
        &self,
        agent: Arc<dyn UserAgent>,
    ) -> Result<OAuth, AuthorizationError> {
        let mut settings = self.settings(OAuthGrant::AuthorizationCode(agent))?;
        settings.store = Some(Arc::new(FreshStart(self.kept())));
        OAuth::new(&self.url, settings)
    }

    /// Where this server's tokens are kept.
    pub(crate) fn kept(&self) -> KeptTokens {
        KeptTokens::for_server(&self.url)
    }

    /// Forgets the tokens kept for this server, in the keyring and in a file alike: the
    /// places they were forgotten from.
    pub(crate) fn forget(&self) -> Result<Vec<String>, AuthorizationError> {
        let mut forgotten = Vec::new();
        let kept = self.kept();
        if kept.forget()? {
            forgotten.push(kept.place());
        }
        if matches!(kept, KeptTokens::Keyring(_)) {
            let file = KeptTokens::file_for_server(&self.url);
            if file.forget()? {
                forgotten.push(file.place());
            }
        }
        Ok(forgotten)
    }

    /// The settings of a person's authorization: the configured client, else one
    /// registered on the spot.
    fn settings(&self, grant: OAuthGrant) -> Result<OAuthSettings, AuthorizationError> {
        match &self.section {
            Some(section) => section.settings(&self.name, grant).map_err(|what| {
                AuthorizationError::new(what, "fix the server's [servers.NAME.oauth] settings")
            }),
            None => Ok(OAuthSettings::new(OAuthClient::Dynamic, grant)),
        }
    }
}

/// The authorizer is made on the server's first refusal, not before: a server that asks
/// for nothing never has its secrets read or the keyring asked (which may ask the person to
/// unlock it).
impl Authorizer for ServerAuthorization {
    fn token(&self) -> Option<AccessToken> {
        self.oauth.get()?.as_ref().ok()?.token()
    }

    fn authorize<'a>(&'a self, challenge: &'a Challenge) -> AuthorizeFuture<'a> {
        let first = self.oauth.get().is_none();
        match self.oauth() {
            // The tokens kept from an earlier run are tried before anything is obtained.
            Ok(oauth) if first => Box::pin(async move {
                if let Some(renewal) = oauth.renew()
                    && let Err(e) = renewal.await
                {
                    tracing::debug!("the kept token was not renewed: {e}");
                }
                match oauth.token() {
                    Some(_) => Ok(()),
                    None => oauth.authorize(challenge).await,
                }
            }),
            Ok(oauth) => oauth.authorize(challenge),
            Err(e) => {
                let e = e.clone();
                Box::pin(async move { Err(e) })
            }
        }
    }

    fn renew(&self) -> Option<AuthorizeFuture<'_>> {
        self.oauth.get()?.as_ref().ok()?.renew()
    }
}

/// A store that starts empty (a new login does not reuse the tokens it replaces) and
/// keeps what is obtained.
#[derive(Debug)]
struct FreshStart(KeptTokens);

impl TokenStore for FreshStart {
    fn load(&self) -> Result<Option<StoredTokens>, AuthorizationError> {
        Ok(None)
    }

    fn save(&self, tokens: &StoredTokens) -> Result<(), AuthorizationError> {
        self.0.save(tokens)
    }
}

/// The user agent of a command that runs unattended: a person's approval is needed again
/// (the kept refresh token was refused or has run out), and `maljan login` is the way.
#[derive(Debug)]
struct NeedsLogin {
    name: String,
}

impl UserAgent for NeedsLogin {
    fn redirect_uri(&self) -> String {
        login::REDIRECT_UNUSED.to_owned()
    }

    fn visit<'a>(
        &'a self,
        _: &'a Url,
    ) -> Pin<Box<dyn Future<Output = Result<Url, AuthorizationError>> + Send + 'a>> {
        Box::pin(async move {
            Err(AuthorizationError::new(
                format!(
                    "the authorization kept for server {} is no longer accepted",
                    self.name
                ),
                format!("run `maljan login {}`", self.name),
            ))
        })
    }
}
