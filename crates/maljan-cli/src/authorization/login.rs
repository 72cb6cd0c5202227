//! `maljan login SERVER`: a person approves maljan at the server's authorization server in
//! a browser, which comes back to a listener on loopback with the code; the tokens are kept
//! for the commands that follow. `maljan logout SERVER` forgets them.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::RawQuery;
use axum::response::Html;
use maljan_client::{ConnectionContext, ServerConnection};
use maljan_mcp_http::AuthorizationError;
use maljan_mcp_http::oauth::{TokenStore, UserAgent};
use url::Url;

use crate::config::Config;
use crate::error::CliError;
use crate::stdout::{errln, out};

/// The redirect URI of a user agent that never sends a person anywhere.
pub(crate) const REDIRECT_UNUSED: &str = "http://127.0.0.1/callback";

/// The page the browser shows once it has come back.
const DONE_PAGE: &str = "<!doctype html><title>maljan</title>\
<p>The authorization came back to maljan. You may close this window.";

/// `maljan login`.
#[derive(Debug, clap::Args)]
pub(crate) struct LoginCommand {
    /// The server: an HTTP server of the config file, or its URL.
    server: String,
    /// Print the authorization URL only; do not open a browser.
    #[arg(long)]
    no_browser: bool,
    /// How long to wait for the browser to come back.
    #[arg(long, default_value = "5m", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

/// `maljan logout`.
#[derive(Debug, clap::Args)]
pub(crate) struct LogoutCommand {
    /// The server: an HTTP server of the config file, or its URL.
    server: String,
}

/// Authorizes maljan for the server: connects with a browser as the user agent, which the
/// server's refusal sets going, and keeps the tokens it brings back.
pub(crate) async fn login(config: &Config, options: LoginCommand) -> Result<ExitCode, CliError> {
    let name = options.server.as_str();
    let authorization = config.authorization(name)?;
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| CliError::Login {
            server: name.to_owned(),
            source: AuthorizationError::new(
                format!("no port on loopback for the browser to come back to: {e}"),
                "free a port on 127.0.0.1",
            ),
        })?;
    let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
    let agent = Arc::new(Loopback {
        server: name.to_owned(),
        redirect: format!("http://127.0.0.1:{port}/callback"),
        listener: Mutex::new(Some(listener)),
        open_browser: !options.no_browser,
        timeout: options.timeout,
    });
    let oauth = authorization
        .interactive(agent)
        .map_err(|source| CliError::Login {
            server: name.to_owned(),
            source,
        })?;
    let server = config.server(Some(name))?.with_authorizer(Arc::new(oauth));
    let connection = ServerConnection::connect(
        &server,
        config.settings.clone(),
        ConnectionContext::default(),
    )
    .await?;
    connection.close().await;
    let kept = authorization.kept();
    match kept.load() {
        Ok(Some(_)) => out!(
            "logged in to server {name}; its tokens are kept in {}",
            kept.place()
        ),
        Ok(None) => out!("server {name} did not ask for authorization; nothing is kept"),
        Err(source) => {
            return Err(CliError::Login {
                server: name.to_owned(),
                source,
            });
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Forgets the tokens kept for the server, wherever they are.
pub(crate) fn logout(config: &Config, options: &LogoutCommand) -> Result<ExitCode, CliError> {
    let name = options.server.as_str();
    let authorization = config.authorization(name)?;
    let forgotten = authorization.forget().map_err(|source| CliError::Login {
        server: name.to_owned(),
        source,
    })?;
    if forgotten.is_empty() {
        out!("no authorization was kept for server {name}");
    } else {
        out!(
            "logged out of server {name}: the tokens kept in {} are forgotten",
            forgotten.join(" and ")
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A browser sent to the authorization URL, coming back to a listener on loopback.
#[derive(Debug)]
struct Loopback {
    server: String,
    redirect: String,
    listener: Mutex<Option<std::net::TcpListener>>,
    open_browser: bool,
    timeout: Duration,
}

impl Loopback {
    /// The query of the first request to the redirect URI's path.
    async fn wait_for_redirect(
        &self,
        listener: std::net::TcpListener,
    ) -> Result<Option<String>, AuthorizationError> {
        let failed = |e: std::io::Error| {
            AuthorizationError::new(
                format!("the listener for the browser failed: {e}"),
                "run `maljan login` again",
            )
        };
        let listener = tokio::net::TcpListener::from_std(listener).map_err(failed)?;
        let (came_back, mut query) = tokio::sync::mpsc::channel::<Option<String>>(1);
        let app = axum::Router::new().route(
            "/callback",
            axum::routing::get(move |RawQuery(raw): RawQuery| {
                let came_back = came_back.clone();
                async move {
                    // Only the first answer counts; a reload finds the page all the same.
                    let _ = came_back.try_send(raw);
                    Html(DONE_PAGE)
                }
            }),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .into_future(),
        );
        let answer = tokio::time::timeout(self.timeout, query.recv()).await;
        let _ = stop.send(());
        // The page is sent before the listener goes; a browser holding its connection open
        // does not keep `maljan` waiting.
        let _ = tokio::time::timeout(Duration::from_secs(2), serving).await;
        match answer {
            Ok(Some(query)) => Ok(query),
            Ok(None) => Err(AuthorizationError::new(
                "the listener for the browser stopped",
                "run `maljan login` again",
            )),
            Err(_) => Err(AuthorizationError::new(
                format!(
                    "the browser did not come back within {}",
                    humantime::format_duration(self.timeout)
                ),
                "run `maljan login` again (--timeout for longer)",
            )),
        }
    }
}

impl UserAgent for Loopback {
    fn redirect_uri(&self) -> String {
        self.redirect.clone()
    }

    fn visit<'a>(
        &'a self,
        authorization_url: &'a Url,
    ) -> Pin<Box<dyn Future<Output = Result<Url, AuthorizationError>> + Send + 'a>> {
        Box::pin(async move {
            let listener = self
                .listener
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
                .ok_or_else(|| {
                    AuthorizationError::new(
                        "the server asked for a second approval in one login",
                        "run `maljan login` again",
                    )
                })?;
            errln!(
                "To let maljan reach server {}, approve it in a browser at:\n\n  {authorization_url}\n",
                self.server
            );
            if self.open_browser {
                open_in_browser(authorization_url);
            }
            errln!(
                "Waiting for the browser to come back to {} …",
                self.redirect
            );
            let query = self.wait_for_redirect(listener).await?;
            let mut back = Url::parse(&self.redirect)
                .map_err(|e| AuthorizationError::new(e.to_string(), "report this as a bug"))?;
            back.set_query(query.as_deref());
            Ok(back)
        })
    }
}

/// Opens `url` in the desktop's browser, where there is one; the URL is printed anyway.
fn open_in_browser(url: &Url) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    if let Err(e) = std::process::Command::new(opener)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    {
        tracing::debug!("no browser opened ({opener}: {e}); the URL above is to be opened by hand");
    }
}
