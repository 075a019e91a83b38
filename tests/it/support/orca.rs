//! Running the real `orca` binary: over stdio through rmcp's child-process client, and as an
//! HTTP server whose bound address is read from its log.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::TokioChildProcess;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

/// The binary cargo built for this test run; the fixtures the tests spawn sit beside it.
pub(crate) const BINARY: &str = env!("CARGO_BIN_EXE_orca");

/// The orca binary the tests run: `ORCA_TEST_BINARY` when set (`./scripts/test` runs the
/// server suites against the binary `./scripts/demo` builds this way), else [`BINARY`]. A
/// relative path is taken from the directory the tests started in, since every orca process runs
/// in a home directory of its own; a path that names no file fails here, not as a spawn error.
pub(crate) fn orca_binary() -> &'static Path {
    static CHOSEN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    CHOSEN.get_or_init(|| match std::env::var_os("ORCA_TEST_BINARY") {
        Some(path) if !path.is_empty() => {
            let path = std::path::absolute(&path).expect("ORCA_TEST_BINARY names no usable path");
            assert!(path.is_file(), "ORCA_TEST_BINARY names no file: {}", path.display());
            path
        }
        _ => PathBuf::from(BINARY),
    })
}

/// The environment and files one orca process runs with.
#[derive(Debug)]
pub(crate) struct OrcaSetup {
    /// ORCA_HOME and working directory; removed when dropped.
    pub(crate) home: tempfile::TempDir,
    pub(crate) env: HashMap<String, String>,
}

impl OrcaSetup {
    /// orca with its state (and its SQL target) in `database_url`.
    pub(crate) fn new(database_url: &str) -> OrcaSetup {
        let home = tempfile::tempdir().expect("cannot create ORCA_HOME");
        let mut env = HashMap::new();
        env.insert("ORCA_HOME".to_owned(), home.path().display().to_string());
        env.insert("ORCA_DATABASE_URL".to_owned(), database_url.to_owned());
        env.insert("DATABASE_URL".to_owned(), database_url.to_owned());
        env.insert("ORCA_LOG".to_owned(), "orca=debug,warn".to_owned());
        // Tests of other features see every tool; `tool_search.rs` sets its own threshold.
        env.insert("ORCA_CATALOG_SEARCH_ABOVE".to_owned(), "100000".to_owned());
        OrcaSetup { home, env }
    }

    /// orca with no database URL: it runs its embedded cluster under its home directory, which
    /// is opened so that the `postgres` user can reach it when the tests run as root.
    pub(crate) fn embedded() -> OrcaSetup {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().expect("cannot create ORCA_HOME");
        std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut env = HashMap::new();
        env.insert("ORCA_HOME".to_owned(), home.path().display().to_string());
        env.insert("ORCA_LOG".to_owned(), "orca=debug,warn".to_owned());
        // Tests of other features see every tool; `tool_search.rs` sets its own threshold.
        env.insert("ORCA_CATALOG_SEARCH_ABOVE".to_owned(), "100000".to_owned());
        OrcaSetup { home, env }
    }

    /// Start the binary with `args` as an HTTP server and wait until it listens.
    pub(crate) fn http_command(&self, args: &[&str]) -> HttpServer {
        let mut command = self.command();
        command.args(args);
        HttpServer::start(command)
    }

    /// Set one environment variable of the process.
    pub(crate) fn with_env(mut self, key: &str, value: &str) -> OrcaSetup {
        self.env.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Point every model provider at the fake servers, with the keys they accept.
    pub(crate) fn with_fake_llm(mut self, fake: &super::fake_llm::FakeLlm) -> OrcaSetup {
        for (key, value) in fake.env() {
            self.env.insert(key, value);
        }
        self
    }

    /// Write `orca.yaml` into the home directory and point orca at it.
    pub(crate) fn with_config(mut self, yaml: &str) -> OrcaSetup {
        let path = self.home.path().join("orca.yaml");
        std::fs::write(&path, yaml).unwrap();
        self.env.insert("ORCA_CONFIG".to_owned(), path.display().to_string());
        self
    }

    /// Write `external-mcps.yaml` into the home directory and point orca at it.
    pub(crate) fn with_external(mut self, yaml: &str) -> OrcaSetup {
        let path = self.home.path().join("external-mcps.yaml");
        std::fs::write(&path, yaml).unwrap();
        self.env.insert("ORCA_EXTERNAL_MCPS".to_owned(), path.display().to_string());
        self
    }

    pub(crate) fn spill_file(&self) -> PathBuf {
        self.home.path().join("tracking-spill.jsonl")
    }

    /// A command for the binary with this setup's environment and nothing inherited that could
    /// change its behaviour.
    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(orca_binary());
        command.current_dir(self.home.path());
        for key in [
            "ORCA_CONFIG",
            "ORCA_HOME",
            "ORCA_DATABASE_URL",
            "DATABASE_URL",
            "ORCA_LOG",
            "RUST_LOG",
            "ORCA_EXTERNAL_MCPS",
            "ORCA_CONTEXT_FILE",
            "OPENAI_API_KEY",
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GEMINI_BASE_URL",
            "METABASE_URL",
            "METABASE_USERNAME",
            "METABASE_PASSWORD",
            "METABASE_API_KEY",
            "METABASE_MAX_ROWS",
            "WEAVIATE_URL",
            "WEAVIATE_API_KEY",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_SDK_DISABLED",
            "OTEL_SERVICE_NAME",
            "OTEL_RESOURCE_ATTRIBUTES",
            "OTEL_TRACES_SAMPLER",
            "ORCA_TRACE_URL",
        ] {
            command.env_remove(key);
        }
        command.envs(&self.env);
        command
    }

    pub(crate) fn tokio_command(&self) -> tokio::process::Command {
        tokio::process::Command::from(self.command())
    }

    /// Start `orca serve --stdio` and connect rmcp's client to it.
    pub(crate) async fn stdio_client(&self) -> RunningService<RoleClient, ()> {
        self.stdio_client_with(()).await
    }

    /// `stdio_client` with a client handler of the test's choosing.
    pub(crate) async fn stdio_client_with<H: rmcp::ClientHandler>(
        &self,
        handler: H,
    ) -> RunningService<RoleClient, H> {
        let mut command = self.tokio_command();
        command.args(["serve", "--stdio"]);
        let transport = TokioChildProcess::builder(command)
            .stderr(Stdio::inherit())
            .spawn()
            .expect("cannot start orca")
            .0;
        handler.serve(transport).await.expect("MCP handshake with orca over stdio failed")
    }

    /// Start `orca serve --http 127.0.0.1:0` (plus `extra` arguments) and wait until it listens.
    pub(crate) fn http_server(&self, extra: &[&str]) -> HttpServer {
        let mut command = self.command();
        command.args(["serve", "--http", "127.0.0.1:0"]).args(extra);
        HttpServer::start(command)
    }
}

/// A running `orca serve --http`, stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) base: String,
    pub(crate) log: Arc<Mutex<Vec<String>>>,
}

impl HttpServer {
    fn start(mut command: Command) -> HttpServer {
        command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = command.spawn().expect("cannot start orca");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (address_sender, address_receiver) = std::sync::mpsc::channel();
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("serving MCP on http://").nth(1) {
                    let address = rest.split("/mcp").next().unwrap_or_default().to_owned();
                    let _ = address_sender.send(address);
                }
                lines.lock().unwrap().push(line);
            }
        });
        match address_receiver.recv_timeout(Duration::from_secs(60)) {
            Ok(address) => HttpServer { child, base: format!("http://{address}"), log },
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "orca did not start serving HTTP; its log:\n{}",
                    log.lock().unwrap().join("\n")
                );
            }
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// An rmcp client for `/mcp`, with an optional bearer key.
    pub(crate) async fn client(&self, key: Option<&str>) -> RunningService<RoleClient, ()> {
        self.try_client(key).await.expect("MCP handshake with orca over HTTP failed")
    }

    pub(crate) async fn try_client(
        &self,
        key: Option<&str>,
    ) -> Result<RunningService<RoleClient, ()>, String> {
        self.try_client_with((), key).await
    }

    /// An rmcp client for `/mcp` with its own `handler`, and an optional bearer key.
    pub(crate) async fn client_with<H: rmcp::ClientHandler>(
        &self,
        handler: H,
        key: Option<&str>,
    ) -> RunningService<RoleClient, H> {
        self.try_client_with(handler, key).await.expect("MCP handshake with orca over HTTP failed")
    }

    async fn try_client_with<H: rmcp::ClientHandler>(
        &self,
        handler: H,
        key: Option<&str>,
    ) -> Result<RunningService<RoleClient, H>, String> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url("/mcp"));
        if let Some(key) = key {
            config = config.auth_header(key);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        handler.serve(transport).await.map_err(|error| error.to_string())
    }

    /// Stop with SIGTERM and wait for an orderly exit (tracking flushed).
    pub(crate) fn stop(mut self) -> std::process::ExitStatus {
        terminate(&mut self.child)
    }

    /// SIGKILL, as the OOM killer or a container stopped hard would: nothing runs after it.
    pub(crate) fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub(crate) fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            terminate(&mut self.child);
        }
    }
}

fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait().expect("cannot reap orca")
}

/// Run the binary to completion; returns (exit code, stdout, stderr).
pub(crate) fn run(setup: &OrcaSetup, args: &[&str]) -> (i32, String, String) {
    let output = setup.command().args(args).stdin(Stdio::null()).output().expect("cannot run orca");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Wait until `check` holds, polling; panics with `what` after `timeout`.
pub(crate) async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}
