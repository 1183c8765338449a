//! kube-scheduler's default profile, for the workload clusters' control planes: a Pod goes to
//! a Node that passes every filter (unschedulable, taints, node affinity and selector, host
//! ports, resources, required pod anti-affinity), the one that spreads the Pod's siblings best
//! and is least allocated; a Pod whose PersistentVolumeClaims are missing or unbound goes
//! nowhere yet; a Pod no Node takes is told why in kube-scheduler's words.
//!
//! [`place`] decides, purely; [`run`] watches Pods and Nodes and binds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, PersistentVolumeClaim, Pod, Taint, Toleration};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::resources::{allocatable, pod_requests};
use super::selectors::{label_selector_matches, node_term_matches};

/// The scheduler's name in Pods' `spec.schedulerName` and in its Events.
pub const DEFAULT_SCHEDULER: &str = "default-scheduler";

/// Why a Node was filtered out, as kube-scheduler's plugins say it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    Unschedulable,
    Taint(String),
    Affinity,
    Ports,
    Insufficient(String),
    TooManyPods,
    AntiAffinity,
}

impl Reason {
    fn text(&self) -> String {
        match self {
            Reason::Unschedulable => "node(s) were unschedulable".into(),
            Reason::Taint(t) => format!("node(s) had untolerated taint {t}"),
            Reason::Affinity => "node(s) didn't match Pod's node affinity/selector".into(),
            Reason::Ports => "node(s) didn't have free ports for the requested pod ports".into(),
            Reason::Insufficient(r) => format!("Insufficient {r}"),
            Reason::TooManyPods => "Too many pods".into(),
            Reason::AntiAffinity => "node(s) didn't match pod anti-affinity rules".into(),
        }
    }

    /// Whether evicting lower-priority Pods could help (kube's `Unschedulable`) or not
    /// (`UnschedulableAndUnresolvable`), which the preemption part of the message tells.
    fn resolvable_by_preemption(&self) -> bool {
        matches!(
            self,
            Reason::Ports | Reason::Insufficient(_) | Reason::TooManyPods | Reason::AntiAffinity
        )
    }
}

/// Why no Node took a Pod, in kube-scheduler's words: "0/6 nodes are available: 3 node(s)
/// had untolerated taint {node-role.kubernetes.io/control-plane: }, 3 Insufficient cpu.
/// preemption: 0/6 nodes are available: 3 No preemption victims found for incoming pod, 3
/// Preemption is not helpful for scheduling.."
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FitError {
    pub nodes: usize,
    /// Each Node's reasons.
    pub reasons: Vec<Vec<Reason>>,
    /// Why the Pod could go to no Node whatever the Nodes (kube's PreFilter plugins): then
    /// no Node is looked at.
    pub pre_filter: Option<String>,
}

impl std::fmt::Display for FitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nodes == 0 {
            return write!(f, "no nodes available to schedule pods");
        }
        if let Some(why) = &self.pre_filter {
            return write!(
                f,
                "0/{n} nodes are available: {why}. preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling.",
                n = self.nodes
            );
        }
        let mut histogram: BTreeMap<String, usize> = BTreeMap::new();
        let (mut helpful, mut not_helpful) = (0, 0);
        for reasons in &self.reasons {
            for r in reasons {
                *histogram.entry(r.text()).or_default() += 1;
            }
            if reasons.iter().all(Reason::resolvable_by_preemption) {
                helpful += 1;
            } else {
                not_helpful += 1;
            }
        }
        let mut parts: Vec<String> = histogram
            .iter()
            .map(|(text, n)| format!("{n} {text}"))
            .collect();
        parts.sort();
        let mut preemption = Vec::new();
        if helpful > 0 {
            preemption.push(format!(
                "{helpful} No preemption victims found for incoming pod"
            ));
        }
        if not_helpful > 0 {
            preemption.push(format!(
                "{not_helpful} Preemption is not helpful for scheduling"
            ));
        }
        write!(
            f,
            "0/{n} nodes are available: {}. preemption: 0/{n} nodes are available: {}.",
            parts.join(", "),
            preemption.join(", "),
            n = self.nodes
        )
    }
}

/// Whether a toleration tolerates a taint (its effect, key, and value or existence).
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    if let Some(effect) = toleration.effect.as_deref().filter(|e| !e.is_empty())
        && effect != taint.effect
    {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => key.is_empty() || key == taint.key,
        _ => {
            key == taint.key
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
    }
}

/// Whether the Pod tolerates every taint of a kind that keeps Pods away (`NoSchedule`,
/// `NoExecute`); the first it does not, written as kube-scheduler writes it.
pub fn untolerated_taint(pod: &Pod, node: &Node) -> Option<String> {
    let tolerations = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default();
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !tolerations.iter().any(|tol| tolerates(tol, t)))
        .map(|t| format!("{{{}: {}}}", t.key, t.value.as_deref().unwrap_or_default()))
}

fn node_labels(node: &Node) -> BTreeMap<String, String> {
    node.metadata.labels.clone().unwrap_or_default()
}

pub fn matches_node_affinity(pod: &Pod, node: &Node) -> bool {
    let Some(spec) = &pod.spec else { return true };
    let labels = node_labels(node);
    if !spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    required.is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|t| node_term_matches(t, node))
    })
}

fn host_ports(pod: &Pod) -> Vec<(String, String, i32)> {
    pod.spec
        .iter()
        .flat_map(|s| {
            s.containers
                .iter()
                .chain(s.init_containers.iter().flatten())
        })
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            let port = p.host_port.filter(|p| *p > 0)?;
            Some((
                p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                p.host_ip.clone().unwrap_or_else(|| "0.0.0.0".into()),
                port,
            ))
        })
        .collect()
}

fn ports_conflict(wanted: &[(String, String, i32)], taken: &[(String, String, i32)]) -> bool {
    wanted.iter().any(|(proto, ip, port)| {
        taken.iter().any(|(p, i, n)| {
            p == proto && n == port && (ip == i || ip == "0.0.0.0" || i == "0.0.0.0")
        })
    })
}

fn namespace_of(pod: &Pod) -> String {
    pod.namespace().unwrap_or_else(|| "default".into())
}

/// Whether `existing`, on a Node in `existing_domain`, and `pod` placed in `domain` would break a
/// required anti-affinity term of `owner` (one of the two) against `other`.
fn anti_affinity_breaks(owner: &Pod, other: &Pod, same_domain: impl Fn(&str) -> bool) -> bool {
    let terms = owner
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.pod_anti_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    terms.into_iter().flatten().any(|term| {
        let namespaces: BTreeSet<String> = match term.namespaces.as_ref() {
            Some(list) if !list.is_empty() => list.iter().cloned().collect(),
            _ => BTreeSet::from([namespace_of(owner)]),
        };
        let selected = term
            .label_selector
            .as_ref()
            .is_some_and(|s| label_selector_matches(s, &other.labels().clone()));
        namespaces.contains(&namespace_of(other)) && selected && same_domain(&term.topology_key)
    })
}

/// A Pod on a Node, as the scheduler counts it.
pub struct Placed<'a> {
    pub pod: &'a Pod,
    pub node: &'a Node,
}

fn pods_on<'a>(node: &Node, on_nodes: &[Placed<'a>]) -> Vec<&'a Pod> {
    let name = node.name_any();
    on_nodes
        .iter()
        .filter(|p| p.node.name_any() == name)
        .map(|p| p.pod)
        .collect()
}

/// The reasons a Node cannot take the Pod (none: it can).
pub fn filter(pod: &Pod, node: &Node, on_nodes: &[Placed]) -> Vec<Reason> {
    let here = pods_on(node, on_nodes);
    if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
        let unschedulable = Taint {
            key: "node.kubernetes.io/unschedulable".into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        };
        let tolerated = pod
            .spec
            .as_ref()
            .and_then(|s| s.tolerations.as_ref())
            .is_some_and(|ts| ts.iter().any(|t| tolerates(t, &unschedulable)));
        if !tolerated {
            return vec![Reason::Unschedulable];
        }
    }
    if let Some(taint) = untolerated_taint(pod, node) {
        return vec![Reason::Taint(taint)];
    }
    if !matches_node_affinity(pod, node) {
        return vec![Reason::Affinity];
    }
    let wanted_ports = host_ports(pod);
    if !wanted_ports.is_empty() {
        let taken: Vec<_> = here.iter().flat_map(|p| host_ports(p)).collect();
        if ports_conflict(&wanted_ports, &taken) {
            return vec![Reason::Ports];
        }
    }
    let capacity = allocatable(node);
    let mut insufficient = Vec::new();
    if here.len() as f64 + 1.0 > capacity.get("pods").copied().unwrap_or(110.0) {
        insufficient.push(Reason::TooManyPods);
    }
    let requested = pod_requests(pod);
    for (resource, amount) in &requested {
        if *amount <= 0.0 {
            continue;
        }
        let used: f64 = here
            .iter()
            .map(|p| pod_requests(p).get(resource).copied().unwrap_or(0.0))
            .sum();
        let available = capacity.get(resource).copied().unwrap_or(0.0);
        if used + amount > available + 1e-9 {
            insufficient.push(Reason::Insufficient(resource.clone()));
        }
    }
    if !insufficient.is_empty() {
        return insufficient;
    }
    let labels = node_labels(node);
    let breaks = on_nodes.iter().any(|placed| {
        let theirs = node_labels(placed.node);
        let same_domain = |key: &str| labels.get(key).is_some_and(|v| theirs.get(key) == Some(v));
        anti_affinity_breaks(pod, placed.pod, same_domain)
            || anti_affinity_breaks(placed.pod, pod, same_domain)
    });
    if breaks {
        return vec![Reason::AntiAffinity];
    }
    Vec::new()
}

fn controller_uid(pod: &Pod) -> Option<String> {
    pod.owner_references()
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// Lower is better: siblings (Pods of the same controller) already on the Node first, then how
/// much of its CPU and memory is requested, then a stable per-Pod shuffle so that equal Nodes
/// take turns.
fn score(pod: &Pod, node: &Node, on_nodes: &[Placed]) -> (usize, u64, u64) {
    let here = pods_on(node, on_nodes);
    let siblings = controller_uid(pod).map_or(0, |uid| {
        here.iter()
            .filter(|p| controller_uid(p).as_deref() == Some(uid.as_str()))
            .count()
    });
    let capacity = allocatable(node);
    let requested = pod_requests(pod);
    let fraction = |resource: &str| {
        let used: f64 = here
            .iter()
            .map(|p| pod_requests(p).get(resource).copied().unwrap_or(0.0))
            .sum::<f64>()
            + requested.get(resource).copied().unwrap_or(0.0);
        match capacity.get(resource) {
            Some(c) if *c > 0.0 => used / c,
            _ => 0.0,
        }
    };
    let allocated = ((fraction("cpu") + fraction("memory")) * 1e6) as u64;
    let shuffle = format!("{}/{}", pod.name_any(), node.name_any())
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    (siblings, allocated, shuffle)
}

/// The Node the Pod goes to, or why none takes it.
pub fn place<'a>(pod: &Pod, nodes: &'a [Node], on_nodes: &[Placed]) -> Result<&'a Node, FitError> {
    let mut reasons = Vec::new();
    let mut feasible = Vec::new();
    for node in nodes {
        let r = filter(pod, node, on_nodes);
        if r.is_empty() {
            feasible.push(node);
        } else {
            reasons.push(r);
        }
    }
    feasible
        .into_iter()
        .min_by_key(|n| score(pod, n, on_nodes))
        .ok_or(FitError {
            nodes: nodes.len(),
            reasons,
            pre_filter: None,
        })
}

/// The claims a cluster has, by namespace and name, for [`claims_unready`].
pub type Claims<'a> = BTreeMap<(String, String), &'a PersistentVolumeClaim>;

/// Why the Pod's PersistentVolumeClaims keep it off every Node, in kube-scheduler's
/// VolumeBinding words: a claim that does not exist or is being deleted, or one not bound to
/// a volume (capictl's clusters have no volume provisioner, as upstream's Docker clusters
/// have none: such a Pod waits, as there, until a volume is bound to its claim).
pub fn claims_unready(pod: &Pod, claims: &Claims) -> Option<String> {
    let namespace = namespace_of(pod);
    let mut unbound = false;
    for volume in pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
        let Some(source) = &volume.persistent_volume_claim else {
            continue;
        };
        let name = &source.claim_name;
        match claims.get(&(namespace.clone(), name.clone())) {
            None => return Some(format!("persistentvolumeclaim {name:?} not found")),
            Some(c) if c.metadata.deletion_timestamp.is_some() => {
                return Some(format!("persistentvolumeclaim {name:?} is being deleted"));
            }
            Some(c) => {
                let bound = c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
                    && c.spec
                        .as_ref()
                        .and_then(|s| s.volume_name.as_deref())
                        .is_some_and(|v| !v.is_empty());
                unbound |= !bound;
            }
        }
    }
    unbound.then(|| "pod has unbound immediate PersistentVolumeClaims".to_string())
}

/// Whether this scheduler places the Pod: unbound, not going away, asking for it.
pub fn is_pending(pod: &Pod) -> bool {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.node_name.as_deref())
        .unwrap_or_default()
        .is_empty()
        && pod.metadata.deletion_timestamp.is_none()
        && spec
            .and_then(|s| s.scheduler_name.as_deref())
            .is_none_or(|n| n.is_empty() || n == DEFAULT_SCHEDULER)
}

/// Whether a bound Pod still holds its Node's resources (not finished).
fn holds_resources(pod: &Pod) -> bool {
    !matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Runs the scheduler on a workload cluster until the future is dropped: every pending Pod is
/// placed whenever Pods or Nodes change (and every few seconds, for what time changes).
pub async fn run(client: Client) {
    let watches = super::Watches::default();
    let (pods, watch_pods) = watches.cache::<Pod>(&client);
    let (nodes, watch_nodes) = watches.cache::<Node>(&client);
    let (claim_cache, watch_claims) = watches.cache::<PersistentVolumeClaim>(&client);
    let schedule = async {
        // What was last said about each unschedulable Pod, so it is said once per change.
        let mut told: BTreeMap<String, String> = BTreeMap::new();
        loop {
            watches.next_pass(Duration::from_secs(5)).await;
            let stored = claim_cache.state();
            let claims: Claims = stored
                .iter()
                .map(|c| ((c.namespace().unwrap_or_default(), c.name_any()), &**c))
                .collect();
            schedule_pending(&client, &pods.state(), &nodes.state(), &claims, &mut told).await;
        }
    };
    tokio::join!(watch_pods, watch_nodes, watch_claims, schedule);
}

async fn schedule_pending(
    client: &Client,
    pods: &[Arc<Pod>],
    nodes: &[Arc<Node>],
    claims: &Claims<'_>,
    told: &mut BTreeMap<String, String>,
) {
    let nodes: Vec<Node> = nodes.iter().map(|n| (**n).clone()).collect();
    // Bound Pods, and those bound in this pass, count against their Nodes.
    let mut bound: Vec<(Pod, String)> = pods
        .iter()
        .filter(|p| holds_resources(p))
        .filter_map(|p| Some(((**p).clone(), p.spec.as_ref()?.node_name.clone()?)))
        .filter(|(_, n)| !n.is_empty())
        .collect();
    let mut pending: Vec<&Arc<Pod>> = pods.iter().filter(|p| is_pending(p)).collect();
    // Older first, as kube-scheduler's queue orders Pods of one priority.
    pending.sort_by_key(|p| p.metadata.creation_timestamp.clone());
    let pending_keys: BTreeSet<String> = pending
        .iter()
        .map(|p| format!("{}/{}", namespace_of(p), p.name_any()))
        .collect();
    told.retain(|k, _| pending_keys.contains(k));
    for pod in pending {
        let key = format!("{}/{}", namespace_of(pod), pod.name_any());
        let placed: Vec<Placed> = bound
            .iter()
            .filter_map(|(p, n)| {
                Some(Placed {
                    pod: p,
                    node: nodes.iter().find(|node| node.name_any() == *n)?,
                })
            })
            .collect();
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace_of(pod));
        let placement = match claims_unready(pod, claims) {
            Some(why) => Err(FitError {
                nodes: nodes.len(),
                reasons: Vec::new(),
                pre_filter: Some(why),
            }),
            None => place(pod, &nodes, &placed),
        };
        match placement {
            Ok(node) => {
                let node = node.name_any();
                let binding = json!({
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": pod.name_any(), "namespace": namespace_of(pod)},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": node},
                });
                let request = api
                    .create_subresource::<_, serde_json::Value>(
                        "binding",
                        &pod.name_any(),
                        &PostParams::default(),
                        &binding,
                    )
                    .await;
                match request {
                    Ok(_) => {
                        record_event(
                            client,
                            pod,
                            "Normal",
                            "Scheduled",
                            &format!("Successfully assigned {key} to {node}"),
                        )
                        .await;
                        bound.push(((**pod).clone(), node));
                    }
                    Err(e) => super::report_failure(DEFAULT_SCHEDULER, &key, &e),
                }
            }
            Err(fit) => {
                let message = fit.to_string();
                if told.get(&key) == Some(&message) {
                    continue;
                }
                let condition = json!({"status": {"conditions": [{
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastProbeTime": null,
                    "lastTransitionTime": crate::kubernetes::now(),
                }]}});
                // A strategic merge patch: conditions merge by type.
                if let Err(e) = api
                    .patch_status(
                        &pod.name_any(),
                        &PatchParams::default(),
                        &Patch::Strategic(condition),
                    )
                    .await
                {
                    super::report_failure(DEFAULT_SCHEDULER, &key, &e);
                    continue;
                }
                record_event(client, pod, "Warning", "FailedScheduling", &message).await;
                told.insert(key, message);
            }
        }
    }
}

async fn record_event(client: &Client, pod: &Pod, kind: &str, reason: &str, message: &str) {
    super::record_event(client, pod, DEFAULT_SCHEDULER, kind, reason, message).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: serde_json::Value, taints: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}},
        }))
        .unwrap()
    }

    fn cluster() -> Vec<Node> {
        let cp_taint =
            json!([{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]);
        vec![
            node(
                "cp1",
                json!({"kubernetes.io/hostname": "cp1"}),
                cp_taint.clone(),
            ),
            node(
                "cp2",
                json!({"kubernetes.io/hostname": "cp2"}),
                cp_taint.clone(),
            ),
            node("cp3", json!({"kubernetes.io/hostname": "cp3"}), cp_taint),
            node(
                "w1",
                json!({"kubernetes.io/hostname": "w1", "disk": "ssd"}),
                json!([]),
            ),
            node("w2", json!({"kubernetes.io/hostname": "w2"}), json!([])),
            node("w3", json!({"kubernetes.io/hostname": "w3"}), json!([])),
        ]
    }

    fn pod(name: &str, spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": true}]},
            "spec": spec,
        }))
        .unwrap()
    }

    /// Places Pods one after another as the scheduler's pass does; the Nodes they went to.
    fn place_all(pods: &[Pod], nodes: &[Node]) -> Vec<Result<String, String>> {
        let mut bound: Vec<(Pod, String)> = Vec::new();
        let mut out = Vec::new();
        for p in pods {
            let placed: Vec<Placed> = bound
                .iter()
                .map(|(p, n)| Placed {
                    pod: p,
                    node: nodes.iter().find(|x| x.name_any() == *n).unwrap(),
                })
                .collect();
            match place(p, nodes, &placed) {
                Ok(n) => {
                    bound.push((p.clone(), n.name_any()));
                    out.push(Ok(n.name_any()));
                }
                Err(e) => out.push(Err(e.to_string())),
            }
        }
        out
    }

    #[test]
    fn replicas_spread_over_the_workers_and_stay_off_the_control_planes() {
        let pods: Vec<Pod> = (0..3)
            .map(|i| pod(&format!("web-{i}"), json!({})))
            .collect();
        let mut nodes: Vec<String> = place_all(&pods, &cluster())
            .into_iter()
            .map(Result::unwrap)
            .collect();
        nodes.sort();
        assert_eq!(nodes, ["w1", "w2", "w3"]);
    }

    #[test]
    fn a_pod_no_node_takes_is_told_why_in_kube_schedulers_words() {
        let cases = [
            (
                "too big",
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}}}]}),
                "0/6 nodes are available: 3 Insufficient cpu, 3 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/6 nodes are available: 3 No preemption victims found for incoming pod, 3 Preemption is not helpful for scheduling.",
            ),
            (
                "selector nobody has",
                json!({"nodeSelector": {"gpu": "yes"}, "tolerations": [{"operator": "Exists"}]}),
                "0/6 nodes are available: 6 node(s) didn't match Pod's node affinity/selector. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling.",
            ),
        ];
        for (name, spec, message) in cases {
            let result = place_all(&[pod("p", spec)], &cluster());
            assert_eq!(result, [Err(message.to_string())], "{name}");
        }
    }

    #[test]
    fn filters_decide_as_kube_schedulers_plugins() {
        let tolerate_cp = json!([{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]);
        type Case = (&'static str, Vec<Pod>, Vec<Result<&'static str, ()>>);
        let cases: Vec<Case> = vec![
            (
                "a toleration lets a Pod onto a control plane; a node selector picks the node",
                vec![pod("a", json!({"tolerations": tolerate_cp, "nodeSelector": {"kubernetes.io/hostname": "cp2"}}))],
                vec![Ok("cp2")],
            ),
            (
                "required node affinity by label",
                vec![pod("a", json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}]}}}}))],
                vec![Ok("w1")],
            ),
            (
                "host ports: one Pod per node",
                (0..4).map(|i| pod(&format!("h{i}"), json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}))).collect(),
                vec![Ok("*"), Ok("*"), Ok("*"), Err(())],
            ),
            (
                "required anti-affinity by hostname: one Pod per node",
                (0..4).map(|i| pod(&format!("x{i}"), json!({"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}}))).collect(),
                vec![Ok("*"), Ok("*"), Ok("*"), Err(())],
            ),
            (
                "resources add up on a node",
                (0..4).map(|i| pod(&format!("r{i}"), json!({"containers": [{"name": "c", "resources": {"requests": {"memory": "3Gi"}}}]}))).collect(),
                vec![Ok("*"), Ok("*"), Ok("*"), Err(())],
            ),
        ];
        for (name, pods, expected) in cases {
            let got = place_all(&pods, &cluster());
            assert_eq!(got.len(), expected.len(), "{name}");
            for (g, e) in got.iter().zip(&expected) {
                match (g, e) {
                    (Ok(n), Ok("*")) => assert!(n.starts_with('w'), "{name}: {n}"),
                    (Ok(n), Ok(want)) => assert_eq!(n, want, "{name}"),
                    (Err(_), Err(())) => {}
                    _ => panic!("{name}: got {got:?}"),
                }
            }
        }
    }

    #[test]
    fn cordoned_and_unreachable_nodes_take_no_new_pods() {
        let mut nodes = cluster();
        nodes[3].spec.as_mut().unwrap().unschedulable = Some(true);
        nodes[4].spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: "node.kubernetes.io/unreachable".into(),
            effect: "NoExecute".into(),
            ..Default::default()
        }]);
        let pods: Vec<Pod> = (0..2).map(|i| pod(&format!("p{i}"), json!({}))).collect();
        let got = place_all(&pods, &nodes);
        assert_eq!(got[0], Ok("w3".to_string()));
        assert_eq!(got[1], Ok("w3".to_string()), "w3 is the only one left");
        let message = place_all(
            &[pod(
                "p",
                json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "5"}}}]}),
            )],
            &nodes,
        );
        assert_eq!(
            message[0].as_ref().unwrap_err(),
            "0/6 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }, 1 node(s) were unschedulable, 3 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }. preemption: 0/6 nodes are available: 1 No preemption victims found for incoming pod, 5 Preemption is not helpful for scheduling."
        );
    }

    #[test]
    fn a_pod_waits_for_its_claims_to_exist_and_be_bound() {
        let claim = |name: &str,
                     status: serde_json::Value,
                     deleting: bool|
         -> PersistentVolumeClaim {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "default",
                    "deletionTimestamp": if deleting { Some("2026-01-01T00:00:00Z") } else { None }},
                "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": status["volume"]},
                "status": {"phase": status["phase"]},
            }))
            .unwrap()
        };
        let stored = [
            claim("bound", json!({"phase": "Bound", "volume": "pv-1"}), false),
            claim("pending", json!({"phase": "Pending"}), false),
            claim("going", json!({"phase": "Bound", "volume": "pv-2"}), true),
        ];
        let claims: Claims = stored
            .iter()
            .map(|c| (("default".to_string(), c.name_any()), c))
            .collect();
        let using = |name: &str| {
            pod(
                "db-0",
                json!({"containers": [{"name": "c"}], "volumes": [
                    {"name": "scratch", "emptyDir": {}},
                    {"name": "data", "persistentVolumeClaim": {"claimName": name}}
                ]}),
            )
        };
        assert_eq!(claims_unready(&pod("web", json!({})), &claims), None);
        assert_eq!(claims_unready(&using("bound"), &claims), None);
        for (name, why) in [
            (
                "pending",
                "pod has unbound immediate PersistentVolumeClaims",
            ),
            ("missing", "persistentvolumeclaim \"missing\" not found"),
            ("going", "persistentvolumeclaim \"going\" is being deleted"),
        ] {
            assert_eq!(claims_unready(&using(name), &claims).as_deref(), Some(why));
        }
        let told = FitError {
            nodes: 6,
            reasons: Vec::new(),
            pre_filter: claims_unready(&using("pending"), &claims),
        };
        assert_eq!(
            told.to_string(),
            "0/6 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/6 nodes are available: 6 Preemption is not helpful for scheduling."
        );
    }
}
