//! The cluster autoscaler, on Cluster API's side of its contract (upstream's
//! cluster-autoscaler with its `clusterapi` cloud provider, here as one controller of the
//! manager, off unless `--autoscaler` asks for it). Node groups are the MachineDeployments, the
//! MachineSets no MachineDeployment owns, and the MachinePools, carrying both
//! `cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size` and `-max-size`.
//! Every scan (per Cluster, every 10 s while it has node groups):
//!
//! - **Up**: Pods the scheduler found no Node for (`PodScheduled` False, `Unschedulable`) are
//!   packed, by kube-scheduler's own filters, onto copies of a Ready Node of a group: first onto
//!   the Machines it already has coming, then onto new ones, never past the maximum. The group's
//!   replicas grow by the Nodes that took Pods.
//! - **Down**: a group above its minimum, with no Machine coming or going and no Pod waiting
//!   for it, loses one Node that has run nothing but DaemonSet and mirror Pods for longer than
//!   `cluster.x-k8s.io/autoscaling-options-scaledownunneededtime` (10m by default, as the
//!   cluster autoscaler's `--scale-down-unneeded-time`): its Machine gets
//!   `cluster.x-k8s.io/delete-machine` and the replicas go down by one, as upstream's does.
//!
//! A group with no Node to copy (scaled to zero) is described by the cluster autoscaler's
//! `capacity.cluster-autoscaler.kubernetes.io/*` annotations or its infrastructure template's
//! `status.capacity` (which capictl's providers fill). Each step is an Event on the MachineDeployment saying which Pods or Node
//! caused it; Pods a group at its maximum cannot take are a Warning. Scale-down of Nodes whose
//! Pods could move elsewhere (utilization below a threshold) is not done.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use crate::api::{
    AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_SCALE_DOWN_UNNEEDED_TIME_ANNOTATION,
    CLUSTER_NAME_LABEL, Cluster, DELETE_MACHINE_ANNOTATION, DEPLOYMENT_NAME_LABEL,
    MACHINE_POOL_NAME_LABEL, MachineDeployment, MachinePool, MachineSet, SET_NAME_LABEL,
};
use crate::kubernetes::scheduler::{Placed, filter, is_pending};
use crate::reconcile::events::Severity;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Result, StepContext, common};

pub const CONTROLLER: &str = "autoscaler";
/// How often a Cluster with node groups is looked at (the cluster autoscaler's `--scan-interval`).
const SCAN_INTERVAL: Duration = Duration::from_secs(10);
/// How long a Node stays unneeded before it goes, where its group does not say.
const DEFAULT_UNNEEDED_TIME: Duration = Duration::from_secs(600);

/// One node group: a MachineDeployment the autoscaler owns, and the Nodes of its Machines.
#[derive(Clone, Debug)]
pub struct NodeGroup {
    pub name: String,
    pub replicas: i32,
    pub min: i32,
    pub max: i32,
    pub unneeded_after: Duration,
    /// Its Machines' Nodes, by Machine name.
    pub nodes: Vec<(String, Node)>,
    /// The Node its capacity describes ([`node_from_capacity`]), for when it has none to copy
    /// (scaling from zero).
    pub blueprint: Option<Node>,
}

/// What a scan decided for one group.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    ScaleUp {
        group: String,
        from: i32,
        to: i32,
        pods: Vec<String>,
    },
    /// Pods no Node fits and this group could take, but not within its maximum.
    AtMaximum {
        group: String,
        max: i32,
        pods: Vec<String>,
    },
    ScaleDown {
        group: String,
        from: i32,
        to: i32,
        machine: String,
        node: String,
        unneeded_for: Duration,
    },
}

/// A group's bounds from its annotations: None unless both parse, and min ≤ max.
pub fn bounds(annotations: &std::collections::BTreeMap<String, String>) -> Option<(i32, i32)> {
    crate::api::autoscaler_bounds(annotations)
        .ok()
        .flatten()
        .filter(|(min, max)| 0 <= *min && min <= max)
}

fn ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A Pod the scheduler tried and found no Node for: what a new Node could help.
pub fn unschedulable(pod: &Pod) -> bool {
    let owned_by_daemon_set = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
    is_pending(pod)
        && !owned_by_daemon_set
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.type_ == "PodScheduled"
                        && c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                })
            })
}

/// Whether a Pod keeps its Node needed: running or about to, and neither a DaemonSet's (which
/// every Node has) nor a static Pod's mirror.
fn keeps_node_needed(pod: &Pod) -> bool {
    let finished = matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    );
    let daemon = pod.owner_references().iter().any(|o| o.kind == "DaemonSet");
    let mirror = pod
        .annotations()
        .contains_key("kubernetes.io/config.mirror");
    !finished && !daemon && !mirror && pod.metadata.deletion_timestamp.is_none()
}

/// The Nodes of `group` that run nothing that keeps them needed.
pub fn unneeded_nodes<'a>(group: &'a NodeGroup, pods: &[Pod]) -> Vec<&'a (String, Node)> {
    group
        .nodes
        .iter()
        .filter(|(_, node)| {
            let name = node.name_any();
            ready(node)
                && !pods.iter().any(|p| {
                    p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(name.as_str())
                        && keeps_node_needed(p)
                })
        })
        .collect()
}

/// The cluster autoscaler's annotations describing a node group's Nodes, for scaling from zero.
pub const CAPACITY_ANNOTATION_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";

/// The Node a group with no Node to copy would get, as the cluster autoscaler's capacity
/// annotations (`cpu`, `memory`, `ephemeral-disk`, `maxPods`, `gpu-count` with `gpu-type`,
/// `labels`, `taints`) or else its infrastructure template's `status.capacity` describe it,
/// tainted as its Machines are. None without a cpu and a memory.
pub fn node_from_capacity(
    annotations: &std::collections::BTreeMap<String, String>,
    template_capacity: Option<&serde_json::Value>,
    machine_taints: &[crate::api::common::MachineTaint],
) -> Option<Node> {
    let annotation = |name: &str| annotations.get(&format!("{CAPACITY_ANNOTATION_PREFIX}{name}"));
    let mut capacity = serde_json::Map::new();
    for (name, resource) in [
        ("cpu", "cpu"),
        ("memory", "memory"),
        ("ephemeral-disk", "ephemeral-storage"),
        ("maxPods", "pods"),
    ] {
        let value = annotation(name).cloned().or_else(|| {
            template_capacity?.get(resource).map(|v| {
                v.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| v.to_string())
            })
        });
        if let Some(value) = value {
            capacity.insert(resource.into(), json!(value));
        }
    }
    if let (Some(count), Some(kind)) = (annotation("gpu-count"), annotation("gpu-type")) {
        capacity.insert(kind.clone(), json!(count));
    }
    if !(capacity.contains_key("cpu") && capacity.contains_key("memory")) {
        return None;
    }
    capacity.entry("pods").or_insert(json!("110"));
    let pairs = |text: Option<&String>| -> Vec<(String, String)> {
        text.into_iter()
            .flat_map(|t| t.split(','))
            .filter_map(|pair| {
                let (k, v) = pair.trim().split_once('=')?;
                Some((k.to_string(), v.to_string()))
            })
            .collect()
    };
    let labels: serde_json::Map<String, serde_json::Value> = pairs(annotation("labels"))
        .into_iter()
        .map(|(k, v)| (k, json!(v)))
        .collect();
    let mut taints: Vec<serde_json::Value> = pairs(annotation("taints"))
        .into_iter()
        .filter_map(|(key, rest)| {
            let (value, effect) = rest.split_once(':')?;
            Some(json!({"key": key, "value": value, "effect": effect}))
        })
        .collect();
    taints.extend(machine_taints.iter().map(|t| {
        json!({"key": t.key, "value": t.value, "effect": serde_json::to_value(t.effect).unwrap_or_default()})
    }));
    serde_json::from_value(json!({
        "metadata": {"name": "blueprint", "labels": labels},
        "spec": {"taints": taints},
        "status": {
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }))
    .ok()
}

/// A fresh Node of the group, as the next one it makes would be: a Ready one's copy under
/// another name, with no Pods, or else the one its capacity describes.
fn template(group: &NodeGroup, name: String) -> Option<Node> {
    let node = group
        .nodes
        .iter()
        .map(|(_, n)| n)
        .find(|n| ready(n))
        .or(group.blueprint.as_ref())?;
    let mut copy = node.clone();
    copy.metadata = kube::api::ObjectMeta {
        name: Some(name),
        labels: node.metadata.labels.clone(),
        ..Default::default()
    };
    Some(copy)
}

/// Scale-up: the pending Pods packed onto each group's coming and new Nodes, groups in name
/// order, each Pod counted once.
pub fn scale_up(groups: &[NodeGroup], pending: &[&Pod]) -> Vec<Decision> {
    let mut left: Vec<&Pod> = pending.to_vec();
    let mut decisions = Vec::new();
    let mut groups: Vec<&NodeGroup> = groups.iter().collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    for group in groups {
        let Some(fresh) = template(group, format!("{}-template", group.name)) else {
            continue;
        };
        let coming =
            (group.replicas - group.nodes.iter().filter(|(_, n)| ready(n)).count() as i32).max(0);
        let mut virtual_nodes: Vec<Node> = (0..coming)
            .filter_map(|i| template(group, format!("{}-coming-{i}", group.name)))
            .collect();
        let mut placements: Vec<(usize, usize)> = Vec::new();
        let mut added = 0;
        let mut beyond_max = Vec::new();
        let mut still_left = Vec::new();
        for (p, pod) in left.iter().enumerate() {
            if !filter(pod, &fresh, &[]).is_empty() {
                still_left.push(*pod);
                continue;
            }
            let placed: Vec<Placed> = placements
                .iter()
                .map(|&(pod, node)| Placed {
                    pod: left[pod],
                    node: &virtual_nodes[node],
                })
                .collect();
            let fits = virtual_nodes
                .iter()
                .position(|n| filter(pod, n, &placed).is_empty());
            drop(placed);
            match fits {
                Some(n) => placements.push((p, n)),
                None if group.replicas + added < group.max => {
                    let name = format!("{}-new-{added}", group.name);
                    virtual_nodes.extend(template(group, name));
                    added += 1;
                    placements.push((p, virtual_nodes.len() - 1));
                }
                None => beyond_max.push(pod.name_any()),
            }
        }
        let on_new: Vec<String> = placements
            .iter()
            .filter(|&&(_, n)| n >= coming as usize)
            .map(|&(p, _)| pod_name(left[p]))
            .collect();
        if added > 0 {
            decisions.push(Decision::ScaleUp {
                group: group.name.clone(),
                from: group.replicas,
                to: group.replicas + added,
                pods: on_new,
            });
        }
        if !beyond_max.is_empty() {
            decisions.push(Decision::AtMaximum {
                group: group.name.clone(),
                max: group.max,
                pods: beyond_max,
            });
        }
        left = still_left;
    }
    decisions
}

fn pod_name(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// Scale-down of one group: its Node unneeded the longest, once that is long enough. `since`
/// says when a Node was first seen unneeded.
pub fn scale_down(
    group: &NodeGroup,
    pods: &[Pod],
    since: &dyn Fn(&str) -> Option<Timestamp>,
    now: Timestamp,
) -> Option<Decision> {
    let settled =
        group.nodes.len() as i32 == group.replicas && group.nodes.iter().all(|(_, n)| ready(n));
    if group.replicas <= group.min || !settled {
        return None;
    }
    unneeded_nodes(group, pods)
        .into_iter()
        .filter_map(|(machine, node)| {
            let idle = now.duration_since(since(&node.name_any())?);
            let idle = Duration::try_from(idle).unwrap_or_default();
            (idle >= group.unneeded_after).then_some((idle, machine, node))
        })
        .max_by_key(|(idle, _, _)| *idle)
        .map(|(idle, machine, node)| Decision::ScaleDown {
            group: group.name.clone(),
            from: group.replicas,
            to: group.replicas - 1,
            machine: machine.clone(),
            node: node.name_any(),
            unneeded_for: idle,
        })
}

/// When each Node (by namespace, Cluster and name) was first seen unneeded.
type Unneeded = Mutex<HashMap<(String, String, String), Timestamp>>;

pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<Cluster>(CONTROLLER);
    // A node group's change (its bounds, its replicas) is looked at at once.
    let controller = controller
        .reconcile_on(clusters_of_groups::<MachineDeployment>(w, |md| {
            &md.spec.cluster_name
        }))
        .reconcile_on(clusters_of_groups::<MachineSet>(w, |ms| {
            &ms.spec.cluster_name
        }));
    let unneeded: Arc<Unneeded> = Arc::default();
    w.run(CONTROLLER, controller, move |cluster, ctx| {
        reconcile(cluster, ctx, unneeded.clone())
    })
}

/// The Clusters of the node groups of kind `K` that change.
fn clusters_of_groups<K>(
    w: &Wiring,
    cluster_name: fn(&K) -> &String,
) -> impl futures::Stream<Item = ObjectRef<Cluster>> + Send + 'static
where
    K: crate::reconcile::runtime::Watched,
{
    kube::runtime::watcher(Api::<K>::all(w.client.clone()), Default::default())
        .default_backoff()
        .applied_objects()
        .filter_map(move |group| {
            let cluster = group
                .ok()
                .filter(|g| bounds(g.annotations()).is_some())
                .map(|g| {
                    ObjectRef::new(cluster_name(&g)).within(&g.namespace().unwrap_or_default())
                });
            std::future::ready(cluster)
        })
}

/// What a node group is: a MachineDeployment, a MachineSet no MachineDeployment owns, or a
/// MachinePool (whose instances are Machines).
enum Target {
    Deployment(MachineDeployment),
    Set(MachineSet),
    Pool(MachinePool),
}

impl Target {
    /// `Kind/name`: what a group is called in the decisions.
    fn key(&self) -> String {
        match self {
            Target::Deployment(md) => format!("MachineDeployment/{}", md.name_any()),
            Target::Set(ms) => format!("MachineSet/{}", ms.name_any()),
            Target::Pool(mp) => format!("MachinePool/{}", mp.name_any()),
        }
    }

    fn annotations(&self) -> &std::collections::BTreeMap<String, String> {
        match self {
            Target::Deployment(md) => md.annotations(),
            Target::Set(ms) => ms.annotations(),
            Target::Pool(mp) => mp.annotations(),
        }
    }

    fn replicas(&self) -> i32 {
        match self {
            Target::Deployment(md) => md.spec.replicas,
            Target::Set(ms) => ms.spec.replicas,
            Target::Pool(mp) => mp.spec.replicas,
        }
        .unwrap_or(1)
    }

    fn machine_spec(&self) -> &crate::api::machine::MachineSpec {
        match self {
            Target::Deployment(md) => &md.spec.template.spec,
            Target::Set(ms) => &ms.spec.template.spec,
            Target::Pool(mp) => &mp.spec.template.spec,
        }
    }

    /// Whether a Machine is one of the group's, by the label its owner puts on it.
    fn has(&self, machine: &crate::api::Machine) -> bool {
        let (label, name) = match self {
            Target::Deployment(md) => (DEPLOYMENT_NAME_LABEL, md.name_any()),
            Target::Set(ms) => (SET_NAME_LABEL, ms.name_any()),
            Target::Pool(mp) => (MACHINE_POOL_NAME_LABEL, mp.name_any()),
        };
        machine.labels().get(label) == Some(&name)
    }

    async fn set_replicas(&self, client: &kube::Client, replicas: i32) -> Result<()> {
        let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
        let params = PatchParams::default();
        match self {
            Target::Deployment(md) => {
                let api: Api<MachineDeployment> =
                    Api::namespaced(client.clone(), &md.namespace().unwrap_or_default());
                api.patch(&md.name_any(), &params, &patch).await?;
            }
            Target::Set(ms) => {
                let api: Api<MachineSet> =
                    Api::namespaced(client.clone(), &ms.namespace().unwrap_or_default());
                api.patch(&ms.name_any(), &params, &patch).await?;
            }
            Target::Pool(mp) => {
                let api: Api<MachinePool> =
                    Api::namespaced(client.clone(), &mp.namespace().unwrap_or_default());
                api.patch(&mp.name_any(), &params, &patch).await?;
            }
        }
        Ok(())
    }

    fn publish(&self, ctx: &Context, severity: Severity, reason: &'static str, note: String) {
        match self {
            Target::Deployment(md) => ctx.events.publish(CONTROLLER, md, severity, reason, note),
            Target::Set(ms) => ctx.events.publish(CONTROLLER, ms, severity, reason, note),
            Target::Pool(mp) => ctx.events.publish(CONTROLLER, mp, severity, reason, note),
        }
    }
}

/// The node groups of a Cluster: its MachineDeployments and its MachineSets that no
/// MachineDeployment owns, with both size annotations, not being deleted.
async fn node_groups(ctx: &Context, namespace: &str, cluster: &str) -> Result<Vec<Target>> {
    let selector = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}"));
    let deployments = Api::<MachineDeployment>::namespaced(ctx.client.clone(), namespace)
        .list(&selector)
        .await?
        .items
        .into_iter()
        .map(Target::Deployment);
    let sets = Api::<MachineSet>::namespaced(ctx.client.clone(), namespace)
        .list(&selector)
        .await?
        .items
        .into_iter()
        .filter(|ms| {
            !ms.owner_references()
                .iter()
                .any(|o| o.kind == "MachineDeployment")
        })
        .map(Target::Set);
    let pools = Api::<MachinePool>::namespaced(ctx.client.clone(), namespace)
        .list(&selector)
        .await?
        .items
        .into_iter()
        .map(Target::Pool);
    Ok(deployments
        .chain(sets)
        .chain(pools)
        .filter(|t| {
            let deleting = match t {
                Target::Deployment(md) => common::deleting(md),
                Target::Set(ms) => common::deleting(ms),
                Target::Pool(mp) => common::deleting(mp),
            };
            bounds(t.annotations()).is_some() && !deleting
        })
        .collect())
}

pub async fn reconcile(
    cluster: Arc<Cluster>,
    ctx: Arc<Context>,
    unneeded: Arc<Unneeded>,
) -> Result<Action> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    if common::deleting(cluster.as_ref()) || cluster.spec.paused == Some(true) {
        return Ok(Action::await_change());
    }
    let targets = node_groups(&ctx, &namespace, &name)
        .await
        .step("reading the node groups")?;
    if targets.is_empty() {
        return Ok(Action::await_change());
    }
    let Some(workload) = ctx.workloads.client(&namespace, &name).await? else {
        return Ok(Action::requeue(SCAN_INTERVAL));
    };
    let nodes: Vec<Node> = Api::<Node>::all(workload.clone())
        .list(&ListParams::default())
        .await
        .step("reading the workload cluster's Nodes")?
        .items;
    let pods: Vec<Pod> = Api::<Pod>::all(workload)
        .list(&ListParams::default())
        .await
        .step("reading the workload cluster's Pods")?
        .items;
    let machines = ctx
        .machines()
        .list_labelled(&namespace, &name, |_| true)
        .await?;
    let mut groups = Vec::new();
    for target in &targets {
        let (min, max) = bounds(target.annotations()).expect("filtered");
        let nodes: Vec<(String, Node)> = machines
            .iter()
            .filter(|m| target.has(m))
            .filter_map(|m| {
                let node_name = &m.status.as_ref()?.node_ref.as_ref()?.name;
                let node = nodes.iter().find(|n| n.name_any() == *node_name)?;
                Some((m.name_any(), node.clone()))
            })
            .collect();
        // A group without a Node to copy is described by its capacity (scaling from zero).
        let blueprint = if nodes.iter().any(|(_, n)| ready(n)) {
            None
        } else {
            let spec = target.machine_spec();
            let template = ctx
                .external
                .get(&namespace, &spec.infrastructure_ref)
                .await
                .ok()
                .flatten();
            let capacity = template
                .as_ref()
                .and_then(|t| t.data["status"].get("capacity"));
            let taints = spec.taints.as_deref().unwrap_or_default();
            node_from_capacity(target.annotations(), capacity, taints)
        };
        groups.push(NodeGroup {
            name: target.key(),
            replicas: target.replicas(),
            min,
            max,
            unneeded_after: target
                .annotations()
                .get(AUTOSCALER_SCALE_DOWN_UNNEEDED_TIME_ANNOTATION)
                .and_then(|d| crate::api::parse_duration(d))
                .map(Duration::from_secs_f64)
                .unwrap_or(DEFAULT_UNNEEDED_TIME),
            nodes,
            blueprint,
        });
    }

    let pending: Vec<&Pod> = pods.iter().filter(|p| unschedulable(p)).collect();
    let mut decisions = scale_up(&groups, &pending);
    let now = Timestamp::now();
    {
        // Which Nodes are unneeded, and since when; forgotten once needed again or gone.
        let mut unneeded = unneeded.lock().unwrap();
        let key = |node: &str| (namespace.clone(), name.clone(), node.to_string());
        let current: Vec<String> = groups
            .iter()
            .flat_map(|g| unneeded_nodes(g, &pods))
            .map(|(_, n)| n.name_any())
            .collect();
        unneeded
            .retain(|(ns, c, node), _| *ns != namespace || *c != name || current.contains(node));
        for node in &current {
            unneeded.entry(key(node)).or_insert(now);
        }
        let growing: Vec<&str> = decisions
            .iter()
            .filter_map(|d| match d {
                Decision::ScaleUp { group, .. } | Decision::AtMaximum { group, .. } => {
                    Some(group.as_str())
                }
                Decision::ScaleDown { .. } => None,
            })
            .collect();
        let since = |node: &str| unneeded.get(&key(node)).copied();
        let shrinking: Vec<Decision> = groups
            .iter()
            .filter(|g| !growing.contains(&g.name.as_str()))
            .filter_map(|g| scale_down(g, &pods, &since, now))
            .collect();
        decisions.extend(shrinking);
    }
    for decision in decisions {
        act(&ctx, &targets, decision)
            .await
            .step("scaling a node group")?;
    }
    Ok(Action::requeue(SCAN_INTERVAL))
}

/// Carries out one decision and says so on the node group's object.
async fn act(ctx: &Context, targets: &[Target], decision: Decision) -> Result<()> {
    let target = |group: &str| {
        targets
            .iter()
            .find(|t| t.key() == group)
            .expect("decided on a listed group")
    };
    let listed = |pods: &[String]| {
        let shown: Vec<&str> = pods.iter().take(3).map(String::as_str).collect();
        match pods.len() {
            n if n > 3 => format!("{} and {} more", shown.join(", "), n - 3),
            _ => shown.join(", "),
        }
    };
    match decision {
        Decision::ScaleUp {
            group,
            from,
            to,
            pods,
        } => {
            let t = target(&group);
            let max = bounds(t.annotations()).map(|b| b.1).unwrap_or(to);
            t.set_replicas(&ctx.client, to).await?;
            t.publish(
                ctx,
                Severity::Normal,
                "TriggeredScaleUp",
                format!(
                    "Pods {} fit no Node: scaling from {from} to {to} replicas (max {max})",
                    listed(&pods)
                ),
            );
        }
        Decision::AtMaximum { group, max, pods } => {
            target(&group).publish(
                ctx,
                Severity::Warning,
                "NotTriggerScaleUp",
                format!(
                    "Pods {} fit no Node, and the group is at its maximum of {max} replicas ({AUTOSCALER_MAX_SIZE_ANNOTATION})",
                    listed(&pods)
                ),
            );
        }
        Decision::ScaleDown {
            group,
            from,
            to,
            machine,
            node,
            unneeded_for,
        } => {
            let t = target(&group);
            let min = bounds(t.annotations()).map(|b| b.0).unwrap_or(to);
            let namespace = match t {
                Target::Deployment(md) => md.namespace(),
                Target::Set(ms) => ms.namespace(),
                Target::Pool(mp) => mp.namespace(),
            }
            .unwrap_or_default();
            let machines: Api<crate::api::Machine> =
                Api::namespaced(ctx.client.clone(), &namespace);
            let marked = json!({"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: Timestamp::now().to_string()}}});
            machines
                .patch(&machine, &PatchParams::default(), &Patch::Merge(marked))
                .await?;
            t.set_replicas(&ctx.client, to).await?;
            t.publish(
                ctx,
                Severity::Normal,
                "ScaleDown",
                format!(
                    "Node {node} has run no Pods but DaemonSets' for {}s: removing Machine {machine}, scaling from {from} to {to} replicas (min {min})",
                    unneeded_for.as_secs()
                ),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::AUTOSCALER_MIN_SIZE_ANNOTATION;

    fn node(name: &str, cpu: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"pool": "md-0"}},
            "status": {
                "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }))
        .unwrap()
    }

    fn pod(name: &str, cpu: &str, on: Option<&str>) -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
        });
        if let Some(node) = on {
            p["spec"]["nodeName"] = json!(node);
            p["status"] = json!({"phase": "Running"});
        }
        serde_json::from_value(p).unwrap()
    }

    fn group(replicas: i32, min: i32, max: i32, nodes: &[&str]) -> NodeGroup {
        NodeGroup {
            name: "md-0".into(),
            replicas,
            min,
            max,
            unneeded_after: Duration::from_secs(30),
            nodes: nodes
                .iter()
                .map(|n| (format!("m-{n}"), node(n, "2")))
                .collect(),
            blueprint: None,
        }
    }

    fn ups(decisions: &[Decision]) -> Vec<(i32, i32, usize)> {
        decisions
            .iter()
            .filter_map(|d| match d {
                Decision::ScaleUp { from, to, pods, .. } => Some((*from, *to, pods.len())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn pending_pods_are_packed_onto_new_nodes_within_the_maximum() {
        let pods: Vec<Pod> = (0..5)
            .map(|i| pod(&format!("web-{i}"), "900m", None))
            .collect();
        let pending: Vec<&Pod> = pods.iter().collect();
        // Two of 900m fit a 2-CPU Node: five need three more Nodes.
        let decisions = scale_up(&[group(1, 1, 5, &["a"])], &pending);
        assert_eq!(ups(&decisions), [(1, 4, 5)]);
        // Capped by the maximum: one more Node, one Pod's worth left waiting.
        let decisions = scale_up(&[group(1, 1, 2, &["a"])], &pending);
        assert_eq!(ups(&decisions), [(1, 2, 2)]);
        assert!(
            matches!(&decisions[1], Decision::AtMaximum { pods, max: 2, .. } if pods.len() == 3)
        );
        // A Machine already coming takes Pods first.
        let decisions = scale_up(&[group(2, 1, 5, &["a"])], &pending[..2]);
        assert_eq!(ups(&decisions), []);
    }

    #[test]
    fn pods_no_node_of_the_group_could_take_do_not_grow_it() {
        let huge = [pod("huge", "4", None)];
        let pending: Vec<&Pod> = huge.iter().collect();
        assert_eq!(scale_up(&[group(1, 1, 5, &["a"])], &pending), []);
        // Nor a group without a Ready Node to copy.
        let fits = [pod("small", "100m", None)];
        let pending: Vec<&Pod> = fits.iter().collect();
        assert_eq!(scale_up(&[group(1, 1, 5, &[])], &pending), []);
    }

    #[test]
    fn an_unneeded_node_goes_once_unneeded_long_enough_never_below_the_minimum() {
        let now: Timestamp = "2026-12-07T12:00:00Z".parse().unwrap();
        let pods = vec![pod("web", "100m", Some("a"))];
        let since_40s = |_: &str| Some(now - jiff::SignedDuration::from_secs(40));
        let since_10s = |_: &str| Some(now - jiff::SignedDuration::from_secs(10));
        let two = group(2, 1, 5, &["a", "b"]);
        match scale_down(&two, &pods, &since_40s, now) {
            Some(Decision::ScaleDown {
                node, machine, to, ..
            }) => {
                assert_eq!((node.as_str(), machine.as_str(), to), ("b", "m-b", 1));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            scale_down(&two, &pods, &since_10s, now),
            None,
            "not long enough"
        );
        assert_eq!(
            scale_down(&group(1, 1, 5, &["b"]), &[], &since_40s, now),
            None,
            "at the minimum"
        );
        assert_eq!(
            scale_down(&group(3, 1, 5, &["a", "b"]), &pods, &since_40s, now),
            None,
            "a Machine is coming"
        );
    }

    #[test]
    fn only_pods_the_scheduler_gave_up_on_count_and_daemon_sets_keep_no_node() {
        let mut daemon = pod("agent", "10m", Some("b"));
        daemon.metadata.owner_references = Some(vec![
            serde_json::from_value(
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "u"}),
            )
            .unwrap(),
        ]);
        let g = group(2, 1, 5, &["a", "b"]);
        let unneeded: Vec<&str> = unneeded_nodes(&g, &[pod("web", "1", Some("a")), daemon])
            .iter()
            .map(|(m, _)| m.as_str())
            .collect();
        assert_eq!(unneeded, ["m-b"]);
        assert!(unschedulable(&pod("web", "1", None)));
        let mut waiting = pod("web", "1", None);
        waiting.status = None;
        assert!(!unschedulable(&waiting), "not tried by the scheduler yet");
    }

    #[test]
    fn a_group_of_no_nodes_grows_from_what_its_capacity_says() {
        let annotations = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (format!("{CAPACITY_ANNOTATION_PREFIX}{k}"), v.to_string()))
                .collect()
        };
        let pods = [pod("web", "1500m", None)];
        let pending: Vec<&Pod> = pods.iter().collect();
        let mut empty = group(0, 0, 3, &[]);
        empty.blueprint =
            node_from_capacity(&annotations(&[("cpu", "2"), ("memory", "4Gi")]), None, &[]);
        assert_eq!(ups(&scale_up(&[empty.clone()], &pending)), [(0, 1, 1)]);
        // Too small a Node, a label the Pod's selector wants missing, or a taint it does not
        // tolerate: no growth.
        empty.blueprint =
            node_from_capacity(&annotations(&[("cpu", "1"), ("memory", "4Gi")]), None, &[]);
        assert_eq!(ups(&scale_up(&[empty.clone()], &pending)), []);
        let mut selective = pod("gpu-job", "1", None);
        selective.spec.as_mut().unwrap().node_selector =
            Some([("accelerator".to_string(), "a100".to_string())].into());
        let labelled = annotations(&[
            ("cpu", "8"),
            ("memory", "32Gi"),
            ("labels", "accelerator=a100,zone=a"),
        ]);
        empty.blueprint = node_from_capacity(&labelled, None, &[]);
        assert_eq!(ups(&scale_up(&[empty.clone()], &[&selective])), [(0, 1, 1)]);
        let tainted = annotations(&[
            ("cpu", "8"),
            ("memory", "32Gi"),
            ("taints", "dedicated=gpu:NoSchedule"),
        ]);
        empty.blueprint = node_from_capacity(&tainted, None, &[]);
        assert_eq!(ups(&scale_up(&[empty.clone()], &pending)), []);
        // The infrastructure template's status.capacity when no annotation says.
        let from_template = node_from_capacity(
            &Default::default(),
            Some(&json!({"cpu": "4", "memory": "8Gi"})),
            &[],
        )
        .unwrap();
        assert_eq!(
            from_template.status.unwrap().allocatable.unwrap()["cpu"].0,
            "4"
        );
        assert!(
            node_from_capacity(&annotations(&[("cpu", "4")]), None, &[]).is_none(),
            "no memory"
        );
    }

    #[test]
    fn bounds_need_both_annotations_in_order() {
        let of = |min: &str, max: &str| {
            bounds(
                &[
                    (AUTOSCALER_MIN_SIZE_ANNOTATION.to_string(), min.to_string()),
                    (AUTOSCALER_MAX_SIZE_ANNOTATION.to_string(), max.to_string()),
                ]
                .into(),
            )
        };
        assert_eq!(of("1", "5"), Some((1, 5)));
        assert_eq!(of("5", "1"), None);
        assert_eq!(of("one", "5"), None);
        assert_eq!(bounds(&Default::default()), None);
    }
}
