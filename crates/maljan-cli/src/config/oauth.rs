//! `[servers.NAME.oauth]`: how maljan is known to a server's OAuth 2.1 authorization
//! server. A client with a secret or a private key (read from an environment variable or a
//! file, never from the config file itself) reaches the server unattended with its own
//! credentials (`client_credentials`); one without (a public client) only names the client
//! that `maljan login` uses.

use std::path::PathBuf;

use maljan_mcp_http::oauth::{OAuth, OAuthClient, OAuthGrant, OAuthSettings};
use serde::Deserialize;

/// `[servers.NAME.oauth]`.
///
/// ```toml
/// [servers.remote.oauth]
/// client_id = "maljan-desktop"                 # a public client: `maljan login remote`
/// ```
///
/// ```toml
/// [servers.remote.oauth]
/// client_id = "triage-worker"
/// client_secret_env = "REMOTE_CLIENT_SECRET"   # or client_secret_file
/// # private_key_file = "/etc/maljan/remote.pem" # private_key_jwt instead of a secret
/// # algorithm = "ES256"
/// scopes = ["tools:call"]                      # default: what the server asks for
/// ```
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OAuthSection {
    client_id: String,
    client_secret_env: Option<String>,
    client_secret_file: Option<PathBuf>,
    private_key_file: Option<PathBuf>,
    #[serde(default = "default_algorithm")]
    algorithm: String,
    scopes: Option<Vec<String>>,
}

fn default_algorithm() -> String {
    "ES256".to_owned()
}

impl OAuthSection {
    /// Whether the client has credentials of its own (a secret or a key), and so reaches
    /// the server without a person.
    pub(crate) fn is_unattended(&self) -> bool {
        self.client_secret_env.is_some()
            || self.client_secret_file.is_some()
            || self.private_key_file.is_some()
    }

    /// The unattended authorizer of the server `name` at `url`, its secret or key read now;
    /// the error says what is missing and what to do.
    pub(crate) fn authorizer(&self, name: &str, url: &str) -> Result<OAuth, String> {
        let mut settings = OAuthSettings::new(self.client(name)?, OAuthGrant::ClientCredentials);
        settings.scopes.clone_from(&self.scopes);
        OAuth::new(url, settings).map_err(|e| format!("server {name}: {e}"))
    }

    /// The settings of a person's authorization (`maljan login`) with this client.
    pub(crate) fn settings(&self, name: &str, grant: OAuthGrant) -> Result<OAuthSettings, String> {
        let mut settings = OAuthSettings::new(self.client(name)?, grant);
        settings.scopes.clone_from(&self.scopes);
        Ok(settings)
    }

    /// The client, its secret or key read now.
    fn client(&self, name: &str) -> Result<OAuthClient, String> {
        let read = |path: &PathBuf, what: &str| {
            std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .map_err(|e| {
                    format!(
                        "server {name}: the {what} file {} cannot be read ({e}); name a readable file",
                        path.display()
                    )
                })
        };
        let secret = match (&self.client_secret_env, &self.client_secret_file) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "server {name}: the client secret is named both by client_secret_env and client_secret_file; keep one"
                ));
            }
            (Some(variable), None) => Some(std::env::var(variable).map_err(|_| {
                format!(
                    "server {name}: the environment variable {variable} holding the client secret is not set; set it, or name client_secret_file"
                )
            })?),
            (None, Some(path)) => Some(read(path, "client secret")?),
            (None, None) => None,
        };
        Ok(match (&self.private_key_file, secret) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "server {name}: a client authenticates with a secret or with a private key, not both; keep one"
                ));
            }
            (Some(path), None) => OAuthClient::KeyRegistered {
                id: self.client_id.clone(),
                private_key_pem: read(path, "private key")?,
                algorithm: self.algorithm.clone(),
            },
            (None, secret) => OAuthClient::Registered {
                id: self.client_id.clone(),
                secret,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> OAuthSection {
        toml::from_str(text).expect("a section")
    }

    #[test]
    fn the_secret_comes_from_a_file_and_never_shows() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "s3cret-value\n").unwrap();
        let oauth = section(&format!(
            "client_id = \"w\"\nclient_secret_file = {:?}\n",
            file.display().to_string()
        ))
        .authorizer("remote", "https://mcp.example.com/mcp")
        .expect("an authorizer");
        assert!(!format!("{oauth:?}").contains("s3cret-value"));
    }

    #[test]
    fn a_missing_variable_two_secrets_or_a_secret_and_a_key_are_refused_by_name() {
        let missing =
            section("client_id = \"w\"\nclient_secret_env = \"MALJAN_TEST_NO_SUCH_VARIABLE\"\n")
                .authorizer("remote", "https://mcp.example.com/mcp")
                .unwrap_err();
        assert!(
            missing.contains("MALJAN_TEST_NO_SUCH_VARIABLE") && missing.contains("remote"),
            "{missing}"
        );
        let both =
            section("client_id = \"w\"\nclient_secret_env = \"A\"\nclient_secret_file = \"/b\"\n")
                .authorizer("remote", "https://mcp.example.com/mcp")
                .unwrap_err();
        assert!(both.contains("keep one"), "{both}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("secret");
        std::fs::write(&file, "x").unwrap();
        let key_and_secret = section(&format!(
            "client_id = \"w\"\nclient_secret_file = {0:?}\nprivate_key_file = {0:?}\n",
            file.display().to_string()
        ))
        .authorizer("remote", "https://mcp.example.com/mcp")
        .unwrap_err();
        assert!(key_and_secret.contains("not both"), "{key_and_secret}");
    }
}
