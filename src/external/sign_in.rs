//! People signing in to OAuth upstreams through orca's HTTP face (the console's "Sign in"): the
//! authorization code flow with PKCE runs on orca's side through `client::auth::Authorizer`
//! (discovery, registration, `state`, `iss`, the code exchange), with a `UserAgent` that hands
//! the authorization URL to the person's browser and waits for the browser to come back to
//! `/oauth/upstream/callback`. What waits is kept here, in this replica's memory, under the
//! request's `state`: single-use, expiring after [`EXPIRY`], bound to the orca user who started
//! it and to that person's browser (the SHA-256 of a random value sent as an HttpOnly cookie),
//! at most [`MAX_PENDING`] at once. The new sign-in is sealed into the vault as that user's
//! (`per_user`) or as the shared one (`shared`, for an administrator). No token, code or
//! verifier leaves this module except into the vault.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;
use url::Url;

use super::ExternalServers;
use super::upstream::Upstream;
use crate::client::auth::{AuthError, Authorizer, AuthorizerConfig, Grant, UserAgent};
use crate::config::{ExternalTransport, SignInMode};

/// How long a started sign-in waits for the browser to come back.
pub(crate) const EXPIRY: Duration = Duration::from_secs(600);
/// Sign-ins waiting at once, per replica.
const MAX_PENDING: usize = 1000;
/// How long the way back waits for the code exchange.
const EXCHANGE_WAIT: Duration = Duration::from_secs(60);

/// Why a sign-in cannot start or finish; the messages name no token, code or verifier.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SignInError {
    #[error("no external server `{0}`")]
    Unknown(String),
    #[error("`{0}` does not sign in with OAuth")]
    NotOAuth(String),
    #[error("`{0}` signs in as orca itself (oauth.mode: service); there is nothing to sign in to")]
    Service(String),
    #[error(
        "only a caller holding every verb (read, create, update, delete) may sign in to `{0}`, whose sign-in every caller shares (oauth.mode: shared)"
    )]
    NotAdministrator(String),
    #[error("too many sign-ins are waiting; try again in a few minutes")]
    Busy,
    #[error("this sign-in is unknown, already used or expired; start again from the console")]
    Expired,
    #[error("this sign-in was started in another browser; start again from the console")]
    OtherBrowser,
    #[error("the sign-in failed: {0}")]
    Failed(String),
}

/// A started sign-in: where to send the person, and the value their browser keeps (as a
/// cookie) to finish it.
pub(crate) struct Started {
    pub(crate) authorization_url: String,
    pub(crate) browser_binding: String,
}

/// Each OAuth upstream as the console shows it to one caller.
#[derive(Debug, serde::Serialize)]
pub(crate) struct UpstreamSignIn {
    pub(crate) name: String,
    pub(crate) display_name: String,
    pub(crate) mode: &'static str,
    pub(crate) status: String,
    /// Whether the caller's own sign-in (`per_user`), the shared one (`shared`) or orca's
    /// (`service`) is stored.
    pub(crate) signed_in: bool,
    /// Whether this caller may sign in or out here.
    pub(crate) may_sign_in: bool,
}

/// The browser's way back, delivered to the waiting agent.
struct Delivery {
    redirected: Url,
    done: oneshot::Sender<Result<(), String>>,
}

struct Pending {
    upstream: usize,
    binding: [u8; 32],
    expires: Instant,
    deliver: oneshot::Sender<Delivery>,
}

/// The sign-ins waiting for their browser, by `state`.
#[derive(Default)]
pub(crate) struct SignIns {
    pending: Mutex<HashMap<String, Pending>>,
}

impl std::fmt::Debug for SignIns {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("SignIns").finish_non_exhaustive()
    }
}

impl SignIns {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the sign-in waiting under `state`, if it has not expired (it is gone either way).
    fn take(&self, state: &str) -> Option<Pending> {
        let mut pending = self.lock();
        let now = Instant::now();
        pending.retain(|_, waiting| waiting.expires > now);
        pending.remove(state)
    }
}

fn digest(value: &str) -> [u8; 32] {
    Sha256::digest(value.as_bytes()).into()
}

/// orca's side of the person's browser: the authorization URL goes out to the caller of
/// `POST .../sign-in`, and the way back comes in from the callback route.
struct ServerAgent {
    redirect_uri: String,
    sign_ins: Arc<SignIns>,
    upstream: usize,
    binding: [u8; 32],
    url_out: Slot<Result<String, String>>,
    done: Slot<Result<(), String>>,
}

/// A one-time answer, shared between the agent and the task that runs the sign-in.
type Slot<T> = Arc<Mutex<Option<oneshot::Sender<T>>>>;

impl UserAgent for ServerAgent {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<Url, AuthError>> {
        Box::pin(async move {
            let state = url
                .query_pairs()
                .find(|(name, _)| name == "state")
                .map(|(_, value)| value.into_owned())
                .ok_or_else(|| AuthError::Authorization("no state in the request".to_owned()))?;
            let (deliver, delivered) = oneshot::channel();
            {
                let mut pending = self.sign_ins.lock();
                if pending.len() >= MAX_PENDING {
                    return Err(AuthError::Authorization(SignInError::Busy.to_string()));
                }
                let expires = Instant::now() + EXPIRY;
                let waiting =
                    Pending { upstream: self.upstream, binding: self.binding, expires, deliver };
                pending.insert(state.clone(), waiting);
            }
            let sender = self.url_out.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(sender) = sender {
                let _ = sender.send(Ok(url.to_string()));
            }
            match tokio::time::timeout(EXPIRY, delivered).await {
                Ok(Ok(delivery)) => {
                    *self.done.lock().unwrap_or_else(|e| e.into_inner()) = Some(delivery.done);
                    Ok(delivery.redirected)
                }
                _ => {
                    self.sign_ins.lock().remove(&state);
                    Err(AuthError::Authorization(
                        "the browser did not come back in time".to_owned(),
                    ))
                }
            }
        })
    }
}

impl ExternalServers {
    fn oauth_upstream(&self, name: &str) -> Result<(&Arc<Upstream>, SignInMode), SignInError> {
        let upstream = self
            .upstreams
            .iter()
            .find(|upstream| upstream.config.key == name)
            .ok_or_else(|| SignInError::Unknown(name.to_owned()))?;
        let mode = upstream.sign_in_mode().ok_or_else(|| SignInError::NotOAuth(name.to_owned()))?;
        Ok((upstream, mode))
    }

    /// The vault row a caller signs in or out under: their own (`per_user`), or the shared one
    /// for a caller who may administer (`shared`).
    fn sign_in_subject(
        name: &str,
        mode: SignInMode,
        user: &str,
        administrator: bool,
    ) -> Result<String, SignInError> {
        match mode {
            SignInMode::Service => Err(SignInError::Service(name.to_owned())),
            SignInMode::Shared if !administrator => {
                Err(SignInError::NotAdministrator(name.to_owned()))
            }
            SignInMode::Shared => Ok(String::new()),
            SignInMode::PerUser => Ok(user.to_owned()),
        }
    }

    /// Every OAuth upstream, its mode and status, and whether `user` (or, for a shared or
    /// service upstream, orca) is signed in to it.
    pub(crate) async fn oauth_sign_ins(
        &self,
        user: &str,
        administrator: bool,
    ) -> Result<Vec<UpstreamSignIn>, SignInError> {
        let mut out = Vec::new();
        for upstream in &self.upstreams {
            let Some(mode) = upstream.sign_in_mode() else { continue };
            let subject = if mode == SignInMode::PerUser { user } else { "" };
            let signed_in = match &upstream.vault {
                Some(vault) => vault
                    .has_sign_in(&upstream.config.key, subject)
                    .await
                    .map_err(|error| SignInError::Failed(error.to_string()))?,
                None => false,
            };
            out.push(UpstreamSignIn {
                name: upstream.config.key.clone(),
                display_name: upstream.config.display_name.clone(),
                mode: mode.as_str(),
                status: upstream.status().describe(),
                signed_in,
                may_sign_in: match mode {
                    SignInMode::Service => false,
                    SignInMode::Shared => administrator,
                    SignInMode::PerUser => true,
                },
            });
        }
        Ok(out)
    }

    /// Start signing `user` in to `name`, the browser to come back to `redirect_uri`.
    pub(crate) async fn start_sign_in(
        &self,
        name: &str,
        user: &str,
        administrator: bool,
        redirect_uri: String,
    ) -> Result<Started, SignInError> {
        let (upstream, mode) = self.oauth_upstream(name)?;
        let subject = Self::sign_in_subject(name, mode, user, administrator)?;
        let ExternalTransport::Http { url, oauth: Some(oauth), .. } = &upstream.config.transport
        else {
            return Err(SignInError::NotOAuth(name.to_owned()));
        };
        let vault = upstream.vault.as_ref().ok_or_else(|| {
            SignInError::Failed("signing in needs orca's database, and there is none".to_owned())
        })?;
        let browser_binding = crate::client::auth::random_token();
        let (url_sender, url_receiver) = oneshot::channel();
        let url_out = Arc::new(Mutex::new(Some(url_sender)));
        let done = Arc::new(Mutex::new(None));
        let agent = ServerAgent {
            redirect_uri,
            sign_ins: self.sign_ins.clone(),
            upstream: upstream.index,
            binding: digest(&browser_binding),
            url_out: url_out.clone(),
            done: done.clone(),
        };
        let mut settings = AuthorizerConfig::new(url, Grant::AuthorizationCode(Arc::new(agent)));
        settings.store = Arc::new(vault.store(name, &subject));
        settings.identity = super::identity_of(oauth);
        let authorizer =
            Authorizer::new(settings).map_err(|error| SignInError::Failed(error.to_string()))?;
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let outcome = authorizer.sign_in_now().await.map_err(|error| error.to_string());
            match &outcome {
                Ok(()) => {
                    tracing::info!(server = %upstream.config.key, "signed in through orca's console");
                    upstream.sign_in_changed(&subject);
                }
                Err(error) => {
                    tracing::warn!(server = %upstream.config.key, %error, "a sign-in failed");
                }
            }
            let sender = url_out.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let (Some(sender), Err(error)) = (sender, &outcome) {
                let _ = sender.send(Err(error.clone()));
            }
            let done = done.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(done) = done {
                let _ = done.send(outcome);
            }
        });
        match tokio::time::timeout(Duration::from_secs(60), url_receiver).await {
            Ok(Ok(Ok(authorization_url))) => Ok(Started { authorization_url, browser_binding }),
            Ok(Ok(Err(error))) => Err(SignInError::Failed(error)),
            _ => Err(SignInError::Failed(
                "the authorization server did not answer in time".to_owned(),
            )),
        }
    }

    /// The browser came back to `redirected` (the callback URL with its query) under `state`,
    /// holding `binding`: hand it to the waiting sign-in and wait for the code exchange; the
    /// upstream's key when the sign-in is stored.
    pub(crate) async fn finish_sign_in(
        &self,
        redirected: Url,
        state: &str,
        binding: Option<&str>,
    ) -> Result<String, SignInError> {
        let pending = self.sign_ins.take(state).ok_or(SignInError::Expired)?;
        if binding.map(digest) != Some(pending.binding) {
            return Err(SignInError::OtherBrowser);
        }
        let name = self.upstreams[pending.upstream].config.key.clone();
        let (done, finished) = oneshot::channel();
        pending.deliver.send(Delivery { redirected, done }).map_err(|_| SignInError::Expired)?;
        match tokio::time::timeout(EXCHANGE_WAIT, finished).await {
            Ok(Ok(Ok(()))) => Ok(name),
            Ok(Ok(Err(error))) => Err(SignInError::Failed(error)),
            _ => Err(SignInError::Failed("the code exchange did not finish".to_owned())),
        }
    }

    /// Forget `user`'s sign-in to `name` (the shared one, for an administrator of a shared
    /// upstream); whether there was one.
    pub(crate) async fn sign_out(
        &self,
        name: &str,
        user: &str,
        administrator: bool,
    ) -> Result<bool, SignInError> {
        let (upstream, mode) = self.oauth_upstream(name)?;
        let subject = Self::sign_in_subject(name, mode, user, administrator)?;
        let Some(vault) = &upstream.vault else { return Ok(false) };
        let forgotten = vault
            .forget(name, &subject)
            .await
            .map_err(|error| SignInError::Failed(error.to_string()))?;
        upstream.sign_in_changed(&subject);
        Ok(forgotten)
    }
}

#[cfg(test)]
mod tests {
    use super::{Pending, SignIns, digest};
    use std::time::{Duration, Instant};

    fn waiting(expires: Instant) -> Pending {
        let (deliver, _) = tokio::sync::oneshot::channel();
        Pending { upstream: 0, binding: digest("cookie"), expires, deliver }
    }

    #[test]
    fn a_waiting_sign_in_is_taken_once_and_never_after_it_expires() {
        let sign_ins = SignIns::default();
        let later = Instant::now() + Duration::from_secs(60);
        sign_ins.lock().insert("fresh".to_owned(), waiting(later));
        sign_ins.lock().insert("stale".to_owned(), waiting(Instant::now()));
        assert!(sign_ins.take("stale").is_none(), "an expired sign-in is gone");
        let taken = sign_ins.take("fresh").expect("a waiting sign-in");
        assert_eq!(taken.binding, digest("cookie"));
        assert!(sign_ins.take("fresh").is_none(), "a sign-in is taken once");
        assert!(sign_ins.lock().is_empty());
    }
}
