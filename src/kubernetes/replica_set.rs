//! The ReplicaSet controller, as kube-controller-manager's: a ReplicaSet keeps `replicas` Pods
//! of its template that match its selector, adopting orphans that match, creating what is
//! missing and deleting the surplus least valuable first (unscheduled, then pending, then not
//! ready, then the newest), and reports how many are ready and available.
//!
//! [`plan`] decides for one ReplicaSet, purely; [`run`] keeps every ReplicaSet of a cluster.

use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::expectations::{self, CachedPods, Expectations, Writes};
use super::selectors::label_selector_matches;

const COMPONENT: &str = "replicaset-controller";

/// Whether a Pod is one a controller counts: not finished, not going away.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        )
}

/// Whether a Pod is Ready, and since when.
pub fn ready_since(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
        .map(|c| {
            c.last_transition_time
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default()
        })
}

/// Whether a Pod has been Ready for `min_ready_seconds` at `now` (Unix seconds).
pub fn is_available(pod: &Pod, min_ready_seconds: i64, now: i64) -> bool {
    let Some(since) = ready_since(pod) else {
        return false;
    };
    if min_ready_seconds <= 0 {
        return true;
    }
    let since = since
        .parse::<k8s_openapi::jiff::Timestamp>()
        .map(|t| t.as_second())
        .unwrap_or(now);
    now - since >= min_ready_seconds
}

/// The uid of the Pod's controller.
pub fn controller_of(pod: &impl ResourceExt) -> Option<String> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// How much a Pod is worth keeping, lower first to go: unscheduled, pending, not ready, and
/// among equals the newest.
fn keep_rank(pod: &Pod) -> (bool, bool, bool, std::cmp::Reverse<String>) {
    let scheduled = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    let created = pod
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    (
        scheduled,
        running,
        ready_since(pod).is_some(),
        std::cmp::Reverse(created),
    )
}

/// What a ReplicaSet needs done.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// Orphans to adopt.
    pub adopt: Vec<String>,
    /// Pods to create.
    pub create: usize,
    /// Pods to delete, by name.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: serde_json::Value,
}

/// What one ReplicaSet needs, from every Pod of its namespace.
pub fn plan(rs: &ReplicaSet, pods: &[&Pod], now: i64) -> Plan {
    let spec = rs.spec.clone();
    let uid = rs.uid().unwrap_or_default();
    let namespace = rs.namespace();
    let selected = |p: &Pod| {
        p.namespace() == namespace && label_selector_matches(&spec.selector, &p.labels().clone())
    };
    let mut adopt = Vec::new();
    let mut owned: Vec<&Pod> = Vec::new();
    for pod in pods {
        match controller_of(*pod) {
            Some(owner) if owner == uid => owned.push(pod),
            None if selected(pod) && is_active(pod) && rs.metadata.deletion_timestamp.is_none() => {
                adopt.push(pod.name_any());
                owned.push(pod);
            }
            _ => {}
        }
    }
    let mut active: Vec<&Pod> = owned.iter().copied().filter(|p| is_active(p)).collect();
    let wanted = spec.replicas.unwrap_or(1).max(0) as usize;
    let (create, delete) = if rs.metadata.deletion_timestamp.is_some() {
        (0, Vec::new())
    } else if active.len() < wanted {
        (wanted - active.len(), Vec::new())
    } else {
        active.sort_by_key(|p| keep_rank(p));
        let surplus = active.len() - wanted;
        (0, active[..surplus].iter().map(|p| p.name_any()).collect())
    };
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let fully_labeled = active
        .iter()
        .filter(|p| {
            let labels = p.labels();
            template_labels
                .iter()
                .all(|(k, v)| labels.get(k) == Some(v))
        })
        .count();
    let min_ready = i64::from(spec.min_ready_seconds.unwrap_or(0));
    let ready = active.iter().filter(|p| ready_since(p).is_some()).count();
    let available = active
        .iter()
        .filter(|p| is_available(p, min_ready, now))
        .count();
    let status = json!({
        "replicas": active.len(),
        "fullyLabeledReplicas": fully_labeled,
        "readyReplicas": ready,
        "availableReplicas": available,
        "observedGeneration": rs.metadata.generation.unwrap_or(0),
    });
    Plan {
        adopt,
        create,
        delete,
        status,
    }
}

fn status_differs(rs: &ReplicaSet, status: &serde_json::Value) -> bool {
    super::counters_differ(
        &rs.status,
        status,
        &[
            "replicas",
            "fullyLabeledReplicas",
            "readyReplicas",
            "availableReplicas",
            "observedGeneration",
        ],
    )
}

/// A Pod of the ReplicaSet's template, owned by it.
pub fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs.spec.template.clone();
    super::pod_from_template(rs, template.unwrap_or_default(), Default::default())
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (sets, watch_sets) = watches.cache::<ReplicaSet>(&client);
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let work = async {
        let mut expecting = Expectations::default();
        loop {
            watches.next_pass(Duration::from_secs(5)).await;
            let pods = pods.state();
            let cached = CachedPods::of(&pods);
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            for rs in sets.state() {
                let uid = rs.uid().unwrap_or_default();
                if !expecting.settled(&uid, &cached) {
                    continue;
                }
                let in_namespace: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.namespace() == rs.namespace())
                    .map(|p| &**p)
                    .collect();
                let plan = plan(&rs, &in_namespace, now);
                match sync(&client, &rs, &plan).await {
                    Ok(writes) => expecting.expect(uid, writes),
                    Err(e) => super::report_failure(COMPONENT, &rs.name_any(), &e),
                }
            }
            expecting.retain(sets.state().iter().filter_map(|r| r.uid()));
        }
    };
    tokio::join!(watch_sets, watch_pods, work);
}

/// Carries out a plan; the Pods created and deleted.
async fn sync(client: &Client, rs: &ReplicaSet, plan: &Plan) -> Result<Writes, kube::Error> {
    let namespace = rs.namespace().unwrap_or_default();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    for name in &plan.adopt {
        let owner = json!({"metadata": {"ownerReferences": [super::controller_reference(rs)]}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(owner))
            .await?;
    }
    let mut writes = Writes::default();
    for _ in 0..plan.create {
        match api
            .create(&PostParams::default(), &pod_from_template(rs))
            .await
        {
            Ok(pod) => {
                super::record_event(
                    client,
                    rs,
                    COMPONENT,
                    "Normal",
                    "SuccessfulCreate",
                    &format!("Created pod: {}", pod.name_any()),
                )
                .await;
                writes
                    .created
                    .insert(expectations::key(&namespace, &pod.name_any()));
            }
            Err(e) => {
                super::record_event(
                    client,
                    rs,
                    COMPONENT,
                    "Warning",
                    "FailedCreate",
                    &format!("Error creating: {e}"),
                )
                .await;
                return Err(e);
            }
        }
    }
    for name in &plan.delete {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                super::record_event(
                    client,
                    rs,
                    COMPONENT,
                    "Normal",
                    "SuccessfulDelete",
                    &format!("Deleted pod: {name}"),
                )
                .await;
                writes.deleted.insert(expectations::key(&namespace, name));
            }
            Err(kube::Error::Api(e)) if e.is_not_found() => {
                writes.deleted.insert(expectations::key(&namespace, name));
            }
            Err(e) => return Err(e),
        }
    }
    if status_differs(rs, &plan.status) {
        super::write_status(client, rs, plan.status.clone()).await?;
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(replicas: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "default", "uid": "rs-1", "generation": 2},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
            },
        }))
        .unwrap()
    }

    fn pod(name: &str, owner: Option<&str>, node: Option<&str>, ready: bool, created: &str) -> Pod {
        let owners: Vec<serde_json::Value> = owner
            .map(|uid| json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "x", "uid": uid, "controller": true}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}, "ownerReferences": owners, "creationTimestamp": created},
            "spec": {"containers": [{"name": "c"}], "nodeName": node},
            "status": {
                "phase": if node.is_some() { "Running" } else { "Pending" },
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": "2026-12-05T10:00:00Z"}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_replica_set_creates_what_is_missing_and_adopts_orphans() {
        let orphan = pod("orphan", None, Some("w1"), true, "2026-12-05T09:00:00Z");
        let theirs = pod(
            "theirs",
            Some("other"),
            Some("w1"),
            true,
            "2026-12-05T09:00:00Z",
        );
        let plan = plan(&rs(3), &[&orphan, &theirs], 0);
        assert_eq!(plan.adopt, ["orphan"]);
        assert_eq!(plan.create, 2);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.status["replicas"], 1);
        assert_eq!(plan.status["readyReplicas"], 1);
        assert_eq!(plan.status["observedGeneration"], 2);
    }

    #[test]
    fn the_surplus_goes_least_valuable_first() {
        let pods = [
            pod(
                "old-ready",
                Some("rs-1"),
                Some("w1"),
                true,
                "2026-12-05T09:00:00Z",
            ),
            pod(
                "new-ready",
                Some("rs-1"),
                Some("w2"),
                true,
                "2026-12-05T09:30:00Z",
            ),
            pod(
                "not-ready",
                Some("rs-1"),
                Some("w3"),
                false,
                "2026-12-05T09:00:00Z",
            ),
            pod(
                "unscheduled",
                Some("rs-1"),
                None,
                false,
                "2026-12-05T08:00:00Z",
            ),
        ];
        let refs: Vec<&Pod> = pods.iter().collect();
        assert_eq!(plan(&rs(2), &refs, 0).delete, ["unscheduled", "not-ready"]);
        assert_eq!(
            plan(&rs(1), &refs, 0).delete,
            ["unscheduled", "not-ready", "new-ready"]
        );
        assert_eq!(plan(&rs(4), &refs, 0).delete, Vec::<String>::new());
    }

    #[test]
    fn available_waits_for_min_ready_seconds() {
        let p = pod("p", Some("rs-1"), Some("w1"), true, "2026-12-05T09:00:00Z");
        let ready_at = "2026-12-05T10:00:00Z"
            .parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .as_second();
        assert!(!is_available(&p, 30, ready_at + 10));
        assert!(is_available(&p, 30, ready_at + 30));
        assert!(is_available(&p, 0, ready_at));
    }
}
