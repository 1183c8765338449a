//! The Machine controller: brings a Machine's bootstrap config and infrastructure machine
//! together, finds its Node in the workload cluster, and on deletion drains the Node, removes
//! the provider objects and the Node, in upstream's order.
//!
//! `mod.rs` gathers and acts; [`status`] computes the status from what was gathered;
//! [`deletion`] takes a deleting Machine through its steps.

mod deletion;
mod status;
mod taints;

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::reconcile::common;
use crate::reconcile::external::{self, initialization_flag};
use futures::future::BoxFuture;
use kube::runtime::watcher;

use crate::api;
use crate::api::common::ContractVersionedObjectReference;
use crate::api::{Cluster, Machine};
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Result, StepContext};
use crate::workload::clusters::NodeLookup;

pub use status::phase;
use status::{NodeState, Providers};

/// Hooks on a Machine: the annotations with a hook prefix.
pub fn hooks(annotations: &BTreeMap<String, String>, prefix: &str) -> Vec<String> {
    annotations
        .keys()
        .filter(|k| k.starts_with(prefix))
        .cloned()
        .collect()
}

/// Makes a provider object the Machine's: controller owner reference, cluster-name label.
async fn adopt(
    ctx: &Context,
    machine: &Machine,
    reference: &ContractVersionedObjectReference,
    object: &kube::api::DynamicObject,
) -> Result<()> {
    let uid = machine.uid().unwrap_or_default();
    let labelled = object.labels().get(api::CLUSTER_NAME_LABEL) == Some(&machine.spec.cluster_name);
    let controlled = common::controller_of(object.owner_references()).is_some_and(|r| r.uid == uid);
    if controlled && labelled {
        return Ok(());
    }
    // The Machine takes over from the MachineSet or control plane that created the object.
    let mut refs: Vec<_> = object
        .owner_references()
        .iter()
        .filter(|r| {
            r.uid != uid && !matches!(r.kind.as_str(), "MachineSet" | "KubeadmControlPlane")
        })
        .cloned()
        .collect();
    refs.push(common::owner_reference(machine, true));
    let api = ctx
        .external
        .api(&machine.namespace().unwrap_or_default(), reference)
        .await?;
    common::patch_merge(
        &api,
        &object.name_any(),
        json!({"metadata": {"ownerReferences": refs, "labels": {(api::CLUSTER_NAME_LABEL): machine.spec.cluster_name}}}),
    )
    .await?;
    Ok(())
}

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "machine";

/// The Machine controller: Machines, woken by their Nodes in the workload cluster, by their
/// infrastructure machines and bootstrap configs and, for workers waiting to look for their
/// Node, by their Cluster's control plane becoming initialized.
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<Machine>(CONTROLLER);
    let controller = controller
        .watches(
            Api::<Cluster>::all(w.client.clone()),
            watcher::Config::default(),
            machines_of_initialized_cluster(w.ctx.clone()),
        )
        .reconcile_on(machines_of_node_changes(
            w.ctx.workloads.node_changes(),
            w.ctx.clone(),
        ))
        .reconcile_on(w.ctx.machine_wakes());
    w.ctx.metrics.state.add_machines(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

pub async fn reconcile(machine: Arc<Machine>, ctx: Arc<Context>) -> Result<Action> {
    let ns = machine.namespace().unwrap_or_default();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&machine.spec.cluster_name)
        .await
        .step("reading the Cluster")?;

    // Guards; a paused Machine is not even deleted (see the Cluster controller).
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        cluster.as_ref(),
        "Machine",
        machine.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, &machine, paused).await;
    }
    if common::deleting(machine.as_ref()) {
        return deletion::reconcile_delete(&ctx, &api, &machine, cluster.as_ref()).await;
    }
    let Some(cluster) = cluster else {
        return Err(crate::reconcile::Error::Invalid(format!(
            "Cluster {} of Machine {} does not exist",
            machine.spec.cluster_name,
            machine.name_any()
        )));
    };
    if common::ensure_finalizer(&api, machine.as_ref(), api::MACHINE_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    if let Some(patch) = ownership_patch(&machine, &cluster) {
        common::patch_merge(&api, &machine.name_any(), json!({"metadata": patch})).await?;
        return Ok(Action::await_change());
    }

    // Phases.
    let providers = Providers::read(&ctx, &machine)
        .await
        .step("reading the bootstrap config and infrastructure machine")?;
    adopt_providers(&ctx, &machine, &providers)
        .await
        .step("adopting the bootstrap config and infrastructure machine")?;
    if let Some(patch) = providers.spec_patch(&machine) {
        common::patch_merge(&api, &machine.name_any(), json!({"spec": patch}))
            .await
            .step("recording the bootstrap data Secret and providerID")?;
        return Ok(Action::await_change());
    }
    let node = find_node(&ctx, &machine, &cluster)
        .await
        .step("finding the Node")?;
    // A MachineDeployment's Machine is up to date when its set's template is the deployment's;
    // control planes say it themselves.
    let up_to_date = super::mdutil::machine_up_to_date(&ctx, &machine)
        .await
        .step("comparing the Machine with its MachineDeployment")?;

    // Status, computed once from what this reconcile gathered.
    let (status, available_wait) = status::compute(&machine, paused, &providers, &node, up_to_date);
    common::write_status(&api, &machine.name_any(), machine.status.as_ref(), &status).await?;
    let ready = |s: Option<&api::machine::MachineStatus>| {
        crate::conditions::is_true(
            s.and_then(|s| s.conditions.as_deref()).unwrap_or_default(),
            crate::conditions::types::READY,
        )
    };
    if !ready(machine.status.as_ref())
        && ready(Some(&status))
        && let Some(created) = &machine.metadata.creation_timestamp
    {
        ctx.metrics.machine_ready(created);
    }
    let requeue = available_wait.map_or(node.requeue(), |w| node.requeue().min(w));
    Ok(Action::requeue(common::spread(machine.as_ref(), requeue)))
}

/// The labels and owner a Machine lacks: the cluster-name label, and (for stand-alone
/// Machines) its Cluster as owner. None when it has them.
fn ownership_patch(machine: &Machine, cluster: &Cluster) -> Option<serde_json::Map<String, Value>> {
    let mut patch = serde_json::Map::new();
    if machine.labels().get(api::CLUSTER_NAME_LABEL) != Some(&machine.spec.cluster_name) {
        patch.insert(
            "labels".into(),
            json!({(api::CLUSTER_NAME_LABEL): machine.spec.cluster_name}),
        );
    }
    let standalone = common::controller_of(machine.owner_references()).is_none()
        && !machine.labels().contains_key(api::SET_NAME_LABEL)
        && !machine.labels().contains_key(api::CONTROL_PLANE_NAME_LABEL);
    if standalone
        && !common::has_owner(
            machine.owner_references(),
            &cluster.uid().unwrap_or_default(),
        )
    {
        let mut refs = machine.owner_references().to_vec();
        refs.push(common::owner_reference(cluster, false));
        patch.insert("ownerReferences".into(), json!(refs));
    }
    (!patch.is_empty()).then_some(patch)
}

impl Providers {
    /// Reads the bootstrap config (when there is a configRef) and the infrastructure machine.
    async fn read(ctx: &Context, machine: &Machine) -> Result<Providers> {
        let ns = machine.namespace().unwrap_or_default();
        let bootstrap = match &machine.spec.bootstrap.config_ref {
            None => None,
            Some(reference) => Some(ctx.external.get(&ns, reference).await?),
        };
        let infrastructure = ctx
            .external
            .get(&ns, &machine.spec.infrastructure_ref)
            .await?;
        Ok(Providers {
            bootstrap,
            infrastructure,
        })
    }

    /// What the Machine's spec takes from its providers: the bootstrap data Secret's name
    /// once the config made it, the infrastructure's providerID once it is provisioned.
    fn spec_patch(&self, machine: &Machine) -> Option<serde_json::Map<String, Value>> {
        let mut patch = serde_json::Map::new();
        if machine.spec.bootstrap.data_secret_name.is_none()
            && let Some(Some(config)) = &self.bootstrap
            && initialization_flag(config, "dataSecretCreated")
            && let Some(name) =
                external::field(config, &["status", "dataSecretName"]).and_then(Value::as_str)
        {
            patch.insert("bootstrap".into(), json!({"dataSecretName": name}));
        }
        if let Some(infra) = &self.infrastructure
            && initialization_flag(infra, "provisioned")
            && let Some(id) =
                external::field(infra, &["spec", "providerID"]).and_then(Value::as_str)
            && machine.spec.provider_id.as_deref() != Some(id)
        {
            patch.insert("providerID".into(), json!(id));
        }
        (!patch.is_empty()).then_some(patch)
    }
}

async fn adopt_providers(ctx: &Context, machine: &Machine, providers: &Providers) -> Result<()> {
    if let (Some(reference), Some(Some(config))) =
        (&machine.spec.bootstrap.config_ref, &providers.bootstrap)
    {
        adopt(ctx, machine, reference, config).await?;
    }
    if let Some(infra) = &providers.infrastructure {
        adopt(ctx, machine, &machine.spec.infrastructure_ref, infra).await?;
    }
    Ok(())
}

/// Looks the Machine's Node up in its workload cluster (by providerID, in the Node cache),
/// and keeps the Node's Cluster API annotations when it is there.
async fn find_node(ctx: &Context, machine: &Machine, cluster: &Cluster) -> Result<NodeState> {
    let ns = machine.namespace().unwrap_or_default();
    let cluster_initialized = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.control_plane_initialized)
        == Some(true);
    let is_control_plane = machine.labels().contains_key(api::CONTROL_PLANE_LABEL);
    let Some(id) = &machine.spec.provider_id else {
        return Ok(NodeState::WaitingForProviderId);
    };
    if !cluster_initialized && !is_control_plane {
        return Ok(NodeState::WaitingForControlPlane(id.clone()));
    }
    Ok(
        match ctx
            .workloads
            .node_by_provider_id(&ns, &cluster.name_any(), id)
            .await
        {
            Ok(NodeLookup::Found(node)) => {
                if let Some(client) = ctx.workloads.client(&ns, &cluster.name_any()).await? {
                    sync_node(&client, machine, &node).await?;
                }
                NodeState::Found(node)
            }
            Ok(NodeLookup::Absent) => NodeState::Absent,
            Ok(NodeLookup::NoKubeconfig) => NodeState::NoKubeconfig,
            Err(e) => NodeState::Unreachable(e.to_string()),
        },
    )
}

/// Keeps the Node's Cluster API annotations and the Machine's taints ([`taints`]), and takes off
/// the uninitialized taint. The patch carries the Node's resourceVersion (its taints are
/// written whole); a Node changed meanwhile (its kubelet's heartbeat) is read again and the
/// patch made anew, rather than the reconcile failing and backing off.
async fn sync_node(client: &Client, machine: &Machine, node: &Node) -> Result<()> {
    let nodes = Api::<Node>::all(client.clone());
    let mut node = std::borrow::Cow::Borrowed(node);
    for _ in 0..3 {
        let Some(patch) = node_patch(machine, &node) else {
            return Ok(());
        };
        match common::patch_merge(&nodes, &node.name_any(), patch).await {
            Err(crate::reconcile::Error::Kube(kube::Error::Api(e))) if e.code == 409 => {
                node = std::borrow::Cow::Owned(nodes.get(&node.name_any()).await?);
            }
            other => return other.map(|_| ()),
        }
    }
    Ok(())
}

/// The merge patch that gives `node` what `machine` wants on it, or None when it has it.
fn node_patch(machine: &Machine, node: &Node) -> Option<serde_json::Value> {
    let owner = common::controller_of(machine.owner_references());
    let mut want = BTreeMap::from([
        (
            api::CLUSTER_NAME_LABEL.to_string(),
            machine.spec.cluster_name.clone(),
        ),
        (
            api::CLUSTER_NAMESPACE_ANNOTATION.to_string(),
            machine.namespace().unwrap_or_default(),
        ),
        (api::MACHINE_ANNOTATION.to_string(), machine.name_any()),
    ]);
    if let Some(o) = owner {
        want.insert(api::OWNER_KIND_ANNOTATION.into(), o.kind.clone());
        want.insert(api::OWNER_NAME_ANNOTATION.into(), o.name.clone());
    }
    let labels: BTreeMap<String, String> = machine
        .labels()
        .iter()
        .filter(|(k, _)| {
            k.starts_with("node-role.kubernetes.io/") || k.starts_with("node.cluster.x-k8s.io/")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let annotations_ok = want
        .iter()
        .all(|(k, v)| node.annotations().get(k) == Some(v));
    let labels_ok = labels.iter().all(|(k, v)| node.labels().get(k) == Some(v));
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default();
    let uninitialized = taints
        .iter()
        .any(|t| t.key == "node.cluster.x-k8s.io/uninitialized");
    let kept: Vec<_> = taints
        .iter()
        .filter(|t| t.key != "node.cluster.x-k8s.io/uninitialized")
        .cloned()
        .collect();
    let propagated = taints::propagate(
        &kept,
        node.annotations()
            .get(taints::TAINTS_FROM_MACHINE_ANNOTATION)
            .map(String::as_str),
        machine.spec.taints.as_deref().unwrap_or_default(),
    );
    if annotations_ok && labels_ok && !uninitialized && propagated.is_none() {
        return None;
    }
    let kept = match propagated {
        Some((taints, owned)) => {
            want.insert(taints::TAINTS_FROM_MACHINE_ANNOTATION.into(), owned);
            taints
        }
        None => kept,
    };
    Some(json!({
        "metadata": {"annotations": want, "labels": labels, "resourceVersion": node.resource_version()},
        "spec": {"taints": kept},
    }))
}

/// The Machines to reconcile when a workload cluster's Node changes: the one named in the
/// Node's `cluster.x-k8s.io/machine` annotation, or, before the Machine has written it, the
/// Machine of that Cluster with the Node's providerID (from the shared Machine cache, by
/// cluster).
pub fn machines_of_node_changes(
    changes: tokio::sync::broadcast::Receiver<crate::workload::clusters::NodeChange>,
    ctx: Arc<Context>,
) -> impl futures::Stream<Item = ObjectRef<Machine>> + Send + 'static {
    tokio_stream::wrappers::BroadcastStream::new(changes).filter_map(move |change| {
        let found = change.ok().and_then(|c| {
            let annotated = c.node.annotations();
            if let (Some(name), Some(ns)) = (
                annotated.get(api::MACHINE_ANNOTATION),
                annotated.get(api::CLUSTER_NAMESPACE_ANNOTATION),
            ) && *ns == c.namespace
            {
                return Some(ObjectRef::new(name).within(ns));
            }
            let id = c.node.spec.as_ref()?.provider_id.as_deref()?;
            let of_cluster = ctx.machines().labelled_now(&c.namespace, &c.cluster, |m| {
                m.spec.provider_id.as_deref() == Some(id)
            });
            of_cluster.first().map(|m| ObjectRef::from_obj(m.as_ref()))
        });
        std::future::ready(found)
    })
}

/// Maps Cluster changes to the Machines to reconcile: all of a Cluster's Machines, but only
/// when its control plane has just become initialized (workers wait for that before looking
/// for their Node), as upstream's ClusterControlPlaneInitialized predicate does. Other Cluster
/// changes, such as status counters, wake no Machine.
pub fn machines_of_initialized_cluster(
    ctx: Arc<Context>,
) -> impl Fn(Cluster) -> Vec<ObjectRef<Machine>> + Send + Sync + 'static {
    let initialized = std::sync::Mutex::new(std::collections::HashSet::<String>::new());
    move |cluster: Cluster| {
        let uid = cluster.uid().unwrap_or_default();
        let now = cluster
            .status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.control_plane_initialized)
            == Some(true);
        let mut seen = initialized.lock().unwrap();
        if !now {
            seen.remove(&uid);
            return Vec::new();
        }
        if !seen.insert(uid) {
            return Vec::new();
        }
        let ns = cluster.namespace().unwrap_or_default();
        let name = cluster.name_any();
        let of_cluster = ctx
            .machines()
            .labelled_now(&ns, &name, |m| m.spec.cluster_name == name);
        of_cluster
            .iter()
            .map(|m| ObjectRef::from_obj(m.as_ref()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_the_annotations_with_the_prefix() {
        let a = BTreeMap::from([
            (format!("{}/backup", api::PRE_DRAIN_HOOK), String::new()),
            ("other".to_string(), String::new()),
        ]);
        assert_eq!(
            hooks(&a, api::PRE_DRAIN_HOOK),
            [format!("{}/backup", api::PRE_DRAIN_HOOK)]
        );
        assert!(hooks(&a, api::PRE_TERMINATE_HOOK).is_empty());
    }
}
