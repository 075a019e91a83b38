//! Replicas as one system on orca's state database alone: the directory of replicas, which one
//! holds what a client continues, the limits they share, and how they vouch for the requests
//! they forward to each other.
//!
//! Every replica has an id of its own (new at each start). With `cluster.advertise_url` (env
//! `ORCA_ADVERTISE_URL`) it is in `orca.replicas` with that address, seen every few seconds; a
//! replica not seen for [`GONE_AFTER`] is gone. What lives in one replica's memory while a
//! client continues it (a task, a `--stateful` session) is noted in `orca.replica_items` with
//! its replica, and a `requestState` names its replica in front (`<replica>~<sealed>`): a
//! request for it that reaches another replica is forwarded to its own, signed with a key of
//! the orca secret ([`Cluster::sign`], checked by [`Cluster::verify`]), or answered at once
//! when that replica is gone. The signature binds the client's address and the credential
//! presented, not the body: the replica it reaches authenticates the request again (its proof
//! of possession was checked and its call counted by the first). `limits.rs` holds the counters and the DPoP proofs replicas
//! share.

pub(crate) mod limits;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

/// How often a replica says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(3);
/// A replica not seen for this long is gone.
pub(crate) const GONE_AFTER: Duration = Duration::from_secs(12);
/// How long a forwarded request's signature holds.
const SIGNATURE_LIFETIME_SECONDS: i64 = 60;
/// The header a forwarding replica signs a request with.
pub(crate) const FORWARDED_HEADER: &str = "x-orca-forwarded";
/// The header that carries the client's address to the replica a request was forwarded to.
pub(crate) const CLIENT_HEADER: &str = "x-orca-client-address";

/// What a client continues that lives in one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Item {
    Task,
    Session,
}

impl Item {
    fn as_str(self) -> &'static str {
        match self {
            Item::Task => "task",
            Item::Session => "session",
        }
    }
}

/// Where something a client continues lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Owner {
    /// This replica (or nobody noted it: this replica answers, as it would alone).
    Here,
    /// Another replica, alive at `url`.
    Elsewhere { replica: String, url: String },
    /// Another replica, gone.
    Gone { replica: String },
}

/// What was noted of something a client continues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Noted {
    /// `Principal::identity` of the caller it is for.
    pub(crate) owner: String,
    /// The tool a task calls.
    pub(crate) tool: Option<String>,
}

/// This replica in the cluster.
#[derive(Clone)]
pub(crate) struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    /// Where the others reach this replica; `None`: one replica alone, nothing is forwarded.
    url: Option<String>,
    pool: PgPool,
    key: Vec<u8>,
    /// Other replicas' addresses, as last read (with when).
    known: Mutex<HashMap<String, (Option<String>, Instant)>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Cluster")
            .field("id", &self.inner.id)
            .field("url", &self.inner.url)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// This replica, with a fresh id; `secret` keys the signatures replicas vouch with.
    pub(crate) fn new(pool: PgPool, url: Option<String>, secret: &crate::sql::Secret) -> Cluster {
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let key = secret.mac(b"orca-cluster-forward-v1", &[]).to_vec();
        Cluster { inner: Arc::new(Inner { id, url, pool, key, known: Mutex::default() }) }
    }

    pub(crate) fn id(&self) -> &str {
        &self.inner.id
    }

    /// Whether other replicas may reach this one (and so whether anything is noted or
    /// forwarded).
    pub(crate) fn is_clustered(&self) -> bool {
        self.inner.url.is_some()
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.inner.pool
    }

    /// Join the directory and say this replica is alive every few seconds, with what `status`
    /// gives (the context files it serves, for `orca doctor`), until the task is aborted;
    /// [`Cluster::leave`] takes it out at an orderly shutdown.
    pub(crate) fn join(
        &self,
        status: impl Fn() -> serde_json::Value + Send + 'static,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let url = self.inner.url.clone()?;
        let cluster = self.clone();
        Some(tokio::spawn(async move {
            for beat in 0_u64.. {
                if beat % 20 == 0 {
                    limits::sweep(cluster.pool()).await;
                }
                let seen = sqlx::query(
                    "INSERT INTO orca.replicas (id, url, status) VALUES ($1, $2, $3) \
                     ON CONFLICT (id) DO UPDATE SET seen_at = now(), url = EXCLUDED.url, status = EXCLUDED.status",
                )
                .bind(cluster.id())
                .bind(&url)
                .bind(status())
                .execute(cluster.pool())
                .await;
                if let Err(error) = seen {
                    tracing::debug!(%error, "this replica could not say it is alive");
                }
                // Items of replicas gone long ago go with them.
                let _ = sqlx::query(
                    "DELETE FROM orca.replica_items i WHERE i.created_at < now() - interval '1 day' \
                     OR NOT EXISTS (SELECT 1 FROM orca.replicas r WHERE r.id = i.replica AND r.seen_at > now() - interval '1 hour')",
                )
                .execute(cluster.pool())
                .await;
                tokio::time::sleep(HEARTBEAT).await;
            }
        }))
    }

    /// Leave the directory (an orderly shutdown): the others know at once that this replica is
    /// gone.
    pub(crate) async fn leave(&self) {
        if self.is_clustered() {
            let _ = sqlx::query("DELETE FROM orca.replicas WHERE id = $1")
                .bind(self.id())
                .execute(self.pool())
                .await;
        }
    }

    /// Note that `key` (a task id, a session id) of `owner` (`Principal::identity`), calling
    /// `tool`, lives here, before the client learns it.
    pub(crate) async fn note(&self, item: Item, key: &str, owner: &str, tool: Option<&str>) {
        if !self.is_clustered() {
            return;
        }
        let noted = sqlx::query(
            "INSERT INTO orca.replica_items (kind, key, replica, owner, tool) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (kind, key) DO UPDATE SET replica = EXCLUDED.replica, owner = EXCLUDED.owner, tool = EXCLUDED.tool",
        )
        .bind(item.as_str())
        .bind(key)
        .bind(self.id())
        .bind(owner)
        .bind(tool)
        .execute(self.pool())
        .await;
        if let Err(error) = noted {
            tracing::warn!(%error, item = item.as_str(), "where this lives could not be noted; only this replica can continue it");
        }
    }

    /// Where `key` lives (`Here` when nobody noted it), and what was noted of it.
    pub(crate) async fn owner_of(&self, item: Item, key: &str) -> (Owner, Option<Noted>) {
        if !self.is_clustered() {
            return (Owner::Here, None);
        }
        let noted: Option<(String, String, Option<String>)> = sqlx::query_as(
            "SELECT replica, owner, tool FROM orca.replica_items WHERE kind = $1 AND key = $2",
        )
        .bind(item.as_str())
        .bind(key)
        .fetch_optional(self.pool())
        .await
        .ok()
        .flatten();
        match noted {
            None => (Owner::Here, None),
            Some((replica, owner, tool)) => {
                (self.replica(&replica).await, Some(Noted { owner, tool }))
            }
        }
    }

    /// Mark `key` lost with its replica: `true` for the one request that marks it first (which
    /// records the call lost).
    pub(crate) async fn mark_lost(&self, item: Item, key: &str) -> bool {
        sqlx::query(
            "UPDATE orca.replica_items SET lost = true WHERE kind = $1 AND key = $2 AND NOT lost",
        )
        .bind(item.as_str())
        .bind(key)
        .execute(self.pool())
        .await
        .is_ok_and(|done| done.rows_affected() == 1)
    }

    /// Where the replica `id` is.
    pub(crate) async fn replica(&self, id: &str) -> Owner {
        if id == self.id() || !self.is_clustered() {
            return Owner::Here;
        }
        let cached = {
            let known = self.inner.known.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            known.get(id).filter(|(_, at)| at.elapsed() < HEARTBEAT).map(|(url, _)| url.clone())
        };
        let url = match cached {
            Some(url) => url,
            None => {
                let url: Option<String> = sqlx::query_scalar(
                    "SELECT url FROM orca.replicas WHERE id = $1 AND seen_at > now() - make_interval(secs => $2)",
                )
                .bind(id)
                .bind(GONE_AFTER.as_secs_f64())
                .fetch_optional(self.pool())
                .await
                .ok()
                .flatten();
                self.inner
                    .known
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(id.to_owned(), (url.clone(), Instant::now()));
                url
            }
        };
        match url {
            Some(url) => Owner::Elsewhere { replica: id.to_owned(), url },
            None => Owner::Gone { replica: id.to_owned() },
        }
    }

    /// A forward to `id` could not reach it: it is taken as gone until the directory says
    /// it is alive again (its next heartbeat, read after [`HEARTBEAT`]).
    pub(crate) fn unreachable(&self, id: &str) {
        self.inner
            .known
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(id.to_owned(), (None, Instant::now()));
    }

    /// The signature this replica forwards a request with: its id, the time, and a MAC over
    /// them, the method, the path, the client's address and the credential the request
    /// presents (its `Authorization` and `DPoP` headers).
    pub(crate) fn sign(&self, method: &str, path: &str, client: &str, credential: &[u8]) -> String {
        let at = chrono::Utc::now().timestamp();
        let mac = self.mac(self.id(), at, method, path, client, credential);
        format!("{}:{at}:{mac}", self.id())
    }

    /// The replica that signed `header` for this request, when the signature holds.
    pub(crate) fn verify(
        &self,
        header: &str,
        method: &str,
        path: &str,
        client: &str,
        credential: &[u8],
    ) -> Option<String> {
        let mut parts = header.splitn(3, ':');
        let (from, at, mac) = (parts.next()?, parts.next()?.parse::<i64>().ok()?, parts.next()?);
        let age = chrono::Utc::now().timestamp() - at;
        if !(-SIGNATURE_LIFETIME_SECONDS..=SIGNATURE_LIFETIME_SECONDS).contains(&age) {
            return None;
        }
        let expected = self.mac(from, at, method, path, client, credential);
        let (expected, given) = (expected.as_bytes(), mac.as_bytes());
        let same = expected.len() == given.len()
            && expected.iter().zip(given).fold(0_u8, |acc, (x, y)| acc | (x ^ y)) == 0;
        same.then(|| from.to_owned())
    }

    fn mac(
        &self,
        from: &str,
        at: i64,
        method: &str,
        path: &str,
        client: &str,
        credential: &[u8],
    ) -> String {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.inner.key)
            .expect("HMAC takes keys of any length");
        for part in [
            from.as_bytes(),
            at.to_string().as_bytes(),
            method.as_bytes(),
            path.as_bytes(),
            client.as_bytes(),
        ] {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.update(&Sha256::digest(credential));
        hex::encode(mac.finalize().into_bytes())
    }
}

/// What `orca doctor` says of the replicas alive on this database: how many, and whether they
/// serve the same context files.
///
/// # Errors
///
/// When they serve different versions (each version with its replicas), or the directory
/// cannot be read.
pub(crate) async fn describe(pool: &PgPool) -> Result<String, String> {
    let alive: Vec<(String, String, Option<serde_json::Value>)> = sqlx::query_as(
        "SELECT id, url, status FROM orca.replicas WHERE seen_at > now() - make_interval(secs => $1) ORDER BY url",
    )
    .bind(GONE_AFTER.as_secs_f64())
    .fetch_all(pool)
    .await
    .map_err(|error| crate::sql::Error::from_query(error).to_string())?;
    if alive.is_empty() {
        return Ok("none with cluster.advertise_url is running".to_owned());
    }
    let mut versions: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (_, url, status) in &alive {
        let version = status
            .as_ref()
            .and_then(|status| status["context_version"].as_str())
            .unwrap_or("unknown")
            .to_owned();
        versions.entry(version).or_default().push(url.clone());
    }
    if versions.len() == 1 {
        let version = versions.keys().next().cloned().unwrap_or_default();
        return Ok(format!("{} alive, serving context version {version}", alive.len()));
    }
    let split: Vec<String> = versions
        .iter()
        .map(|(version, urls)| format!("{version} at {}", urls.join(", ")))
        .collect();
    Err(format!(
        "{} alive, serving different context files: {}; give every replica the same files",
        alive.len(),
        split.join("; ")
    ))
}

/// A `requestState` this replica hands out: its id in front of what was sealed.
pub(crate) fn tag_state(replica: &str, sealed: &str) -> String {
    format!("{replica}~{sealed}")
}

/// The replica a `requestState` names, and what was sealed.
pub(crate) fn untag_state(state: &str) -> Option<(&str, &str)> {
    state.split_once('~').filter(|(replica, _)| {
        !replica.is_empty() && replica.bytes().all(|byte| byte.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(secret: &str) -> Cluster {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@127.0.0.1:1/none")
            .unwrap();
        let secret = crate::sql::Secret::from_text(secret);
        Cluster::new(pool, Some("http://127.0.0.1:1".to_owned()), &secret)
    }

    #[tokio::test]
    async fn a_forwarded_request_is_vouched_for_only_by_a_replica_of_the_same_secret() {
        let (one, two, stranger) = (cluster("s"), cluster("s"), cluster("t"));
        let signed = one.sign("POST", "/mcp", "10.0.0.7", b"{}");
        assert_eq!(
            two.verify(&signed, "POST", "/mcp", "10.0.0.7", b"{}"),
            Some(one.id().to_owned())
        );
        for (method, path, client, body) in [
            ("GET", "/mcp", "10.0.0.7", &b"{}"[..]),
            ("POST", "/other", "10.0.0.7", b"{}"),
            ("POST", "/mcp", "10.0.0.8", b"{}"),
            ("POST", "/mcp", "10.0.0.7", b"{ }"),
        ] {
            assert_eq!(
                two.verify(&signed, method, path, client, body),
                None,
                "{method} {path} {client}"
            );
        }
        assert_eq!(stranger.verify(&signed, "POST", "/mcp", "10.0.0.7", b"{}"), None);
        let old = format!("{}:{}:{}", one.id(), chrono::Utc::now().timestamp() - 120, "00");
        assert_eq!(two.verify(&old, "POST", "/mcp", "10.0.0.7", b"{}"), None);
    }

    #[test]
    fn a_request_state_names_its_replica_in_front() {
        let tagged = tag_state("0a1b2c3d4e5f", "rs2.abc.def");
        assert_eq!(untag_state(&tagged), Some(("0a1b2c3d4e5f", "rs2.abc.def")));
        assert_eq!(untag_state("rs2.abc.def"), None);
        assert_eq!(untag_state("not hex~x"), None);
    }
}
