//! The Cluster controller: follows the infrastructure cluster and the control plane, counts the
//! Machines, writes the admin kubeconfig when there is no control-plane provider, and tears
//! everything down in order when the Cluster is deleted.

use super::common::machine_condition_true as is_true;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::common;
use super::external::{self, condition, initialization_flag};
use super::{Context, Result};
use crate::api;
use crate::api::cluster::ReplicasSummary;
use crate::api::common::{ApiEndpoint, ContractVersionedObjectReference};
use crate::api::{Cluster, Machine, MachineDeployment, MachineSet};
use crate::conditions::{self, AggregateInput, MergeReasons, NewCondition, Status, SummaryOptions};

/// The objects of a Cluster, found by its cluster-name label.
struct Descendants {
    deployments: Vec<MachineDeployment>,
    sets: Vec<MachineSet>,
    /// Shared with the Machine cache: a Cluster of thousands of Machines is not copied on
    /// every reconcile.
    control_plane: Vec<Arc<Machine>>,
    workers: Vec<Arc<Machine>>,
}

async fn descendants(ctx: &Context, cluster: &Cluster) -> Result<Descendants> {
    let ns = cluster.namespace().unwrap_or_default();
    let selector = ListParams::default().labels(&format!(
        "{}={}",
        api::CLUSTER_NAME_LABEL,
        cluster.name_any()
    ));
    let deployments = Api::<MachineDeployment>::namespaced(ctx.client.clone(), &ns)
        .list(&selector)
        .await?
        .items;
    let sets = Api::<MachineSet>::namespaced(ctx.client.clone(), &ns)
        .list(&selector)
        .await?
        .items;
    // Machines can be thousands: from the shared cache, not the API server.
    let name = cluster.name_any();
    let (control_plane, workers) = ctx
        .machines()
        .list(&ns, |m| {
            m.labels().get(api::CLUSTER_NAME_LABEL) == Some(&name)
        })
        .await?
        .into_iter()
        .partition(|m| m.labels().contains_key(api::CONTROL_PLANE_LABEL));
    Ok(Descendants {
        deployments,
        sets,
        control_plane,
        workers,
    })
}

/// The conditions a Cluster sums up from what it is made of, as upstream's v1beta2 Cluster
/// does: its Machines' Ready and UpToDate (control plane and workers apart), whether the
/// control plane or any MachineDeployment (or stand-alone MachineSet) is rolling out or
/// scaling, and which Machines a MachineHealthCheck asked their owner to remediate.
/// `control_plane` is the control plane's kind, name and RollingOut/Scaling* conditions.
fn aggregated_conditions(
    control_plane: Option<&(String, String, Vec<Condition>)>,
    d: &Descendants,
    now: Timestamp,
) -> Vec<NewCondition> {
    use super::machines::{aggregate, condition_of};
    let ready = || MergeReasons::new("NotReady", "ReadyUnknown", "Ready");
    let up_to_date = || MergeReasons::new("NotUpToDate", "UpToDateUnknown", "UpToDate");
    // A Machine just made has not had the time to say whether it is up to date.
    let settled = |machines: &[Arc<Machine>]| -> Vec<Arc<Machine>> {
        machines
            .iter()
            .filter(|m| {
                condition_of(m, "UpToDate").is_some()
                    || m.meta()
                        .creation_timestamp
                        .as_ref()
                        .is_some_and(|t| now.as_second() - t.0.as_second() > 10)
            })
            .cloned()
            .collect()
    };
    let mut out = vec![
        aggregate(
            &d.control_plane,
            "Ready",
            api::cluster::conditions::CONTROL_PLANE_MACHINES_READY,
            ready(),
        ),
        aggregate(
            &d.workers,
            "Ready",
            api::cluster::conditions::WORKER_MACHINES_READY,
            ready(),
        ),
        aggregate(
            &settled(&d.control_plane),
            "UpToDate",
            api::cluster::conditions::CONTROL_PLANE_MACHINES_UP_TO_DATE,
            up_to_date(),
        ),
        aggregate(
            &settled(&d.workers),
            "UpToDate",
            api::cluster::conditions::WORKER_MACHINES_UP_TO_DATE,
            up_to_date(),
        ),
    ];

    // RollingOut over the control plane and the MachineDeployments; ScalingUp/Down also over
    // stand-alone MachineSets.
    // (kind, name, conditions, whether a stand-alone MachineSet) of the workers' owners.
    let owners: Vec<(&str, String, Option<&[Condition]>, bool)> = d
        .deployments
        .iter()
        .map(|md| {
            let conds = md.status.as_ref().and_then(|s| s.conditions.as_deref());
            ("MachineDeployment", md.name_any(), conds, false)
        })
        .chain(
            d.sets
                .iter()
                .filter(|s| !s.labels().contains_key(api::DEPLOYMENT_NAME_LABEL))
                .map(|ms| {
                    let conds = ms.status.as_ref().and_then(|s| s.conditions.as_deref());
                    ("MachineSet", ms.name_any(), conds, true)
                }),
        )
        .collect();
    for (t, reasons, with_sets) in [
        (
            "RollingOut",
            MergeReasons::new("RollingOut", "RollingOutUnknown", "NotRollingOut"),
            false,
        ),
        (
            "ScalingUp",
            MergeReasons::new("ScalingUp", "ScalingUpUnknown", "NotScalingUp"),
            true,
        ),
        (
            "ScalingDown",
            MergeReasons::new("ScalingDown", "ScalingDownUnknown", "NotScalingDown"),
            true,
        ),
    ] {
        let mut inputs = Vec::new();
        if let Some((kind, name, conds)) = control_plane
            && let Some(c) = conditions::get(conds, t)
        {
            inputs.push(AggregateInput {
                kind,
                name,
                control_plane: true,
                condition: Some(c),
            });
        }
        for (kind, name, conds, standalone_set) in &owners {
            if *standalone_set && !with_sets {
                continue;
            }
            inputs.push(AggregateInput {
                kind,
                name,
                control_plane: false,
                condition: conds.and_then(|c| conditions::get(c, t)),
            });
        }
        out.push(if inputs.is_empty() {
            NewCondition::new(t, Status::False, &reasons.info)
        } else {
            conditions::aggregate(&inputs, t, t, &reasons)
        });
    }

    // Remediating: the Machines whose owner was asked to replace them.
    let machines: Vec<&Arc<Machine>> = d.control_plane.iter().chain(&d.workers).collect();
    let unhealthy = |m: &Machine| {
        condition_of(m, api::machine::conditions::HEALTH_CHECK_SUCCEEDED)
            .is_some_and(|c| c.status == "False")
    };
    let to_remediate: Vec<Arc<Machine>> = machines
        .iter()
        .filter(|m| {
            unhealthy(m)
                && condition_of(m, api::OWNER_REMEDIATED).is_some_and(|c| c.status == "False")
        })
        .map(|m| Arc::clone(m))
        .collect();
    out.push(if to_remediate.is_empty() {
        let mut names: Vec<String> = machines
            .iter()
            .filter(|m| unhealthy(m))
            .map(|m| m.name_any())
            .collect();
        names.sort();
        let c = NewCondition::new(
            conditions::types::REMEDIATING,
            Status::False,
            "NotRemediating",
        );
        match names.len() {
            0 => c,
            1 => c.message(format!(
                "Machine {} is not healthy (not to be remediated)",
                names[0]
            )),
            _ => c.message(format!(
                "Machines {} are not healthy (not to be remediated)",
                names.join(", ")
            )),
        }
    } else {
        aggregate(
            &to_remediate,
            api::OWNER_REMEDIATED,
            "Remediating",
            MergeReasons::new("Remediating", "RemediatingUnknown", "NotRemediating"),
        )
    });
    out
}

/// The Cluster's phase, as upstream computes it.
pub fn phase(cluster: &Cluster) -> &'static str {
    let init = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.clone())
        .unwrap_or_default();
    if common::deleting(cluster) {
        "Deleting"
    } else if init.infrastructure_provisioned == Some(true)
        && cluster
            .spec
            .control_plane_endpoint
            .as_ref()
            .is_some_and(ApiEndpoint::is_valid)
    {
        "Provisioned"
    } else if cluster.spec.infrastructure_ref.is_some() || cluster.spec.control_plane_ref.is_some()
    {
        "Provisioning"
    } else {
        "Pending"
    }
}

/// Counts Machines into a replicas summary (control plane without a provider).
fn count_machines(machines: &[Arc<Machine>]) -> ReplicasSummary {
    let n = |t: &str| machines.iter().filter(|m| is_true(m, t)).count() as i32;
    ReplicasSummary {
        desired_replicas: Some(machines.len() as i32),
        replicas: Some(machines.len() as i32),
        ready_replicas: Some(n("Ready")),
        available_replicas: Some(n("Available")),
        up_to_date_replicas: Some(n("UpToDate")),
        ..Default::default()
    }
}

/// Sums the workers: MachineDeployments, stand-alone MachineSets and Machines.
fn count_workers(d: &Descendants) -> ReplicasSummary {
    let mut sum = ReplicasSummary::default();
    let mut add = |desired: Option<i32>,
                   replicas: Option<i32>,
                   ready: Option<i32>,
                   available: Option<i32>,
                   up: Option<i32>| {
        let plus = |a: &mut Option<i32>, b: Option<i32>| *a = Some(a.unwrap_or(0) + b.unwrap_or(0));
        plus(&mut sum.desired_replicas, desired);
        plus(&mut sum.replicas, replicas);
        plus(&mut sum.ready_replicas, ready);
        plus(&mut sum.available_replicas, available);
        plus(&mut sum.up_to_date_replicas, up);
    };
    for md in &d.deployments {
        let s = md.status.clone().unwrap_or_default();
        add(
            md.spec.replicas,
            s.replicas,
            s.ready_replicas,
            s.available_replicas,
            s.up_to_date_replicas,
        );
    }
    let standalone_sets = d
        .sets
        .iter()
        .filter(|ms| !ms.labels().contains_key(api::DEPLOYMENT_NAME_LABEL));
    for ms in standalone_sets {
        let s = ms.status.clone().unwrap_or_default();
        add(
            ms.spec.replicas,
            s.replicas,
            s.ready_replicas,
            s.available_replicas,
            s.up_to_date_replicas,
        );
    }
    let standalone_machines = d
        .workers
        .iter()
        .filter(|m| common::controller_of(m.owner_references()).is_none());
    for m in standalone_machines {
        let one = |t: &str| Some(i32::from(is_true(m, t)));
        add(
            Some(1),
            Some(1),
            one("Ready"),
            one("Available"),
            one("UpToDate"),
        );
    }
    sum
}

/// Adopts a provider object: a Cluster owner reference and the cluster-name label.
async fn adopt(
    ctx: &Context,
    cluster: &Cluster,
    reference: &ContractVersionedObjectReference,
    object: &DynamicObject,
) -> Result<()> {
    let uid = cluster.uid().unwrap_or_default();
    let labelled = object.labels().get(api::CLUSTER_NAME_LABEL) == Some(&cluster.name_any());
    if common::has_owner(object.owner_references(), &uid) && labelled {
        return Ok(());
    }
    let mut refs = object.owner_references().to_vec();
    if !common::has_owner(&refs, &uid) {
        refs.push(common::owner_reference(cluster, false));
    }
    let api = ctx
        .external
        .api(&cluster.namespace().unwrap_or_default(), reference)
        .await?;
    common::patch_merge(
        &api,
        &object.name_any(),
        json!({"metadata": {"ownerReferences": refs, "labels": {(api::CLUSTER_NAME_LABEL): cluster.name_any()}}}),
    )
    .await?;
    Ok(())
}

pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action> {
    let ns = cluster.namespace().unwrap_or_default();
    let api: Api<Cluster> = Api::namespaced(ctx.client.clone(), &ns);
    if common::deleting(cluster.as_ref()) {
        return reconcile_delete(&ctx, &api, &cluster).await;
    }
    if common::ensure_finalizer(&api, cluster.as_ref(), api::CLUSTER_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let mut status = cluster.status.clone().unwrap_or_default();
    let generation = cluster.meta().generation;
    let (is_paused, paused) = common::paused(Some(&cluster), "Cluster", cluster.annotations());
    if is_paused {
        common::set_conditions(&mut status.conditions, generation, vec![paused]);
        common::patch_status(&api, &cluster.name_any(), &status).await?;
        return Ok(Action::await_change());
    }
    let mut new_conditions = vec![
        paused,
        NewCondition::new(conditions::types::DELETING, Status::False, "NotDeleting"),
    ];
    let mut init = status.initialization.clone().unwrap_or_default();
    let mut endpoint_patch = None;
    let mut requeue = Duration::from_secs(10);

    // Infrastructure.
    match &cluster.spec.infrastructure_ref {
        None => {
            init.infrastructure_provisioned = Some(true);
            new_conditions.push(NewCondition::new(
                api::cluster::conditions::INFRASTRUCTURE_READY,
                Status::True,
                "NoInfrastructure",
            ));
        }
        Some(reference) => match ctx.external.get(&ns, reference).await? {
            None => {
                requeue = Duration::from_secs(2);
                new_conditions.push(
                    NewCondition::new(
                        api::cluster::conditions::INFRASTRUCTURE_READY,
                        Status::False,
                        "ObjectDoesNotExist",
                    )
                    .message(format!(
                        "{} {} does not exist",
                        reference.kind, reference.name
                    )),
                );
            }
            Some(infra) => {
                adopt(&ctx, &cluster, reference, &infra).await?;
                let provisioned = initialization_flag(&infra, "provisioned");
                if provisioned {
                    init.infrastructure_provisioned = Some(true);
                    if !cluster
                        .spec
                        .control_plane_endpoint
                        .as_ref()
                        .is_some_and(ApiEndpoint::is_valid)
                        && let Some(e) = external::field(&infra, &["spec", "controlPlaneEndpoint"])
                    {
                        endpoint_patch = Some(e.clone());
                    }
                    let domains = external::field(&infra, &["status", "failureDomains"]).cloned();
                    status.failure_domains = domains.and_then(|d| serde_json::from_value(d).ok());
                } else {
                    requeue = Duration::from_secs(2);
                }
                let fallback = if provisioned {
                    NewCondition::new("", Status::True, "Ready")
                } else {
                    NewCondition::new("", Status::False, "NotReady").message(format!(
                        "{} status.initialization.provisioned is false",
                        reference.kind
                    ))
                };
                new_conditions.push(conditions::mirror(
                    condition(&infra, "Ready").as_ref(),
                    "Ready",
                    api::cluster::conditions::INFRASTRUCTURE_READY,
                    Some(fallback),
                ));
            }
        },
    }

    // Control plane.
    let d = descendants(&ctx, &cluster).await?;
    let mut control_plane_conditions: Option<(String, String, Vec<Condition>)> = None;
    match &cluster.spec.control_plane_ref {
        None => {
            let initialized = d
                .control_plane
                .iter()
                .any(|m| super::machines::node_name(m).is_some());
            if initialized {
                init.control_plane_initialized = Some(true);
            }
            new_conditions.push(if init.control_plane_initialized == Some(true) {
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                    Status::True,
                    "Initialized",
                )
            } else {
                requeue = Duration::from_secs(2);
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                    Status::False,
                    "NotInitialized",
                )
                .message("Waiting for the first control plane machine to have status.nodeRef set")
            });
            status.control_plane = Some(count_machines(&d.control_plane));
            let available = d.control_plane.iter().any(|m| is_true(m, "Available"));
            new_conditions.push(if available {
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                    Status::True,
                    "Available",
                )
            } else {
                NewCondition::new(
                    api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                    Status::False,
                    "NotAvailable",
                )
                .message("Waiting for a control plane Machine to be Available")
            });
        }
        Some(reference) => match ctx.external.get(&ns, reference).await? {
            None => {
                requeue = Duration::from_secs(2);
                new_conditions.push(
                    NewCondition::new(
                        api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                        Status::Unknown,
                        "ObjectDoesNotExist",
                    )
                    .message(format!("{} does not exist", reference.kind)),
                );
                status.control_plane = None;
            }
            Some(cp) => {
                adopt(&ctx, &cluster, reference, &cp).await?;
                control_plane_conditions = Some((
                    reference.kind.clone(),
                    cp.name_any(),
                    ["RollingOut", "ScalingUp", "ScalingDown"]
                        .into_iter()
                        .filter_map(|t| external::condition(&cp, t))
                        .collect(),
                ));
                if initialization_flag(&cp, "controlPlaneInitialized") {
                    init.control_plane_initialized = Some(true);
                    if endpoint_patch.is_none()
                        && !cluster
                            .spec
                            .control_plane_endpoint
                            .as_ref()
                            .is_some_and(ApiEndpoint::is_valid)
                        && let Some(e) = external::field(&cp, &["spec", "controlPlaneEndpoint"])
                    {
                        endpoint_patch = Some(e.clone());
                    }
                }
                new_conditions.push(if init.control_plane_initialized == Some(true) {
                    NewCondition::new(
                        api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                        Status::True,
                        "Initialized",
                    )
                } else {
                    requeue = Duration::from_secs(2);
                    NewCondition::new(
                        api::cluster::conditions::CONTROL_PLANE_INITIALIZED,
                        Status::False,
                        "NotInitialized",
                    )
                    .message("Control plane not yet initialized")
                });
                let num = |path: &[&str]| {
                    external::field(&cp, path)
                        .and_then(|v| v.as_i64())
                        .map(|v| v as i32)
                };
                status.control_plane = Some(ReplicasSummary {
                    desired_replicas: num(&["spec", "replicas"]),
                    replicas: num(&["status", "replicas"]),
                    ready_replicas: num(&["status", "readyReplicas"]),
                    available_replicas: num(&["status", "availableReplicas"]),
                    up_to_date_replicas: num(&["status", "upToDateReplicas"]),
                    versions: external::field(&cp, &["status", "versions"])
                        .and_then(|v| serde_json::from_value(v.clone()).ok()),
                    upgrade_plan: None,
                });
                let fallback = NewCondition::new("", Status::Unknown, "NotYetReported")
                    .message(format!("{} has not reported Available", reference.kind));
                new_conditions.push(conditions::mirror(
                    condition(&cp, "Available").as_ref(),
                    "Available",
                    api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                    Some(fallback),
                ));
            }
        },
    }

    // Workers.
    status.workers = Some(count_workers(&d));
    let md_conditions: Vec<Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>> = d
        .deployments
        .iter()
        .map(|md| {
            md.status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .and_then(|c| conditions::get(c, "Available"))
                .cloned()
        })
        .collect();
    let md_names: Vec<String> = d.deployments.iter().map(|m| m.name_any()).collect();
    new_conditions.push(if d.deployments.is_empty() {
        NewCondition::new(
            api::cluster::conditions::WORKERS_AVAILABLE,
            Status::True,
            "NoWorkers",
        )
    } else {
        let inputs: Vec<AggregateInput<'_>> = md_names
            .iter()
            .zip(&md_conditions)
            .map(|(name, c)| AggregateInput {
                kind: "MachineDeployment",
                name,
                control_plane: false,
                condition: c.as_ref(),
            })
            .collect();
        conditions::aggregate(
            &inputs,
            "Available",
            api::cluster::conditions::WORKERS_AVAILABLE,
            &MergeReasons::new("NotAvailable", "AvailableUnknown", "Available"),
        )
    });

    new_conditions.extend(aggregated_conditions(
        control_plane_conditions.as_ref(),
        &d,
        Timestamp::now(),
    ));

    if cluster.spec.control_plane_ref.is_none()
        && super::secrets::reconcile_kubeconfig(
            &ctx.client,
            &cluster,
            common::owner_reference(cluster.as_ref(), true),
        )
        .await?
    {
        requeue = requeue.min(Duration::from_secs(2));
    }

    // Can the workload cluster be reached?
    if init.control_plane_initialized == Some(true) {
        new_conditions.push(probe(&ctx, &cluster).await);
    }

    if let Some(e) = endpoint_patch {
        common::patch_merge(
            &api,
            &cluster.name_any(),
            json!({"spec": {"controlPlaneEndpoint": e}}),
        )
        .await?;
        return Ok(Action::await_change());
    }

    status.initialization = Some(init);
    common::set_conditions(&mut status.conditions, generation, new_conditions);
    let available = {
        let list = status.conditions.clone().unwrap_or_default();
        let options = SummaryOptions {
            ignore_if_missing: &[api::cluster::conditions::REMOTE_CONNECTION_PROBE],
            reasons: MergeReasons::new("NotAvailable", "AvailableUnknown", "Available"),
            ..Default::default()
        };
        conditions::summary(
            &list,
            "Available",
            &[
                "Deleting",
                api::cluster::conditions::REMOTE_CONNECTION_PROBE,
                api::cluster::conditions::INFRASTRUCTURE_READY,
                api::cluster::conditions::CONTROL_PLANE_AVAILABLE,
                api::cluster::conditions::WORKERS_AVAILABLE,
            ],
            &options,
        )
    };
    common::set_conditions(&mut status.conditions, generation, vec![available]);
    let mut with_phase = (*cluster).clone();
    with_phase.status = Some(status.clone());
    status.phase = Some(phase(&with_phase).to_string());
    status.observed_generation = generation;
    if cluster.status.as_ref() != Some(&status) {
        common::patch_status(&api, &cluster.name_any(), &status).await?;
    }
    Ok(Action::requeue(requeue))
}

/// RemoteConnectionProbe: whether the workload cluster's API answers.
async fn probe(ctx: &Context, cluster: &Cluster) -> NewCondition {
    let ns = cluster.namespace().unwrap_or_default();
    match ctx.workloads.client(&ns, &cluster.name_any()).await {
        Ok(Some(client)) => match Api::<Namespace>::all(client)
            .list(&ListParams::default().limit(1))
            .await
        {
            Ok(_) => NewCondition::new(
                api::cluster::conditions::REMOTE_CONNECTION_PROBE,
                Status::True,
                "ProbeSucceeded",
            ),
            Err(e) => NewCondition::new(
                api::cluster::conditions::REMOTE_CONNECTION_PROBE,
                Status::False,
                "ProbeFailed",
            )
            .message(format!("Remote connection probe failed: {e}")),
        },
        Ok(None) => NewCondition::new(
            api::cluster::conditions::REMOTE_CONNECTION_PROBE,
            Status::False,
            "ProbeFailed",
        )
        .message("Remote connection not established yet: the kubeconfig Secret does not exist"),
        Err(e) => NewCondition::new(
            api::cluster::conditions::REMOTE_CONNECTION_PROBE,
            Status::False,
            "ProbeFailed",
        )
        .message(e.to_string()),
    }
}

/// Deletes what the Cluster owns in order: workers, then the control plane, then the
/// infrastructure; the finalizer goes last.
async fn reconcile_delete(ctx: &Context, api: &Api<Cluster>, cluster: &Cluster) -> Result<Action> {
    let ns = cluster.namespace().unwrap_or_default();
    let uid = cluster.uid().unwrap_or_default();
    let d = descendants(ctx, cluster).await?;
    let owned = |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
        common::has_owner(refs, &uid)
    };
    let mut waiting = Vec::new();
    for md in &d.deployments {
        waiting.push(format!("MachineDeployment {}", md.name_any()));
        if owned(md.owner_references()) && !common::deleting(md) {
            Api::<MachineDeployment>::namespaced(ctx.client.clone(), &ns)
                .delete(&md.name_any(), &DeleteParams::background())
                .await?;
        }
    }
    for ms in &d.sets {
        waiting.push(format!("MachineSet {}", ms.name_any()));
        if owned(ms.owner_references()) && !common::deleting(ms) {
            Api::<MachineSet>::namespaced(ctx.client.clone(), &ns)
                .delete(&ms.name_any(), &DeleteParams::background())
                .await?;
        }
    }
    let machines = Api::<Machine>::namespaced(ctx.client.clone(), &ns);
    let standalone_cp = if cluster.spec.control_plane_ref.is_none() {
        d.control_plane.clone()
    } else {
        Vec::new()
    };
    for m in d.workers.iter().chain(&standalone_cp) {
        waiting.push(format!("Machine {}", m.name_any()));
        let independent =
            common::controller_of(m.owner_references()).is_none() || owned(m.owner_references());
        if independent && !common::deleting(m.as_ref()) {
            machines
                .delete(&m.name_any(), &DeleteParams::background())
                .await?;
        }
    }
    let mut status = cluster.status.clone().unwrap_or_default();
    let generation = cluster.meta().generation;
    status.phase = Some("Deleting".into());
    if !waiting.is_empty() {
        let message = format!("* Waiting for {} to be deleted", waiting.join(", "));
        common::set_conditions(
            &mut status.conditions,
            generation,
            vec![
                NewCondition::new(
                    conditions::types::DELETING,
                    Status::True,
                    "WaitingForWorkersDeletion",
                )
                .message(message),
            ],
        );
        common::patch_status(api, &cluster.name_any(), &status).await?;
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    for (reference, reason) in [
        (
            &cluster.spec.control_plane_ref,
            "WaitingForControlPlaneDeletion",
        ),
        (
            &cluster.spec.infrastructure_ref,
            "WaitingForInfrastructureDeletion",
        ),
    ] {
        let Some(reference) = reference else { continue };
        if let Some(object) = ctx.external.get(&ns, reference).await? {
            if object.meta().deletion_timestamp.is_none() {
                ctx.external
                    .api(&ns, reference)
                    .await?
                    .delete(&reference.name, &DeleteParams::background())
                    .await?;
            }
            common::set_conditions(
                &mut status.conditions,
                generation,
                vec![
                    NewCondition::new(conditions::types::DELETING, Status::True, reason)
                        .message(format!("Waiting for {} to be deleted", reference.kind)),
                ],
            );
            common::patch_status(api, &cluster.name_any(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(2)));
        }
    }
    ctx.workloads.forget(&ns, &cluster.name_any());
    common::remove_finalizer(api, cluster, api::CLUSTER_FINALIZER).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(spec: serde_json::Value, status: serde_json::Value, deleting: bool) -> Cluster {
        let mut meta = json!({"name": "c"});
        if deleting {
            meta["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        }
        serde_json::from_value(json!({"metadata": meta, "spec": spec, "status": status})).unwrap()
    }

    fn cond(t: &str, status: &str, reason: &str, message: &str) -> serde_json::Value {
        json!({"type": t, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2026-11-30T00:00:00Z"})
    }

    fn machine(name: &str, control_plane: bool, conditions: serde_json::Value) -> Arc<Machine> {
        let labels = if control_plane {
            json!({(api::CONTROL_PLANE_LABEL): ""})
        } else {
            json!({})
        };
        serde_json::from_value::<Machine>(json!({
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-11-30T00:00:00Z"},
            "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": name}},
            "status": {"conditions": conditions},
        }))
        .unwrap()
        .into()
    }

    #[test]
    fn a_cluster_sums_up_its_machines_rollouts_and_remediations() {
        let ready = cond("Ready", "True", "Ready", "");
        let d = Descendants {
            deployments: vec![serde_json::from_value(json!({
                "metadata": {"name": "md-0"},
                "spec": {"clusterName": "c", "selector": {}, "template": {"spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "t"}}}},
                "status": {"conditions": [
                    cond("RollingOut", "True", "RollingOut", "Rolling out 2 not up-to-date replicas"),
                    cond("ScalingUp", "False", "NotScalingUp", ""),
                ]}
            }))
            .unwrap()],
            sets: Vec::new(),
            control_plane: vec![machine("cp-0", true, json!([ready, cond("UpToDate", "True", "UpToDate", "")]))],
            workers: vec![
                machine("w-0", false, json!([ready])),
                machine("w-1", false, json!([
                    cond("Ready", "False", "NotReady", "* NodeHealthy: Node not ready"),
                    cond("HealthCheckSucceeded", "False", "UnhealthyNode", "Node not ready for 300s"),
                    cond("OwnerRemediated", "False", "WaitingForRemediation", "Waiting for MachineSet ms to remediate this Machine"),
                ])),
            ],
        };
        let cp = (
            "KubeadmControlPlane".to_string(),
            "cp".to_string(),
            serde_json::from_value::<Vec<Condition>>(json!([cond(
                "ScalingUp",
                "True",
                "ScalingUp",
                "Scaling up from 1 to 3 replicas"
            )]))
            .unwrap(),
        );
        let now: Timestamp = "2026-11-30T00:01:00Z".parse().unwrap();
        let got: Vec<(String, Status, String)> = aggregated_conditions(Some(&cp), &d, now)
            .into_iter()
            .map(|c| (c.type_, c.status, c.reason))
            .collect();
        let want = [
            ("ControlPlaneMachinesReady", Status::True, "Ready"),
            ("WorkerMachinesReady", Status::False, "NotReady"),
            ("ControlPlaneMachinesUpToDate", Status::True, "UpToDate"),
            // The workers never said: old enough to count, so Unknown.
            ("WorkerMachinesUpToDate", Status::Unknown, "UpToDateUnknown"),
            ("RollingOut", Status::True, "RollingOut"),
            ("ScalingUp", Status::True, "ScalingUp"),
            // Neither the control plane nor md-0 reports it.
            ("ScalingDown", Status::Unknown, "ScalingDownUnknown"),
            ("Remediating", Status::True, "Remediating"),
        ];
        let want: Vec<(String, Status, String)> = want
            .into_iter()
            .map(|(t, s, r)| (t.to_string(), s, r.to_string()))
            .collect();
        assert_eq!(got, want);

        // Nothing to remediate, but an unhealthy Machine is named.
        let mut d = d;
        Arc::make_mut(&mut d.workers[1])
            .status
            .as_mut()
            .unwrap()
            .conditions
            .as_mut()
            .unwrap()
            .pop();
        let remediating = aggregated_conditions(None, &d, now).pop().unwrap();
        assert_eq!(
            (remediating.status, remediating.message.as_str()),
            (
                Status::False,
                "Machine w-1 is not healthy (not to be remediated)"
            )
        );
    }

    #[test]
    fn phase_table() {
        let infra = json!({"infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "n"}});
        let endpoint = json!({"infrastructureRef": {"apiGroup": "g", "kind": "K", "name": "n"}, "controlPlaneEndpoint": {"host": "h", "port": 6443}});
        let provisioned = json!({"initialization": {"infrastructureProvisioned": true}});
        for (spec, status, deleting, want) in [
            (json!({}), json!({}), false, "Pending"),
            (infra.clone(), json!({}), false, "Provisioning"),
            (infra, provisioned.clone(), false, "Provisioning"),
            (endpoint.clone(), provisioned.clone(), false, "Provisioned"),
            (endpoint, provisioned, true, "Deleting"),
        ] {
            assert_eq!(
                phase(&cluster(spec.clone(), status.clone(), deleting)),
                want,
                "{spec} {status}"
            );
        }
    }
}
