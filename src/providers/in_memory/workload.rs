//! The workload clusters of the in-memory provider: each is a real API server (the embedded
//! one, on an in-memory store) with its own HTTPS listener on 127.0.0.1, serving certificates
//! signed by the cluster's CA and trusting client certificates the CA signed, so that the
//! Cluster's kubeconfig works with kubectl. Control-plane machines join a simulated etcd
//! member list.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use kube::Client;

use crate::apiserver::tls::{Pki, TlsError};
use crate::apiserver::{self, ApiServer, store::Store};

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error("starting the workload API server: {0}")]
    Start(#[from] apiserver::status::ApiError),
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Listen { port: u16, source: std::io::Error },
}

/// A member of a workload cluster's simulated etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdMember {
    pub id: u64,
    pub name: String,
}

/// The simulated etcd of a workload cluster: its members and which one leads.
#[derive(Clone, Debug, Default)]
pub struct Etcd {
    members: BTreeMap<String, EtcdMember>,
    leader: Option<String>,
    next_id: u64,
}

impl Etcd {
    /// Adds a member for a control-plane machine (once); the first one leads.
    pub fn join(&mut self, name: &str) {
        if !self.members.contains_key(name) {
            self.next_id += 1;
            self.members.insert(
                name.to_string(),
                EtcdMember {
                    id: self.next_id,
                    name: name.to_string(),
                },
            );
        }
        if self.leader.is_none() {
            self.leader = Some(name.to_string());
        }
    }

    pub fn members(&self) -> Vec<EtcdMember> {
        self.members.values().cloned().collect()
    }

    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// Moves leadership to another member; false if it is not a member.
    pub fn move_leader(&mut self, to: &str) -> bool {
        if self.members.contains_key(to) {
            self.leader = Some(to.to_string());
            true
        } else {
            false
        }
    }

    /// Removes a member; leadership passes to another member if it led.
    pub fn remove(&mut self, name: &str) {
        self.members.remove(name);
        if self.leader.as_deref() == Some(name) {
            self.leader = self.members.keys().next().cloned();
        }
    }
}

/// One running workload cluster.
pub struct Workload {
    pub server: Arc<ApiServer>,
    pub address: SocketAddr,
    /// A client of the workload API server inside this process.
    pub client: Client,
    pub etcd: Mutex<Etcd>,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

/// Every workload cluster this process runs, by `<namespace>/<cluster>`.
#[derive(Default)]
pub struct Workloads {
    clusters: Mutex<HashMap<String, Arc<Workload>>>,
}

impl Workloads {
    pub fn get(&self, key: &str) -> Option<Arc<Workload>> {
        self.clusters.lock().unwrap().get(key).cloned()
    }

    /// Starts the workload cluster `key` unless it runs; on `port` when given (the one it had),
    /// else on a free port.
    pub async fn ensure(
        &self,
        key: &str,
        ca: &Pki,
        port: Option<u16>,
    ) -> Result<Arc<Workload>, WorkloadError> {
        if let Some(w) = self.get(key) {
            return Ok(w);
        }
        let server = ApiServer::start(Store::in_memory()).await?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
            .await
            .map_err(|source| WorkloadError::Listen {
                port: port.unwrap_or(0),
                source,
            })?;
        let address = listener
            .local_addr()
            .map_err(|source| WorkloadError::Listen {
                port: port.unwrap_or(0),
                source,
            })?;
        let serving =
            ca.serving_certificate(&["localhost".into(), "127.0.0.1".into(), "::1".into()])?;
        let config = ca.server_config(&serving)?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        tokio::spawn(apiserver::tls::serve(
            listener,
            apiserver::router(server.clone()),
            config,
            async {
                let _ = stopped.await;
            },
        ));
        let client = Client::new(apiserver::local_router(server.clone()), "default");
        let workload = Arc::new(Workload {
            server,
            address,
            client,
            etcd: Mutex::new(Etcd::default()),
            stop: Mutex::new(Some(stop)),
        });
        let mut clusters = self.clusters.lock().unwrap();
        // Another reconcile may have won the race; keep the first.
        Ok(clusters.entry(key.to_string()).or_insert(workload).clone())
    }

    /// Stops a workload cluster.
    pub fn stop(&self, key: &str) {
        if let Some(w) = self.clusters.lock().unwrap().remove(key)
            && let Some(stop) = w.stop.lock().unwrap().take()
        {
            let _ = stop.send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etcd_membership_and_leadership() {
        let mut etcd = Etcd::default();
        etcd.join("cp-1");
        etcd.join("cp-2");
        etcd.join("cp-1");
        assert_eq!(etcd.members().len(), 2);
        assert_eq!(etcd.leader(), Some("cp-1"));
        assert!(etcd.move_leader("cp-2"));
        assert!(!etcd.move_leader("cp-9"));
        etcd.remove("cp-2");
        assert_eq!(
            etcd.leader(),
            Some("cp-1"),
            "leadership passes on when the leader leaves"
        );
        assert_eq!(
            etcd.members()
                .iter()
                .map(|m| m.name.as_str())
                .collect::<Vec<_>>(),
            ["cp-1"]
        );
    }
}
