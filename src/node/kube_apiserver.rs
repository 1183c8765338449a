//! `kube-apiserver` in a capictl node: capictl's API server on the node's etcd, started by the
//! node agent from kubeadm's manifest with kube-apiserver's own flags. It keeps objects in etcd
//! over mTLS (`--etcd-servers`, `--etcd-cafile`, `--etcd-certfile`, `--etcd-keyfile`), serves
//! HTTPS with `--tls-cert-file` and `--tls-private-key-file`, authenticates clients by
//! certificates of `--client-ca-file`, and answers `/healthz` anonymously (the load balancer's
//! check). Flags it has no use for are accepted and ignored, so kubeadm's manifests and the
//! users' `extraArgs` run unchanged.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::{NodeError, Result, read_file};
use crate::apiserver::store::{EtcdTls, Store};
use crate::apiserver::tls;
use crate::apiserver::{self, ApiServer, listener};
use crate::pki::KeyPairPem;

/// How long the API server waits for etcd at start (etcd starts beside it).
const ETCD_WAIT: Duration = Duration::from_secs(60);

/// `--name=value` flags as a map (the last one wins; `--flag` alone is `true`).
pub fn parse_flags(args: &[String]) -> BTreeMap<String, String> {
    let mut flags = BTreeMap::new();
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        let Some(name) = arg.strip_prefix("--") else {
            continue;
        };
        match name.split_once('=') {
            Some((k, v)) => {
                flags.insert(k.to_string(), v.to_string());
            }
            None => {
                let value = match it.peek() {
                    Some(next) if !next.starts_with("--") => it.next().cloned().unwrap_or_default(),
                    _ => "true".to_string(),
                };
                flags.insert(name.to_string(), value);
            }
        }
    }
    flags
}

fn required<'a>(flags: &'a BTreeMap<String, String>, name: &str) -> Result<&'a str> {
    flags
        .get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| NodeError::Config(format!("--{name} is required")))
}

/// `--authorization-mode`: kubeadm's `Node,RBAC`, or `RBAC`, or `AlwaysAllow`.
fn authorization_mode(flag: Option<&str>) -> Result<apiserver::authz::Authorization> {
    use apiserver::authz::Authorization;
    let modes: Vec<&str> = flag.unwrap_or("AlwaysAllow").split(',').collect();
    match modes.as_slice() {
        ["Node", "RBAC"] => Ok(Authorization::NodeAndRbac),
        ["RBAC"] => Ok(Authorization::Rbac),
        ["AlwaysAllow"] => Ok(Authorization::AlwaysAllow),
        _ => Err(NodeError::Config(format!(
            "--authorization-mode={}: capictl's API server supports Node,RBAC, RBAC or AlwaysAllow",
            flag.unwrap_or_default()
        ))),
    }
}

/// Runs the API server until SIGTERM.
pub async fn run(args: &[String]) -> Result<()> {
    let flags = parse_flags(args);
    let servers: Vec<String> = required(&flags, "etcd-servers")?
        .split(',')
        .map(String::from)
        .collect();
    let etcd_tls = match (
        flags.get("etcd-cafile"),
        flags.get("etcd-certfile"),
        flags.get("etcd-keyfile"),
    ) {
        (Some(ca), Some(cert), Some(key)) => Some(
            EtcdTls::from_files(ca.as_ref(), cert.as_ref(), key.as_ref())
                .map_err(|e| NodeError::Config(e.to_string()))?,
        ),
        _ => None,
    };
    let serving = KeyPairPem {
        cert: read_file(required(&flags, "tls-cert-file")?.as_ref())?,
        key: read_file(required(&flags, "tls-private-key-file")?.as_ref())?,
    };
    let client_ca = read_file(required(&flags, "client-ca-file")?.as_ref())?;
    let started = Instant::now();
    let store = loop {
        match Store::etcd(&servers, etcd_tls.as_ref()).await {
            Ok(s) => break s,
            Err(e) if started.elapsed() < ETCD_WAIT => {
                tracing::info!(error = %e, "waiting for etcd");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(NodeError::Failed(format!(
                    "etcd at {} did not answer within {}s: {e}",
                    servers.join(","),
                    ETCD_WAIT.as_secs()
                )));
            }
        }
    };
    let authorization = authorization_mode(flags.get("authorization-mode").map(String::as_str))?;
    let server = ApiServer::start(store, authorization)
        .await
        .map_err(|e| NodeError::Failed(format!("starting the API server: {e:?}")))?;
    server.set_kubernetes_version(super::kubernetes_version());
    if let Some(range) = flags
        .get("service-cluster-ip-range")
        .and_then(|r| apiserver::defaults::parse_service_range(r))
    {
        server.set_service_range(range);
    }
    apiserver::ensure_kubernetes_service(&server).await;
    // `kubectl logs` and `kubectl exec` reach what the nodes' kubelets run on the Docker Engine.
    if let Some(engine) = super::containers::EngineStreams::connect().await {
        let engine = std::sync::Arc::new(engine);
        server.set_log_source(engine.clone());
        server.set_exec_source(engine);
    }
    // Lives as long as this process, which serves this store alone.
    drop(server.start_system_controllers().await);
    let bind = flags
        .get("bind-address")
        .cloned()
        .unwrap_or_else(|| "0.0.0.0".into());
    let port: u16 = flags
        .get("secure-port")
        .and_then(|p| p.parse().ok())
        .unwrap_or(super::kubeadm::config::API_SERVER_PORT);
    // This server in the `kubernetes` Service's endpoints while it serves.
    let reconciler = flags.get("advertise-address").map(|ip| {
        std::sync::Arc::new(apiserver::endpoint_reconciler::Reconciler::new(
            &server,
            &super::hostname(),
            ip,
            port,
        ))
    });
    let reconciling = reconciler
        .clone()
        .map(|r| tokio::spawn(async move { r.run().await }));
    let address = super::kubeadm::pki::join_host_port(&bind, port);
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(super::io_error(address.as_ref()))?;
    let config = tls::server_config(&client_ca, &serving)?;
    println!("Serving securely on {address}");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(super::io_error("SIGTERM".as_ref()))?;
    listener::serve(listener, apiserver::router(server), config, async move {
        terminate.recv().await;
        if let Some(task) = reconciling {
            task.abort();
        }
        if let Some(r) = reconciler {
            r.withdraw().await;
        }
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_apiserver_flags() {
        let args: Vec<String> = [
            "--etcd-servers=https://127.0.0.1:2379",
            "--secure-port",
            "6443",
            "--allow-privileged",
            "--v=2",
            "stray",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let flags = parse_flags(&args);
        assert_eq!(flags["etcd-servers"], "https://127.0.0.1:2379");
        assert_eq!(flags["secure-port"], "6443");
        assert_eq!(flags["allow-privileged"], "true");
        assert_eq!(flags["v"], "2");
        let err = required(&flags, "tls-cert-file").unwrap_err().to_string();
        assert_eq!(err, "--tls-cert-file is required");
    }
}
