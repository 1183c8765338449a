//! The Machine controller: brings a Machine's bootstrap config and infrastructure machine
//! together, finds its Node in the workload cluster, and on deletion drains the Node, removes
//! the provider objects and the Node, in upstream's order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::common;
use super::external::{self, condition, initialization_flag};
use super::{Context, Result};
use crate::api;
use crate::api::common::{ContractVersionedObjectReference, MachineAddress};
use crate::api::machine::{MachineNodeReference, MachineStatus};
use crate::api::{Cluster, Machine};
use crate::conditions::{self, MergeReasons, NewCondition, Status, SummaryOptions};
use crate::workload::clusters::NodeLookup;

/// The Machine's phase, as upstream computes it.
pub fn phase(machine: &Machine) -> &'static str {
    let status = machine.status.clone().unwrap_or_default();
    let init = status.initialization.unwrap_or_default();
    if common::deleting(machine) {
        "Deleting"
    } else if status.node_ref.is_some() && init.infrastructure_provisioned == Some(true) {
        "Running"
    } else if machine.spec.provider_id.is_some() {
        "Provisioned"
    } else if init.bootstrap_data_secret_created == Some(true) {
        "Provisioning"
    } else {
        "Pending"
    }
}

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

fn node_conditions(node: Option<&Node>) -> Vec<NewCondition> {
    let Some(node) = node else {
        return vec![
            NewCondition::new(
                api::machine::conditions::NODE_READY,
                Status::Unknown,
                "NodeDoesNotExist",
            )
            .message("Node does not exist"),
            NewCondition::new(
                api::machine::conditions::NODE_HEALTHY,
                Status::Unknown,
                "NodeDoesNotExist",
            )
            .message("Node does not exist"),
        ];
    };
    let list = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let get = |t: &str| list.iter().find(|c| c.type_ == t);
    let ready = match get("Ready") {
        Some(c) if c.status == "True" => NewCondition::new(
            api::machine::conditions::NODE_READY,
            Status::True,
            "NodeReady",
        ),
        Some(c) => NewCondition::new(
            api::machine::conditions::NODE_READY,
            Status::parse(&c.status),
            if c.status == "False" {
                "NodeNotReady"
            } else {
                "NodeReadyUnknown"
            },
        )
        .message(format!(
            "* Node.Ready: {}",
            c.message
                .clone()
                .unwrap_or_else(|| format!("Condition is {}", c.status))
        )),
        None => NewCondition::new(
            api::machine::conditions::NODE_READY,
            Status::Unknown,
            "NodeReadyUnknown",
        )
        .message("* Node.Ready: Condition not yet reported"),
    };
    let mut problems = Vec::new();
    let mut unknown = false;
    for (t, good) in [
        ("Ready", "True"),
        ("MemoryPressure", "False"),
        ("DiskPressure", "False"),
        ("PIDPressure", "False"),
    ] {
        match get(t) {
            Some(c) if c.status == good => {}
            Some(c) if c.status == "Unknown" => {
                unknown = true;
                problems.push(format!("* Node.{t}: Condition is Unknown"));
            }
            Some(c) => problems.push(format!(
                "* Node.{t}: {}",
                c.message
                    .clone()
                    .unwrap_or_else(|| format!("Condition is {}", c.status))
            )),
            None if t == "Ready" => {
                unknown = true;
                problems.push("* Node.Ready: Condition not yet reported".into());
            }
            None => {}
        }
    }
    let healthy = if problems.is_empty() {
        NewCondition::new(
            api::machine::conditions::NODE_HEALTHY,
            Status::True,
            "NodeHealthy",
        )
    } else if unknown && problems.len() == 1 {
        NewCondition::new(
            api::machine::conditions::NODE_HEALTHY,
            Status::Unknown,
            "NodeHealthyUnknown",
        )
        .message(problems.join("\n"))
    } else {
        NewCondition::new(
            api::machine::conditions::NODE_HEALTHY,
            Status::False,
            "NodeNotHealthy",
        )
        .message(problems.join("\n"))
    };
    vec![ready, healthy]
}

pub async fn reconcile(machine: Arc<Machine>, ctx: Arc<Context>) -> Result<Action> {
    let ns = machine.namespace().unwrap_or_default();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = Api::<Cluster>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&machine.spec.cluster_name)
        .await?;
    if common::deleting(machine.as_ref()) {
        return reconcile_delete(&ctx, &api, &machine, cluster.as_ref()).await;
    }
    let Some(cluster) = cluster else {
        return Err(super::Error::Invalid(format!(
            "Cluster {} of Machine {} does not exist",
            machine.spec.cluster_name,
            machine.name_any()
        )));
    };
    if common::ensure_finalizer(&api, machine.as_ref(), api::MACHINE_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let generation = machine.meta().generation;
    let mut status = machine.status.clone().unwrap_or_default();
    let (is_paused, paused) = common::paused(Some(&cluster), "Machine", machine.annotations());
    if is_paused {
        common::set_conditions(&mut status.conditions, generation, vec![paused]);
        common::patch_status(&api, &machine.name_any(), &status).await?;
        return Ok(Action::await_change());
    }

    // Owner and labels: stand-alone Machines belong to their Cluster.
    let mut metadata_patch = serde_json::Map::new();
    if machine.labels().get(api::CLUSTER_NAME_LABEL) != Some(&machine.spec.cluster_name) {
        metadata_patch.insert(
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
        refs.push(common::owner_reference(&cluster, false));
        metadata_patch.insert("ownerReferences".into(), json!(refs));
    }
    if !metadata_patch.is_empty() {
        common::patch_merge(
            &api,
            &machine.name_any(),
            json!({"metadata": metadata_patch}),
        )
        .await?;
        return Ok(Action::await_change());
    }

    let mut conds = vec![
        paused,
        NewCondition::new(conditions::types::DELETING, Status::False, "NotDeleting"),
    ];
    let mut init = status.initialization.clone().unwrap_or_default();
    let mut spec_patch = serde_json::Map::new();

    // Bootstrap.
    match &machine.spec.bootstrap.config_ref {
        None => {
            let provided = machine.spec.bootstrap.data_secret_name.is_some();
            init.bootstrap_data_secret_created = Some(provided);
            conds.push(if provided {
                NewCondition::new(
                    api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                    Status::True,
                    "DataSecretProvided",
                )
            } else {
                NewCondition::new(
                    api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                    Status::False,
                    "NotReady",
                )
                .message("Waiting for spec.bootstrap.dataSecretName to be set")
            });
        }
        Some(reference) => match ctx.external.get(&ns, reference).await? {
            None => conds.push(
                NewCondition::new(
                    api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                    Status::False,
                    "ObjectDoesNotExist",
                )
                .message(format!("{} does not exist", reference.kind)),
            ),
            Some(config) => {
                adopt(&ctx, &machine, reference, &config).await?;
                let created = initialization_flag(&config, "dataSecretCreated");
                if machine.spec.bootstrap.data_secret_name.is_some() {
                    init.bootstrap_data_secret_created = Some(true);
                } else if created
                    && let Some(name) = external::field(&config, &["status", "dataSecretName"])
                        .and_then(Value::as_str)
                {
                    spec_patch.insert("bootstrap".into(), json!({"dataSecretName": name}));
                    init.bootstrap_data_secret_created = Some(true);
                }
                let fallback = if created {
                    NewCondition::new("", Status::True, "Ready")
                } else {
                    NewCondition::new("", Status::False, "NotReady").message(format!(
                        "{} status.initialization.dataSecretCreated is false",
                        reference.kind
                    ))
                };
                conds.push(conditions::mirror(
                    condition(&config, "Ready").as_ref(),
                    "Ready",
                    api::machine::conditions::BOOTSTRAP_CONFIG_READY,
                    Some(fallback),
                ));
            }
        },
    }

    // Infrastructure.
    let reference = &machine.spec.infrastructure_ref;
    match ctx.external.get(&ns, reference).await? {
        None => conds.push(
            NewCondition::new(
                api::machine::conditions::INFRASTRUCTURE_READY,
                Status::False,
                "ObjectDoesNotExist",
            )
            .message(format!("{} does not exist", reference.kind)),
        ),
        Some(infra) => {
            adopt(&ctx, &machine, reference, &infra).await?;
            let provisioned = initialization_flag(&infra, "provisioned");
            if provisioned
                && let Some(id) =
                    external::field(&infra, &["spec", "providerID"]).and_then(Value::as_str)
            {
                init.infrastructure_provisioned = Some(true);
                if machine.spec.provider_id.as_deref() != Some(id) {
                    spec_patch.insert("providerID".into(), json!(id));
                }
                status.addresses = external::field(&infra, &["status", "addresses"])
                    .and_then(|a| serde_json::from_value::<Vec<MachineAddress>>(a.clone()).ok());
                status.failure_domain = external::field(&infra, &["status", "failureDomain"])
                    .and_then(Value::as_str)
                    .map(String::from);
            }
            let fallback = if provisioned {
                NewCondition::new("", Status::True, "Ready")
            } else {
                NewCondition::new("", Status::False, "NotReady").message(format!(
                    "{} status.initialization.provisioned is false",
                    reference.kind
                ))
            };
            conds.push(conditions::mirror(
                condition(&infra, "Ready").as_ref(),
                "Ready",
                api::machine::conditions::INFRASTRUCTURE_READY,
                Some(fallback),
            ));
        }
    }
    if !spec_patch.is_empty() {
        common::patch_merge(&api, &machine.name_any(), json!({"spec": spec_patch})).await?;
        return Ok(Action::await_change());
    }

    // The Node.
    let cluster_initialized = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.control_plane_initialized)
        == Some(true);
    let is_control_plane = machine.labels().contains_key(api::CONTROL_PLANE_LABEL);
    // Node changes reach this reconciler through the workload cluster's Node watch; the
    // requeue is only a safety net.
    let mut requeue = Duration::from_secs(60);
    match (
        &machine.spec.provider_id,
        cluster_initialized || is_control_plane,
    ) {
        (Some(id), true) => match ctx
            .workloads
            .node_by_provider_id(&ns, &cluster.name_any(), id)
            .await
        {
            Ok(NodeLookup::Found(node)) => {
                status.node_ref = Some(MachineNodeReference {
                    name: node.name_any(),
                });
                status.node_info = node.status.as_ref().and_then(|s| s.node_info.clone());
                if let Some(client) = ctx.workloads.client(&ns, &cluster.name_any()).await? {
                    sync_node(&client, &machine, &node).await?;
                }
                conds.extend(node_conditions(Some(&node)));
            }
            Ok(NodeLookup::Absent) => {
                requeue = Duration::from_secs(10);
                conds.extend(node_conditions(None));
            }
            Ok(NodeLookup::NoKubeconfig) => {
                requeue = Duration::from_secs(2);
                conds.push(
                    NewCondition::new(
                        api::machine::conditions::NODE_HEALTHY,
                        Status::Unknown,
                        "InspectionFailed",
                    )
                    .message("Waiting for the Cluster's kubeconfig Secret"),
                );
            }
            Err(e) => {
                requeue = Duration::from_secs(2);
                conds.push(
                    NewCondition::new(
                        api::machine::conditions::NODE_HEALTHY,
                        Status::Unknown,
                        "ConnectionDown",
                    )
                    .message(format!("Cannot reach the workload cluster: {e}")),
                );
            }
        },
        (Some(id), false) => {
            // The Cluster watch wakes this Machine when the control plane is initialized.
            requeue = Duration::from_secs(10);
            conds.push(NewCondition::new(api::machine::conditions::NODE_HEALTHY, Status::Unknown, "InspectionFailed").message(format!(
                "Waiting for Cluster control plane to be initialized to find the Node with spec.providerID {id}"
            )));
        }
        (None, _) => {
            requeue = Duration::from_secs(1);
            conds.push(
                NewCondition::new(
                    api::machine::conditions::NODE_HEALTHY,
                    Status::Unknown,
                    "InspectionFailed",
                )
                .message(format!(
                    "Waiting for {} to report spec.providerID",
                    machine.spec.infrastructure_ref.kind
                )),
            );
        }
    }

    status.initialization = Some(init);
    common::set_conditions(&mut status.conditions, generation, conds);
    let list = status.conditions.clone().unwrap_or_default();
    let ready = conditions::summary(
        &list,
        "Ready",
        &[
            "Deleting",
            api::machine::conditions::BOOTSTRAP_CONFIG_READY,
            api::machine::conditions::INFRASTRUCTURE_READY,
            api::machine::conditions::NODE_HEALTHY,
            api::machine::conditions::HEALTH_CHECK_SUCCEEDED,
        ],
        &SummaryOptions {
            ignore_if_missing: &[api::machine::conditions::HEALTH_CHECK_SUCCEEDED],
            reasons: MergeReasons::new("NotReady", "ReadyUnknown", "Ready"),
            ..Default::default()
        },
    );
    let available = available_condition(&machine, &list, &ready);
    let mut more = vec![ready];
    if let Some(a) = available.0 {
        more.push(a);
    }
    // A MachineDeployment's Machine is up to date when its set's template is the deployment's;
    // stand-alone Machines and sets are up to date by definition; control planes set their own.
    match super::mdutil::machine_up_to_date(&ctx, &machine).await? {
        Some(c) => more.push(c),
        None if common::controller_of(machine.owner_references()).is_none() => {
            more.push(NewCondition::new(
                conditions::types::UP_TO_DATE,
                Status::True,
                "UpToDate",
            ));
        }
        None => {}
    }
    common::set_conditions(&mut status.conditions, generation, more);
    if let Some(wait) = available.1 {
        requeue = requeue.min(wait);
    }
    let mut with_status = (*machine).clone();
    with_status.status = Some(status.clone());
    let new_phase = phase(&with_status).to_string();
    if status.phase.as_deref() != Some(new_phase.as_str()) {
        status.last_updated = Some(Time(Timestamp::now()));
    }
    status.phase = Some(new_phase);
    status.observed_generation = generation;
    if machine.status.as_ref() != Some(&status) {
        common::patch_status(&api, &machine.name_any(), &status).await?;
    }
    Ok(Action::requeue(requeue))
}

/// Available: Ready for at least minReadySeconds. Returns the condition and when to look again.
fn available_condition(
    machine: &Machine,
    list: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    ready: &NewCondition,
) -> (Option<NewCondition>, Option<Duration>) {
    if ready.status != Status::True {
        return (
            Some(NewCondition::new(
                conditions::types::AVAILABLE,
                Status::False,
                "NotReady",
            )),
            None,
        );
    }
    let min = i64::from(machine.spec.min_ready_seconds.unwrap_or(0));
    let since = conditions::get(list, "Ready")
        .filter(|c| c.status == "True")
        .map(|c| common::seconds_since(&c.last_transition_time))
        .unwrap_or(0);
    if since >= min {
        (
            Some(NewCondition::new(
                conditions::types::AVAILABLE,
                Status::True,
                "Available",
            )),
            None,
        )
    } else {
        (
            Some(NewCondition::new(
                conditions::types::AVAILABLE,
                Status::False,
                "WaitingForMinReadySeconds",
            )),
            Some(Duration::from_secs((min - since) as u64)),
        )
    }
}

/// Keeps the Node's Cluster API annotations, and takes off the uninitialized taint.
async fn sync_node(client: &Client, machine: &Machine, node: &Node) -> Result<()> {
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
    if annotations_ok && labels_ok && !uninitialized {
        return Ok(());
    }
    let kept: Vec<_> = taints
        .into_iter()
        .filter(|t| t.key != "node.cluster.x-k8s.io/uninitialized")
        .collect();
    let patch = json!({
        "metadata": {"annotations": want, "labels": labels, "resourceVersion": node.resource_version()},
        "spec": {"taints": kept},
    });
    common::patch_merge(&Api::<Node>::all(client.clone()), &node.name_any(), patch).await?;
    Ok(())
}

/// Deletion: pre-drain hooks, drain, pre-terminate hooks, the infrastructure machine, the
/// bootstrap config, the Node; then the finalizer goes.
async fn reconcile_delete(
    ctx: &Context,
    api: &Api<Machine>,
    machine: &Machine,
    cluster: Option<&Cluster>,
) -> Result<Action> {
    let ns = machine.namespace().unwrap_or_default();
    let generation = machine.meta().generation;
    let mut status = machine.status.clone().unwrap_or_default();
    let mut deletion = status.deletion.clone().unwrap_or_default();
    let cluster_deleting = cluster.is_none_or(common::deleting);
    let node_name = status.node_ref.as_ref().map(|n| n.name.clone());
    let remote = match (cluster, &node_name) {
        (Some(c), Some(_)) if !cluster_deleting => ctx
            .workloads
            .client(&ns, &c.name_any())
            .await
            .unwrap_or(None),
        _ => None,
    };
    let say = |status: &mut MachineStatus, reason: &str, message: String| {
        common::set_conditions(
            &mut status.conditions,
            generation,
            vec![
                NewCondition::new(conditions::types::DELETING, Status::True, reason)
                    .message(message),
            ],
        );
    };

    if let (Some(client), Some(node)) = (&remote, &node_name) {
        let pre_drain = hooks(machine.annotations(), api::PRE_DRAIN_HOOK);
        if !pre_drain.is_empty() {
            deletion
                .wait_for_pre_drain_hook_start_time
                .get_or_insert(Time(Timestamp::now()));
            status.deletion = Some(deletion);
            say(
                &mut status,
                "WaitingForPreDrainHook",
                format!(
                    "Waiting for pre-drain hooks to succeed (hooks: {})",
                    pre_drain.join(",")
                ),
            );
            common::patch_status(api, &machine.name_any(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
        if !machine
            .annotations()
            .contains_key(api::EXCLUDE_DRAIN_ANNOTATION)
        {
            let started = deletion
                .node_drain_start_time
                .get_or_insert(Time(Timestamp::now()))
                .clone();
            let timeout = machine
                .spec
                .deletion
                .as_ref()
                .and_then(|d| d.node_drain_timeout_seconds)
                .unwrap_or(0);
            let timed_out = timeout > 0 && common::seconds_since(&started) > i64::from(timeout);
            if !timed_out {
                let remaining = crate::workload::drain::drain(client, node).await?;
                if remaining.pods > 0 {
                    status.deletion = Some(deletion);
                    let mut message = format!(
                        "Drain not completed yet (started at {}): {} Pods to evict",
                        started.0, remaining.pods
                    );
                    for refused in &remaining.refused {
                        message.push_str(&format!("\n* {refused}"));
                    }
                    say(&mut status, "DrainingNode", message);
                    common::patch_status(api, &machine.name_any(), &status).await?;
                    return Ok(Action::requeue(Duration::from_secs(2)));
                }
            }
        }
    }
    let pre_terminate = hooks(machine.annotations(), api::PRE_TERMINATE_HOOK);
    if !pre_terminate.is_empty() {
        deletion
            .wait_for_pre_terminate_hook_start_time
            .get_or_insert(Time(Timestamp::now()));
        status.deletion = Some(deletion);
        say(
            &mut status,
            "WaitingForPreTerminateHook",
            format!(
                "Waiting for pre-terminate hooks to succeed (hooks: {})",
                pre_terminate.join(",")
            ),
        );
        common::patch_status(api, &machine.name_any(), &status).await?;
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    let references = [
        (
            Some(&machine.spec.infrastructure_ref),
            "WaitingForInfrastructureDeletion",
        ),
        (
            machine.spec.bootstrap.config_ref.as_ref(),
            "WaitingForBootstrapDeletion",
        ),
    ];
    for (reference, reason) in references {
        let Some(reference) = reference else { continue };
        if let Some(object) = ctx.external.get(&ns, reference).await? {
            if object.meta().deletion_timestamp.is_none() {
                ctx.external
                    .api(&ns, reference)
                    .await?
                    .delete(&reference.name, &DeleteParams::background())
                    .await?;
            }
            status.deletion = Some(deletion);
            say(
                &mut status,
                reason,
                format!("Waiting for {} to be deleted", reference.kind),
            );
            common::patch_status(api, &machine.name_any(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
    }
    if let (Some(client), Some(node)) = (&remote, &node_name) {
        match Api::<Node>::all(client.clone())
            .delete(node, &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                status.deletion = Some(deletion);
                say(
                    &mut status,
                    "DeletingNode",
                    format!("Deleting Node {node} failed: {e}"),
                );
                common::patch_status(api, &machine.name_any(), &status).await?;
                return Ok(Action::requeue(Duration::from_secs(2)));
            }
        }
    }
    common::remove_finalizer(api, machine, api::MACHINE_FINALIZER).await?;
    Ok(Action::await_change())
}

/// The Machines to reconcile when a workload cluster's Node changes: the one named in the
/// Node's `cluster.x-k8s.io/machine` annotation, or, before the Machine has written it, the
/// Machine of that namespace with the Node's providerID (from the controller's cache).
pub fn machines_of_node_changes(
    changes: tokio::sync::broadcast::Receiver<crate::workload::clusters::NodeChange>,
    machines: Store<Machine>,
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
            machines
                .find(|m| {
                    m.namespace().as_deref() == Some(c.namespace.as_str())
                        && m.spec.provider_id.as_deref() == Some(id)
                })
                .map(|m| ObjectRef::from_obj(m.as_ref()))
        });
        std::future::ready(found)
    })
}

/// Maps Cluster changes to the Machines to reconcile: all of a Cluster's Machines, but only
/// when its control plane has just become initialized (workers wait for that before looking
/// for their Node), as upstream's ClusterControlPlaneInitialized predicate does. Other Cluster
/// changes, such as status counters, wake no Machine.
pub fn machines_of_initialized_cluster(
    machines: Store<Machine>,
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
        let ns = cluster.namespace();
        let name = cluster.name_any();
        machines
            .state()
            .iter()
            .filter(|m| m.namespace() == ns && m.spec.cluster_name == name)
            .map(|m| ObjectRef::from_obj(m.as_ref()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_table() {
        let base = json!({"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "n"}});
        let machine = |spec: Value, status: Value| -> Machine {
            serde_json::from_value(
                json!({"metadata": {"name": "m"}, "spec": spec, "status": status}),
            )
            .unwrap()
        };
        let mut with_id = base.clone();
        with_id["providerID"] = json!("in-memory://ns/m");
        for (spec, status, want) in [
            (base.clone(), json!({}), "Pending"),
            (
                base.clone(),
                json!({"initialization": {"bootstrapDataSecretCreated": true}}),
                "Provisioning",
            ),
            (
                with_id.clone(),
                json!({"initialization": {"bootstrapDataSecretCreated": true}}),
                "Provisioned",
            ),
            (
                with_id,
                json!({"initialization": {"infrastructureProvisioned": true}, "nodeRef": {"name": "n"}}),
                "Running",
            ),
        ] {
            assert_eq!(phase(&machine(spec, status.clone())), want, "{status}");
        }
    }

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
