//! Workload clusters, reached through their `<cluster>-kubeconfig` Secret: one cached client
//! per cluster, shared by every reconciler, rebuilt when the kubeconfig changes and dropped
//! when the cluster goes (upstream's ClusterCache). Requests time out quickly, so a dead
//! workload cluster never holds up the reconcilers of the others.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::{Error, Result};
use crate::kubeadm::certs::kubeconfig_secret_name;

/// A workload cluster's client and the kubeconfig it was made from, by namespace and name.
type Clients = HashMap<(String, String), (Vec<u8>, Client)>;

pub struct RemoteClusters {
    management: Client,
    clients: Mutex<Clients>,
}

impl RemoteClusters {
    pub fn new(management: Client) -> RemoteClusters {
        RemoteClusters {
            management,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// A client of the workload cluster, or None while its kubeconfig Secret does not exist.
    pub async fn client(&self, namespace: &str, cluster: &str) -> Result<Option<Client>> {
        let secrets: Api<Secret> = Api::namespaced(self.management.clone(), namespace);
        let Some(secret) = secrets.get_opt(&kubeconfig_secret_name(cluster)).await? else {
            return Ok(None);
        };
        let value = secret
            .data
            .and_then(|d| d.get("value").cloned())
            .map(|b| b.0)
            .unwrap_or_default();
        let key = (namespace.to_string(), cluster.to_string());
        if let Some((seen, client)) = self.clients.lock().unwrap().get(&key)
            && *seen == value
        {
            return Ok(Some(client.clone()));
        }
        let text = String::from_utf8(value.clone()).map_err(|_| {
            Error::Invalid(format!(
                "Secret {} is not a UTF-8 kubeconfig",
                kubeconfig_secret_name(cluster)
            ))
        })?;
        let kubeconfig = Kubeconfig::from_yaml(&text).map_err(|e| {
            Error::Invalid(format!(
                "Secret {} holds no valid kubeconfig: {e}",
                kubeconfig_secret_name(cluster)
            ))
        })?;
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| Error::Invalid(format!("the kubeconfig of Cluster {cluster}: {e}")))?;
        config.connect_timeout = Some(Duration::from_secs(5));
        config.read_timeout = Some(Duration::from_secs(15));
        let client = Client::try_from(config)?;
        self.clients
            .lock()
            .unwrap()
            .insert(key, (value, client.clone()));
        Ok(Some(client))
    }

    /// Forgets a workload cluster's client (the cluster is gone).
    pub fn forget(&self, namespace: &str, cluster: &str) {
        self.clients
            .lock()
            .unwrap()
            .remove(&(namespace.to_string(), cluster.to_string()));
    }
}
