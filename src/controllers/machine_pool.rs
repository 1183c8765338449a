//! The MachinePool controller: a pool's bootstrap data and infrastructure (whose provider
//! scales the instances), its provider IDs and Nodes, and a Machine for each instance when the
//! provider reports `status.infrastructureMachineKind` (upstream's MachinePool Machines), so
//! draining, deletion and health checks work per instance as for any Machine.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::machines::condition_of;
use crate::api;
use crate::api::common::ContractVersionedObjectReference;
use crate::api::machine::{Bootstrap, MachineSpec};
use crate::api::machine_pool::{
    MachinePoolInitializationStatus, MachinePoolPhase, MachinePoolStatus,
};
use crate::api::{Cluster, Machine, MachinePool};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::external::{self, Deletion, field};
use crate::reconcile::runtime::{Wiring, controllers_of};
use crate::reconcile::{Context, Error, Result, StepContext};

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "machinepool";

/// What the pool's bootstrap config and infrastructure report, read once per reconcile.
#[derive(Debug, Default, Clone, PartialEq)]
struct Providers {
    /// The bootstrap config's data Secret (None: not written yet, or no config).
    data_secret: Option<String>,
    /// Whether the pool names a bootstrap config that does not exist.
    bootstrap_missing: bool,
    infrastructure_missing: bool,
    infrastructure_provisioned: bool,
    provider_ids: Vec<String>,
    /// The instances the infrastructure reports.
    replicas: Option<i32>,
    /// The kind of the instances' infrastructure machines, when the provider has them.
    machine_kind: Option<String>,
}

impl Providers {
    fn read(
        pool: &MachinePool,
        bootstrap: Option<&DynamicObject>,
        infrastructure: Option<&DynamicObject>,
    ) -> Providers {
        let spec = &pool.spec.template.spec;
        let data_secret = spec.bootstrap.data_secret_name.clone().or_else(|| {
            bootstrap
                .and_then(|b| field(b, &["status", "dataSecretName"]))
                .and_then(Value::as_str)
                .map(String::from)
                .filter(|_| {
                    bootstrap.is_some_and(|b| external::initialization_flag(b, "dataSecretCreated"))
                })
        });
        let infra = |path: &[&str]| infrastructure.and_then(|i| field(i, path));
        Providers {
            data_secret,
            bootstrap_missing: spec.bootstrap.config_ref.is_some() && bootstrap.is_none(),
            infrastructure_missing: infrastructure.is_none(),
            // The v1beta2 contract's flag, or the deprecated `status.ready`.
            infrastructure_provisioned: infrastructure.is_some_and(|i| {
                external::initialization_flag(i, "provisioned")
                    || field(i, &["status", "ready"]) == Some(&json!(true))
            }),
            provider_ids: infra(&["spec", "providerIDList"])
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            replicas: infra(&["status", "replicas"])
                .and_then(Value::as_i64)
                .map(|r| r as i32),
            machine_kind: infra(&["status", "infrastructureMachineKind"])
                .and_then(Value::as_str)
                .filter(|k| !k.is_empty())
                .map(String::from),
        }
    }
}

/// The MachinePool controller: MachinePools, woken by their Machines and by changes of the
/// objects they own (their bootstrap config and infrastructure, through the providers'
/// watches).
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w
        .controller::<MachinePool>(CONTROLLER)
        .reconcile_on(controllers_of(w.ctx.machines().changes()))
        .reconcile_on(w.ctx.machine_pool_wakes());
    w.ctx.metrics.state.add(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

pub async fn reconcile(pool: Arc<MachinePool>, ctx: Arc<Context>) -> Result<Action> {
    let ns = pool.namespace().unwrap_or_default();
    let api: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&pool.spec.cluster_name)
        .await?;

    // Guards.
    let (is_paused, paused) = common::paused(
        ctx.management_uid(),
        cluster.as_ref(),
        "MachinePool",
        pool.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, &pool, paused).await;
    }
    if common::deleting(pool.as_ref()) {
        return reconcile_delete(&ctx, &api, &pool)
            .await
            .step("deleting the pool's infrastructure and bootstrap config");
    }
    let Some(cluster) = cluster else {
        return Err(Error::Invalid(format!(
            "Cluster {} of MachinePool {} does not exist",
            pool.spec.cluster_name,
            pool.name_any()
        )));
    };
    if common::ensure_finalizer(&api, pool.as_ref(), api::MACHINE_POOL_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let cluster_uid = cluster.uid().unwrap_or_default();
    if pool.labels().get(api::CLUSTER_NAME_LABEL) != Some(&pool.spec.cluster_name)
        || !common::has_owner(pool.owner_references(), &cluster_uid)
    {
        let mut refs = pool.owner_references().to_vec();
        if !common::has_owner(&refs, &cluster_uid) {
            refs.push(common::owner_reference(&cluster, false));
        }
        common::patch_merge(&api, &pool.name_any(), json!({"metadata": {"labels": {(api::CLUSTER_NAME_LABEL): pool.spec.cluster_name}, "ownerReferences": refs}})).await?;
        return Ok(Action::await_change());
    }

    // Phases: the providers' objects become the pool's, then their news is copied over.
    let spec = &pool.spec.template.spec;
    let bootstrap = match &spec.bootstrap.config_ref {
        Some(reference) => adopt(&ctx, &pool, reference)
            .await
            .step("taking the bootstrap config")?,
        None => None,
    };
    let infrastructure = adopt(&ctx, &pool, &spec.infrastructure_ref)
        .await
        .step("taking the infrastructure machine pool")?;
    let providers = Providers::read(&pool, bootstrap.as_ref(), infrastructure.as_ref());
    if let Some(patch) = spec_patch(&pool, &providers) {
        common::patch_merge(&api, &pool.name_any(), patch).await?;
        return Ok(Action::await_change());
    }
    let machines = match (&providers.machine_kind, &infrastructure) {
        (Some(kind), Some(infrastructure)) => sync_machines(&ctx, &pool, kind, infrastructure)
            .await
            .step("making a Machine for each instance")?,
        _ => Vec::new(),
    };
    let nodes = if providers.machine_kind.is_some() {
        nodes_of_machines(&machines, &providers.provider_ids)
    } else {
        nodes_by_provider_id(&ctx, &pool, &providers.provider_ids)
            .await
            .step("finding the instances' Nodes")?
    };

    // Status, computed once from what this reconcile saw.
    let status = compute_status(&pool, &providers, &machines, nodes, paused);
    let settled = status.phase == Some(MachinePoolPhase::Running)
        && status.up_to_date_replicas == pool.spec.replicas.or(Some(1));
    common::write_status(&api, &pool.name_any(), pool.status.as_ref(), &status).await?;
    Ok(Action::requeue(if settled {
        common::spread(pool.as_ref(), common::RESYNC)
    } else {
        Duration::from_secs(2)
    }))
}

/// The provider object a reference names, owned by the pool and labelled with its Cluster;
/// None while it does not exist.
async fn adopt(
    ctx: &Context,
    pool: &MachinePool,
    reference: &ContractVersionedObjectReference,
) -> Result<Option<DynamicObject>> {
    let ns = pool.namespace().unwrap_or_default();
    let Some(object) = ctx.external.get(&ns, reference).await? else {
        return Ok(None);
    };
    let uid = pool.uid().unwrap_or_default();
    let labelled = object.labels().get(api::CLUSTER_NAME_LABEL) == Some(&pool.spec.cluster_name);
    if labelled && common::has_owner(object.owner_references(), &uid) {
        return Ok(Some(object));
    }
    let mut refs = object.owner_references().to_vec();
    if !common::has_owner(&refs, &uid) {
        refs.push(common::owner_reference(pool, false));
    }
    let api = ctx.external.api(&ns, reference).await?;
    let patch = json!({"metadata": {"ownerReferences": refs, "labels": {(api::CLUSTER_NAME_LABEL): pool.spec.cluster_name}}});
    let adopted: DynamicObject = common::patch_merge(&api, &object.name_any(), patch).await?;
    Ok(Some(adopted))
}

/// What the pool's spec lacks of what its providers report: the bootstrap data Secret's name
/// and the instances' provider IDs.
fn spec_patch(pool: &MachinePool, providers: &Providers) -> Option<Value> {
    let mut patch = serde_json::Map::new();
    if providers.data_secret.is_some()
        && pool.spec.template.spec.bootstrap.data_secret_name != providers.data_secret
    {
        patch.insert(
            "template".into(),
            json!({"spec": {"bootstrap": {"dataSecretName": providers.data_secret}}}),
        );
    }
    let current = pool.spec.provider_id_list.clone().unwrap_or_default();
    if providers.infrastructure_provisioned && current != providers.provider_ids {
        patch.insert("providerIDList".into(), json!(providers.provider_ids));
    }
    (!patch.is_empty()).then(|| json!({"spec": patch}))
}

/// The Machine of each of the provider's instances (infrastructure machines of `kind` labelled
/// with the pool), created where missing, as upstream's MachinePool Machines: named as the
/// instance, controlled by the pool, with the pool's bootstrap data and version. Returns the
/// pool's Machines.
async fn sync_machines(
    ctx: &Context,
    pool: &MachinePool,
    kind: &str,
    infrastructure: &DynamicObject,
) -> Result<Vec<Machine>> {
    let ns = pool.namespace().unwrap_or_default();
    let group = infrastructure
        .types
        .as_ref()
        .map(|t| external::group_of(&t.api_version).to_string())
        .unwrap_or_default();
    let resource = ctx.external.resource(&group, kind).await?;
    let selector = super::machines::selector_string(&instance_labels(pool));
    let instances = Api::<DynamicObject>::namespaced_with(ctx.client.clone(), &ns, &resource)
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    let mut machines: Vec<Machine> = ctx
        .machines()
        .list_labelled(&ns, &pool.spec.cluster_name, |m| {
            m.labels().get(api::MACHINE_POOL_NAME_LABEL) == Some(&pool.name_any())
        })
        .await?
        .iter()
        .map(|m| (**m).clone())
        .collect();
    let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let mut created = Vec::new();
    for instance in instances.items.iter().filter(|i| !common::deleting(*i)) {
        let name = instance.name_any();
        if machines
            .iter()
            .any(|m| m.spec.infrastructure_ref.name == name)
        {
            continue;
        }
        let machine = pool_machine(pool, &name, &group, kind);
        match machines_api.create(&PostParams::default(), &machine).await {
            Ok(m) => {
                created.push(name);
                machines.push(m);
            }
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    if !created.is_empty() {
        ctx.machines()
            .wait_for("the pool's new Machines", |cache| {
                created
                    .iter()
                    .all(|n| cache.get(&ObjectRef::new(n).within(&ns)).is_some())
            })
            .await?;
    }
    Ok(machines)
}

/// The Machine standing for one instance of the pool.
fn pool_machine(pool: &MachinePool, instance: &str, group: &str, kind: &str) -> Machine {
    let template = pool.spec.template.metadata.as_ref();
    let mut labels = template.and_then(|m| m.labels.clone()).unwrap_or_default();
    labels.extend(instance_labels(pool));
    Machine {
        metadata: ObjectMeta {
            name: Some(instance.to_string()),
            namespace: pool.namespace(),
            labels: Some(labels),
            annotations: template.and_then(|m| m.annotations.clone()),
            owner_references: Some(vec![common::owner_reference(pool, true)]),
            finalizers: Some(vec![api::MACHINE_FINALIZER.to_string()]),
            ..Default::default()
        },
        spec: MachineSpec {
            cluster_name: pool.spec.cluster_name.clone(),
            bootstrap: Bootstrap {
                config_ref: None,
                data_secret_name: pool.spec.template.spec.bootstrap.data_secret_name.clone(),
            },
            infrastructure_ref: ContractVersionedObjectReference {
                api_group: group.to_string(),
                kind: kind.to_string(),
                name: instance.to_string(),
            },
            // The version the instance is made for: a pool's rollout replaces instances, so a
            // Machine's version never changes.
            version: pool.spec.template.spec.version.clone(),
            deletion: pool.spec.template.spec.deletion.clone(),
            readiness_gates: pool.spec.template.spec.readiness_gates.clone(),
            taints: pool.spec.template.spec.taints.clone(),
            ..Default::default()
        },
        status: None,
    }
}

/// The labels of a pool's instances and their Machines.
fn instance_labels(pool: &MachinePool) -> BTreeMap<String, String> {
    BTreeMap::from([
        (api::MACHINE_POOL_NAME_LABEL.to_string(), pool.name_any()),
        (
            api::CLUSTER_NAME_LABEL.to_string(),
            pool.spec.cluster_name.clone(),
        ),
    ])
}

/// The pool's Nodes, from its Machines whose instances are in the provider ID list.
fn nodes_of_machines(machines: &[Machine], provider_ids: &[String]) -> Vec<ObjectReference> {
    let mut nodes: Vec<ObjectReference> = machines
        .iter()
        .filter(|m| {
            m.spec
                .provider_id
                .as_ref()
                .is_some_and(|id| provider_ids.contains(id))
        })
        .filter_map(|m| super::machines::node_name(m).map(node_reference))
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    nodes
}

fn node_reference(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.to_string()),
        ..Default::default()
    }
}

/// The workload cluster's Nodes whose provider IDs are the pool's (for providers without
/// MachinePool Machines).
async fn nodes_by_provider_id(
    ctx: &Context,
    pool: &MachinePool,
    provider_ids: &[String],
) -> Result<Vec<ObjectReference>> {
    let ns = pool.namespace().unwrap_or_default();
    if provider_ids.is_empty() {
        return Ok(Vec::new());
    }
    let Some(workload) = ctx.workloads.client(&ns, &pool.spec.cluster_name).await? else {
        return Ok(pool
            .status
            .as_ref()
            .and_then(|s| s.node_refs.clone())
            .unwrap_or_default());
    };
    let nodes = Api::<Node>::all(workload).list(&Default::default()).await?;
    let mut refs: Vec<ObjectReference> = nodes
        .items
        .iter()
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some_and(|id| provider_ids.contains(id))
        })
        .map(|n| {
            let mut r = node_reference(&n.name_any());
            r.uid = n.uid();
            r
        })
        .collect();
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(refs)
}

/// The pool's status from its providers, Machines and Nodes: initialization, replica counters,
/// versions, phase (as upstream's reconcilePhase) and conditions.
fn compute_status(
    pool: &MachinePool,
    providers: &Providers,
    machines: &[Machine],
    nodes: Vec<ObjectReference>,
    paused: NewCondition,
) -> MachinePoolStatus {
    let mut status = pool.status.clone().unwrap_or_default();
    let desired = pool.spec.replicas.unwrap_or(1).max(0);
    let bootstrap_created = providers.data_secret.is_some();
    status.initialization = Some(MachinePoolInitializationStatus {
        infrastructure_provisioned: Some(providers.infrastructure_provisioned),
        bootstrap_data_secret_created: Some(bootstrap_created),
    });
    let count = |t: &str| {
        machines
            .iter()
            .filter(|m| condition_of(m, t).is_some_and(|c| c.status == "True"))
            .count() as i32
    };
    // With a Machine per instance, the Machines are the freshest count (the infrastructure's
    // status may lag a rollout behind).
    let replicas = match providers.machine_kind {
        Some(_) => machines.len() as i32,
        None => providers.replicas.unwrap_or_default(),
    };
    status.replicas = Some(replicas);
    if providers.machine_kind.is_some() {
        status.ready_replicas = Some(count(conditions::types::READY));
        status.available_replicas = Some(count(conditions::types::AVAILABLE));
        // A Machine of another version is outdated already, before its condition says so.
        let version = &pool.spec.template.spec.version;
        status.up_to_date_replicas = Some(
            machines
                .iter()
                .filter(|m| &m.spec.version == version)
                .filter(|m| {
                    condition_of(m, conditions::types::UP_TO_DATE)
                        .is_some_and(|c| c.status == "True")
                })
                .count() as i32,
        );
        let versions =
            super::machines::versions(machines.iter().filter_map(|m| m.spec.version.clone()));
        status.versions = (!versions.is_empty()).then_some(versions);
    } else {
        // Without Machines, an instance with a Node counts as ready and available.
        let with_node = nodes.len() as i32;
        status.ready_replicas = Some(with_node);
        status.available_replicas = Some(with_node);
        status.up_to_date_replicas = Some(desired.min(replicas));
    }
    status.node_refs = (!nodes.is_empty()).then_some(nodes);
    let ready = status.ready_replicas.unwrap_or(0);
    status.phase = Some(phase(pool, bootstrap_created, providers, ready, desired));

    let live = machines.iter().filter(|m| !common::deleting(*m)).count() as i32;
    let mut conds = vec![
        paused,
        NewCondition::new(
            conditions::types::DELETING,
            Status::False,
            conditions::reasons::NOT_DELETING,
        ),
        bootstrap_condition(pool, providers),
        infrastructure_condition(pool, providers),
    ];
    let current = if providers.machine_kind.is_some() {
        live
    } else {
        replicas
    };
    conds.push(NewCondition::activity(
        conditions::types::SCALING_UP,
        current < desired,
        || format!("Scaling up from {current} to {desired} replicas"),
    ));
    conds.push(NewCondition::activity(
        conditions::types::SCALING_DOWN,
        current > desired,
        || format!("Scaling down from {current} to {desired} replicas"),
    ));
    if providers.machine_kind.is_some() {
        conds.extend(super::machines::machines_ready_and_up_to_date(machines));
    }
    let available = status.available_replicas.unwrap_or(0);
    conds.push(if available >= desired {
        NewCondition::new(
            conditions::types::AVAILABLE,
            Status::True,
            conditions::reasons::AVAILABLE,
        )
    } else {
        NewCondition::new(
            conditions::types::AVAILABLE,
            Status::False,
            conditions::reasons::NOT_AVAILABLE,
        )
        .message(format!("{available} of {desired} replicas are available"))
    });
    let generation = pool.meta().generation;
    common::set_conditions(&mut status.conditions, generation, conds);
    status.observed_generation = generation;
    status
}

/// Upstream's phase of a pool, in its order of precedence.
fn phase(
    pool: &MachinePool,
    bootstrap_created: bool,
    providers: &Providers,
    ready: i32,
    desired: i32,
) -> MachinePoolPhase {
    let provisioned = providers.infrastructure_provisioned;
    let autoscaled = matches!(api::autoscaler_bounds(pool.annotations()), Ok(Some(_)));
    let scaling = |direction| {
        if autoscaled {
            MachinePoolPhase::Scaling
        } else {
            direction
        }
    };
    if common::deleting(pool) {
        MachinePoolPhase::Deleting
    } else if provisioned && desired > ready {
        scaling(MachinePoolPhase::ScalingUp)
    } else if provisioned && desired < ready {
        scaling(MachinePoolPhase::ScalingDown)
    } else if provisioned {
        MachinePoolPhase::Running
    } else if pool
        .status
        .as_ref()
        .and_then(|s| s.node_refs.as_ref())
        .is_some_and(|n| !n.is_empty())
    {
        MachinePoolPhase::Provisioned
    } else if bootstrap_created {
        MachinePoolPhase::Provisioning
    } else {
        MachinePoolPhase::Pending
    }
}

fn bootstrap_condition(pool: &MachinePool, providers: &Providers) -> NewCondition {
    let reference = pool.spec.template.spec.bootstrap.config_ref.as_ref();
    let ty = api::machine::conditions::BOOTSTRAP_CONFIG_READY;
    match reference {
        _ if providers.data_secret.is_some() => {
            NewCondition::new(ty, Status::True, conditions::reasons::READY)
        }
        Some(r) if providers.bootstrap_missing => NewCondition::new(
            ty,
            Status::False,
            conditions::reasons::OBJECT_DOES_NOT_EXIST,
        )
        .message(format!("{} {} does not exist", r.kind, r.name)),
        Some(r) => {
            NewCondition::new(ty, Status::False, conditions::reasons::NOT_READY).message(format!(
                "Waiting for {} {} to write the bootstrap data",
                r.kind, r.name
            ))
        }
        None => NewCondition::new(ty, Status::False, conditions::reasons::NOT_READY)
            .message("spec.template.spec.bootstrap names neither a configRef nor a dataSecretName"),
    }
}

fn infrastructure_condition(pool: &MachinePool, providers: &Providers) -> NewCondition {
    let r = &pool.spec.template.spec.infrastructure_ref;
    let ty = api::machine::conditions::INFRASTRUCTURE_READY;
    if providers.infrastructure_missing {
        NewCondition::new(
            ty,
            Status::False,
            conditions::reasons::OBJECT_DOES_NOT_EXIST,
        )
        .message(format!("{} {} does not exist", r.kind, r.name))
    } else if providers.infrastructure_provisioned {
        NewCondition::new(ty, Status::True, conditions::reasons::READY)
    } else {
        NewCondition::new(ty, Status::False, conditions::reasons::NOT_READY)
            .message(format!("{} {} is not provisioned yet", r.kind, r.name))
    }
}

/// Deletes the pool's infrastructure (which takes its instances and their Machines) and its
/// bootstrap config, then the Nodes of instances without Machines; the finalizer goes once
/// they are gone.
async fn reconcile_delete(
    ctx: &Context,
    api: &Api<MachinePool>,
    pool: &MachinePool,
) -> Result<Action> {
    let ns = pool.namespace().unwrap_or_default();
    let spec = &pool.spec.template.spec;
    let mut waiting = false;
    for reference in std::iter::once(&spec.infrastructure_ref).chain(&spec.bootstrap.config_ref) {
        if ctx.external.delete(&ns, reference).await? == Deletion::Waiting {
            waiting = true;
        }
    }
    let machines = ctx
        .machines()
        .list_labelled(&ns, &pool.spec.cluster_name, |m| {
            m.labels().get(api::MACHINE_POOL_NAME_LABEL) == Some(&pool.name_any())
                && common::controller_of(m.owner_references())
                    .is_some_and(|o| Some(&o.uid) == pool.uid().as_ref())
        })
        .await?;
    let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    for m in machines.iter().filter(|m| !common::deleting(m.as_ref())) {
        machines_api
            .delete(&m.name_any(), &DeleteParams::background())
            .await?;
    }
    if waiting || !machines.is_empty() {
        return Ok(Action::requeue(Duration::from_secs(1)));
    }
    delete_retired_nodes(ctx, pool).await?;
    common::remove_finalizer(api, pool, api::MACHINE_POOL_FINALIZER).await?;
    Ok(Action::await_change())
}

/// Deletes the pool's Nodes that no Machine deletes (a provider without MachinePool Machines),
/// as upstream's deleteRetiredNodes; a workload cluster that cannot be reached has none to
/// delete.
async fn delete_retired_nodes(ctx: &Context, pool: &MachinePool) -> Result<()> {
    let nodes: Vec<String> = pool
        .status
        .as_ref()
        .and_then(|s| s.node_refs.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|n| n.name.clone())
        .collect();
    if nodes.is_empty() {
        return Ok(());
    }
    let ns = pool.namespace().unwrap_or_default();
    let Some(workload) = ctx.workloads.client(&ns, &pool.spec.cluster_name).await? else {
        return Ok(());
    };
    let api: Api<Node> = Api::all(workload);
    for node in nodes {
        match api.delete(&node, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::common::expect_condition;

    fn pool(replicas: i32, annotations: Value) -> MachinePool {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "generation": 3, "annotations": annotations},
            "spec": {"clusterName": "c", "replicas": replicas, "template": {"spec": {
                "clusterName": "c", "version": "v1.31.0",
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "p"}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachinePool", "name": "p"},
            }}},
        }))
        .unwrap()
    }

    /// A Machine of the pool at `version`, Ready/Available/UpToDate as `ok` says.
    fn machine(name: &str, version: &str, ok: bool) -> Machine {
        let status = if ok { "True" } else { "False" };
        let condition = |t: &str| json!({"type": t, "status": status, "reason": "R", "lastTransitionTime": "2026-12-01T00:00:00Z", "message": ""});
        serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"clusterName": "c", "version": version, "providerID": format!("dev://{name}"), "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "DevMachine", "name": name}},
            "status": {"nodeRef": {"name": name}, "conditions": [condition("Ready"), condition("Available"), condition("UpToDate")]},
        }))
        .unwrap()
    }

    fn providers(provisioned: bool, ids: &[&str]) -> Providers {
        Providers {
            data_secret: Some("p".into()),
            infrastructure_provisioned: provisioned,
            provider_ids: ids.iter().map(|i| i.to_string()).collect(),
            replicas: Some(ids.len() as i32),
            machine_kind: Some("DevMachine".into()),
            ..Default::default()
        }
    }

    fn paused() -> NewCondition {
        NewCondition::new(
            conditions::types::PAUSED,
            Status::False,
            conditions::reasons::NOT_PAUSED,
        )
    }

    #[test]
    fn status_table() {
        let autoscaled = json!({
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3",
        });
        // (case, pool, providers, machines, phase, (replicas, ready, up to date), Available)
        let cases = [
            (
                "waiting for the bootstrap data",
                pool(2, json!({})),
                Providers {
                    machine_kind: Some("DevMachine".into()),
                    ..Default::default()
                },
                vec![],
                MachinePoolPhase::Pending,
                (0, 0, 0),
                "0 of 2 replicas are available",
            ),
            (
                "running",
                pool(2, json!({})),
                providers(true, &["dev://a", "dev://b"]),
                vec![machine("a", "v1.31.0", true), machine("b", "v1.31.0", true)],
                MachinePoolPhase::Running,
                (2, 2, 2),
                "",
            ),
            (
                "an instance of the old version is not up to date yet",
                pool(2, json!({})),
                providers(true, &["dev://a", "dev://b"]),
                vec![machine("a", "v1.30.4", true), machine("b", "v1.31.0", true)],
                MachinePoolPhase::Running,
                (2, 2, 1),
                "",
            ),
            (
                "scaling up",
                pool(3, json!({})),
                providers(true, &["dev://a"]),
                vec![machine("a", "v1.31.0", true)],
                MachinePoolPhase::ScalingUp,
                (1, 1, 1),
                "1 of 3 replicas are available",
            ),
            (
                "the autoscaler's pool just scales",
                pool(3, autoscaled),
                providers(true, &["dev://a"]),
                vec![machine("a", "v1.31.0", true)],
                MachinePoolPhase::Scaling,
                (1, 1, 1),
                "1 of 3 replicas are available",
            ),
        ];
        for (case, pool, providers, machines, phase, counters, available) in cases {
            let nodes = nodes_of_machines(&machines, &providers.provider_ids);
            let status = compute_status(&pool, &providers, &machines, nodes, paused());
            assert_eq!(status.phase, Some(phase), "{case}");
            assert_eq!(
                (
                    status.replicas.unwrap(),
                    status.ready_replicas.unwrap(),
                    status.up_to_date_replicas.unwrap()
                ),
                counters,
                "{case}"
            );
            let condition = expect_condition(
                status.conditions.as_ref(),
                conditions::types::AVAILABLE,
                case,
            );
            assert_eq!(condition.message, available, "{case}");
            assert_eq!(status.observed_generation, Some(3), "{case}");
        }
    }

    #[test]
    fn the_spec_takes_the_data_secret_and_the_provider_ids() {
        let p = pool(2, json!({}));
        assert_eq!(
            spec_patch(&p, &providers(true, &["dev://a", "dev://b"])),
            Some(json!({"spec": {
                "template": {"spec": {"bootstrap": {"dataSecretName": "p"}}},
                "providerIDList": ["dev://a", "dev://b"],
            }}))
        );
        // Not provisioned yet: the IDs wait.
        assert_eq!(
            spec_patch(&p, &providers(false, &["dev://a"])),
            Some(json!({"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": "p"}}}}}))
        );
        let machine = pool_machine(&p, "p-x", "infrastructure.cluster.x-k8s.io", "DevMachine");
        assert_eq!(machine.spec.version.as_deref(), Some("v1.31.0"));
        assert_eq!(
            machine
                .labels()
                .get(api::MACHINE_POOL_NAME_LABEL)
                .map(String::as_str),
            Some("p")
        );
        let owner = &machine.owner_references()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("MachinePool", Some(true))
        );
    }
}
