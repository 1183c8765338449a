//! What the control plane provider needs of a workload cluster's etcd: its members, who leads,
//! moving leadership, and removing a member. The in-memory provider's simulated etcd answers
//! today; a client of real etcd (through the Docker provider's nodes) will implement the same.

use std::sync::Arc;

use crate::providers::in_memory::workload::Workloads;

/// A workload cluster's etcd, as the control plane provider sees it.
pub trait EtcdCluster: Send + Sync {
    /// The member names (one per control-plane machine), or None when etcd cannot be reached.
    fn members(&self, namespace: &str, cluster: &str) -> Option<Vec<String>>;
    fn leader(&self, namespace: &str, cluster: &str) -> Option<String>;
    /// Moves leadership to a member; false when that cannot be done.
    fn move_leader(&self, namespace: &str, cluster: &str, to: &str) -> bool;
    fn remove_member(&self, namespace: &str, cluster: &str, member: &str);
}

/// The simulated etcd of the in-memory provider's workload clusters.
pub struct InMemoryEtcd(pub Arc<Workloads>);

impl InMemoryEtcd {
    fn with<T>(
        &self,
        namespace: &str,
        cluster: &str,
        f: impl FnOnce(&mut crate::providers::in_memory::workload::Etcd) -> T,
    ) -> Option<T> {
        let workload = self.0.get(&format!("{namespace}/{cluster}"))?;
        let mut etcd = workload.etcd.lock().unwrap();
        Some(f(&mut etcd))
    }
}

impl EtcdCluster for InMemoryEtcd {
    fn members(&self, namespace: &str, cluster: &str) -> Option<Vec<String>> {
        self.with(namespace, cluster, |e| {
            e.members().into_iter().map(|m| m.name).collect()
        })
    }

    fn leader(&self, namespace: &str, cluster: &str) -> Option<String> {
        self.with(namespace, cluster, |e| e.leader().map(String::from))
            .flatten()
    }

    fn move_leader(&self, namespace: &str, cluster: &str, to: &str) -> bool {
        self.with(namespace, cluster, |e| e.move_leader(to))
            .unwrap_or(false)
    }

    fn remove_member(&self, namespace: &str, cluster: &str, member: &str) {
        self.with(namespace, cluster, |e| e.remove(member));
    }
}
