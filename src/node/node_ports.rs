//! The node ports of NodePort Services, served by capictl's node agent in user space as
//! kube-proxy's userspace mode served them: a listener on every address of the node for each
//! TCP node port, each connection forwarded to one of the Service's ready endpoints, picked at
//! random. (kube-proxy programs the node's `nat` table instead; capictl's unprivileged node
//! containers hold no `NET_ADMIN`.) [`super::service_proxy::node_ports`] says what to serve.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, RwLock};

use tokio::net::{TcpListener, TcpStream};

/// The endpoints a node port leads to: (address, port).
type Targets = Arc<RwLock<Vec<(String, i32)>>>;

/// The node ports this node serves.
#[derive(Default)]
pub struct NodePorts {
    open: HashMap<u16, (tokio::task::JoinHandle<()>, Targets)>,
    /// Ports that could not be opened (something else listens there), said once.
    refused: HashSet<u16>,
}

impl Drop for NodePorts {
    fn drop(&mut self) {
        self.open.values().for_each(|(task, _)| task.abort());
    }
}

impl NodePorts {
    /// Serves exactly the node ports of `table`, each to its endpoints.
    pub async fn serve(&mut self, table: BTreeMap<u16, Vec<(String, i32)>>) {
        self.open.retain(|port, (task, _)| {
            let keep = table.contains_key(port);
            if !keep {
                task.abort();
            }
            keep
        });
        self.refused.retain(|port| table.contains_key(port));
        for (port, endpoints) in table {
            if let Some((_, targets)) = self.open.get(&port) {
                *targets.write().unwrap() = endpoints;
                continue;
            }
            let listener = match TcpListener::bind(("0.0.0.0", port)).await {
                Ok(l) => l,
                Err(e) => {
                    if self.refused.insert(port) {
                        tracing::warn!(port, error = %e, "kubelet: a Service's node port cannot be opened on this node");
                    }
                    continue;
                }
            };
            let targets: Targets = Arc::new(RwLock::new(endpoints));
            let task = tokio::spawn(forward(listener, targets.clone()));
            self.open.insert(port, (task, targets));
        }
    }
}

/// Accepts connections until aborted, each forwarded to an endpoint picked at random; one that
/// comes while there is none is closed, as kube-proxy rejects it.
async fn forward(listener: TcpListener, targets: Targets) {
    loop {
        let Ok((mut inbound, _)) = listener.accept().await else {
            continue;
        };
        let target = {
            let targets = targets.read().unwrap();
            match targets.len() {
                0 => None,
                n => Some(targets[rand::random_range(0..n)].clone()),
            }
        };
        let Some((address, port)) = target else {
            continue;
        };
        tokio::spawn(async move {
            let address = super::kubeadm::pki::join_host_port(&address, port as u16);
            if let Ok(mut outbound) = TcpStream::connect(address).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}
