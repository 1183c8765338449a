//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub mod lifecycle;

/// `../shared/reference/upstream/<rel>` beside the checkout, where upstream's CRDs and
/// templates live as test data. `None` (with a note on stderr) when it is absent, so the tests
/// that need it skip rather than fail on a machine without it.
pub fn upstream(rel: &str) -> Option<PathBuf> {
    shared(&format!("reference/upstream/{rel}"))
}

/// `../shared/<rel>` beside the checkout.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(rel);
    if path.exists() {
        Some(path)
    } else {
        eprintln!("skipping: {} is not there", path.display());
        None
    }
}

/// Every document of a YAML file, as JSON values.
pub fn read_yaml_docs(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    capictl::yaml::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A throwaway etcd on loopback, stopped and removed when dropped. `None` (with a note) when
/// no etcd binary is there: $ETCD, else `etcd` on PATH (scripts/setup installs Debian's).
pub struct Etcd {
    child: std::process::Child,
    dir: PathBuf,
    pub endpoint: String,
}

/// A TCP port nothing listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Etcd {
    pub fn start() -> Option<Etcd> {
        let binary = std::env::var("ETCD").unwrap_or_else(|_| "etcd".into());
        if std::process::Command::new(&binary)
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!("skipping: no etcd (set ETCD or run scripts/setup)");
            return None;
        }
        let dir = std::env::temp_dir().join(format!("capictl-etcd-{}", uuid::Uuid::new_v4()));
        let (client, peer) = (free_port(), free_port());
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = std::process::Command::new(binary)
            .args(["--name", "test", "--data-dir"])
            .arg(&dir)
            .args([
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("test={peer_url}")])
            .args(["--max-request-bytes", "16777216", "--log-level", "error"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let etcd = Etcd {
            child,
            dir,
            endpoint: client_url,
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", client)).is_err() {
            assert!(std::time::Instant::now() < deadline, "etcd did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Some(etcd)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
