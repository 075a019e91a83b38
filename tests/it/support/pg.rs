//! The test PostgreSQL: one throwaway cluster per test run, started from the local server
//! binaries by the harness itself, with a fresh database per test.
//!
//! Under nextest every test is its own process, so the cluster is shared through a directory
//! keyed by the run (`NEXTEST_RUN_ID`) and a file lock; a detached reaper stops the server and
//! removes the directory once the test runner exits. `ORCA_TEST_DATABASE_URL` points the
//! harness at an existing server instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use orca::embedded::EmbeddedPostgres;
use sqlx::Connection;

/// How to reach the shared test server.
#[derive(Debug, Clone)]
struct Server {
    /// A URL to the maintenance database, for CREATE DATABASE.
    admin_url: String,
}

static SERVER: OnceLock<Server> = OnceLock::new();

fn server() -> &'static Server {
    SERVER.get_or_init(|| {
        if let Ok(url) = std::env::var("ORCA_TEST_DATABASE_URL")
            && !url.is_empty()
        {
            return Server { admin_url: url };
        }
        // The cluster is started on a runtime of its own: the test's runtime may be a
        // current-thread one that is busy awaiting this very call.
        std::thread::spawn(start_shared_cluster).join().expect("the test cluster thread panicked")
    })
}

fn start_shared_cluster() -> Server {
    let (key, watched_pid) = match std::env::var("NEXTEST_RUN_ID") {
        Ok(run) if !run.is_empty() => (run, std::os::unix::process::parent_id()),
        _ => (format!("pid-{}", std::process::id()), std::process::id()),
    };
    let dir = PathBuf::from(format!("/tmp/orca-test-{key}"));
    std::fs::create_dir_all(&dir).expect("cannot create the test cluster directory");
    let lock_path = std::env::temp_dir().join(format!("orca-test-{key}.lock"));
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .expect("cannot open the test cluster lock");
    lock.lock().expect("cannot lock the test cluster");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let cluster =
        runtime.block_on(EmbeddedPostgres::start(&dir.join("pg"), None)).unwrap_or_else(|error| {
            panic!("cannot start the test PostgreSQL: {error:#}");
        });
    let reaper_marker = dir.join("reaper-started");
    if !reaper_marker.exists() {
        spawn_reaper(&dir, &lock_path, watched_pid);
        std::fs::File::create(&reaper_marker).unwrap().write_all(b"1").unwrap();
    }
    let admin_url = cluster.url("postgres");
    // The reaper stops the server when the run ends; this process must not stop it on exit.
    std::mem::forget(cluster);
    drop(lock);
    Server { admin_url }
}

/// A detached process that waits for the test runner to exit, then stops the cluster and
/// removes its directory.
fn spawn_reaper(dir: &Path, lock_path: &Path, watched_pid: u32) {
    let bindir = runtime_block(orca::embedded::find_bindir(None)).expect("no PostgreSQL binaries");
    let data = dir.join("pg/data");
    let as_postgres = if is_root() { "runuser -u postgres -- " } else { "" };
    let script = format!(
        "while kill -0 {watched_pid} 2>/dev/null; do sleep 1; done; \
         {as_postgres}{pg_ctl} -D {data} -m immediate -w stop >/dev/null 2>&1; rm -rf {dir} {lock}",
        pg_ctl = bindir.join("pg_ctl").display(),
        data = data.display(),
        dir = dir.display(),
        lock = lock_path.display(),
    );
    Command::new("setsid")
        .args(["-f", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // `setsid -f` forks the reaper into its own session and returns at once.
        .status()
        .expect("cannot start the test cluster reaper");
}

fn runtime_block<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(future)
}

pub(crate) fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// A database of its own for one test.
#[derive(Debug, Clone)]
pub(crate) struct TestDatabase {
    pub(crate) url: String,
}

impl TestDatabase {
    /// Create a fresh, empty database on the shared test server.
    pub(crate) async fn create() -> TestDatabase {
        let admin_url = server().admin_url.clone();
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let mut admin =
            sqlx::PgConnection::connect(&admin_url).await.expect("cannot reach the test server");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .unwrap();
        admin.close().await.unwrap();
        TestDatabase { url: replace_database(&admin_url, &name) }
    }

    pub(crate) async fn connect(&self) -> sqlx::PgPool {
        sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .connect(&self.url)
            .await
            .expect("cannot reach the test database")
    }
}

/// The same URL with another database name.
pub(crate) fn replace_database(url: &str, database: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, format!("?{query}")),
        None => (url, String::new()),
    };
    let scheme_end = base.find("://").map_or(0, |index| index + 3);
    let path_start = base[scheme_end..].find('/').map_or(base.len(), |index| scheme_end + index);
    format!("{}/{database}{query}", &base[..path_start])
}

/// The URL of the test server's `postgres` database, as a superuser.
pub(crate) fn admin_url() -> String {
    server().admin_url.clone()
}

/// A private cluster for one test, so stopping it (an outage, a fault) disturbs no other test;
/// its directory is removed when it is dropped.
pub(crate) struct PrivateCluster {
    dir: PathBuf,
}

impl PrivateCluster {
    pub(crate) fn new() -> PrivateCluster {
        use std::os::unix::fs::PermissionsExt;
        let dir = PathBuf::from(format!("/tmp/orca-private-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        PrivateCluster { dir }
    }

    /// Start (or start again) the cluster, with an `orca` database.
    pub(crate) async fn start(&self) -> EmbeddedPostgres {
        let cluster = EmbeddedPostgres::start(&self.dir.join("pg"), None)
            .await
            .expect("cannot start a private cluster");
        cluster.ensure_database("orca").await.unwrap();
        cluster
    }
}

impl Drop for PrivateCluster {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
