//! The cluster certificates and admin kubeconfig the control plane owns, and each Machine's
//! API server certificate expiry, read from the API server itself.

use super::*;

/// The cluster certificates and the admin kubeconfig, owned by the control plane.
pub(super) async fn ensure_certificates(
    ctx: &Context,
    kcp: &KubeadmControlPlane,
    cluster: &Cluster,
) -> Result<()> {
    let policy = crate::kubeadm::certs::certificate_policy(
        kcp.spec
            .kubeadm_config_spec
            .as_ref()
            .and_then(|s| s.cluster_configuration.as_ref()),
    );
    crate::controllers::secrets::cluster_certificates(
        &ctx.client,
        cluster,
        Some(common::owner_reference(kcp, true)),
        policy,
    )
    .await?;
    crate::controllers::secrets::reconcile_kubeconfig(
        &ctx.client,
        cluster,
        common::owner_reference(kcp, true),
        policy.key,
    )
    .await?;
    Ok(())
}

/// Records on each control-plane Machine's KubeadmConfig when its API server's certificate
/// expires, read from the API server itself once it runs (upstream's
/// reconcileCertificateExpiries). An API server that cannot be reached yet is tried again on
/// a later reconcile.
pub(super) async fn record_certificate_expiries(
    ctx: &Context,
    cluster: &Cluster,
    machines: &[Machine],
) -> Result<()> {
    let ns = cluster.namespace().unwrap_or_default();
    let configs: Api<KubeadmConfig> = Api::namespaced(ctx.client.clone(), &ns);
    for m in machines {
        let known = m
            .annotations()
            .contains_key(api::CERTIFICATES_EXPIRY_ANNOTATION)
            || m.status
                .as_ref()
                .is_some_and(|s| s.certificates_expiry_date.is_some());
        let running = m.status.as_ref().is_some_and(|s| s.node_ref.is_some());
        let Some(config) = m.spec.bootstrap.config_ref.as_ref() else {
            continue;
        };
        if known || !running || common::deleting(m) {
            continue;
        }
        let Some(address) = api_server_address(m, cluster) else {
            continue;
        };
        match crate::workload::certificates::serving_certificate_expiry(&address).await {
            Ok(expiry) => {
                common::patch_merge(
                    &configs,
                    &config.name,
                    serde_json::json!({"metadata": {"annotations": {(api::CERTIFICATES_EXPIRY_ANNOTATION): expiry.to_string()}}}),
                )
                .await?;
            }
            Err(e) => {
                tracing::debug!(machine = %m.name_any(), error = %e, "reading the API server's certificate");
            }
        }
    }
    Ok(())
}

/// Where a control-plane Machine's own API server answers: its InternalIP on kubeadm's port
/// (each Docker node runs one), else the cluster's endpoint (the in-memory provider runs one
/// API server for all of a cluster's Machines, on loopback).
pub(super) fn api_server_address(machine: &Machine, cluster: &Cluster) -> Option<String> {
    let internal = machine
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .and_then(|a| {
            a.iter()
                .find(|a| a.type_ == crate::api::common::MachineAddressType::InternalIp)
        })
        .map(|a| a.address.clone())
        .filter(|ip| {
            ip.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| !ip.is_loopback())
        });
    match internal {
        Some(ip) if ip.contains(':') => Some(format!("[{ip}]:6443")),
        Some(ip) => Some(format!("{ip}:6443")),
        None => {
            let endpoint = cluster.spec.control_plane_endpoint.as_ref()?;
            Some(format!("{}:{}", endpoint.host.as_ref()?, endpoint.port?))
        }
    }
}
