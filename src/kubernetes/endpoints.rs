//! The endpoints and EndpointSlice controllers, as kube-controller-manager's: every Service with
//! a selector gets an Endpoints object of its name and an EndpointSlice labelled with it,
//! listing the selected Pods that have an IP, ready or not, with the Service's ports resolved
//! against each Pod's named container ports.
//!
//! [`compute`] decides for one Service, purely; [`run`] keeps every Service of a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::replica_set::ready_since;

pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// On the Endpoints this controller writes (so the mirroring controller leaves them alone),
/// and how it finds them again once their Service is gone.
const SKIP_MIRROR_LABEL: &str = "endpointslice.kubernetes.io/skip-mirror";

/// A port as endpoints list it: name, number, protocol.
type Port = (String, i32, String);
/// Addresses ready and not ready.
type Addresses = (Vec<Value>, Vec<Value>);

/// The port a Pod serves a Service port on: the target port's number, or the container port
/// of that name; None when the Pod has no port of that name.
fn target_port(pod: &Pod, port: &k8s_openapi::api::core::v1::ServicePort) -> Option<i32> {
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port),
    }
}

/// The `subsets` of a Service's Endpoints and the `endpoints` and `ports` of its
/// EndpointSlice, from the Pods of its namespace.
pub fn compute(service: &Service, pods: &[&Pod]) -> (Value, Value, Value) {
    let spec = service.spec.clone().unwrap_or_default();
    let Some(selector) = spec.selector.filter(|s| !s.is_empty()) else {
        return (json!([]), json!([]), json!([]));
    };
    let ports = spec.ports.unwrap_or_default();
    // A headless Service for a StatefulSet's peers often wants them before they are ready.
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    // Pods grouped by the ports they serve, as the endpoints controller packs subsets.
    let mut subsets: BTreeMap<Vec<Port>, Addresses> = BTreeMap::new();
    let mut slice_endpoints = Vec::new();
    let mut slice_ports: BTreeSet<Port> = BTreeSet::new();
    let mut selected: Vec<&&Pod> = pods
        .iter()
        .filter(|p| {
            let labels = p.labels();
            selector.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .filter(|p| p.status.as_ref().and_then(|s| s.pod_ip.as_ref()).is_some())
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect();
    selected.sort_by_key(|p| p.name_any());
    for pod in selected {
        let ip = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .unwrap_or_default();
        let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let terminating = pod.metadata.deletion_timestamp.is_some();
        let ready = (publish_not_ready || ready_since(pod).is_some()) && !terminating;
        let target = json!({"kind": "Pod", "namespace": pod.namespace(), "name": pod.name_any(), "uid": pod.uid()});
        // A Pod that names this Service as its subdomain is found by its hostname.
        let hostname = pod
            .spec
            .as_ref()
            .filter(|s| s.subdomain.is_some() && s.subdomain == service.metadata.name)
            .and_then(|s| s.hostname.clone())
            .filter(|h| !h.is_empty());
        let served: Vec<Port> = ports
            .iter()
            .filter_map(|p| {
                Some((
                    p.name.clone().unwrap_or_default(),
                    target_port(pod, p)?,
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ))
            })
            .collect();
        slice_ports.extend(served.iter().cloned());
        let mut address = json!({"ip": ip, "nodeName": node, "targetRef": target});
        if let Some(h) = &hostname {
            address["hostname"] = json!(h);
        }
        let entry = subsets.entry(served).or_default();
        if ready {
            entry.0.push(address);
        } else if !terminating {
            entry.1.push(address);
        }
        let mut endpoint = json!({
            "addresses": [ip],
            "conditions": {"ready": ready, "serving": ready || ready_since(pod).is_some(), "terminating": terminating},
            "nodeName": node,
            "targetRef": target,
        });
        if let Some(h) = hostname {
            endpoint["hostname"] = json!(h);
        }
        slice_endpoints.push(endpoint);
    }
    let port_json = |ports: &[Port]| -> Vec<Value> {
        ports
            .iter()
            .map(|(name, port, protocol)| {
                let mut p = json!({"port": port, "protocol": protocol});
                if !name.is_empty() {
                    p["name"] = json!(name);
                }
                p
            })
            .collect()
    };
    let subsets: Vec<Value> = subsets
        .into_iter()
        .filter(|(ports, (ready, not_ready))| {
            !ports.is_empty() && (!ready.is_empty() || !not_ready.is_empty())
        })
        .map(|(ports, (ready, not_ready))| {
            let mut s = json!({"ports": port_json(&ports)});
            if !ready.is_empty() {
                s["addresses"] = json!(ready);
            }
            if !not_ready.is_empty() {
                s["notReadyAddresses"] = json!(not_ready);
            }
            s
        })
        .collect();
    let slice_ports: Vec<_> = slice_ports.into_iter().collect();
    (
        json!(subsets),
        json!(slice_endpoints),
        json!(port_json(&slice_ports)),
    )
}

/// Runs the controllers until the future is dropped: the Endpoints one with `client`, the
/// EndpointSlice one with `slices_client` (kube's two controllers, each its own identity).
pub async fn run(client: Client, slices_client: Client) {
    let watches = super::Watches::default();
    let (services, watch_services) = watches.cache::<Service>(&client);
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (endpoints, watch_endpoints) = watches.cache::<Endpoints>(&client);
    let (slices, watch_slices) = watches.cache::<EndpointSlice>(&slices_client);
    let work = async {
        loop {
            watches.next_pass(Duration::from_secs(10)).await;
            let pods = pods.state();
            let services = services.state();
            for service in &services {
                let mine: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.namespace() == service.namespace())
                    .map(|p| &**p)
                    .collect();
                if let Err(e) = sync(
                    [&client, &slices_client],
                    service,
                    &mine,
                    &endpoints.state(),
                    &slices.state(),
                )
                .await
                {
                    super::report_failure("endpoint-controller", &service.name_any(), &e);
                }
            }
            // Endpoints this controller wrote for Services that are gone.
            let live: BTreeSet<(Option<String>, String)> = services
                .iter()
                .map(|s| (s.namespace(), s.name_any()))
                .collect();
            for e in endpoints.state() {
                let ours = e.labels().contains_key(SKIP_MIRROR_LABEL);
                if ours && !live.contains(&(e.namespace(), e.name_any())) {
                    let api: Api<Endpoints> =
                        Api::namespaced(client.clone(), &e.namespace().unwrap_or_default());
                    let _ = api.delete(&e.name_any(), &DeleteParams::default()).await;
                }
            }
        }
    };
    tokio::join!(
        watch_services,
        watch_pods,
        watch_endpoints,
        watch_slices,
        work
    );
}

/// `clients`: the Endpoints controller's, the EndpointSlice controller's.
async fn sync(
    [client, slices_client]: [&Client; 2],
    service: &Service,
    pods: &[&Pod],
    endpoints: &[Arc<Endpoints>],
    slices: &[Arc<EndpointSlice>],
) -> Result<(), kube::Error> {
    if service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .is_none_or(|s| s.is_empty())
    {
        return Ok(());
    }
    let namespace = service.namespace().unwrap_or_default();
    let name = service.name_any();
    let (subsets, slice_endpoints, slice_ports) = compute(service, pods);

    let wanted: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {SKIP_MIRROR_LABEL: "true"}},
        "subsets": subsets,
    }))
    .expect("Endpoints");
    let api: Api<Endpoints> = Api::namespaced(client.clone(), &namespace);
    match endpoints
        .iter()
        .find(|e| e.namespace() == service.namespace() && e.name_any() == name)
    {
        None => {
            api.create(&PostParams::default(), &wanted).await?;
        }
        Some(have)
            if have.subsets.clone().unwrap_or_default()
                != wanted.subsets.clone().unwrap_or_default() =>
        {
            let mut replaced = wanted.clone();
            replaced.metadata.resource_version = have.resource_version();
            api.replace(&name, &PostParams::default(), &replaced)
                .await?;
        }
        Some(_) => {}
    }

    let slice_api: Api<EndpointSlice> = Api::namespaced(slices_client.clone(), &namespace);
    let mut wanted: Value = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "generateName": format!("{name}-"),
            "namespace": namespace,
            "labels": {SERVICE_NAME_LABEL: name, MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [super::controller_reference(service)],
        },
        "addressType": "IPv4",
        "endpoints": slice_endpoints,
        "ports": slice_ports,
    });
    let have = slices.iter().find(|s| {
        s.namespace() == service.namespace()
            && s.labels().get(SERVICE_NAME_LABEL) == Some(&name)
            && s.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY)
    });
    match have {
        None => {
            // The cache may not show a slice made a moment ago: ask before making another.
            let listed = slice_api
                .list(&ListParams::default().labels(&format!(
                    "{SERVICE_NAME_LABEL}={name},{MANAGED_BY_LABEL}={MANAGED_BY}"
                )))
                .await?;
            if listed.items.is_empty() {
                slice_api
                    .create(
                        &PostParams::default(),
                        &serde_json::from_value(wanted).expect("an EndpointSlice"),
                    )
                    .await?;
            }
        }
        Some(slice) => {
            let current = serde_json::to_value(&**slice).unwrap_or_default();
            if current["endpoints"] != wanted["endpoints"] || current["ports"] != wanted["ports"] {
                wanted["metadata"]["name"] = json!(slice.name_any());
                wanted["metadata"]["resourceVersion"] = json!(slice.resource_version());
                wanted["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove("generateName");
                slice_api
                    .replace(
                        &slice.name_any(),
                        &PostParams::default(),
                        &serde_json::from_value(wanted).expect("an EndpointSlice"),
                    )
                    .await?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, ip: Option<&str>, ready: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}, "uid": name},
            "spec": {"nodeName": "w1", "containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 8080}]}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    #[test]
    fn endpoints_list_the_selected_pods_with_their_ports() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
        }))
        .unwrap();
        let pods = [
            pod("a", Some("10.244.0.2"), true),
            pod("b", Some("10.244.0.3"), false),
            pod("c", None, false),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        let (subsets, endpoints, ports) = compute(&service, &refs);
        assert_eq!(subsets[0]["addresses"][0]["ip"], "10.244.0.2");
        assert_eq!(subsets[0]["notReadyAddresses"][0]["ip"], "10.244.0.3");
        assert_eq!(
            subsets[0]["ports"],
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
        );
        assert_eq!(
            endpoints.as_array().unwrap().len(),
            2,
            "a Pod without an IP is not an endpoint"
        );
        assert_eq!(endpoints[1]["conditions"]["ready"], false);
        assert_eq!(
            ports,
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
        );
    }

    #[test]
    fn a_headless_services_peers_are_named_and_may_be_published_unready() {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"clusterIP": "None", "selector": {"app": "web"}, "publishNotReadyAddresses": true,
                "ports": [{"port": 5432}]},
        }))
        .unwrap();
        let mut member = pod("db-0", Some("10.244.0.2"), false);
        let spec = member.spec.as_mut().unwrap();
        spec.hostname = Some("db-0".into());
        spec.subdomain = Some("db".into());
        let mut elsewhere = pod("other", Some("10.244.0.3"), true);
        let spec = elsewhere.spec.as_mut().unwrap();
        spec.hostname = Some("other".into());
        spec.subdomain = Some("not-db".into());
        let (subsets, endpoints, _) = compute(&service, &[&member, &elsewhere]);
        assert_eq!(subsets[0]["addresses"][0]["hostname"], "db-0");
        assert!(subsets[0]["addresses"][1].get("hostname").is_none());
        assert!(subsets[0].get("notReadyAddresses").is_none());
        assert_eq!(endpoints[0]["hostname"], "db-0");
        assert_eq!(endpoints[0]["conditions"]["ready"], true);
    }
}
