//! A stdio server's process as orca keeps it: the leader of its own process group, whose whole
//! group is killed whenever it goes; the baseline of orca's environment it inherits; how its
//! exit is described; and its stderr, logged at debug level.
//!
//! # Design notes
//!
//! `child.rs`: a stdio server's process (`Child`, the leader of its own process group, killed whole
//! when it goes), the baseline environment it inherits, how its exit is described, its stderr
//! logged.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::frame::StreamStats;

/// A stdio server's process, leader of its own process group.
pub(super) struct Child {
    pub(super) child: tokio::process::Child,
    pub(super) pid: Option<i32>,
}

impl Child {
    pub(super) async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait().await
    }

    /// Close its stdin (done by the caller), give it a moment, then kill its whole group.
    pub(super) async fn stop(&mut self) {
        if tokio::time::timeout(Duration::from_secs(2), self.child.wait()).await.is_err() {
            let _ = self.child.start_kill();
            let _ = self.child.wait().await;
        }
        self.kill_group();
    }

    fn kill_group(&self) {
        if let Some(pid) = self.pid {
            // Whatever the child started in its group goes too; ESRCH means nothing is left.
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// Variables a child server gets from orca's environment: what programs need to run (find
/// executables, a home, a locale, temporary files, proxies and CA certificates), nothing else.
pub(super) fn inherited(name: &str) -> bool {
    const EXACT: [&str; 20] = [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TERM",
        "TZ",
        "TMPDIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "NODE_OPTIONS",
    ];
    EXACT.contains(&name) || name.starts_with("LC_") || name.starts_with("XDG_")
}

pub(super) fn describe_exit(
    status: std::io::Result<std::process::ExitStatus>,
    stats: &StreamStats,
) -> String {
    use std::os::unix::process::ExitStatusExt;
    let mut text = match status {
        Ok(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("the process exited with status {code}"),
            (None, Some(signal)) => format!("the process was killed by signal {signal}"),
            _ => "the process exited".to_owned(),
        },
        Err(error) => format!("the process could not be waited for: {error}"),
    };
    let not_json = stats.not_json.load(Ordering::Relaxed);
    if not_json > 0 {
        text.push_str(&format!(
            " after writing {not_json} line{} that {} not MCP (JSON-RPC) to stdout; stdout must carry MCP messages only, logs belong on stderr",
            if not_json == 1 { "" } else { "s" },
            if not_json == 1 { "is" } else { "are" }
        ));
    }
    text
}

pub(super) async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line: String = line.chars().take(2000).collect();
        tracing::debug!(server = %server, "stderr: {line}");
    }
}
