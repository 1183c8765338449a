//! A DockerCluster's load balancer: its container (made, or started again after a Docker
//! restart), its image, and its HAProxy configuration kept in step with the control-plane
//! containers and Machines, by the DockerCluster and DockerMachine reconcilers alike.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::container::{self, Role};
use super::haproxy::{self, Backend};
use super::{DockerBackedCluster, DockerProvider, images};
use crate::api::{self, Cluster, Machine};
use crate::reconcile::common;

/// kind's load balancer image, used when present on the Engine.
pub const KINDEST_HAPROXY: &str = "kindest/haproxy:v20230606-42a2262b";

/// The load balancer's back ends: every control-plane container of the cluster at its
/// address (its name when it has none yet, which Docker's DNS resolves), weight 0 for one whose
/// Machine is being deleted while others remain, so that no new connection goes to it. An
/// address that changes (a restarted container) is rewritten on the next reconcile.
pub fn backends(
    control_planes: &[(String, Option<String>)],
    deleting: &[String],
) -> BTreeMap<String, Backend> {
    let others_remain = control_planes.len() > 1;
    control_planes
        .iter()
        .map(|(name, ip)| {
            let weight = if others_remain && deleting.contains(name) {
                0
            } else {
                100
            };
            let address = ip.clone().unwrap_or_else(|| name.clone());
            (name.clone(), Backend { address, weight })
        })
        .collect()
}

/// The load balancer image: the DockerCluster's, else kind's when present here, else
/// capictl's own (built by `capictl images build`).
pub async fn load_balancer_image<C: DockerBackedCluster>(
    ctx: &DockerProvider,
    dc: &C,
) -> std::result::Result<String, String> {
    let lb = dc.docker().load_balancer.as_ref();
    if let Some(repo) = lb.and_then(|l| l.image_repository.clone()) {
        let tag = lb
            .and_then(|l| l.image_tag.clone())
            .unwrap_or_else(|| "latest".into());
        return Ok(format!("{repo}/haproxy:{tag}"));
    }
    let docker = ctx.docker().await?;
    if images::exists(&docker, KINDEST_HAPROXY)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok(KINDEST_HAPROXY.into());
    }
    images::find_load_balancer(&docker)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no load balancer image on this Docker Engine: run `capictl images build` (or load kindest/haproxy)".to_string())
}

/// Finds or makes the load balancer; starts it when stopped.
pub async fn ensure_load_balancer<C: DockerBackedCluster>(
    ctx: &DockerProvider,
    dc: &C,
    cluster: &Cluster,
) -> std::result::Result<String, String> {
    let docker = ctx.docker().await?;
    let ns = dc.namespace().unwrap_or_default();
    let existing = container::find(&docker, &ns, &cluster.name_any(), Role::LoadBalancer)
        .await
        .map_err(|e| e.to_string())?;
    let name = match existing.first() {
        Some(name) => name.clone(),
        None => {
            container::ensure_network(&docker)
                .await
                .map_err(|e| e.to_string())?;
            let name = container::free_name(
                &docker,
                &super::load_balancer_container(&cluster.name_any()),
                &ns,
            )
            .await
            .map_err(|e| e.to_string())?;
            let spec = container::Spec {
                name: name.clone(),
                namespace: ns.clone(),
                cluster: cluster.name_any(),
                role: Role::LoadBalancer,
                image: load_balancer_image(ctx, dc).await?,
                privileged: false,
                labels: Default::default(),
                mounts: vec![],
            };
            container::create_and_start(&docker, &spec)
                .await
                .map_err(|e| format!("creating the load balancer container {name}: {e}"))?;
            name
        }
    };
    let inspected = container::inspect(&docker, &name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("the load balancer container {name} is gone"))?;
    if inspected.state.as_ref().and_then(|s| s.running) != Some(true) {
        // A stopped load balancer (a Docker restart) is started again, not a failure.
        docker
            .start_container(
                &name,
                None::<bollard::query_parameters::StartContainerOptions>,
            )
            .await
            .map_err(|e| format!("starting the stopped load balancer container {name}: {e}"))?;
    }
    Ok(name)
}

/// Rewrites the load balancer's configuration from the control-plane containers and Machines.
pub async fn sync_load_balancer<C: DockerBackedCluster>(
    ctx: &DockerProvider,
    dc: &C,
    cluster: &Cluster,
    lb: &str,
) -> std::result::Result<(), String> {
    let docker = ctx.docker().await?;
    let ns = dc.namespace().unwrap_or_default();
    let names = container::find(&docker, &ns, &cluster.name_any(), Role::ControlPlane)
        .await
        .map_err(|e| e.to_string())?;
    let mut control_planes = Vec::new();
    for name in names {
        let inspected = container::inspect(&docker, &name)
            .await
            .map_err(|e| e.to_string())?;
        let running = inspected
            .as_ref()
            .and_then(|c| c.state.as_ref())
            .and_then(|s| s.running)
            == Some(true);
        if running {
            control_planes.push((name, inspected.as_ref().and_then(container::ip_of)));
        }
    }
    let machines = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .list(&ListParams::default().labels(&format!(
            "{}={},{}",
            api::CLUSTER_NAME_LABEL,
            cluster.name_any(),
            api::CONTROL_PLANE_LABEL
        )))
        .await
        .map_err(|e| e.to_string())?;
    let deleting: Vec<String> = machines
        .iter()
        .filter(|m| common::deleting(*m))
        .map(|m| container::machine_container(&cluster.name_any(), &m.name_any()))
        .collect();
    let template = match dc.docker().load_balancer.as_ref().and_then(|l| l.custom_haproxy_config_template_ref.as_ref()).and_then(|r| r.name.clone()) {
        Some(name) => Api::<ConfigMap>::namespaced(ctx.client.clone(), &ns)
            .get_opt(&name)
            .await
            .map_err(|e| e.to_string())?
            .and_then(|c| c.data?.get("value").cloned())
            .ok_or_else(|| format!("spec.loadBalancer.customHAProxyConfigTemplateRef: ConfigMap {name} with the key \"value\" not found in namespace {ns}"))?,
        None => haproxy::DEFAULT_TEMPLATE.to_string(),
    };
    let port = dc
        .endpoint()
        .and_then(|e| e.port)
        .filter(|p| *p > 0)
        .unwrap_or(6443) as u16;
    let config = haproxy::render(
        &template,
        &haproxy::data(port, &backends(&control_planes, &deleting), false),
    )
    .map_err(|e| e.to_string())?;
    if haproxy::apply(&docker, lb, &config)
        .await
        .map_err(|e| e.to_string())?
    {
        tracing::info!(
            load_balancer = lb,
            backends = control_planes.len(),
            "load balancer configuration written and reloaded"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleting_control_planes_get_no_new_connections_unless_they_are_the_last() {
        let all = vec![
            ("c-cp-a".to_string(), Some("172.18.0.3".to_string())),
            ("c-cp-b".to_string(), None),
        ];
        let b = backends(&all, &["c-cp-a".into()]);
        assert_eq!(b["c-cp-a"].weight, 0);
        assert_eq!(b["c-cp-a"].address, "172.18.0.3");
        assert_eq!(b["c-cp-b"].weight, 100);
        assert_eq!(
            b["c-cp-b"].address, "c-cp-b",
            "by name until it has an address"
        );
        let last = backends(&[("c-cp-a".into(), None)], &["c-cp-a".into()]);
        assert_eq!(last["c-cp-a"].weight, 100, "the last one keeps serving");
    }
}
