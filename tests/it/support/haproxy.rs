//! HAProxy (Debian's `haproxy`) in front of orca's replicas, round robin, as a team runs them
//! behind a load balancer: every request may reach another replica. A replica that stops
//! answering its health check is taken out within a second; a request it could not take is
//! sent to another.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running HAProxy, stopped when dropped.
#[derive(Debug)]
pub(crate) struct Balancer {
    child: Child,
    pub(crate) port: u16,
    _config: tempfile::TempDir,
}

fn binary() -> &'static str {
    if std::path::Path::new("/usr/sbin/haproxy").exists() { "/usr/sbin/haproxy" } else { "haproxy" }
}

impl Balancer {
    /// Round robin over the replicas listening on `backends` (ports on 127.0.0.1).
    pub(crate) fn start(backends: &[u16]) -> Balancer {
        Balancer::start_on(crate::oauth_upstream::free_port(), backends)
    }

    /// Round robin over `backends`, listening on `port`.
    pub(crate) fn start_on(port: u16, backends: &[u16]) -> Balancer {
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(index, backend)| {
                format!("  server r{index} 127.0.0.1:{backend} check inter 300ms fall 2 rise 1\n")
            })
            .collect();
        let config = format!(
            "global\n  maxconn 512\n\
             defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n  \
             retries 2\n  option redispatch 1\n  retry-on conn-failure empty-response\n\
             frontend in\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
             backend replicas\n  balance roundrobin\n  option httpchk\n  \
             http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1\n{servers}"
        );
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(binary())
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("HAProxy is installed (scripts/test installs it: apt-get install -y haproxy)");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(10), "HAProxy did not listen");
            std::thread::sleep(Duration::from_millis(50));
        }
        Balancer { child, port, _config: directory }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
