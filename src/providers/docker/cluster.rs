//! The DockerCluster reconciler: the Cluster's HAProxy load balancer container `<cluster>-lb`
//! on the `kind` network (created when missing, started when stopped), its address as the
//! control plane endpoint, and its configuration following the control-plane machines. On
//! deletion the load balancer goes after every DockerMachine of the cluster.
//!
//! (Upstream: CAPD's `dockercluster_backend.go`; the load balancer's configuration, which CAPD
//! rewrites from the DockerMachine reconciler, is kept here, level-triggered, from the
//! control-plane containers and Machines as they are.)

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::container::{self, Role};
use super::load_balancer::{ensure_load_balancer, sync_load_balancer};
use super::{DockerBackedCluster, DockerProvider};
use crate::api::docker::{DockerClusterStatus, ProvisionedStatus, conditions as docker_conditions};
use crate::api::{self, Cluster};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::{Error, Result, common};

/// What the load balancer's phase found.
#[derive(Debug)]
pub enum LoadBalancer {
    Available { address: String },
    Unavailable(String),
}

/// The DockerCluster's status, computed once.
pub fn compute_status<C: DockerBackedCluster>(
    dc: &C,
    paused: NewCondition,
    lb: &LoadBalancer,
) -> DockerClusterStatus {
    let mut status = dc.status().cloned().unwrap_or_default();
    status.failure_domains = dc.docker().failure_domains.clone();
    let endpoint_set = dc.endpoint().is_some_and(|e| e.is_valid());
    let available = match lb {
        LoadBalancer::Available { .. } => NewCondition::new(
            docker_conditions::LOAD_BALANCER_AVAILABLE,
            Status::True,
            conditions::reasons::AVAILABLE,
        ),
        LoadBalancer::Unavailable(why) => NewCondition::new(
            docker_conditions::LOAD_BALANCER_AVAILABLE,
            Status::False,
            conditions::reasons::NOT_AVAILABLE,
        )
        .message(why.clone()),
    };
    if matches!(lb, LoadBalancer::Available { .. }) && endpoint_set {
        status.initialization = Some(ProvisionedStatus {
            provisioned: Some(true),
        });
    }
    let endpoint = if endpoint_set {
        NewCondition::new(
            "ControlPlaneEndpoint",
            Status::True,
            conditions::reasons::AVAILABLE,
        )
    } else {
        NewCondition::new(
            "ControlPlaneEndpoint",
            Status::False,
            conditions::reasons::NOT_AVAILABLE,
        )
        .message("Waiting for spec.controlPlaneEndpoint to be set")
    };
    let ready = NewCondition::ready_of(&[&available, &endpoint]);
    common::set_conditions(
        &mut status.conditions,
        dc.meta().generation,
        vec![paused, available, ready],
    );
    status
}

pub async fn reconcile<C: DockerBackedCluster>(
    dc: Arc<C>,
    ctx: Arc<DockerProvider>,
) -> Result<Action> {
    if !dc.docker_backed() {
        return Ok(Action::await_change());
    }
    let dc: &C = dc.as_ref();
    let ns = dc.namespace().unwrap_or_default();
    let api: Api<C> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = common::labelled_cluster(&ctx.client, dc).await?;

    // Guards; paused, not even the load balancer of a deleted DockerCluster goes: `capictl
    // move` deletes the source's objects with the Cluster paused, and the cluster lives on.
    let (is_paused, paused) = common::paused(
        ctx.shared.management_uid(),
        cluster.as_ref(),
        &C::kind(&()),
        dc.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, dc, paused).await;
    }
    if common::deleting(dc) {
        return delete(dc, &ctx, &api, cluster.as_ref()).await;
    }
    let Some(cluster) = cluster else {
        // The Cluster controller labels the DockerCluster once the Cluster refers to it.
        return Ok(Action::requeue(Duration::from_secs(2)));
    };
    if common::ensure_finalizer(&api, dc, C::FINALIZER).await? {
        return Ok(Action::await_change());
    }

    // Phases: the load balancer, its address as the endpoint, its configuration.
    let lb = match ensure_load_balancer(&ctx, dc, &cluster).await {
        Ok(name) => {
            let docker = ctx.docker().await.map_err(Error::Invalid)?;
            let inspected = container::inspect(&docker, &name)
                .await
                .map_err(|e| Error::Invalid(e.to_string()))?;
            match inspected.as_ref().and_then(container::ip_of) {
                Some(address) => match sync_load_balancer(&ctx, dc, &cluster, &name).await {
                    Ok(()) => LoadBalancer::Available { address },
                    Err(e) => LoadBalancer::Unavailable(format!("configuring {name}: {e}")),
                },
                None => LoadBalancer::Unavailable(format!(
                    "the load balancer container {name} has no address on the {} network yet",
                    container::NETWORK
                )),
            }
        }
        Err(e) => LoadBalancer::Unavailable(e),
    };
    if let LoadBalancer::Available { address } = &lb
        && !dc.endpoint().is_some_and(|e| e.is_valid())
    {
        let port = dc
            .endpoint()
            .and_then(|e| e.port)
            .filter(|p| *p > 0)
            .unwrap_or(6443);
        common::patch_merge(
            &api,
            &dc.name_any(),
            json!({"spec": {"controlPlaneEndpoint": {"host": address, "port": port}}}),
        )
        .await?;
        return Ok(Action::await_change());
    }

    // Status.
    let status = compute_status(dc, paused, &lb);
    common::write_status(&api, &dc.name_any(), dc.status(), &status).await?;
    Ok(Action::requeue(match lb {
        LoadBalancer::Available { .. } => Duration::from_secs(30),
        LoadBalancer::Unavailable(_) => Duration::from_secs(5),
    }))
}

/// Deletion: the load balancer goes once every DockerMachine of the cluster has gone.
async fn delete<C: DockerBackedCluster>(
    dc: &C,
    ctx: &DockerProvider,
    api: &Api<C>,
    cluster: Option<&Cluster>,
) -> Result<Action> {
    let ns = dc.namespace().unwrap_or_default();
    let cluster_name = dc
        .labels()
        .get(api::CLUSTER_NAME_LABEL)
        .cloned()
        .or_else(|| cluster.map(|c| c.name_any()));
    let machines = match &cluster_name {
        Some(c) => Api::<C::Machine>::namespaced(ctx.client.clone(), &ns)
            .list(&ListParams::default().labels(&format!("{}={c}", api::CLUSTER_NAME_LABEL)))
            .await?
            .items
            .len(),
        None => 0,
    };
    let mut status = dc.status().cloned().unwrap_or_default();
    let deleting = NewCondition::new(
        docker_conditions::LOAD_BALANCER_AVAILABLE,
        Status::False,
        conditions::types::DELETING,
    );
    let deleting = if machines > 0 {
        deleting.message(format!(
            "Waiting for {machines} DockerMachines to be deleted before the load balancer"
        ))
    } else {
        deleting.message("Deleting the load balancer")
    };
    common::set_conditions(&mut status.conditions, dc.meta().generation, vec![deleting]);
    common::write_status(api, &dc.name_any(), dc.status(), &status).await?;
    if machines > 0 {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }
    if let Some(c) = &cluster_name
        && !dc.finalizers().is_empty()
    {
        let docker = ctx.docker().await.map_err(Error::Invalid)?;
        for name in container::find(&docker, &ns, c, Role::LoadBalancer)
            .await
            .map_err(|e| Error::Invalid(e.to_string()))?
        {
            container::remove(&docker, &name)
                .await
                .map_err(|e| Error::Invalid(format!("removing the load balancer {name}: {e}")))?;
        }
    }
    common::remove_finalizer(api, dc, C::FINALIZER).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DockerCluster;

    #[test]
    fn status_says_what_the_load_balancer_waits_for() {
        let dc: DockerCluster =
            serde_json::from_value(json!({"metadata": {"name": "c", "generation": 1}, "spec": {}}))
                .unwrap();
        let paused = NewCondition::new(
            conditions::types::PAUSED,
            Status::False,
            conditions::reasons::NOT_PAUSED,
        );
        let s = compute_status(
            &dc,
            paused.clone(),
            &LoadBalancer::Unavailable("no load balancer image".into()),
        );
        let lb = common::expect_condition(
            s.conditions.as_ref(),
            docker_conditions::LOAD_BALANCER_AVAILABLE,
            "no image",
        );
        assert_eq!(
            (lb.status.as_str(), lb.reason.as_str()),
            ("False", "NotAvailable")
        );
        let ready =
            common::expect_condition(s.conditions.as_ref(), conditions::types::READY, "no image");
        assert_eq!(ready.status, "False");
        assert!(
            ready.message.contains("no load balancer image"),
            "{}",
            ready.message
        );
        assert!(s.initialization.is_none());
        let dc: DockerCluster = serde_json::from_value(json!({"metadata": {"name": "c", "generation": 1}, "spec": {"controlPlaneEndpoint": {"host": "172.18.0.2", "port": 6443}}})).unwrap();
        let s = compute_status(
            &dc,
            paused,
            &LoadBalancer::Available {
                address: "172.18.0.2".into(),
            },
        );
        let ready =
            common::expect_condition(s.conditions.as_ref(), conditions::types::READY, "available");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("True", "Ready")
        );
        assert_eq!(s.initialization.unwrap().provisioned, Some(true));
    }
}
