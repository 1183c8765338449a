//! The workload clusters of the in-memory provider: each is a real API server (the embedded
//! one, on an in-memory store) with its own HTTPS listener on 127.0.0.1, serving certificates
//! signed by the cluster's CA and trusting client certificates the CA signed, so that the
//! Cluster's kubeconfig works with kubectl. Control-plane machines join a simulated etcd
//! member list.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kube::Client;

use crate::apiserver::authz::Authorization;
use crate::apiserver::{self, ApiServer, store::Store};
use crate::pki::{Pki, PkiError};
use crate::workload::etcd::{EtcdClient, EtcdClients, EtcdError, NetworkEtcd, SimulatedEtcd};

#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(transparent)]
    Tls(#[from] PkiError),
    #[error("starting the workload API server: {0}")]
    Start(#[from] apiserver::status::ApiError),
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Listen { port: u16, source: std::io::Error },
}

/// One running workload cluster.
pub struct Workload {
    pub server: Arc<ApiServer>,
    pub address: SocketAddr,
    /// A client of the workload API server inside this process.
    pub client: Client,
    /// Its simulated etcd: control-plane machines join as members named after their Nodes.
    pub etcd: Arc<SimulatedEtcd>,
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// The scheduler, the workload controllers and the kubelets, once there are workloads.
    control_plane: tokio::task::JoinHandle<()>,
}

/// Where users' workloads start: the first object of one of these wakes the cluster's
/// scheduler, controllers and kubelets (control planes' mirror Pods do not: they are the
/// simulation's own). A cluster without workloads costs no more than before.
const WORKLOAD_RESOURCES: &[(&str, &str)] = &[
    ("", "pods"),
    ("apps", "replicasets"),
    ("apps", "deployments"),
    ("apps", "daemonsets"),
    ("apps", "statefulsets"),
    ("batch", "jobs"),
    ("batch", "cronjobs"),
];

/// Waits for the cluster's first workload, then runs what runs Pods: kube-scheduler,
/// kube-controller-manager's workload controllers, and the nodes' kubelets.
async fn run_control_plane(server: Arc<ApiServer>, client: Client) {
    let prefixes: Vec<String> = WORKLOAD_RESOURCES
        .iter()
        .filter_map(|(group, plural)| Some(server.registry.get(group, "v1", plural)?.prefix()))
        .collect();
    let workload = |record: &crate::apiserver::store::Record| {
        record.value()["metadata"]["annotations"][crate::node::pods::CONFIG_MIRROR_ANNOTATION]
            .is_null()
    };
    // A resource is looked at again only when it changed: every commit wakes this (a thousand
    // Nodes' heartbeats among them), and decoding the mirror Pods each time cost the whole
    // simulation a tenth of its speed.
    let mut looked_at: Vec<Option<u64>> = vec![None; prefixes.len()];
    let mut commits = server.store.commits();
    'waiting: loop {
        for (prefix, looked) in prefixes.iter().zip(looked_at.iter_mut()) {
            let changed = server.store.last_change(prefix);
            if *looked == Some(changed) {
                continue;
            }
            *looked = Some(changed);
            if !server
                .store
                .list(prefix, None, Some(1), workload)
                .0
                .is_empty()
            {
                break 'waiting;
            }
        }
        if commits.changed().await.is_err() {
            return;
        }
    }
    tokio::join!(
        Box::pin(crate::kubernetes::scheduler::run(client.clone())),
        Box::pin(crate::kubernetes::run_controllers(|_| client.clone())),
        Box::pin(super::kubelet::run(client.clone())),
    );
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
        // Only the cluster's admin kubeconfig reaches a simulated cluster.
        let server = ApiServer::start(Store::in_memory(), Authorization::AlwaysAllow).await?;
        apiserver::ensure_kubernetes_service(&server).await;
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
        let config = crate::apiserver::tls::server_config(&ca.ca.cert, &serving)?;
        let (stop, stopped) = tokio::sync::oneshot::channel();
        tokio::spawn(apiserver::listener::serve(
            listener,
            apiserver::router(server.clone()),
            config,
            async {
                let _ = stopped.await;
            },
        ));
        let client = Client::new(apiserver::controller_router(server.clone()), "default");
        let mut clusters = self.clusters.lock().unwrap();
        // Another reconcile may have won the race; keep the first.
        if let Some(first) = clusters.get(key) {
            let _ = stop.send(());
            return Ok(first.clone());
        }
        let control_plane = tokio::spawn(run_control_plane(server.clone(), client.clone()));
        let workload = Arc::new(Workload {
            server,
            address,
            client,
            etcd: Arc::default(),
            stop: Mutex::new(Some(stop)),
            control_plane,
        });
        clusters.insert(key.to_string(), workload.clone());
        Ok(workload)
    }

    /// Stops a workload cluster.
    pub fn stop(&self, key: &str) {
        if let Some(w) = self.clusters.lock().unwrap().remove(key) {
            w.control_plane.abort();
            if let Some(stop) = w.stop.lock().unwrap().take() {
                let _ = stop.send(());
            }
        }
    }
}

/// The control plane provider reaches a simulated cluster's etcd here, as it would reach real
/// etcd through a workload cluster's API server.
impl EtcdClients for Workloads {
    fn connect<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn EtcdClient>, EtcdError>> {
        let etcd = self
            .get(&format!("{namespace}/{cluster}"))
            .map(|w| w.etcd.clone() as Arc<dyn EtcdClient>)
            .ok_or_else(|| {
                EtcdError::Unreachable(format!(
                    "the in-memory cluster {namespace}/{cluster} is not running"
                ))
            });
        Box::pin(std::future::ready(etcd))
    }
}

/// The etcd of a workload cluster: the in-memory provider's simulation for its clusters, real
/// etcd over the network for the others.
pub struct WorkloadEtcd {
    in_memory: Arc<Workloads>,
    network: NetworkEtcd,
}

impl WorkloadEtcd {
    pub fn new(in_memory: Arc<Workloads>, network: NetworkEtcd) -> WorkloadEtcd {
        WorkloadEtcd { in_memory, network }
    }
}

impl EtcdClients for WorkloadEtcd {
    fn connect<'a>(
        &'a self,
        namespace: &'a str,
        cluster: &'a str,
    ) -> BoxFuture<'a, Result<Arc<dyn EtcdClient>, EtcdError>> {
        if self
            .in_memory
            .get(&format!("{namespace}/{cluster}"))
            .is_some()
        {
            self.in_memory.connect(namespace, cluster)
        } else {
            self.network.connect(namespace, cluster)
        }
    }
}
