//! Releasing a deleting control-plane Machine's etcd member (the pre-terminate hook), and
//! reading the members and alarms of the cluster's etcd.

use super::*;

/// The pre-terminate hook of deleting control-plane Machines: once a Machine waits for it, its
/// etcd member is released (leadership moved, member removed; never the last), then the hook
/// goes and the Machine's infrastructure with it. When the whole control plane goes, or the
/// Machine is the last one, there is nothing to keep and the hook just goes.
pub(super) async fn release_members(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
    machines: &[Machine],
) -> Result<()> {
    let ns = cluster.namespace().unwrap_or_default();
    let hook = api::kubeadm_control_plane::KCP_CLEANUP_HOOK;
    let remaining: Vec<&Machine> = machines.iter().filter(|m| !common::deleting(*m)).collect();
    for machine in machines.iter().filter(|m| common::deleting(*m)) {
        if !machine.annotations().contains_key(hook) {
            continue;
        }
        let waiting = machine
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == conditions::types::DELETING))
            .is_some_and(|c| c.reason == api::machine::reasons::WAITING_FOR_PRE_TERMINATE_HOOK);
        let everything_goes =
            common::deleting(kcp) || common::deleting(cluster) || remaining.is_empty();
        if !waiting && !everything_goes {
            continue;
        }
        if !everything_goes && let (Some(clients), Some(member)) = (&ctx.etcd, node_name(machine)) {
            let etcd = clients.connect(&ns, &cluster.name_any()).await?;
            let successor = remaining
                .iter()
                .filter(|m| is_true(m, "Ready"))
                .find_map(|m| node_name(m));
            etcd::release_member(etcd.as_ref(), member, successor).await?;
        }
        drop_cleanup_hook(
            &Api::<Machine>::namespaced(ctx.client.clone(), &ns),
            machine,
        )
        .await?;
    }
    Ok(())
}

/// The members and alarms of the cluster's etcd, read over one connection.
pub(super) async fn read_etcd(ctx: &Context, cluster: &Cluster) -> EtcdSeen {
    let Some(clients) = &ctx.etcd else {
        return Err(EtcdError::Unreachable(
            "no infrastructure provider in this manager reaches workload etcd".into(),
        ));
    };
    let ns = cluster.namespace().unwrap_or_default();
    let etcd = clients.connect(&ns, &cluster.name_any()).await?;
    Ok((etcd.members().await?, etcd.alarms().await?))
}
