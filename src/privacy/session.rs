//! The masked sessions of one target database: for each masking policy, a pool of connections
//! logged in as the policy's own role ([`super::setup`]), prepared on first use, and prepared
//! again when the catalog changes (checked at most every few seconds, in the background, while
//! calls go on with what was prepared: a relation or column created since is unreadable until
//! then, never readable unmasked).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use super::mask::MaskingPolicy;
use super::setup::{self, MaskRole, QualifiedRelation, SetupError};
use crate::sql::{PoolSize, quote_identifier};

/// How long a prepared session is used before the catalog is read again to see if it changed.
const RECHECK: Duration = Duration::from_secs(5);

/// How long a refusal (orca's role lacking privileges, a login refused) stands before the
/// setup is tried again, so that an administrator's fix takes effect without a restart.
const RETRY_REFUSED: Duration = Duration::from_secs(5);

/// Where a masked caller's statements run, and how its SQL finds the masked relations.
#[derive(Debug)]
pub(crate) struct MaskedSession {
    /// Connections logged in as the role, whose search path puts each masked schema first.
    pub(crate) pool: PgPool,
    pub(crate) role: MaskRole,
    /// Original schema -> the schema of its masked views.
    schemas: BTreeMap<String, String>,
    /// Relations the role cannot read, with why.
    hidden: BTreeMap<QualifiedRelation, String>,
    /// Every relation of the catalog it was prepared from (each read through its masked view,
    /// or hidden).
    known: BTreeSet<QualifiedRelation>,
    /// The search path its connections start with.
    search_path: String,
}

impl MaskedSession {
    /// `text` with every relation named with its schema read from the masked schema instead.
    ///
    /// # Errors
    ///
    /// The parser's, when `text` does not parse.
    pub(crate) fn redirect(&self, text: &str) -> Result<String, crate::sql::ParseError> {
        crate::sql::redirect_schemas(text, |schema| self.schemas.get(schema).cloned())
    }

    /// The masked relation of `schema.name`, quoted, for SQL orca writes itself.
    #[must_use]
    pub(crate) fn relation(&self, schema: &str, name: &str) -> String {
        let schema = self.schemas.get(schema).map_or(schema, String::as_str);
        format!("{}.{}", quote_identifier(schema), quote_identifier(name))
    }

    /// Whether the relation `schema.name` existed when the session was prepared, or is one of
    /// the schemas masking leaves alone (a relation created since is unreadable through it until
    /// it is prepared again).
    #[must_use]
    pub(crate) fn knows(&self, schema: &str, name: &str) -> bool {
        setup::is_system_schema(schema)
            || self.known.contains(&(schema.to_owned(), name.to_owned()))
    }

    /// Why the role cannot read the relation `name` (in any schema), when it is one left out.
    #[must_use]
    pub(crate) fn hidden_reason(&self, name: &str) -> Option<String> {
        self.hidden.iter().find(|((_, relation), _)| relation == name).map(
            |((schema, relation), why)| {
                format!("{schema}.{relation} is not readable under masking: {why}")
            },
        )
    }
}

/// The state of one policy's session.
enum State {
    Ready(Arc<MaskedSession>),
    Refused(SetupError),
}

struct Slot {
    state: State,
    /// When the catalog was last compared with what was prepared (or the refusal made).
    checked: Instant,
    /// Whether a background check is running.
    checking: bool,
    /// What the session was built from, to tell when it must be rebuilt.
    fingerprint: String,
}

/// The masked sessions of one target database, by role name.
#[derive(Clone)]
pub(crate) struct MaskedSessions {
    inner: Arc<Inner>,
}

struct Inner {
    /// orca's own pool on the database: what prepares the roles.
    owner: PgPool,
    size: PoolSize,
    slots: tokio::sync::Mutex<HashMap<String, Slot>>,
}

impl std::fmt::Debug for MaskedSessions {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MaskedSessions").finish_non_exhaustive()
    }
}

impl MaskedSessions {
    /// The sessions of the database `owner` reaches, each pool of `size`.
    #[must_use]
    pub(crate) fn new(owner: PgPool, size: PoolSize) -> MaskedSessions {
        MaskedSessions {
            inner: Arc::new(Inner { owner, size, slots: tokio::sync::Mutex::default() }),
        }
    }

    /// The session of `policy`, prepared when it is first asked for (or a refusal stands no
    /// longer); a prepared one is checked against the catalog in the background when its last
    /// check is a few seconds old.
    ///
    /// # Errors
    ///
    /// [`SetupError`]: the session cannot be prepared; the caller must not be served.
    pub(crate) async fn session(
        &self,
        policy: &MaskingPolicy,
    ) -> Result<Arc<MaskedSession>, SetupError> {
        let role = MaskRole::of(policy);
        let mut slots = self.inner.slots.lock().await;
        if let Some(slot) = slots.get_mut(&role.name) {
            match &slot.state {
                State::Ready(session) => {
                    let session = Arc::clone(session);
                    if slot.checked.elapsed() >= RECHECK && !slot.checking {
                        slot.checking = true;
                        self.check_later(policy.clone(), role.name.clone());
                    }
                    return Ok(session);
                }
                State::Refused(error)
                    if !error.is_transient() && slot.checked.elapsed() < RETRY_REFUSED =>
                {
                    return Err(error.clone());
                }
                State::Refused(_) => {}
            }
        }
        let previous = slots.get(&role.name).and_then(|slot| match &slot.state {
            State::Ready(session) => Some(Arc::clone(session)),
            State::Refused(_) => None,
        });
        let (state, fingerprint) = match self.prepare(policy, role.clone(), previous).await {
            Ok((session, fingerprint)) => (State::Ready(session), fingerprint),
            Err(error) => {
                tracing::error!(role = %role.name, %error, "a masked role cannot be served on this database");
                (State::Refused(error), String::new())
            }
        };
        let result = match &state {
            State::Ready(session) => Ok(Arc::clone(session)),
            State::Refused(error) => Err(error.clone()),
        };
        slots.insert(
            role.name,
            Slot { state, checked: Instant::now(), checking: false, fingerprint },
        );
        result
    }

    /// Have every session's next use compare the catalog with what was prepared (after DDL ran
    /// through orca, or a masked statement met a relation or column it does not know).
    pub(crate) async fn invalidate(&self) {
        let mut slots = self.inner.slots.lock().await;
        for slot in slots.values_mut() {
            slot.checked = Instant::now().checked_sub(RECHECK).unwrap_or_else(Instant::now);
        }
    }

    /// Prepare `policy`'s session again now, waiting for it: for a statement that met a relation
    /// or column created since the last preparation, before it is tried once more.
    ///
    /// # Errors
    ///
    /// As [`MaskedSessions::session`].
    pub(crate) async fn refresh(
        &self,
        policy: &MaskingPolicy,
    ) -> Result<Arc<MaskedSession>, SetupError> {
        let role = MaskRole::of(policy);
        self.inner.slots.lock().await.remove(&role.name);
        self.session(policy).await
    }

    fn check_later(&self, policy: MaskingPolicy, name: String) {
        let sessions = self.clone();
        tokio::spawn(async move {
            let role = MaskRole::of(&policy);
            let current = {
                let slots = sessions.inner.slots.lock().await;
                slots.get(&name).map(|slot| slot.fingerprint.clone())
            };
            let outcome = sessions.fingerprint(&policy, &role).await;
            let mut slots = sessions.inner.slots.lock().await;
            let Some(slot) = slots.get_mut(&name) else { return };
            slot.checking = false;
            match outcome {
                Ok(fingerprint) if Some(&fingerprint) == current.as_ref() => {
                    slot.checked = Instant::now();
                }
                Ok(_) => {
                    // The catalog changed: the next call prepares the session again (the one
                    // held meanwhile still reads only masked values).
                    slots.remove(&name);
                }
                Err(error) => {
                    tracing::warn!(role = %name, %error, "could not check the catalog for masking");
                    slot.checked = Instant::now();
                }
            }
        });
    }

    /// What a preparation of `policy` would build now.
    async fn fingerprint(
        &self,
        policy: &MaskingPolicy,
        role: &MaskRole,
    ) -> Result<String, SetupError> {
        let mut connection = self
            .inner
            .owner
            .acquire()
            .await
            .map_err(|error| SetupError::Database(error.to_string()))?;
        let catalog = setup::read_catalog(&mut connection).await.map_err(|error| {
            SetupError::Database(crate::sql::Error::from_query(error).to_string())
        })?;
        Ok(setup::plan(role, policy, &catalog).fingerprint)
    }

    async fn prepare(
        &self,
        policy: &MaskingPolicy,
        role: MaskRole,
        previous: Option<Arc<MaskedSession>>,
    ) -> Result<(Arc<MaskedSession>, String), SetupError> {
        let database = |error: sqlx::Error| {
            SetupError::Database(crate::sql::Error::from_query(error).to_string())
        };
        let mut connection = self.inner.owner.acquire().await.map_err(database)?;
        let catalog = setup::read_catalog(&mut connection).await.map_err(database)?;
        let plan = setup::plan(&role, policy, &catalog);
        let applied = setup::apply(&mut connection, &role, &plan).await?;
        setup::verify(&mut connection, &role, policy).await?;
        let path: Vec<String> =
            sqlx::query_scalar("SELECT unnest(pg_catalog.current_schemas(false))::text")
                .fetch_all(&mut *connection)
                .await
                .map_err(database)?;
        drop(connection);
        let search_path = path
            .iter()
            .flat_map(|schema| plan.schemas.get(schema).into_iter().chain([schema]))
            .map(|schema| quote_identifier(schema))
            .collect::<Vec<_>>()
            .join(", ");
        let pool = match previous {
            Some(session)
                if session.role.name == role.name && session.search_path == search_path =>
            {
                session.pool.clone()
            }
            _ => self.connect(&role, &search_path),
        };
        if let Err(error) = pool.acquire().await {
            let reason = error.as_database_error().map_or_else(
                || "the database is unreachable".to_owned(),
                |e| e.message().to_owned(),
            );
            return Err(SetupError::Login { role: role.name.clone(), reason });
        }
        if applied.built {
            tracing::info!(role = %role.name, hidden = applied.hidden.len(), "masking prepared");
        }
        let session = MaskedSession {
            pool,
            role,
            schemas: plan.schemas,
            hidden: applied.hidden,
            known: plan.relations,
            search_path,
        };
        Ok((Arc::new(session), plan.fingerprint))
    }

    fn connect(&self, role: &MaskRole, search_path: &str) -> PgPool {
        let options = (*self.inner.owner.connect_options())
            .clone()
            .username(&role.name)
            .password(role.password())
            .application_name("orca (masked)")
            .options([("search_path", search_path)]);
        let size = PoolSize { max: self.inner.size.max.max(1), min: 0 };
        crate::sql::pool_options(size, Duration::from_secs(5)).connect_lazy_with(options)
    }
}
