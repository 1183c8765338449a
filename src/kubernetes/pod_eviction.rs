//! What takes Pods off Nodes that cannot run them, as kube-controller-manager does: the taint
//! eviction controller deletes a Pod from a Node with a `NoExecute` taint it does not tolerate
//! (at once, or after its `tolerationSeconds`; kube-apiserver's DefaultTolerationSeconds gives
//! every Pod 300 s for `not-ready` and `unreachable`), and the Pod garbage collector deletes
//! Pods bound to Nodes that no longer exist. Their controllers then make new ones elsewhere.
//!
//! [`to_evict`] decides, purely; [`run`] acts.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Toleration};
use kube::api::{Api, DeleteParams};
use kube::{Client, ResourceExt};

use super::scheduler::tolerates;

const COMPONENT: &str = "taint-eviction-controller";
/// kube-apiserver's DefaultTolerationSeconds.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;
/// How long a Pod's Node must have been missing before the Pod is collected (kube's podgc
/// quarantine), so that a Node being re-registered keeps its Pods.
const ORPHAN_QUARANTINE_SECONDS: i64 = 40;

/// Why a Pod goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Eviction {
    /// A `NoExecute` taint it does not tolerate (any longer).
    Taint(String),
    /// Its Node is gone.
    Orphaned,
}

fn tolerations(pod: &Pod) -> Vec<Toleration> {
    let mut out = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        let has = out.iter().any(|t| {
            (t.key.as_deref() == Some(key)
                || (t.key.is_none() && t.operator.as_deref() == Some("Exists")))
                && t.effect
                    .as_deref()
                    .is_none_or(|e| e.is_empty() || e == "NoExecute")
        });
        if !has {
            out.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                toleration_seconds: Some(DEFAULT_TOLERATION_SECONDS),
                ..Default::default()
            });
        }
    }
    out
}

/// The Pods to delete at `now` (Unix seconds), and why; `missing_since` says since when each
/// missing Node has been seen missing.
pub fn to_evict<'a>(
    pods: &[&'a Pod],
    nodes: &[&Node],
    missing_since: &BTreeMap<String, i64>,
    now: i64,
) -> Vec<(&'a Pod, Eviction)> {
    let mut out = Vec::new();
    for pod in pods {
        let Some(node_name) = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .filter(|n| !n.is_empty())
        else {
            continue;
        };
        let Some(node) = nodes.iter().find(|n| n.name_any() == node_name) else {
            // No kubelet will confirm a Pod of a Node that is gone, terminating or not: it is
            // collected at once (kube's podgc deletes orphans with no grace period).
            if missing_since
                .get(&node_name)
                .is_some_and(|since| now - since >= ORPHAN_QUARANTINE_SECONDS)
            {
                out.push((*pod, Eviction::Orphaned));
            }
            continue;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let tolerations = tolerations(pod);
        for taint in node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
        {
            if taint.effect != "NoExecute" {
                continue;
            }
            let matching: Vec<&Toleration> =
                tolerations.iter().filter(|t| tolerates(t, taint)).collect();
            let added = taint.time_added.as_ref().map_or(now, |t| t.0.as_second());
            // The shortest matching toleration bounds the stay; none bounded is forever.
            let stay = matching
                .iter()
                .map(|t| t.toleration_seconds)
                .collect::<Option<Vec<i64>>>()
                .map(|s| s.into_iter().min());
            let expired = match (matching.is_empty(), stay) {
                (true, _) => true,
                (false, Some(Some(seconds))) => now - added >= seconds.max(0),
                _ => false,
            };
            if expired {
                out.push((
                    *pod,
                    Eviction::Taint(format!("{}:{}", taint.key, taint.effect)),
                ));
                break;
            }
        }
    }
    out
}

/// Runs both until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (nodes, watch_nodes) = watches.cache::<Node>(&client);
    let work = async {
        let mut missing_since: BTreeMap<String, i64> = BTreeMap::new();
        loop {
            watches.next_pass(Duration::from_secs(5)).await;
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let nodes = nodes.state();
            let node_refs: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
            let pods = pods.state();
            let pod_refs: Vec<&Pod> = pods.iter().map(|p| &**p).collect();
            let wanted: Vec<String> = pod_refs
                .iter()
                .filter_map(|p| p.spec.as_ref()?.node_name.clone())
                .filter(|n| !n.is_empty() && !node_refs.iter().any(|node| node.name_any() == *n))
                .collect();
            missing_since.retain(|n, _| wanted.contains(n));
            for n in wanted {
                missing_since.entry(n).or_insert(now);
            }
            for (pod, why) in to_evict(&pod_refs, &node_refs, &missing_since, now) {
                let api: Api<Pod> =
                    Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
                let (component, reason, message) = match &why {
                    Eviction::Taint(taint) => (
                        COMPONENT,
                        "TaintManagerEviction",
                        format!(
                            "Marking for deletion Pod {}/{}: taint {taint}",
                            pod.namespace().unwrap_or_default(),
                            pod.name_any()
                        ),
                    ),
                    Eviction::Orphaned => (
                        "pod-garbage-collector",
                        "DeletingOrphanedPod",
                        format!(
                            "Deleting orphaned Pod {}/{}: its Node is gone",
                            pod.namespace().unwrap_or_default(),
                            pod.name_any()
                        ),
                    ),
                };
                // The kubelet of an orphaned or unreachable Node cannot confirm: no grace.
                let params = match why {
                    Eviction::Orphaned => DeleteParams::default().grace_period(0),
                    Eviction::Taint(_) => DeleteParams::default(),
                };
                match api.delete(&pod.name_any(), &params).await {
                    Ok(_) => {
                        super::record_event(&client, pod, component, "Normal", reason, &message)
                            .await
                    }
                    Err(e) => super::report_failure(component, &pod.name_any(), &e),
                }
            }
        }
    };
    tokio::join!(watch_pods, watch_nodes, work);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"taints": taints}}))
            .unwrap()
    }

    fn pod(name: &str, node: &str, tolerations: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [], "tolerations": tolerations}})).unwrap()
    }

    #[test]
    fn pods_leave_nodes_they_no_longer_tolerate() {
        let t0 = "2027-01-15T08:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        let unreachable = node(
            "w1",
            json!([{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2027-01-15T08:00:00Z"}]),
        );
        let drained = node("w2", json!([{"key": "maintenance", "effect": "NoExecute"}]));
        let plain = pod("plain", "w1", json!([]));
        let short = pod(
            "short",
            "w1",
            json!([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]),
        );
        let forever = pod("forever", "w1", json!([{"operator": "Exists"}]));
        let maintained = pod("maintained", "w2", json!([]));
        let orphan = pod("orphan", "gone", json!([]));
        // Terminating: a kubelet that is there confirms it; one that is gone never will.
        let terminating = |name: &str, node: &str| {
            let mut p = pod(name, node, json!([]));
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    "2027-01-15T08:00:00Z".parse().unwrap(),
                ));
            p
        };
        let (leaving, stranded) = (
            terminating("leaving", "w2"),
            terminating("stranded", "gone"),
        );
        let pods = [
            &plain,
            &short,
            &forever,
            &maintained,
            &orphan,
            &leaving,
            &stranded,
        ];
        let nodes = [&unreachable, &drained];
        let missing = BTreeMap::from([("gone".to_string(), t0)]);
        let names = |now: i64| -> Vec<String> {
            to_evict(&pods, &nodes, &missing, now)
                .iter()
                .map(|(p, _)| p.name_any())
                .collect()
        };
        assert_eq!(
            names(t0 + 10),
            ["maintained"],
            "untolerated at once; defaults give 300 s"
        );
        assert_eq!(names(t0 + 30), ["short", "maintained"]);
        assert_eq!(
            names(t0 + 40),
            ["short", "maintained", "orphan", "stranded"],
            "orphans after the quarantine, terminating or not"
        );
        assert_eq!(
            names(t0 + 300),
            ["plain", "short", "maintained", "orphan", "stranded"],
            "a bare toleration is forever"
        );
    }
}
