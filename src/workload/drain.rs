//! Draining a workload cluster's Node before its Machine goes, as upstream's drain does
//! (`internal/controllers/machine/drain`): cordon, then evict (not delete) the Pods in rounds
//! by their order, so that PodDisruptionBudgets get their say. DaemonSet and mirror Pods stay,
//! a `cluster.x-k8s.io/drain` label or the first MachineDrainRule matching a Pod decides what
//! happens to it, and what is left is said in upstream's words.
//!
//! After the drain, [`volumes_to_detach`] says which of the Node's volumes are still attached.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api::machine_drain_rule::{DrainBehavior, MachineDrainRule};
use crate::api::{Cluster, Machine, POD_DRAIN_LABEL};
use crate::kubernetes::selectors::label_selector_matches;

/// What a drain does with one Pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Behavior {
    /// Left on the Node.
    Skip,
    /// Evicted in the round of this order (lower first).
    Drain(i32),
    /// Not evicted; the drain waits until it has completed.
    WaitCompleted,
}

/// What decides the Pods' behaviours besides the Pods themselves.
#[derive(Default)]
pub struct Judge<'a> {
    /// The MachineDrainRules that apply to the Machine, by name ([`rules_for`]).
    pub rules: Vec<&'a MachineDrainRule>,
    /// Each namespace's labels, for the rules' namespace selectors.
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
    /// The DaemonSets that exist (namespace, name): their Pods stay; orphans go.
    pub daemon_sets: BTreeSet<(String, String)>,
    /// The Node's kubelet has stopped reporting: no kubelet will confirm a deletion there.
    pub unreachable: bool,
    pub now: Timestamp,
}

/// The MachineDrainRules of the Machine's namespace that select it (by its labels and its
/// Cluster's), sorted by name: the first one matching a Pod decides for it.
pub fn rules_for<'a>(
    rules: &'a [MachineDrainRule],
    machine: &Machine,
    cluster: &Cluster,
) -> Vec<&'a MachineDrainRule> {
    let matches = |selector: &Option<_>, labels: &BTreeMap<String, String>| {
        selector
            .as_ref()
            .is_none_or(|s| label_selector_matches(s, labels))
    };
    let mut out: Vec<&MachineDrainRule> = rules
        .iter()
        .filter(|r| {
            r.spec.machines.as_ref().is_none_or(|selectors| {
                selectors.iter().any(|s| {
                    matches(&s.selector, machine.labels())
                        && matches(&s.cluster_selector, cluster.labels())
                })
            })
        })
        .collect();
    out.sort_by_key(|r| r.name_any());
    out
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

impl Judge<'_> {
    /// What the drain does with `pod`: the first filter that skips it wins, as upstream's
    /// filters run; otherwise the label, then the first matching rule, then `Drain(0)`.
    pub fn behavior(&self, pod: &Pod) -> Behavior {
        // No kubelet confirms a deletion on an unreachable Node: a Pod being deleted there for
        // more than a second is as good as gone (upstream's SkipWaitForDeleteTimeoutSeconds).
        let given_up = self.unreachable
            && pod
                .meta()
                .deletion_timestamp
                .as_ref()
                .is_some_and(|t| self.now.duration_since(t.0).as_secs() >= 1);
        let ns = pod.namespace().unwrap_or_default();
        let daemon = pod
            .owner_references()
            .iter()
            .find(|r| r.controller == Some(true) && r.kind == "DaemonSet")
            .is_some_and(|r| self.daemon_sets.contains(&(ns.clone(), r.name.clone())));
        let mirror = pod
            .annotations()
            .contains_key("kubernetes.io/config.mirror");
        // A finished Pod holds nothing and no budget counts it: there is nothing to wait for.
        if given_up || daemon || mirror || finished(pod) {
            return Behavior::Skip;
        }
        match pod.labels().get(POD_DRAIN_LABEL).map(String::as_str) {
            Some("skip") => return Behavior::Skip,
            Some("wait-completed") => return Behavior::WaitCompleted,
            _ => {}
        }
        let no_labels = BTreeMap::new();
        let namespace_labels = self.namespaces.get(&ns).unwrap_or(&no_labels);
        let applies = |rule: &MachineDrainRule| {
            rule.spec.pods.as_ref().is_none_or(|selectors| {
                selectors.iter().any(|s| {
                    s.selector
                        .as_ref()
                        .is_none_or(|sel| label_selector_matches(sel, pod.labels()))
                        && s.namespace_selector
                            .as_ref()
                            .is_none_or(|sel| label_selector_matches(sel, namespace_labels))
                })
            })
        };
        match self.rules.iter().find(|r| applies(r)) {
            Some(rule) => match rule.spec.drain.behavior {
                DrainBehavior::Drain => Behavior::Drain(rule.spec.drain.order.unwrap_or(0)),
                DrainBehavior::Skip => Behavior::Skip,
                DrainBehavior::WaitCompleted => Behavior::WaitCompleted,
            },
            None => Behavior::Drain(0),
        }
    }
}

/// One round of a drain: what to evict now, and what it waits for.
#[derive(Debug, Default, PartialEq)]
pub struct Round<'a> {
    /// Pods of the lowest order not yet being deleted.
    pub evict: Vec<&'a Pod>,
    /// Pods being deleted that are still there.
    pub terminating: Vec<&'a Pod>,
    /// Pods waited for to complete, in this round and in a later one.
    pub wait: Vec<&'a Pod>,
    pub wait_later: Vec<&'a Pod>,
    /// Pods of a higher order, evicted once the lower ones are gone.
    pub evict_later: Vec<&'a Pod>,
    /// Pods the drain leaves where they are.
    pub skipped: Vec<&'a Pod>,
}

/// The round a drain is in: only Pods of the lowest order left (Pods waited for count as
/// order 0) are evicted or waited for; Pods are taken by namespace and name, so that the
/// same Node gives the same round and message.
pub fn round<'a>(pods: &'a [Pod], judge: &Judge<'_>) -> Round<'a> {
    let mut judged: Vec<(&Pod, Behavior)> = pods.iter().map(|p| (p, judge.behavior(p))).collect();
    judged.sort_by_key(|(p, _)| key(p));
    let order = |b: Behavior| match b {
        Behavior::Drain(order) => Some(order),
        Behavior::WaitCompleted => Some(0),
        Behavior::Skip => None,
    };
    let lowest = judged.iter().filter_map(|(_, b)| order(*b)).min();
    let mut round = Round::default();
    for (pod, behavior) in judged {
        let now = order(behavior) == lowest;
        let list = match behavior {
            Behavior::Skip => &mut round.skipped,
            Behavior::Drain(_) if pod.meta().deletion_timestamp.is_some() => &mut round.terminating,
            Behavior::Drain(_) if now => &mut round.evict,
            Behavior::Drain(_) => &mut round.evict_later,
            Behavior::WaitCompleted if now => &mut round.wait,
            Behavior::WaitCompleted => &mut round.wait_later,
        };
        list.push(pod);
    }
    round
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// What is left of a drain after a round, as upstream's condition message lists it.
#[derive(Debug, Default, PartialEq)]
pub struct Remaining {
    /// Pods being deleted (evicted in this round or before) that are still there.
    pub terminating: Vec<String>,
    /// Pods whose eviction was refused, by why (a PodDisruptionBudget's words, say).
    pub refused: BTreeMap<String, Vec<String>>,
    pub wait: Vec<String>,
    pub evict_later: Vec<String>,
    pub wait_later: Vec<String>,
}

impl Remaining {
    pub fn completed(&self) -> bool {
        self.terminating.is_empty()
            && self.refused.is_empty()
            && self.wait.is_empty()
            && self.evict_later.is_empty()
            && self.wait_later.is_empty()
    }

    /// The Machine's `Deleting` message while the drain goes on, `started` being when it
    /// began (RFC 3339).
    pub fn message(&self, started: &str) -> String {
        let mut message = format!("Drain not completed yet (started at {started}):");
        let pods = |list: &[String]| {
            let kind = if list.len() > 1 { "Pods" } else { "Pod" };
            format!("{kind} {}", list_to_string(list, 3))
        };
        if !self.terminating.is_empty() {
            message.push_str(&format!(
                "\n* {}: deletionTimestamp set, but still not removed from the Node",
                pods(&self.terminating)
            ));
        }
        let budget = "cannot evict pod as it would violate the pod's disruption budget.";
        let mut causes: Vec<(&String, &Vec<String>)> = self.refused.iter().collect();
        let others: usize = causes.iter().skip(5).map(|(_, p)| p.len()).sum();
        causes.truncate(5);
        for (cause, refused) in causes {
            let cause = cause.replace(
                "Cannot evict pod as it would violate the pod's disruption budget.",
                budget,
            );
            let cause = if cause.starts_with(budget) {
                cause
            } else {
                format!("failed to evict Pod, {cause}")
            };
            message.push_str(&format!("\n* {}: {cause}", pods(refused)));
        }
        match others {
            0 => {}
            1 => message.push_str("\n* 1 Pod with other issues"),
            n => message.push_str(&format!("\n* {n} Pods with other issues")),
        }
        if !self.wait.is_empty() {
            message.push_str(&format!("\n* {}: waiting for completion", pods(&self.wait)));
        }
        if !self.evict_later.is_empty() {
            message.push_str(&format!(
                "\nAfter above Pods have been removed from the Node, the following Pods will be evicted: {}",
                list_to_string(&self.evict_later, 3)
            ));
        }
        if !self.wait_later.is_empty() {
            message.push_str(&format!(
                "\nAfter above Pods have been removed from the Node, waiting for the following Pods to complete without eviction: {}",
                list_to_string(&self.wait_later, 3)
            ));
        }
        message
    }
}

/// The first `n` items, and how many more there are.
fn list_to_string(items: &[String], n: usize) -> String {
    let shown = items[..items.len().min(n)].join(", ");
    if items.len() > n {
        format!("{shown}, ... ({} more)", items.len() - n)
    } else {
        shown
    }
}

/// The Node's Pods and what decides their fate.
async fn judged<'a>(
    client: &Client,
    node: &Node,
    rules: Vec<&'a MachineDrainRule>,
) -> Result<(Vec<Pod>, Judge<'a>), kube::Error> {
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={}", node.name_any())))
        .await?
        .items;
    let mut judge = Judge {
        unreachable: unreachable(node),
        now: Timestamp::now(),
        ..Judge::default()
    };
    let owned_by_daemon_set = |p: &Pod| p.owner_references().iter().any(|r| r.kind == "DaemonSet");
    if pods.iter().any(owned_by_daemon_set) {
        judge.daemon_sets = Api::<DaemonSet>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|d| (d.namespace().unwrap_or_default(), d.name_any()))
            .collect();
    }
    if !rules.is_empty() {
        judge.namespaces = Api::<Namespace>::all(client.clone())
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|n| (n.name_any(), n.metadata.labels.unwrap_or_default()))
            .collect();
    }
    judge.rules = rules;
    Ok((pods, judge))
}

/// Cordons the Node and evicts this round's Pods; returns what is left.
pub async fn drain(
    client: &Client,
    node: &str,
    rules: Vec<&MachineDrainRule>,
) -> Result<Remaining, kube::Error> {
    let Some(found) = Api::<Node>::all(client.clone()).get_opt(node).await? else {
        return Ok(Remaining::default());
    };
    let (pods, judge) = judged(client, &found, rules).await?;
    if found.spec.as_ref().and_then(|s| s.unschedulable) != Some(true) {
        let cordon = json!({"spec": {"unschedulable": true}});
        Api::<Node>::all(client.clone())
            .patch(node, &PatchParams::default(), &Patch::Merge(cordon))
            .await?;
    }
    let round = round(&pods, &judge);
    let names = |list: &[&Pod]| list.iter().map(|p| key(p)).collect::<Vec<_>>();
    let mut remaining = Remaining {
        terminating: names(&round.terminating),
        wait: names(&round.wait),
        evict_later: names(&round.evict_later),
        wait_later: names(&round.wait_later),
        ..Remaining::default()
    };
    for pod in round.evict {
        let api: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace().unwrap_or_default());
        // Evicted, not deleted: PodDisruptionBudgets get their say.
        let cause = match api.evict(&pod.name_any(), &EvictParams::default()).await {
            Ok(_) => {
                remaining.terminating.push(key(pod));
                continue;
            }
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(kube::Error::Api(e)) if e.code == 429 => disruption_cause(&e),
            Err(e) => e.to_string(),
        };
        remaining.refused.entry(cause).or_default().push(key(pod));
    }
    remaining.terminating.sort();
    Ok(remaining)
}

/// Whether the Node's kubelet stopped reporting: Ready is Unknown.
fn unreachable(node: &Node) -> bool {
    node.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "Ready" && c.status == "Unknown")
}

/// Why an eviction was refused: the budget's own words when the API server gives them.
fn disruption_cause(e: &kube::core::Status) -> String {
    let causes: Vec<&str> = e
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .map(|c| c.message.as_str())
        .filter(|m| !m.is_empty())
        .collect();
    if causes.is_empty() {
        e.message.clone()
    } else {
        format!("{} {}", e.message, causes.join(","))
    }
}

/// The volumes still attached to a Node, grouped as upstream's condition message names them.
#[derive(Debug, Default, PartialEq)]
pub struct Attached {
    /// Claims (namespace/name) whose volumes are attached, but those of Pods the drain left.
    pub claims: Vec<String>,
    /// Attached PersistentVolumes bound to no claim.
    pub unclaimed_volumes: Vec<String>,
    /// `status.volumesAttached` names that match no PersistentVolume.
    pub unknown_node_volumes: Vec<String>,
    /// VolumeAttachments naming a PersistentVolume that does not exist.
    pub unknown_attachment_volumes: Vec<String>,
}

impl Attached {
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.unclaimed_volumes.is_empty()
            && self.unknown_node_volumes.is_empty()
            && self.unknown_attachment_volumes.is_empty()
    }

    /// The Machine's `Deleting` message while it waits, `started` being when the wait began.
    pub fn message(&self, started: &str) -> String {
        let mut message = format!("Waiting for Node volumes to be detached (started at {started})");
        for (list, what) in [
            (&self.claims, "PersistentVolumeClaims"),
            (
                &self.unclaimed_volumes,
                "PersistentVolumes without a .spec.claimRef to a PersistentVolumeClaim",
            ),
            (
                &self.unknown_node_volumes,
                "Node with .status.volumesAttached entries not matching a PersistentVolume",
            ),
            (
                &self.unknown_attachment_volumes,
                "VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume",
            ),
        ] {
            if !list.is_empty() {
                message.push_str(&format!("\n* {what}: {}", list_to_string(list, 3)));
            }
        }
        message
    }
}

/// Which volumes are still attached to `node`: its `status.volumesAttached` (CSI volumes by
/// `kubernetes.io/csi/<driver>^<handle>`) and the attached VolumeAttachments naming it, matched
/// to PersistentVolumes and their claims; claims in `ignored` (those of Pods the drain left on
/// the Node) do not count.
pub fn attached(
    node: &Node,
    attachments: &[VolumeAttachment],
    volumes: &[PersistentVolume],
    ignored: &BTreeSet<String>,
) -> Attached {
    let mut node_volumes: BTreeSet<String> = node
        .status
        .iter()
        .flat_map(|s| s.volumes_attached.iter().flatten())
        .map(|v| v.name.clone())
        .collect();
    let node_name = node.name_any();
    let mut attached_volumes: BTreeSet<String> = attachments
        .iter()
        .filter(|a| a.spec.node_name == node_name)
        .filter(|a| a.status.as_ref().is_some_and(|s| s.attached))
        .filter_map(|a| a.spec.source.persistent_volume_name.clone())
        .collect();
    let mut out = Attached::default();
    let mut claims = BTreeSet::new();
    for volume in volumes {
        let csi_name = volume
            .spec
            .as_ref()
            .and_then(|s| s.csi.as_ref())
            .map(|c| format!("kubernetes.io/csi/{}^{}", c.driver, c.volume_handle));
        let by_node = csi_name.is_some_and(|n| node_volumes.remove(&n));
        let by_attachment = attached_volumes.remove(&volume.name_any());
        if !by_node && !by_attachment {
            continue;
        }
        match volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
            Some(r) if r.kind.as_deref() == Some("PersistentVolumeClaim") => {
                let claim = format!(
                    "{}/{}",
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name.as_deref().unwrap_or_default()
                );
                if !ignored.contains(&claim) {
                    claims.insert(claim);
                }
            }
            _ => out.unclaimed_volumes.push(volume.name_any()),
        }
    }
    out.claims = claims.into_iter().collect();
    out.unclaimed_volumes.sort();
    out.unknown_node_volumes = node_volumes.into_iter().collect();
    out.unknown_attachment_volumes = attached_volumes.into_iter().collect();
    out
}

/// What of the Node's volumes is still attached once its Pods are drained; nothing when the
/// Node is gone or unreachable (no kubelet there detaches anything, and waiting would hold
/// the Machine for good).
pub async fn volumes_to_detach(
    client: &Client,
    node: &str,
    rules: Vec<&MachineDrainRule>,
) -> Result<Attached, kube::Error> {
    let Some(found) = Api::<Node>::all(client.clone()).get_opt(node).await? else {
        return Ok(Attached::default());
    };
    if unreachable(&found) {
        return Ok(Attached::default());
    }
    let attachments = Api::<VolumeAttachment>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    // Nothing attached (every Node of a cluster without volumes): the Pods and volumes need
    // not be read.
    if attached(&found, &attachments, &[], &BTreeSet::new()).is_empty() {
        return Ok(Attached::default());
    }
    let (pods, judge) = judged(client, &found, rules).await?;
    let ignored: BTreeSet<String> = round(&pods, &judge)
        .skipped
        .iter()
        .flat_map(|p| {
            let ns = p.namespace().unwrap_or_default();
            p.spec
                .iter()
                .flat_map(|s| s.volumes.iter().flatten())
                .filter_map(|v| v.persistent_volume_claim.as_ref())
                .map(move |c| format!("{ns}/{}", c.claim_name))
                .collect::<Vec<_>>()
        })
        .collect();
    let volumes = Api::<PersistentVolume>::all(client.clone())
        .list(&ListParams::default())
        .await?
        .items;
    Ok(attached(&found, &attachments, &volumes, &ignored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(name: &str, extra: Value) -> Pod {
        let mut p = json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"containers": []}, "status": {"phase": "Running"}});
        merge(&mut p, extra);
        serde_json::from_value(p).unwrap()
    }

    fn merge(into: &mut Value, from: Value) {
        match (into, from) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    merge(a.entry(k).or_insert(Value::Null), v);
                }
            }
            (a, b) => *a = b,
        }
    }

    fn rule(name: &str, spec: Value) -> MachineDrainRule {
        serde_json::from_value(
            json!({"metadata": {"name": name, "namespace": "default"}, "spec": spec}),
        )
        .unwrap()
    }

    fn daemon_owned(ds: &str) -> Value {
        json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds, "uid": "u", "controller": true}]}})
    }

    #[test]
    fn each_pod_gets_the_behaviour_of_the_first_filter_that_decides() {
        let rules = [
            rule(
                "a-db-last",
                json!({"drain": {"behavior": "Drain", "order": 10}, "pods": [{"selector": {"matchLabels": {"app": "db"}}}]}),
            ),
            rule(
                "b-batch",
                json!({"drain": {"behavior": "WaitCompleted"}, "pods": [{"namespaceSelector": {"matchLabels": {"team": "batch"}}}]}),
            ),
            rule(
                "c-db-skip",
                json!({"drain": {"behavior": "Skip"}, "pods": [{"selector": {"matchLabels": {"app": "db"}}}]}),
            ),
        ];
        let mut judge = Judge {
            rules: rules.iter().collect(),
            now: Timestamp::from_second(1000).unwrap(),
            ..Judge::default()
        };
        judge.daemon_sets.insert(("default".into(), "agent".into()));
        judge
            .namespaces
            .insert("default".into(), [("team".into(), "batch".into())].into());
        let table = [
            ("web", json!({}), Behavior::WaitCompleted),
            (
                "db",
                json!({"metadata": {"labels": {"app": "db"}}}),
                Behavior::Drain(10),
            ),
            (
                "labelled-skip",
                json!({"metadata": {"labels": {"app": "db", "cluster.x-k8s.io/drain": "skip"}}}),
                Behavior::Skip,
            ),
            (
                "labelled-wait",
                json!({"metadata": {"labels": {"app": "db", "cluster.x-k8s.io/drain": "wait-completed"}}}),
                Behavior::WaitCompleted,
            ),
            ("agent-0", daemon_owned("agent"), Behavior::Skip),
            // A DaemonSet's Pod whose DaemonSet is gone is drained as any other.
            ("orphan-0", daemon_owned("gone"), Behavior::WaitCompleted),
            (
                "static",
                json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}),
                Behavior::Skip,
            ),
            (
                "done",
                json!({"status": {"phase": "Succeeded"}}),
                Behavior::Skip,
            ),
        ];
        for (name, extra, expected) in table {
            assert_eq!(judge.behavior(&pod(name, extra)), expected, "{name}");
        }
        // Without rules, Pods are drained at order 0.
        let plain = Judge::default();
        assert_eq!(plain.behavior(&pod("web", json!({}))), Behavior::Drain(0));
    }

    #[test]
    fn on_an_unreachable_node_a_pod_deleted_over_a_second_ago_is_given_up() {
        let judge = Judge {
            unreachable: true,
            now: Timestamp::from_second(1_700_000_010).unwrap(),
            ..Judge::default()
        };
        let deleted_at = |t: &str| pod("web", json!({"metadata": {"deletionTimestamp": t}}));
        assert_eq!(
            judge.behavior(&deleted_at("2023-11-14T22:13:20Z")),
            Behavior::Skip
        );
        assert_eq!(
            judge.behavior(&deleted_at("2023-11-14T22:13:30Z")),
            Behavior::Drain(0)
        );
    }

    #[test]
    fn a_round_takes_the_lowest_order_and_says_the_rest_in_upstreams_words() {
        let rules = [rule(
            "db-last",
            json!({"drain": {"behavior": "Drain", "order": 10}, "pods": [{"selector": {"matchLabels": {"app": "db"}}}]}),
        )];
        let judge = Judge {
            rules: rules.iter().collect(),
            ..Judge::default()
        };
        let pods = [
            pod("web-b", json!({})),
            pod("web-a", json!({})),
            pod(
                "leaving",
                json!({"metadata": {"deletionTimestamp": "2024-01-01T00:00:00Z"}}),
            ),
            pod("db-0", json!({"metadata": {"labels": {"app": "db"}}})),
            pod(
                "job",
                json!({"metadata": {"labels": {"cluster.x-k8s.io/drain": "wait-completed"}}}),
            ),
            pod(
                "kept",
                json!({"metadata": {"labels": {"cluster.x-k8s.io/drain": "skip"}}}),
            ),
        ];
        let r = round(&pods, &judge);
        let names = |l: &[&Pod]| l.iter().map(|p| p.name_any()).collect::<Vec<_>>();
        assert_eq!(names(&r.evict), ["web-a", "web-b"]);
        assert_eq!(names(&r.terminating), ["leaving"]);
        assert_eq!(names(&r.wait), ["job"]);
        assert_eq!(names(&r.evict_later), ["db-0"]);
        assert_eq!(names(&r.skipped), ["kept"]);

        // Once only the later order is left, it is this round's.
        let later = [pods[3].clone(), pods[5].clone()];
        assert_eq!(names(&round(&later, &judge).evict), ["db-0"]);

        let remaining = Remaining {
            terminating: vec!["default/leaving".into(), "default/web-a".into()],
            refused: [(
                "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently".to_string(),
                vec!["default/web-b".to_string()],
            )]
            .into(),
            wait: vec!["default/job".into()],
            evict_later: vec!["default/db-0".into()],
            wait_later: vec![],
        };
        assert!(!remaining.completed());
        assert_eq!(
            remaining.message("2024-01-01T00:00:00Z"),
            "Drain not completed yet (started at 2024-01-01T00:00:00Z):\n\
             * Pods default/leaving, default/web-a: deletionTimestamp set, but still not removed from the Node\n\
             * Pod default/web-b: cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy pods and has 2 currently\n\
             * Pod default/job: waiting for completion\n\
             After above Pods have been removed from the Node, the following Pods will be evicted: default/db-0"
        );
        let many = Remaining {
            refused: (0..7)
                .map(|i| (format!("error {i}"), vec![format!("default/p{i}")]))
                .collect(),
            ..Remaining::default()
        };
        let message = many.message("t");
        assert!(
            message.contains("\n* Pod default/p0: failed to evict Pod, error 0"),
            "{message}"
        );
        assert!(
            message.ends_with("\n* 2 Pods with other issues"),
            "{message}"
        );
        assert!(Remaining::default().completed());
        assert_eq!(
            list_to_string(
                &["a".into(), "b".into(), "c".into(), "d".into(), "e".into()],
                3
            ),
            "a, b, c, ... (2 more)"
        );
    }

    #[test]
    fn attached_volumes_are_named_by_their_claims_but_those_of_pods_left_on_the_node() {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1"},
            "status": {"volumesAttached": [
                {"name": "kubernetes.io/csi/disk.example^vol-1", "devicePath": ""},
                {"name": "kubernetes.io/csi/disk.example^vol-unknown", "devicePath": ""}
            ]}
        }))
        .unwrap();
        let attachment = |name: &str, node: &str, pv: &str, attached: bool| -> VolumeAttachment {
            serde_json::from_value(json!({
                "metadata": {"name": name},
                "spec": {"attacher": "disk.example", "nodeName": node, "source": {"persistentVolumeName": pv}},
                "status": {"attached": attached}
            }))
            .unwrap()
        };
        let attachments = [
            attachment("a", "n1", "pv-data", true),
            attachment("b", "n1", "pv-logs", true),
            attachment("c", "n1", "pv-missing", true),
            attachment("d", "n2", "pv-other", true),
            attachment("e", "n1", "pv-detached", false),
        ];
        let volume = |name: &str, claim: Option<&str>, csi: Option<&str>| -> PersistentVolume {
            let mut spec = json!({});
            if let Some(c) = claim {
                spec["claimRef"] =
                    json!({"kind": "PersistentVolumeClaim", "namespace": "default", "name": c});
            }
            if let Some(h) = csi {
                spec["csi"] = json!({"driver": "disk.example", "volumeHandle": h});
            }
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).unwrap()
        };
        let volumes = [
            volume("pv-data", Some("data"), None),
            volume("pv-logs", Some("logs"), None),
            volume("pv-csi", Some("cache"), Some("vol-1")),
            volume("pv-raw", None, Some("vol-raw")),
            volume("pv-other", Some("other"), None),
            volume("pv-detached", Some("detached"), None),
        ];
        let ignored: BTreeSet<String> = ["default/logs".to_string()].into();
        let a = attached(&node, &attachments, &volumes, &ignored);
        assert_eq!(
            a,
            Attached {
                claims: vec!["default/cache".into(), "default/data".into()],
                unclaimed_volumes: vec![],
                unknown_node_volumes: vec!["kubernetes.io/csi/disk.example^vol-unknown".into()],
                unknown_attachment_volumes: vec!["pv-missing".into()],
            }
        );
        assert_eq!(
            a.message("2024-01-01T00:00:00Z"),
            "Waiting for Node volumes to be detached (started at 2024-01-01T00:00:00Z)\n\
             * PersistentVolumeClaims: default/cache, default/data\n\
             * Node with .status.volumesAttached entries not matching a PersistentVolume: kubernetes.io/csi/disk.example^vol-unknown\n\
             * VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume: pv-missing"
        );
        let bare: Node = serde_json::from_value(json!({"metadata": {"name": "n3"}})).unwrap();
        assert!(attached(&bare, &attachments, &volumes, &ignored).is_empty());
    }
}
