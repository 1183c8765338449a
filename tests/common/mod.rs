//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

pub mod crash;
pub mod docker;
pub mod fixtures;
pub mod lifecycle;
pub mod management;
pub mod prometheus;
pub mod quickstart;

/// `../shared/reference/upstream/<rel>` beside the checkout, where upstream's CRDs and
/// templates live as test data.
pub fn upstream(rel: &str) -> PathBuf {
    shared(&format!("reference/upstream/{rel}"))
}

/// `../shared/<rel>` beside the checkout (CI lays a copy of shared/ there). A test that needs
/// it fails, saying so, where it is missing: it never passes by not running.
pub fn shared(rel: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared")
        .join(rel);
    assert!(
        path.exists(),
        "{} is not there: this test reads the project's shared/ folder beside the checkout",
        path.display()
    );
    path
}

/// Every document of a YAML file, as JSON values.
pub fn read_yaml_docs(path: &std::path::Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(path).unwrap();
    capictl::yaml::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A throwaway etcd on loopback, stopped and removed when dropped: $ETCD, else `etcd` on PATH
/// (scripts/setup installs Debian's). Without one the test fails, saying how to get it.
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

/// The files a client of a TLS etcd presents: the CA etcd's certificate chains to, and a
/// client certificate and key that etcd's CA signed.
pub struct EtcdClientTls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Etcd {
    pub fn start() -> Etcd {
        Etcd::start_with(false).0
    }

    /// An etcd that serves clients over TLS and asks for their certificates.
    pub fn start_tls() -> (Etcd, EtcdClientTls) {
        let (etcd, tls) = Etcd::start_with(true);
        (etcd, tls.expect("TLS files"))
    }

    fn start_with(tls: bool) -> (Etcd, Option<EtcdClientTls>) {
        let binary = std::env::var("ETCD").unwrap_or_else(|_| "etcd".into());
        if let Err(e) = std::process::Command::new(&binary)
            .arg("--version")
            .output()
        {
            panic!(
                "cannot run etcd ({binary}: {e}): run scripts/setup, or set ETCD to an etcd binary"
            );
        }
        let dir = std::env::temp_dir().join(format!("capictl-etcd-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (client, peer) = (free_port(), free_port());
        let scheme = if tls { "https" } else { "http" };
        let client_url = format!("{scheme}://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut command = std::process::Command::new(binary);
        command
            .args(["--name", "test", "--data-dir"])
            .arg(dir.join("data"))
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
            .stderr(std::process::Stdio::null());
        let client_tls = tls.then(|| {
            let pki = capictl::pki::Pki::generate("etcd-ca").unwrap();
            let serving = pki
                .serving_certificate(&["127.0.0.1".to_string(), "localhost".to_string()])
                .unwrap();
            let user = pki.client_certificate("capictl", &[]).unwrap();
            let write = |name: &str, contents: &str| {
                let path = dir.join(name);
                std::fs::write(&path, contents).unwrap();
                path
            };
            command
                .arg("--trusted-ca-file")
                .arg(write("ca.crt", &pki.ca.cert))
                .arg("--cert-file")
                .arg(write("server.crt", &serving.cert))
                .arg("--key-file")
                .arg(write("server.key", &serving.key))
                .arg("--client-cert-auth");
            EtcdClientTls {
                ca: dir.join("ca.crt"),
                cert: write("client.crt", &user.cert),
                key: write("client.key", &user.key),
            }
        });
        let child = command.spawn().unwrap();
        let etcd = Etcd {
            child,
            dir,
            endpoint: client_url,
        };
        // Listening is not serving: until it has elected itself leader, etcd answers requests
        // with "leader changed".
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !etcd.healthy(client, client_tls.as_ref()) {
            assert!(
                std::time::Instant::now() < deadline,
                "etcd did not become healthy"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        (etcd, client_tls)
    }

    fn healthy(&self, port: u16, tls: Option<&EtcdClientTls>) -> bool {
        let Some(tls) = tls else {
            return healthy(port);
        };
        // Over TLS: whether a client presenting its certificate gets etcd's status.
        let read = |p: &PathBuf| std::fs::read_to_string(p).unwrap();
        let options = etcd_client::ConnectOptions::new()
            .with_tls(
                etcd_client::TlsOptions::new()
                    .ca_certificate(etcd_client::Certificate::from_pem(read(&tls.ca)))
                    .identity(etcd_client::Identity::from_pem(
                        read(&tls.cert),
                        read(&tls.key),
                    )),
            )
            .with_connect_timeout(std::time::Duration::from_secs(2))
            .with_timeout(std::time::Duration::from_secs(2));
        let endpoint = self.endpoint.clone();
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async move {
                match etcd_client::Client::connect([endpoint], Some(options)).await {
                    Ok(mut client) => client.status().await.is_ok(),
                    Err(_) => false,
                }
            })
    }
}

/// Whether the etcd serving clients on this port says it is healthy.
fn healthy(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(2)));
    let request = "GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    let mut response = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut response).is_ok()
        && response.contains(r#""health":"true""#)
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts the process's peak resident memory (`VmHWM`) over from what it holds now, so that
/// one phase of a benchmark is measured on its own.
pub fn reset_peak_rss() {
    std::fs::write("/proc/self/clear_refs", "5").expect("the kernel resets the peak RSS");
}

/// A field of this process's /proc/self/status (VmHWM, VmRSS), in MiB.
pub fn status_mib(field: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A management cluster served in this process from a new state directory under the system's
/// temp dir, on the embedded store or, with endpoints (and TLS files: CA, client certificate,
/// key), on etcd: the directory, the options it was served with, the running server.
pub async fn serve_in_process(
    context: &str,
    etcd_endpoints: Vec<String>,
    etcd_tls: Option<[PathBuf; 3]>,
) -> (
    PathBuf,
    capictl::management::ServeOptions,
    capictl::management::Running,
) {
    capictl::install_crypto_provider();
    let dir = std::env::temp_dir().join(format!("capictl-{context}-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let options = capictl::management::ServeOptions {
        dir: capictl::management::StateDir::new(Some(dir.clone())),
        listen: "127.0.0.1:0".into(),
        kubeconfig: None,
        context: context.into(),
        etcd_endpoints,
        etcd_tls,
        audit: Default::default(),
        limits: Default::default(),
        tls_sans: Vec::new(),
        autoscaler: false,
    };
    let running = capictl::management::start(&options).await.unwrap();
    (dir, options, running)
}

/// A kube-rs client of the admin kubeconfig a management cluster wrote: each call a
/// connection pool of its own.
pub async fn admin_client(options: &capictl::management::ServeOptions) -> kube::Client {
    let config = kube::config::Kubeconfig::read_from(options.dir.admin_kubeconfig()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(config, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}
