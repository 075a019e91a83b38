//! The embedded PostgreSQL: a private cluster under `ORCA_HOME/pg`, started from the local
//! server binaries when no database URL is configured, reused across runs and by every orca
//! process of the same home, and stopped on exit by the last of them.
//!
//! As root, PostgreSQL refuses to run, so every server command runs as the `postgres` user
//! through `runuser`, and the cluster directory is owned by that user.
//!
//! # Design notes
//!
//! The private PostgreSQL cluster under `ORCA_HOME/pg`: finds the server binaries, runs
//! `initdb`/`pg_ctl` (through `runuser -u postgres` as root), chooses and remembers a port, and
//! loads the bundled Chinook database once (under a temporary name, renamed when complete). Several
//! orca processes may share one cluster: a file lock next to it (`<root>.lock`) serializes
//! `initdb`, the server's start and the decision to stop it; each process holds a shared lock on
//! `<root>.users` while it uses the cluster, and on exit (or when dropped on an error path) stops
//! the server only if it can take that lock exclusively, that is, if it is the last user; and a
//! PostgreSQL advisory lock (`lock_setup`) serializes creating its databases and loading Chinook.
//!
//! The integration-test harness starts its throwaway cluster with the same code.

use std::io::Write;
use std::net::TcpListener;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use rand::Rng;
use tokio::process::Command;

/// The Chinook sample database (schema and data), loaded by `orca demo`.
const CHINOOK_SQL: &str = include_str!("../../data/chinook/chinook_postgres.sql");

/// The apt package that provides the server binaries, named in the error when none are found.
const INSTALL_HINT: &str = "install the PostgreSQL server binaries (Debian/Ubuntu: `apt-get install -y postgresql`), \
or point ORCA_DATABASE_URL and DATABASE_URL at an existing server";

/// A running private cluster. Stopping it is explicit ([`EmbeddedPostgres::stop`]); dropping one
/// stops it too, so no server is left behind on an error path. Either way the server stops only
/// when no other orca process uses it: each holds a shared lock on `<root>.users` while it does.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    root: PathBuf,
    bindir: PathBuf,
    port: u16,
    password: String,
    as_postgres_user: bool,
    /// The shared lock on `<root>.users` this process holds while it uses the cluster; `None`
    /// once it has let go.
    users: Option<std::fs::File>,
    /// `<root>.lock`, held while the server is started, joined or stopped.
    start_lock: PathBuf,
}

/// Open (creating it) a file that serves as a lock.
fn lock_file(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open the lock {}", path.display()))
}

impl EmbeddedPostgres {
    /// Start (or reuse) the cluster whose files live in `root`.
    ///
    /// # Errors
    ///
    /// When no server binaries are found (the message names the package to install), when
    /// `root` cannot be used by the `postgres` user, or when the server does not start (the
    /// message carries the end of the server log).
    pub async fn start(root: &Path, bindir: Option<&Path>) -> anyhow::Result<EmbeddedPostgres> {
        let bindir = find_bindir(bindir).await?;
        let as_postgres_user = crate::config::running_as_root();
        std::fs::create_dir_all(root)
            .with_context(|| format!("cannot create {}", root.display()))?;
        // Two orca processes starting at once must not both run initdb or pg_ctl start, nor
        // may one join the server while another stops it.
        let start_lock = root.with_extension("lock");
        let users_lock = root.with_extension("users");
        let lock = lock_file(&start_lock)?;
        lock.lock().with_context(|| format!("cannot lock {}", root.display()))?;
        let root =
            root.canonicalize().with_context(|| format!("cannot resolve {}", root.display()))?;
        if as_postgres_user {
            prepare_root_for_postgres_user(&root).await?;
        } else {
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("cannot restrict {}", root.display()))?;
        }
        let mut cluster = EmbeddedPostgres {
            root,
            bindir,
            port: 0,
            password: String::new(),
            as_postgres_user,
            users: None,
            start_lock,
        };
        cluster.init_if_needed().await?;
        cluster.password = std::fs::read_to_string(cluster.password_file())
            .with_context(|| {
                format!(
                    "the cluster in {} has no password file; remove that directory to start afresh",
                    cluster.root.display()
                )
            })?
            .trim()
            .to_owned();
        if cluster.is_running().await {
            cluster.port =
                cluster.saved_port().context("the running embedded cluster has no port file")?;
            tracing::info!(
                port = cluster.port,
                "reusing the embedded PostgreSQL that is already running"
            );
        } else {
            cluster.port = cluster.choose_port().await?;
            cluster.start_server().await?;
        }
        // From here on the server is stopped, on error or on exit, only if no one else uses it
        // (which `leave` decides under the start lock, so it is let go of first).
        let users = lock_file(&users_lock)?;
        users.lock_shared().with_context(|| format!("cannot lock {}", users_lock.display()))?;
        cluster.users = Some(users);
        drop(lock);
        cluster.wait_until_ready().await?;
        Ok(cluster)
    }

    /// The URL of one database of this cluster.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres:{}@127.0.0.1:{}/{database}", self.password, self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Create `name` unless it exists.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached or refuses the statement.
    pub async fn ensure_database(&self, name: &str) -> anyhow::Result<()> {
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect(&self.url("postgres"))
            .await
            .context("cannot connect to the embedded PostgreSQL")?;
        lock_setup(&mut connection).await?;
        if !database_exists(&mut connection, name).await? {
            let statement = format!("CREATE DATABASE {}", quote_identifier(name));
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement))
                .execute(&mut connection)
                .await
                .with_context(|| format!("cannot create database {name}"))?;
        }
        connection.close().await?;
        Ok(())
    }

    /// Load the Chinook sample database into `name`, once: it is loaded under a temporary name
    /// and renamed when complete, so a crash half-way leaves no half-loaded database behind.
    /// Returns whether it was loaded now.
    ///
    /// # Errors
    ///
    /// When the server cannot be reached or the load fails.
    pub async fn ensure_chinook(&self, name: &str) -> anyhow::Result<bool> {
        load_chinook(self, name).await
    }

    /// Stop the server if this process started it.
    ///
    /// # Errors
    ///
    /// When `pg_ctl stop` fails.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let Some(_last) = self.leave()? else {
            return Ok(());
        };
        let output = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "-t", "60", "stop"])
            .output()
            .await
            .context("cannot run pg_ctl stop")?;
        if !output.status.success() {
            bail!("pg_ctl stop failed: {}", String::from_utf8_lossy(&output.stderr).trim());
        }
        tracing::info!("embedded PostgreSQL stopped");
        Ok(())
    }

    /// Let go of the cluster. When this process was its last user, returns the locks to hold
    /// while the server is stopped (no orca can start or join it meanwhile); `None` when another
    /// process still uses it, or this one already let go.
    fn leave(&mut self) -> anyhow::Result<Option<(std::fs::File, std::fs::File)>> {
        let Some(users) = self.users.take() else { return Ok(None) };
        let lock = lock_file(&self.start_lock)?;
        lock.lock().with_context(|| format!("cannot lock {}", self.start_lock.display()))?;
        match users.try_lock() {
            Ok(()) => Ok(Some((users, lock))),
            Err(std::fs::TryLockError::WouldBlock) => {
                tracing::info!("the embedded PostgreSQL stays up: another orca process uses it");
                Ok(None)
            }
            Err(std::fs::TryLockError::Error(error)) => {
                Err(error).context("cannot tell whether another orca uses the embedded PostgreSQL")
            }
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    fn password_file(&self) -> PathBuf {
        self.root.join("password")
    }

    fn port_file(&self) -> PathBuf {
        self.root.join("port")
    }

    fn log_file(&self) -> PathBuf {
        self.root.join("server.log")
    }

    fn socket_dir(&self) -> PathBuf {
        self.root.join("run")
    }

    fn pg_command(&self, program: &str) -> Command {
        let binary = self.bindir.join(program);
        let mut command = if self.as_postgres_user {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(binary);
            command
        } else {
            Command::new(binary)
        };
        command.stdin(Stdio::null()).kill_on_drop(false);
        command
    }

    async fn init_if_needed(&self) -> anyhow::Result<()> {
        if self.data_dir().join("PG_VERSION").is_file() {
            return Ok(());
        }
        let password: String =
            rand::rng().sample_iter(rand::distr::Alphanumeric).take(32).map(char::from).collect();
        // initdb reads the superuser password from a file that the server user can read; it is
        // removed right after. orca keeps its own copy, readable by orca's user only.
        let password_input = self.root.join("initdb-password");
        write_private(&password_input, &password)?;
        if self.as_postgres_user {
            chown_to_postgres(&password_input).await?;
        }
        std::fs::create_dir_all(self.socket_dir())?;
        if self.as_postgres_user {
            chown_to_postgres(&self.socket_dir()).await?;
        }
        let output = self
            .pg_command("initdb")
            .arg("-D")
            .arg(self.data_dir())
            .args(["-U", "postgres", "--auth=scram-sha-256", "-E", "UTF8", "--locale=C"])
            .arg(format!("--pwfile={}", password_input.display()))
            .output()
            .await
            .context("cannot run initdb")?;
        let _ = std::fs::remove_file(&password_input);
        if !output.status.success() {
            bail!(
                "initdb failed in {}: {}",
                self.data_dir().display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        write_private(&self.password_file(), &password)?;
        tracing::info!(dir = %self.data_dir().display(), "created the embedded PostgreSQL cluster");
        Ok(())
    }

    async fn is_running(&self) -> bool {
        self.pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("status")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await
            .is_ok_and(|status| status.success())
    }

    fn saved_port(&self) -> Option<u16> {
        std::fs::read_to_string(self.port_file()).ok()?.trim().parse().ok()
    }

    /// The port used last time if it is free, so URLs printed earlier stay valid; otherwise a
    /// free one picked by the kernel.
    /// A port that was just released (a server stopped a moment ago) can stay busy briefly, so
    /// the saved one is retried for up to two seconds before another is chosen.
    async fn choose_port(&self) -> anyhow::Result<u16> {
        if let Some(port) = self.saved_port() {
            for _ in 0..20 {
                if TcpListener::bind(("127.0.0.1", port)).is_ok() {
                    return Ok(port);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tracing::warn!(port, "the embedded PostgreSQL's usual port is taken; choosing another");
        }
        let port = TcpListener::bind(("127.0.0.1", 0))?.local_addr()?.port();
        std::fs::write(self.port_file(), port.to_string())?;
        Ok(port)
    }

    async fn start_server(&self) -> anyhow::Result<()> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.socket_dir().display()
        );
        let output = self
            .pg_command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .arg("-l")
            .arg(self.log_file())
            .args(["-w", "-t", "60", "-o", &options, "start"])
            .stdout(Stdio::null())
            .output()
            .await
            .context("cannot run pg_ctl start")?;
        if !output.status.success() {
            bail!(
                "the embedded PostgreSQL did not start: {}\nlast lines of {}:\n{}",
                String::from_utf8_lossy(&output.stderr).trim(),
                self.log_file().display(),
                tail(&self.log_file(), 10)
            );
        }
        tracing::info!(port = self.port, "embedded PostgreSQL started");
        Ok(())
    }

    async fn wait_until_ready(&self) -> anyhow::Result<()> {
        use sqlx::Connection;
        let url = self.url("postgres");
        let mut last_error = None;
        for _ in 0..100 {
            match sqlx::PgConnection::connect(&url).await {
                Ok(connection) => {
                    let _ = connection.close().await;
                    return Ok(());
                }
                Err(error) => last_error = Some(error),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "the embedded PostgreSQL on port {} does not accept connections: {}",
            self.port,
            last_error.map(|error| error.to_string()).unwrap_or_default()
        )
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        let Ok(Some(_last)) = self.leave() else {
            return;
        };
        let binary = self.bindir.join("pg_ctl");
        let mut command = if self.as_postgres_user {
            let mut command = std::process::Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(binary);
            command
        } else {
            std::process::Command::new(binary)
        };
        let _ = command
            .arg("-D")
            .arg(self.data_dir())
            .args(["-m", "fast", "-w", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// Load Chinook into database `name` of `cluster`, once.
async fn load_chinook(cluster: &EmbeddedPostgres, name: &str) -> anyhow::Result<bool> {
    use sqlx::Connection;
    let mut admin = sqlx::PgConnection::connect(&cluster.url("postgres"))
        .await
        .context("cannot connect to load the sample database")?;
    lock_setup(&mut admin).await?;
    if database_exists(&mut admin, name).await? {
        return Ok(false);
    }
    let staging = format!("{name}_loading");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {}",
        quote_identifier(&staging)
    )))
    .execute(&mut admin)
    .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {}", quote_identifier(&staging))))
        .execute(&mut admin)
        .await?;
    {
        let mut target = sqlx::PgConnection::connect(&cluster.url(&staging)).await?;
        sqlx::raw_sql(chinook_body())
            .execute(&mut target)
            .await
            .context("loading the Chinook sample database failed")?;
        // Statistics now, not whenever autovacuum first comes by: without them the planner
        // guesses the row counts of the freshly loaded tables, and the first queries of a demo
        // (a masked role's views above all) get plans that read and sort every row.
        sqlx::raw_sql("ANALYZE")
            .execute(&mut target)
            .await
            .context("analyzing the Chinook sample database failed")?;
        target.close().await?;
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE {} RENAME TO {}",
        quote_identifier(&staging),
        quote_identifier(name)
    )))
    .execute(&mut admin)
    .await?;
    admin.close().await?;
    tracing::info!(database = name, "loaded the Chinook sample database");
    Ok(true)
}

/// The advisory lock that orca processes sharing one embedded cluster hold while they create its
/// databases, so that two first starts at once (two MCP clients launching orca together) do not
/// both create, or both load, the same database. The file lock of [`EmbeddedPostgres::start`]
/// covers starting the server only. It is a session lock: it goes with the connection.
const SETUP_LOCK: i64 = 0x6f72_6361_7365_7475;

async fn lock_setup(connection: &mut sqlx::PgConnection) -> anyhow::Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(SETUP_LOCK)
        .execute(connection)
        .await
        .context("cannot take the embedded cluster's setup lock")?;
    Ok(())
}

async fn database_exists(
    connection: &mut sqlx::PgConnection,
    name: &str,
) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(connection)
        .await
}

/// The Chinook script without its leading `DROP DATABASE` / `CREATE DATABASE` / `\c` lines,
/// which only psql understands.
fn chinook_body() -> &'static str {
    let marker = "\\c chinook;";
    match CHINOOK_SQL.find(marker) {
        Some(index) => &CHINOOK_SQL[index + marker.len()..],
        None => CHINOOK_SQL,
    }
}

/// Quote an identifier for PostgreSQL: double quotes, with inner quotes doubled.
pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Find the directory holding `initdb`, `pg_ctl` and `postgres`: `explicit` when given
/// (`ORCA_PG_BINDIR`), else on PATH, through `pg_config --bindir`, or the newest
/// `/usr/lib/postgresql/*/bin`.
///
/// # Errors
///
/// When none is found; the message names the package to install.
pub async fn find_bindir(explicit: Option<&Path>) -> anyhow::Result<PathBuf> {
    let complete = |dir: &Path| {
        ["initdb", "pg_ctl", "postgres"].iter().all(|program| dir.join(program).is_file())
    };
    if let Some(dir) = explicit {
        if complete(dir) {
            return Ok(dir.to_path_buf());
        }
        bail!(
            "ORCA_PG_BINDIR ({}) does not hold initdb, pg_ctl and postgres: {INSTALL_HINT}",
            dir.display()
        );
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if complete(&dir) {
                return Ok(dir);
            }
        }
    }
    if let Ok(output) =
        Command::new("pg_config").arg("--bindir").stdin(Stdio::null()).output().await
        && output.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
        if complete(&dir) {
            return Ok(dir);
        }
    }
    let mut candidates: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let dir = entry.path().join("bin");
            complete(&dir).then_some((version, dir))
        })
        .collect();
    candidates.sort();
    match candidates.pop() {
        Some((_, dir)) => Ok(dir),
        None => bail!(
            "no PostgreSQL server binaries found (looked on PATH, in `pg_config --bindir` and under /usr/lib/postgresql/*/bin): {INSTALL_HINT}"
        ),
    }
}

async fn prepare_root_for_postgres_user(root: &Path) -> anyhow::Result<()> {
    let known = Command::new("id")
        .args(["-u", "postgres"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
    if !known.is_ok_and(|status| status.success()) {
        bail!(
            "orca runs as root, so PostgreSQL must run as the `postgres` user, which does not exist: {INSTALL_HINT}"
        );
    }
    chown_to_postgres(root).await?;
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o700))?;
    let reachable = Command::new("runuser")
        .args(["-u", "postgres", "--", "test", "-w"])
        .arg(root)
        .stdin(Stdio::null())
        .status()
        .await
        .is_ok_and(|status| status.success());
    if !reachable {
        bail!(
            "the `postgres` user cannot reach {} (a parent directory is not traversable, as root's home is); \
             set ORCA_HOME to a directory it can reach, such as /var/lib/orca",
            root.display()
        );
    }
    Ok(())
}

async fn chown_to_postgres(path: &Path) -> anyhow::Result<()> {
    let status = Command::new("chown")
        .args(["postgres:postgres"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .await?;
    if !status.success() {
        bail!("cannot give {} to the postgres user", path.display());
    }
    Ok(())
}

fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
