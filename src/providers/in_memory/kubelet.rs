//! The in-memory nodes' kubelet, as KWOK's: a Pod bound to one of the cluster's Nodes is
//! reported Running and Ready, with an IP, its containers' statuses and QoS class, without any
//! process behind it. With the scheduler and the ReplicaSet and Deployment controllers beside
//! it, a workload cluster's Deployments come up, drains move their Pods, and disruption
//! budgets hold Machines, as on real nodes.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::kubernetes;

/// Pod addresses: 10.244.0.0/16, one per Pod of the cluster.
const POD_NETWORK: u32 = u32::from_be_bytes([10, 244, 0, 0]);

/// The QoS class kubelet gives a Pod: Guaranteed when every container's CPU and memory
/// requests equal their limits, BestEffort when nothing is asked, else Burstable.
pub fn qos_class(pod: &Pod) -> &'static str {
    let containers = pod.spec.iter().flat_map(|s| {
        s.containers
            .iter()
            .chain(s.init_containers.iter().flatten())
    });
    let mut any = false;
    let mut guaranteed = true;
    for c in containers {
        let r = c.resources.clone().unwrap_or_default();
        let limits = r.limits.unwrap_or_default();
        let requests = r.requests.unwrap_or_default();
        any |= !limits.is_empty() || !requests.is_empty();
        for resource in ["cpu", "memory"] {
            let limit = limits.get(resource);
            let request = requests.get(resource).or(limit);
            if limit.is_none() || request != limit {
                guaranteed = false;
            }
        }
    }
    match (any, guaranteed) {
        (false, _) => "BestEffort",
        (true, true) => "Guaranteed",
        (true, false) => "Burstable",
    }
}

/// The status kubelet reports for a Pod it started at `now` on `address`.
pub fn running_status(pod: &Pod, pod_ip: Ipv4Addr, host_ip: &str, now: &str) -> Value {
    let uid = pod.uid().unwrap_or_default();
    let containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            json!({
                "name": c.name,
                "image": image,
                "imageID": format!("in-memory://{image}"),
                "containerID": format!("in-memory://{uid}/{}", c.name),
                "ready": true,
                "started": true,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            })
        })
        .collect();
    let condition = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": now});
    json!({
        "phase": "Running",
        "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip.to_string(),
        "podIPs": [{"ip": pod_ip.to_string()}],
        "startTime": now,
        "containerStatuses": containers,
        "qosClass": qos_class(pod),
    })
}

fn internal_ip(node: &Node) -> String {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .find(|a| a.type_ == "InternalIP")
        .map_or_else(|| "127.0.0.1".to_string(), |a| a.address.clone())
}

/// Runs the kubelet of every Node of the cluster until the future is dropped.
pub async fn run(client: Client) {
    let watches = kubernetes::Watches::default();
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (nodes, watch_nodes) = watches.cache::<Node>(&client);
    let work = async {
        loop {
            watches.next_pass(Duration::from_secs(10)).await;
            let nodes = nodes.state();
            let pods = pods.state();
            let mut used: BTreeSet<Ipv4Addr> = pods
                .iter()
                .filter_map(|p| p.status.as_ref()?.pod_ip.as_ref()?.parse().ok())
                .collect();
            let mut next = POD_NETWORK + 2;
            for pod in pods.iter() {
                let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) else {
                    continue;
                };
                // Mirror Pods are the simulated control plane's own, reported by its boot.
                if pod
                    .annotations()
                    .contains_key(crate::node::pods::CONFIG_MIRROR_ANNOTATION)
                {
                    continue;
                }
                let Some(node) = nodes.iter().find(|n| n.name_any() == node_name) else {
                    continue;
                };
                let api: Api<Pod> =
                    Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
                if pod.metadata.deletion_timestamp.is_some() {
                    // Nothing to stop: the kubelet confirms the deletion at once.
                    let _ = api
                        .delete(&pod.name_any(), &DeleteParams::default().grace_period(0))
                        .await;
                    continue;
                }
                let status = pod.status.clone().unwrap_or_default();
                if status.phase.as_deref() == Some("Running") && status.pod_ip.is_some() {
                    continue;
                }
                while used.contains(&Ipv4Addr::from(next)) {
                    next += 1;
                }
                let ip = Ipv4Addr::from(next);
                used.insert(ip);
                let status = running_status(pod, ip, &internal_ip(node), &kubernetes::now());
                if let Err(e) = api
                    .patch_status(
                        &pod.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(json!({ "status": status })),
                    )
                    .await
                {
                    kubernetes::report_failure("kubelet", &pod.name_any(), &e);
                }
            }
        }
    };
    tokio::join!(watch_pods, watch_nodes, work);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes_as_kubelet_gives_them() {
        for (resources, class) in [
            (json!({}), "BestEffort"),
            (json!({"requests": {"cpu": "100m"}}), "Burstable"),
            (
                json!({"limits": {"cpu": "1", "memory": "1Gi"}}),
                "Guaranteed",
            ),
            (
                json!({"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}),
                "Burstable",
            ),
        ] {
            let pod: Pod = serde_json::from_value(
                json!({"spec": {"containers": [{"name": "c", "resources": resources}]}}),
            )
            .unwrap();
            assert_eq!(qos_class(&pod), class, "{resources}");
        }
    }
}
