//! How a person is sent to the authorization server: `LoopbackBrowser` (opens a browser when
//! there is one, hands the URL to the caller to show either way, and takes the redirect on a
//! loopback port) and `HeadlessAgent` (follows the server's redirects itself, for servers that
//! sign a client in without a person, such as test servers).

use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use url::Url;

use super::AuthError;
use super::authorizer::UserAgent;

/// How long a person has to sign in.
const SIGN_IN_WAIT: Duration = Duration::from_secs(300);

/// Follows the authorization server's redirects without a person, up to the redirect URI.
#[derive(Debug, Clone)]
pub struct HeadlessAgent {
    redirect_uri: String,
    http: reqwest::Client,
}

impl HeadlessAgent {
    /// An agent whose authorization requests name `redirect_uri`.
    ///
    /// # Errors
    ///
    /// [`AuthError::Http`] when the HTTP client cannot be built.
    pub fn new(redirect_uri: impl Into<String>) -> Result<HeadlessAgent, AuthError> {
        crate::tls::install();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|error| AuthError::Http { url: String::new(), message: error.to_string() })?;
        Ok(HeadlessAgent { redirect_uri: redirect_uri.into(), http })
    }
}

impl UserAgent for HeadlessAgent {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<Url, AuthError>> {
        Box::pin(async move {
            let mut current = url;
            for _ in 0..10 {
                if current.as_str().starts_with(&self.redirect_uri) {
                    return Ok(current);
                }
                let response = self.http.get(current.clone()).send().await.map_err(|error| {
                    AuthError::Http {
                        url: super::discovery::shown(current.as_str()),
                        message: error.to_string(),
                    }
                })?;
                let location = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|value| value.to_str().ok())
                    .ok_or_else(|| {
                        AuthError::Authorization(format!(
                            "the authorization endpoint answered HTTP {} without a redirect: a person must sign in",
                            response.status()
                        ))
                    })?;
                current = current.join(location).map_err(|_| {
                    AuthError::Authorization(
                        "the authorization endpoint redirected to an invalid URL".to_owned(),
                    )
                })?;
            }
            Err(AuthError::Authorization("too many redirects".to_owned()))
        })
    }
}

/// What to do with the authorization URL besides opening a browser: the CLI prints it.
pub type Announce = Box<dyn Fn(&Url, bool) + Send + Sync>;

/// Opens the authorization URL in a browser (when one can be started), announces it, and waits
/// for the redirect on `http://127.0.0.1:<port>/callback`.
pub struct LoopbackBrowser {
    listener: tokio::sync::Mutex<tokio::net::TcpListener>,
    redirect_uri: String,
    announce: Announce,
    open_browser: bool,
}

impl std::fmt::Debug for LoopbackBrowser {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("LoopbackBrowser").field("redirect_uri", &self.redirect_uri).finish()
    }
}

impl LoopbackBrowser {
    /// Listen on a free loopback port. `announce` gets the URL and whether a browser was
    /// started; `open_browser` false never starts one.
    ///
    /// # Errors
    ///
    /// [`AuthError::Authorization`] when no loopback port can be bound.
    pub async fn bind(
        announce: Announce,
        open_browser: bool,
    ) -> Result<LoopbackBrowser, AuthError> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await.map_err(|error| {
            AuthError::Authorization(format!("cannot listen on a loopback port: {error}"))
        })?;
        let port = listener
            .local_addr()
            .map_err(|error| AuthError::Authorization(error.to_string()))?
            .port();
        Ok(LoopbackBrowser {
            listener: tokio::sync::Mutex::new(listener),
            redirect_uri: format!("http://127.0.0.1:{port}/callback"),
            announce,
            open_browser,
        })
    }

    fn start_browser(url: &Url) -> bool {
        let graphical = std::env::var_os("DISPLAY").is_some()
            || std::env::var_os("WAYLAND_DISPLAY").is_some()
            || cfg!(target_os = "macos");
        if !graphical {
            return false;
        }
        let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
        std::process::Command::new(opener)
            .arg(url.as_str())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .is_ok()
    }

    async fn wait(&self) -> Result<Url, AuthError> {
        let listener = self.listener.lock().await;
        loop {
            let (mut stream, _) = listener
                .accept()
                .await
                .map_err(|error| AuthError::Authorization(error.to_string()))?;
            let mut buffer = vec![0_u8; 8192];
            let mut read = 0;
            while read < buffer.len() {
                let count = stream
                    .read(&mut buffer[read..])
                    .await
                    .map_err(|error| AuthError::Authorization(error.to_string()))?;
                if count == 0 {
                    break;
                }
                read += count;
                if buffer[..read].windows(4).any(|window| window == b"\r\n\r\n") {
                    break;
                }
            }
            let head = String::from_utf8_lossy(&buffer[..read]);
            let target = head
                .lines()
                .next()
                .and_then(|line| line.strip_prefix("GET "))
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or("");
            if !target.starts_with("/callback") {
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            }
            let body =
                "<!doctype html><title>orca</title><p>Signed in. You may close this tab.</p>";
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
            let base = Url::parse(&self.redirect_uri)
                .map_err(|error| AuthError::Authorization(error.to_string()))?;
            return base.join(target).map_err(|error| AuthError::Authorization(error.to_string()));
        }
    }
}

impl UserAgent for LoopbackBrowser {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<Url, AuthError>> {
        Box::pin(async move {
            let opened = self.open_browser && LoopbackBrowser::start_browser(&url);
            (self.announce)(&url, opened);
            tokio::time::timeout(SIGN_IN_WAIT, self.wait()).await.map_err(|_| {
                AuthError::Authorization(format!(
                    "nobody signed in within {} minutes",
                    SIGN_IN_WAIT.as_secs() / 60
                ))
            })?
        })
    }
}
