//! The DaemonSet controller, as kube-controller-manager's: one Pod of the template on every
//! Node its selector, affinity and tolerations allow (with the tolerations kube adds to every
//! daemon Pod), each pinned to its Node by required node affinity and placed by the scheduler;
//! a template change replaces the Pods `maxUnavailable` at a time (RollingUpdate) or when
//! they are deleted (OnDelete).
//!
//! [`plan`] decides for one DaemonSet, purely; [`run`] keeps every DaemonSet of a cluster.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSet};
use k8s_openapi::api::core::v1::{Node, Pod, PodSpec, PodTemplateSpec, Toleration};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::deployment::template_hash;
use super::expectations::{self, CachedPods, Expectations, Writes};
use super::history;
use super::replica_set::{controller_of, is_active, is_available, ready_since};
use super::scheduler::{matches_node_affinity, untolerated_taint};

const COMPONENT: &str = "daemonset-controller";
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The tolerations kube adds to every daemon Pod, so that node conditions never take it away.
fn daemon_tolerations(spec: &PodSpec) -> Vec<Toleration> {
    let mut out = spec.tolerations.clone().unwrap_or_default();
    let mut add = |key: &str, effect: &str| {
        if !out
            .iter()
            .any(|t| t.key.as_deref() == Some(key) && t.effect.as_deref() == Some(effect))
        {
            out.push(Toleration {
                key: Some(key.into()),
                operator: Some("Exists".into()),
                effect: Some(effect.into()),
                ..Default::default()
            });
        }
    };
    add("node.kubernetes.io/not-ready", "NoExecute");
    add("node.kubernetes.io/unreachable", "NoExecute");
    add("node.kubernetes.io/disk-pressure", "NoSchedule");
    add("node.kubernetes.io/memory-pressure", "NoSchedule");
    add("node.kubernetes.io/pid-pressure", "NoSchedule");
    add("node.kubernetes.io/unschedulable", "NoSchedule");
    if spec.host_network == Some(true) {
        add("node.kubernetes.io/network-unavailable", "NoSchedule");
    }
    out
}

/// The daemon Pod for `node`: the template, its revision's label, the daemon tolerations and
/// required node affinity to that Node alone.
pub fn pod_for(ds: &DaemonSet, hash: &str, node: &str) -> Pod {
    let template: PodTemplateSpec = ds.spec.template.clone();
    let meta = template.metadata.unwrap_or_default();
    let mut labels = meta.labels.unwrap_or_default();
    labels.insert(REVISION_LABEL.into(), hash.into());
    let mut spec = template.spec.unwrap_or_default();
    spec.tolerations = Some(daemon_tolerations(&spec));
    let mut affinity: Value =
        serde_json::to_value(spec.affinity.clone().unwrap_or_default()).unwrap_or_default();
    affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = json!({
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    });
    spec.affinity = serde_json::from_value(affinity).ok();
    Pod {
        metadata: kube::api::ObjectMeta {
            generate_name: Some(format!("{}-", ds.name_any())),
            namespace: ds.namespace(),
            labels: Some(labels),
            annotations: meta.annotations,
            owner_references: Some(vec![super::controller_reference(ds)]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The hash of the DaemonSet's current template, its Pods' `controller-revision-hash`.
fn revision_hash(ds: &DaemonSet) -> String {
    let collisions = ds.status.as_ref().and_then(|s| s.collision_count);
    template_hash(&ds.spec.template, collisions.unwrap_or(0))
}

/// What the DaemonSet's history needs (its revisions among `revisions`, its Pods among `pods`):
/// the revision of its template, named `<set>-<hash>` (its Pods carry the hash).
pub fn history(
    ds: &DaemonSet,
    revisions: &[std::sync::Arc<ControllerRevision>],
    pods: &[&Pod],
) -> history::Plan {
    let uid = ds.uid();
    let live = pods
        .iter()
        .filter(|p| uid.is_some() && controller_of(**p) == uid)
        .filter_map(|p| p.labels().get(REVISION_LABEL))
        .map(|hash| history::revision_name(&ds.name_any(), hash))
        .collect();
    let current = history::Current {
        template: &ds.spec.template,
        hash: revision_hash(ds),
        collision_count: ds
            .status
            .as_ref()
            .and_then(|s| s.collision_count)
            .unwrap_or(0),
    };
    let owned = history::owned_by(ds, revisions);
    history::plan(ds, &current, &owned, &live, ds.spec.revision_history_limit)
}

/// The Node a daemon Pod is for: where it is bound, or where its affinity pins it.
fn target_node(pod: &Pod) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    if let Some(n) = spec.node_name.as_ref().filter(|n| !n.is_empty()) {
        return Some(n.clone());
    }
    let terms = &spec
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    terms
        .iter()
        .flat_map(|t| t.match_fields.iter().flatten())
        .find(|f| f.key == "metadata.name" && f.operator == "In")
        .and_then(|f| f.values.as_ref()?.first().cloned())
}

/// What a DaemonSet needs done.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// Nodes to create a Pod for.
    pub create: Vec<String>,
    /// Pods to delete.
    pub delete: Vec<String>,
    pub status: Value,
}

/// What one DaemonSet needs, from the Nodes and the Pods of its namespace.
pub fn plan(ds: &DaemonSet, nodes: &[&Node], pods: &[&Pod], now: i64) -> Plan {
    let uid = ds.uid().unwrap_or_default();
    let hash = revision_hash(ds);
    let probe = pod_for(ds, &hash, "");
    let eligible = |node: &Node| {
        // Affinity as the template has it (the pinning is ours), tolerations with the daemon's.
        let mut template_pod = probe.clone();
        if let Some(spec) = template_pod.spec.as_mut() {
            spec.affinity = ds
                .spec
                .template
                .spec
                .as_ref()
                .and_then(|s| s.affinity.clone());
        }
        untolerated_taint(&template_pod, node).is_none()
            && matches_node_affinity(&template_pod, node)
    };
    let mut by_node: BTreeMap<String, Vec<&Pod>> = BTreeMap::new();
    for pod in pods {
        if controller_of(*pod).as_deref() == Some(uid.as_str()) && is_active(pod) {
            by_node
                .entry(target_node(pod).unwrap_or_default())
                .or_default()
                .push(pod);
        }
    }
    let min_ready = i64::from(ds.spec.min_ready_seconds.unwrap_or(0));
    let rolling = ds
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        != Some("OnDelete");
    let max_unavailable = match ds
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_unavailable.clone())
    {
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(n)) => {
            n.max(0) as usize
        }
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String(s)) => {
            let percent: usize = s.trim_end_matches('%').parse().unwrap_or(0);
            let wanted = nodes.iter().filter(|n| eligible(n)).count();
            (percent * wanted / 100).max(1)
        }
        None => 1,
    };
    let mut out = Plan::default();
    let (mut desired, mut current, mut ready, mut available, mut updated, mut misscheduled) =
        (0, 0, 0, 0, 0, 0);
    let mut unavailable_now = 0;
    let mut outdated: Vec<&Pod> = Vec::new();
    for node in nodes {
        let name = node.name_any();
        let mut here = by_node.remove(&name).unwrap_or_default();
        if !eligible(node) {
            misscheduled += usize::from(!here.is_empty());
            out.delete.extend(here.iter().map(|p| p.name_any()));
            continue;
        }
        desired += 1;
        if here.is_empty() {
            if ds.metadata.deletion_timestamp.is_none() {
                out.create.push(name);
            }
            unavailable_now += 1;
            continue;
        }
        current += 1;
        // One Pod a Node: a running one before one that is not, then the oldest, then by
        // name, as kube orders them; the order must not depend on the cache's, or two passes
        // could each keep a different Pod and delete both.
        here.sort_by_key(|p| {
            (
                p.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Running"),
                p.metadata.creation_timestamp.clone(),
                p.name_any(),
            )
        });
        out.delete.extend(here[1..].iter().map(|p| p.name_any()));
        let pod = here[0];
        let is_new = pod.labels().get(REVISION_LABEL) == Some(&hash);
        updated += usize::from(is_new);
        ready += usize::from(ready_since(pod).is_some());
        if is_available(pod, min_ready, now) {
            available += 1;
            if !is_new {
                outdated.push(pod);
            }
        } else {
            unavailable_now += 1;
            if !is_new && rolling {
                // An old Pod that is not available anyway goes at once.
                out.delete.push(pod.name_any());
            }
        }
    }
    // Pods for Nodes that are gone.
    for pods in by_node.values() {
        out.delete.extend(pods.iter().map(|p| p.name_any()));
    }
    if rolling {
        let room = max_unavailable.saturating_sub(unavailable_now);
        out.delete
            .extend(outdated.iter().take(room).map(|p| p.name_any()));
    }
    out.status = json!({
        "desiredNumberScheduled": desired,
        "currentNumberScheduled": current,
        "numberMisscheduled": misscheduled,
        "numberReady": ready,
        "numberAvailable": available,
        "numberUnavailable": desired - available,
        "updatedNumberScheduled": updated,
        "observedGeneration": ds.metadata.generation.unwrap_or(0),
    });
    out
}

fn status_differs(ds: &DaemonSet, status: &Value) -> bool {
    let keys: Vec<&str> = status
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, _)| k.as_str())
        .collect();
    super::counters_differ(&ds.status, status, &keys)
}

/// Runs the controller until the future is dropped.
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (sets, watch_sets) = watches.cache::<DaemonSet>(&client);
    let (nodes, watch_nodes) = watches.cache::<Node>(&client);
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (revisions, watch_revisions) = watches.cache::<ControllerRevision>(&client);
    let work = async {
        let mut expecting = Expectations::default();
        loop {
            watches.next_pass(Duration::from_secs(5)).await;
            let nodes = nodes.state();
            let node_refs: Vec<&Node> = nodes.iter().map(|n| &**n).collect();
            let pods = pods.state();
            let cached = CachedPods::of(&pods);
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            let revisions = revisions.state();
            for ds in sets.state() {
                let uid = ds.uid().unwrap_or_default();
                if !expecting.settled(&uid, &cached) {
                    continue;
                }
                let mine: Vec<&Pod> = pods
                    .iter()
                    .filter(|p| p.namespace() == ds.namespace())
                    .map(|p| &**p)
                    .collect();
                let history = history(&ds, &revisions, &mine);
                if !super::keep_history(&client, &*ds, &history, COMPONENT).await {
                    continue;
                }
                let plan = plan(&ds, &node_refs, &mine, now);
                match sync(&client, &ds, &plan).await {
                    Ok(writes) => expecting.expect(uid, writes),
                    Err(e) => super::report_failure(COMPONENT, &ds.name_any(), &e),
                }
            }
            expecting.retain(sets.state().iter().filter_map(|s| s.uid()));
        }
    };
    tokio::join!(watch_sets, watch_nodes, watch_pods, watch_revisions, work);
}

/// Carries out a plan; the Pods created and deleted.
async fn sync(client: &Client, ds: &DaemonSet, plan: &Plan) -> Result<Writes, kube::Error> {
    let namespace = ds.namespace().unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let hash = revision_hash(ds);
    let mut writes = Writes::default();
    for node in &plan.create {
        let pod = pods
            .create(&PostParams::default(), &pod_for(ds, &hash, node))
            .await?;
        writes
            .created
            .insert(expectations::key(&namespace, &pod.name_any()));
        super::record_event(
            client,
            ds,
            COMPONENT,
            "Normal",
            "SuccessfulCreate",
            &format!("Created pod: {}", pod.name_any()),
        )
        .await;
    }
    for name in &plan.delete {
        match pods.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                super::record_event(
                    client,
                    ds,
                    COMPONENT,
                    "Normal",
                    "SuccessfulDelete",
                    &format!("Deleted pod: {name}"),
                )
                .await
            }
            Err(kube::Error::Api(e)) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
        writes.deleted.insert(expectations::key(&namespace, name));
    }
    if status_differs(ds, &plan.status) {
        super::write_status(client, ds, plan.status.clone()).await?;
    }
    Ok(writes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, taint: Option<&str>) -> Node {
        let taints: Vec<Value> = taint
            .map(|k| json!({"key": k, "effect": "NoSchedule"}))
            .into_iter()
            .collect();
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"taints": taints}}))
            .unwrap()
    }

    fn daemon_set(template_spec: Value) -> DaemonSet {
        serde_json::from_value(json!({
            "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-1", "generation": 1},
            "spec": {
                "selector": {"matchLabels": {"app": "agent"}},
                "template": {"metadata": {"labels": {"app": "agent"}}, "spec": template_spec},
            },
        }))
        .unwrap()
    }

    fn running(ds: &DaemonSet, name: &str, node: &str, hash: &str) -> Pod {
        let mut pod = pod_for(ds, hash, node);
        pod.metadata.name = Some(name.into());
        pod.metadata.owner_references.as_mut().unwrap()[0].uid = "ds-1".into();
        pod.spec.as_mut().unwrap().node_name = Some(node.into());
        pod.status = serde_json::from_value(
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        )
        .unwrap();
        pod
    }

    #[test]
    fn a_pod_on_every_node_that_tolerates() {
        let cp = node("cp", Some("node-role.kubernetes.io/control-plane"));
        let (w1, w2) = (
            node("w1", None),
            node("w2", Some("node.kubernetes.io/unschedulable")),
        );
        let nodes = [&cp, &w1, &w2];
        let plain = daemon_set(json!({"containers": [{"name": "c"}]}));
        assert_eq!(
            plan(&plain, &nodes, &[], 0).create,
            ["w1", "w2"],
            "cordoned Nodes too, control planes not"
        );
        let everywhere = daemon_set(
            json!({"containers": [{"name": "c"}], "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]}),
        );
        let p = plan(&everywhere, &nodes, &[], 0);
        assert_eq!(p.create, ["cp", "w1", "w2"]);
        assert_eq!(p.status["desiredNumberScheduled"], 3);
        let pinned = pod_for(&everywhere, "h", "w1");
        assert_eq!(
            target_node(&pinned).as_deref(),
            Some("w1"),
            "pinned by node affinity"
        );
    }

    #[test]
    fn a_new_template_replaces_one_pod_at_a_time() {
        let ds = daemon_set(json!({"containers": [{"name": "c", "image": "agent:2"}]}));
        let (w1, w2) = (node("w1", None), node("w2", None));
        let old = [
            running(&ds, "a", "w1", "old"),
            running(&ds, "b", "w2", "old"),
        ];
        let refs: Vec<&Pod> = old.iter().collect();
        let p = plan(&ds, &[&w1, &w2], &refs, 0);
        assert_eq!(p.delete, ["a"], "maxUnavailable 1");
        assert!(p.create.is_empty());
        assert_eq!(p.status["updatedNumberScheduled"], 0);
        // A Pod for a Node that is gone goes.
        let p = plan(&ds, &[&w1], &refs, 0);
        assert!(p.delete.contains(&"b".to_string()), "{:?}", p.delete);
    }

    #[test]
    fn of_two_pods_on_a_node_the_same_one_goes_whatever_the_cache_order() {
        let ds = daemon_set(json!({"containers": [{"name": "c"}]}));
        let w1 = node("w1", None);
        let hash = revision_hash(&ds);
        let a = running(&ds, "agent-a", "w1", &hash);
        let b = running(&ds, "agent-b", "w1", &hash);
        let mut pending = running(&ds, "agent-0", "w1", &hash);
        pending.status.as_mut().unwrap().phase = Some("Pending".into());
        for pods in [[&a, &b, &pending], [&pending, &b, &a], [&b, &pending, &a]] {
            let mut deleted = plan(&ds, &[&w1], &pods, 0).delete;
            deleted.sort();
            assert_eq!(
                deleted,
                ["agent-0", "agent-b"],
                "a running Pod stays, then by name"
            );
        }
    }
}
