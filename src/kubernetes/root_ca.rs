//! kube-controller-manager's root CA publisher: a `kube-root-ca.crt` ConfigMap in every
//! namespace holding the cluster CA (`ca.crt`), which every Pod's API credentials volume reads
//! (kube-apiserver's ServiceAccount admission mounts it beside the token).
//!
//! [`wanted`] decides for one namespace, purely; [`run`] keeps every namespace.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;

/// The ConfigMap's name, as kube publishes it.
pub const CONFIG_MAP: &str = "kube-root-ca.crt";
const KEY: &str = "ca.crt";
const COMPONENT: &str = "root-ca-cert-publisher";

/// The ConfigMap a namespace should hold when what it holds (`existing`) is not it: None when
/// it holds the CA already.
pub fn wanted(namespace: &str, existing: Option<&ConfigMap>, ca: &str) -> Option<ConfigMap> {
    let current = existing.and_then(|c| c.data.as_ref()?.get(KEY));
    if current.map(String::as_str) == Some(ca) {
        return None;
    }
    let mut map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": CONFIG_MAP, "namespace": namespace},
        "data": {KEY: ca},
    }))
    .expect("a ConfigMap");
    if let Some(existing) = existing {
        map.metadata.resource_version = existing.resource_version();
        map.metadata.annotations = existing.metadata.annotations.clone();
    }
    Some(map)
}

/// Publishes `ca` (PEM) in every active namespace until the future is dropped.
pub async fn run(client: Client, ca: String) {
    let watches = super::Watches::default();
    let (namespaces, watch_namespaces) = watches.cache::<Namespace>(&client);
    let (maps, watch_maps) = watches.cache_selected::<ConfigMap>(
        &client,
        watcher::Config::default().fields(&format!("metadata.name={CONFIG_MAP}")),
    );
    let work = async {
        loop {
            watches.next_pass(Duration::from_secs(60)).await;
            let maps = maps.state();
            for namespace in namespaces.state() {
                let terminating = namespace.status.as_ref().and_then(|s| s.phase.as_deref())
                    == Some("Terminating");
                if terminating {
                    continue;
                }
                let name = namespace.name_any();
                let existing = maps
                    .iter()
                    .find(|m| m.namespace().as_deref() == Some(name.as_str()));
                let Some(map) = wanted(&name, existing.map(|m| &**m), &ca) else {
                    continue;
                };
                let api: Api<ConfigMap> = Api::namespaced(client.clone(), &name);
                let written = match existing {
                    None => api.create(&PostParams::default(), &map).await,
                    Some(_) => api.replace(CONFIG_MAP, &PostParams::default(), &map).await,
                };
                if let Err(e) = written {
                    super::report_failure(COMPONENT, &name, &e);
                }
            }
        }
    };
    tokio::join!(watch_namespaces, watch_maps, work);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_namespace_gets_the_ca_once_and_again_when_it_changed() {
        let made = wanted("team", None, "CA").expect("made where missing");
        assert_eq!(made.data.as_ref().unwrap()[KEY], "CA");
        assert_eq!(made.namespace().as_deref(), Some("team"));
        assert!(wanted("team", Some(&made), "CA").is_none(), "kept");
        let mut old = made.clone();
        old.metadata.resource_version = Some("7".into());
        let replaced = wanted("team", Some(&old), "NEW CA").expect("replaced");
        assert_eq!(replaced.data.unwrap()[KEY], "NEW CA");
        assert_eq!(replaced.metadata.resource_version.as_deref(), Some("7"));
    }
}
