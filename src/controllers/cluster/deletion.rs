//! Deleting a Cluster: its MachinePools, MachineDeployments, MachineSets and stand-alone
//! Machines first,
//! then the control plane, then the infrastructure cluster; the finalizer goes last. Each
//! reconcile records in `Deleting` what it waits for.

use std::time::Duration;

use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::CONTROLLER;
use super::status::Descendants;
use crate::api;
use crate::api::{Cluster, Machine, MachineDeployment, MachinePool, MachineSet};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::events::Severity;
use crate::reconcile::external::Deletion;
use crate::reconcile::{Context, Result, StepContext};

/// Deletes what the Cluster owns in order: workers, then the control plane, then the
/// infrastructure; the finalizer goes last.
pub(super) async fn reconcile_delete(
    ctx: &Context,
    api: &Api<Cluster>,
    cluster: &Cluster,
) -> Result<Action> {
    // A Cluster with a topology waits for the BeforeClusterDelete hooks, which the topology
    // controller calls, before anything of it goes.
    if !ctx
        .extensions
        .may_delete(cluster)
        .await
        .step("reading the Runtime Extensions")?
    {
        return record_deleting(
            api,
            cluster,
            api::cluster::reasons::WAITING_FOR_BEFORE_DELETE_HOOK,
            "Waiting for BeforeClusterDelete hook".into(),
        )
        .await;
    }
    let ns = cluster.namespace().unwrap_or_default();
    let uid = cluster.uid().unwrap_or_default();
    let d = Descendants::gather(ctx, cluster)
        .await
        .step("reading what the Cluster owns")?;
    let owned = |refs: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference]| {
        common::has_owner(refs, &uid)
    };
    let deleted = |kind: &str, name: &str| {
        let note = format!("Deleting {kind} {name:?}");
        ctx.events.publish(
            CONTROLLER,
            cluster,
            Severity::Normal,
            "SuccessfulDelete",
            note,
        );
    };
    let mut waiting = Vec::new();
    for mp in &d.pools {
        waiting.push(format!("MachinePool {}", mp.name_any()));
        if owned(mp.owner_references()) && !common::deleting(mp) {
            Api::<MachinePool>::namespaced(ctx.client.clone(), &ns)
                .delete(&mp.name_any(), &DeleteParams::background())
                .await?;
            deleted("MachinePool", &mp.name_any());
        }
    }
    for md in &d.deployments {
        waiting.push(format!("MachineDeployment {}", md.name_any()));
        if owned(md.owner_references()) && !common::deleting(md) {
            Api::<MachineDeployment>::namespaced(ctx.client.clone(), &ns)
                .delete(&md.name_any(), &DeleteParams::background())
                .await?;
            deleted("MachineDeployment", &md.name_any());
        }
    }
    for ms in &d.sets {
        waiting.push(format!("MachineSet {}", ms.name_any()));
        if owned(ms.owner_references()) && !common::deleting(ms) {
            Api::<MachineSet>::namespaced(ctx.client.clone(), &ns)
                .delete(&ms.name_any(), &DeleteParams::background())
                .await?;
            deleted("MachineSet", &ms.name_any());
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
            deleted("Machine", &m.name_any());
        }
    }
    let waiting_for = if waiting.is_empty() {
        delete_providers(ctx, cluster)
            .await
            .step("deleting the control plane and the infrastructure cluster")?
    } else {
        Some((
            conditions::reasons::WAITING_FOR_WORKERS_DELETION,
            format!("* Waiting for {} to be deleted", waiting.join(", ")),
        ))
    };
    if let Some((reason, message)) = waiting_for {
        return record_deleting(api, cluster, reason, message).await;
    }
    ctx.workloads.forget(&ns, &cluster.name_any());
    common::remove_finalizer(api, cluster, api::CLUSTER_FINALIZER).await?;
    ctx.events.publish(
        CONTROLLER,
        cluster,
        Severity::Normal,
        "Deleted",
        "Everything the Cluster owned is gone; the Cluster is deleted",
    );
    Ok(Action::await_change())
}

/// Records what the deletion waits for in the `Deleting` condition, and waits.
async fn record_deleting(
    api: &Api<Cluster>,
    cluster: &Cluster,
    reason: &'static str,
    message: String,
) -> Result<Action> {
    let mut status = cluster.status.clone().unwrap_or_default();
    status.phase = Some("Deleting".into());
    common::set_conditions(
        &mut status.conditions,
        cluster.meta().generation,
        vec![NewCondition::new(conditions::types::DELETING, Status::True, reason).message(message)],
    );
    common::write_status(api, &cluster.name_any(), cluster.status.as_ref(), &status).await?;
    Ok(Action::requeue(Duration::from_secs(2)))
}

/// Deletes the control plane, then the infrastructure cluster; what is still waited for
/// (the `Deleting` condition's reason and message), or None once both are gone.
async fn delete_providers(
    ctx: &Context,
    cluster: &Cluster,
) -> Result<Option<(&'static str, String)>> {
    let ns = cluster.namespace().unwrap_or_default();
    for (reference, reason) in [
        (
            &cluster.spec.control_plane_ref,
            api::cluster::reasons::WAITING_FOR_CONTROL_PLANE_DELETION,
        ),
        (
            &cluster.spec.infrastructure_ref,
            conditions::reasons::WAITING_FOR_INFRASTRUCTURE_DELETION,
        ),
    ] {
        let Some(reference) = reference else { continue };
        match ctx.external.delete(&ns, reference).await? {
            Deletion::Waiting => {
                return Ok(Some((
                    reason,
                    format!("Waiting for {} to be deleted", reference.kind),
                )));
            }
            Deletion::Gone => {}
            Deletion::NotInstalled(why) => {
                ctx.events.publish(
                    CONTROLLER,
                    cluster,
                    Severity::Warning,
                    "DeletionSkipped",
                    why,
                );
            }
        }
    }
    Ok(None)
}
