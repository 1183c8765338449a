//! Draining a workload cluster's Node before its Machine goes, as `kubectl drain` does:
//! cordon, then evict (not delete) every Pod but DaemonSet, mirror and finished ones, so that
//! PodDisruptionBudgets get their say.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

/// Cordons the Node and evicts its Pods (DaemonSet and mirror Pods stay); returns what is still
/// there to go.
pub async fn drain(client: &Client, node: &str) -> Result<Remaining, kube::Error> {
    let nodes = Api::<Node>::all(client.clone());
    let Some(found) = nodes.get_opt(node).await? else {
        return Ok(Remaining::default());
    };
    if found.spec.as_ref().and_then(|s| s.unschedulable) != Some(true) {
        let cordon = json!({"spec": {"unschedulable": true}});
        nodes
            .patch(node, &PatchParams::default(), &Patch::Merge(cordon))
            .await?;
    }
    let unreachable = unreachable(&found);
    let now = k8s_openapi::jiff::Timestamp::now();
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await?;
    let mut remaining = Remaining::default();
    for pod in pods.items {
        let daemon = pod.owner_references().iter().any(|r| r.kind == "DaemonSet");
        let mirror = pod
            .annotations()
            .contains_key("kubernetes.io/config.mirror");
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        // No kubelet confirms a deletion on an unreachable Node: a Pod being deleted there for
        // more than a second is as good as gone (upstream's SkipWaitForDeleteTimeoutSeconds).
        let given_up = unreachable
            && pod
                .meta()
                .deletion_timestamp
                .as_ref()
                .is_some_and(|t| now.duration_since(t.0).as_secs() >= 1);
        if daemon || mirror || finished || given_up {
            continue;
        }
        remaining.pods += 1;
        if pod.meta().deletion_timestamp.is_none() {
            let api: Api<Pod> =
                Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
            // Evicted, not deleted: PodDisruptionBudgets get their say.
            match api.evict(&pod.name_any(), &EvictParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 429 => remaining.refused.push(format!(
                    "Pod {}/{}: {}",
                    pod.namespace().unwrap_or_default(),
                    pod.name_any(),
                    disruption_cause(&e)
                )),
                Err(kube::Error::Api(e)) if e.code == 404 => remaining.pods -= 1,
                Err(e) => remaining.refused.push(format!(
                    "Pod {}/{}: eviction failed: {e}",
                    pod.namespace().unwrap_or_default(),
                    pod.name_any()
                )),
            }
        }
    }
    Ok(remaining)
}

/// Whether the Node's kubelet stopped reporting: Ready is Unknown.
fn unreachable(node: &Node) -> bool {
    node.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "Unknown")
}

/// What is left of a drain: the Pods still on the Node, and why evictions were refused.
#[derive(Debug, Default)]
pub struct Remaining {
    pub pods: usize,
    pub refused: Vec<String>,
}

/// Why an eviction was refused: the budget's own words when the API server gives them.
fn disruption_cause(e: &kube::core::Status) -> String {
    let cause = e
        .details
        .as_ref()
        .and_then(|d| d.causes.first())
        .map(|c| c.message.clone());
    match cause {
        Some(c) if !c.is_empty() => format!("{} {c}", e.message),
        _ => e.message.clone(),
    }
}
