//! Deleting a KubeadmControlPlane: the workers go first, then every control-plane Machine;
//! the finalizer goes last. Each reconcile records in `Deleting` what it waits for.

use std::time::Duration;

use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use crate::api;
use crate::api::{KubeadmControlPlane, Machine, MachineDeployment};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::common;
use crate::reconcile::{Context, Result};

/// Deletion waits for the workers to go first, then removes every control-plane Machine.
pub(super) async fn reconcile_delete(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    api: &Api<KubeadmControlPlane>,
    cluster: Option<&str>,
    machines: &[Machine],
) -> Result<Action> {
    let ns = kcp.namespace().unwrap_or_default();
    let mut status = kcp.status.clone().unwrap_or_default();
    if let Some(cluster) = cluster {
        let selector =
            ListParams::default().labels(&format!("{}={cluster}", api::CLUSTER_NAME_LABEL));
        let workers = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
            .list(&selector)
            .await?
            .items
            .into_iter()
            .filter(|m| !m.labels().contains_key(api::CONTROL_PLANE_LABEL))
            .count();
        let deployments = Api::<MachineDeployment>::namespaced(ctx.client.clone(), &ns)
            .list(&selector)
            .await?
            .items
            .len();
        if workers > 0 || deployments > 0 {
            common::set_conditions(
                &mut status.conditions,
                kcp.meta().generation,
                vec![NewCondition::new(conditions::types::DELETING, Status::True, conditions::reasons::WAITING_FOR_WORKERS_DELETION)
                    .message(format!("Waiting for worker nodes to be deleted: {deployments} MachineDeployments, {workers} worker Machines"))],
            );
            common::write_status(api, &kcp.name_any(), kcp.status.as_ref(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(1)));
        }
    }
    if machines.is_empty() {
        common::remove_finalizer(api, kcp, api::KUBEADM_CONTROL_PLANE_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let machines_api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    for m in machines {
        if common::deleting(m) {
            // The whole control plane goes: no etcd member is worth keeping.
            super::drop_cleanup_hook(&machines_api, m).await?;
        } else {
            machines_api
                .delete(&m.name_any(), &DeleteParams::background())
                .await?;
        }
    }
    common::set_conditions(
        &mut status.conditions,
        kcp.meta().generation,
        vec![
            NewCondition::new(
                conditions::types::DELETING,
                Status::True,
                conditions::reasons::WAITING_FOR_MACHINE_DELETION,
            )
            .message(format!("Deleting {} Machines", machines.len())),
        ],
    );
    common::write_status(api, &kcp.name_any(), kcp.status.as_ref(), &status).await?;
    Ok(Action::requeue(Duration::from_secs(1)))
}
