//! The Cluster controller: follows the infrastructure cluster and the control plane, counts the
//! Machines, writes the admin kubeconfig when there is no control-plane provider, and tears
//! everything down in order when the Cluster is deleted.
//!
//! `mod.rs` gathers and acts; [`status`] computes the status from what was gathered;
//! [`deletion`] takes a deleting Cluster through its steps.

mod claim;
mod deletion;
mod status;

use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::controller::Action;
use serde_json::{Value, json};

use crate::reconcile::common;
use crate::reconcile::external::{self, initialization_flag};
use std::future::ready;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::api;
use crate::api::common::{ApiEndpoint, ContractVersionedObjectReference};
use crate::api::{Cluster, MachineDeployment, MachinePool, MachineSet};
use crate::conditions::NewCondition;
use crate::reconcile::runtime::{Wiring, cluster_of};
use crate::reconcile::{Context, Result, StepContext};

pub use status::phase;
use status::{Descendants, Providers};

impl Descendants {
    /// The Cluster's MachinePools, MachineDeployments, MachineSets and Machines, by its
    /// cluster-name label.
    async fn gather(ctx: &Context, cluster: &Cluster) -> Result<Descendants> {
        let ns = cluster.namespace().unwrap_or_default();
        let selector = ListParams::default().labels(&format!(
            "{}={}",
            api::CLUSTER_NAME_LABEL,
            cluster.name_any()
        ));
        let pools = Api::<MachinePool>::namespaced(ctx.client.clone(), &ns)
            .list(&selector)
            .await?
            .items;
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
            .list_labelled(&ns, &name, |_| true)
            .await?
            .into_iter()
            .partition(|m| m.labels().contains_key(api::CONTROL_PLANE_LABEL));
        Ok(Descendants {
            pools,
            deployments,
            sets,
            control_plane,
            workers,
        })
    }
}

impl Providers {
    /// Reads the infrastructure cluster and the control plane the Cluster refers to.
    async fn read(ctx: &Context, cluster: &Cluster) -> Result<Providers> {
        let ns = cluster.namespace().unwrap_or_default();
        let get = |reference: Option<ContractVersionedObjectReference>| {
            let ns = ns.clone();
            async move {
                match reference {
                    None => Ok(None),
                    Some(r) => ctx.external.get(&ns, &r).await.map(Some),
                }
            }
        };
        Ok(Providers {
            infrastructure: get(cluster.spec.infrastructure_ref.clone()).await?,
            control_plane: get(cluster.spec.control_plane_ref.clone()).await?,
        })
    }

    /// The control plane endpoint the Cluster takes from its providers when it has none: the
    /// provisioned infrastructure's, else the initialized control plane's.
    fn endpoint(&self, cluster: &Cluster) -> Option<Value> {
        if cluster
            .spec
            .control_plane_endpoint
            .as_ref()
            .is_some_and(ApiEndpoint::is_valid)
        {
            return None;
        }
        let from = |object: &Option<Option<DynamicObject>>, flag: &str| {
            object
                .as_ref()
                .and_then(Option::as_ref)
                .filter(|o| initialization_flag(o, flag))
                .and_then(|o| external::field(o, &["spec", "controlPlaneEndpoint"]))
                .cloned()
        };
        from(&self.infrastructure, "provisioned")
            .or_else(|| from(&self.control_plane, "controlPlaneInitialized"))
    }
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

/// The controller's name, in its metrics and as its Events' reporter.
const CONTROLLER: &str = "cluster";

/// The Cluster controller: Clusters, woken by their Machines and MachineDeployments, and by
/// their infrastructure cluster and control plane ([`crate::reconcile::Context::wake_owners`]).
pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let machines = w
        .ctx
        .machines()
        .changes()
        .filter_map(|m| ready(cluster_of(m.as_ref(), &m.spec.cluster_name)));
    let controller = w
        .controller::<Cluster>("cluster")
        .reconcile_on(machines)
        .reconcile_on(w.ctx.cluster_wakes())
        .reconcile_on(clusters_of_health_changes(&w.ctx))
        .reconcile_on(w.ctx.claims.lost())
        .watches(
            Api::<MachineDeployment>::all(w.client.clone()),
            watcher::Config::default(),
            |m| cluster_of(&m, &m.spec.cluster_name),
        );
    w.ctx.metrics.state.add(controller.store());
    w.run(CONTROLLER, controller, reconcile)
}

/// The Clusters whose workload cluster became reachable or unreachable.
pub fn clusters_of_health_changes(
    ctx: &Context,
) -> impl futures::Stream<Item = ObjectRef<Cluster>> + Send + 'static {
    ctx.workloads
        .health_changes()
        .map(|change| ObjectRef::new(&change.cluster).within(&change.namespace))
}

pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action> {
    let ns = cluster.namespace().unwrap_or_default();
    let api: Api<Cluster> = Api::namespaced(ctx.client.clone(), &ns);
    // Guards. Pause comes first: a paused Cluster being deleted (as `capictl move` deletes the
    // source's objects) must not take its children and infrastructure with it. Paused, it
    // gives up its claim, so that the management cluster it moves to takes it at once.
    let by_user = common::paused_by_user(Some(&cluster), "Cluster", cluster.annotations());
    if !by_user.is_empty() {
        ctx.claims.release(&ns, &cluster.name_any()).await;
        return common::record_paused(&api, &cluster, common::paused_condition(by_user).1).await;
    }
    // One management cluster at a time: claimed elsewhere, the Cluster waits.
    if let Some(waiting) = claim::reconcile_claim(&ctx, &api, &cluster)
        .await
        .step("claiming the workload cluster")?
    {
        return Ok(waiting);
    }
    let (_, paused) = common::paused(
        ctx.management_uid(),
        Some(&cluster),
        "Cluster",
        cluster.annotations(),
    );
    if common::deleting(cluster.as_ref()) {
        return deletion::reconcile_delete(&ctx, &api, &cluster).await;
    }
    if common::ensure_finalizer(&api, cluster.as_ref(), api::CLUSTER_FINALIZER).await? {
        return Ok(Action::await_change());
    }

    // Phases.
    let providers = Providers::read(&ctx, &cluster)
        .await
        .step("reading the infrastructure cluster and the control plane")?;
    adopt_providers(&ctx, &cluster, &providers)
        .await
        .step("adopting the infrastructure cluster and the control plane")?;
    if let Some(endpoint) = providers.endpoint(&cluster) {
        common::patch_merge(
            &api,
            &cluster.name_any(),
            json!({"spec": {"controlPlaneEndpoint": endpoint}}),
        )
        .await
        .step("recording the control plane endpoint")?;
        return Ok(Action::await_change());
    }
    let descendants = Descendants::gather(&ctx, &cluster)
        .await
        .step("reading the Cluster's MachineDeployments, MachineSets and Machines")?;
    let kubeconfig_created = cluster.spec.control_plane_ref.is_none()
        && super::secrets::reconcile_kubeconfig(
            &ctx.client,
            &cluster,
            common::owner_reference(cluster.as_ref(), true),
            crate::pki::KeyAlgorithm::default(),
        )
        .await
        .step("writing the admin kubeconfig")?;
    // Can the workload cluster be reached?
    let probe = if status::control_plane_initialized(&cluster, &providers, &descendants) {
        Some(probe(&ctx, &cluster).await)
    } else {
        None
    };

    // Status, computed once from what this reconcile gathered.
    let (status, settled) = status::compute(&cluster, paused, &providers, &descendants, probe);
    common::write_status(&api, &cluster.name_any(), cluster.status.as_ref(), &status).await?;
    Ok(Action::requeue(if settled && !kubeconfig_created {
        common::spread(cluster.as_ref(), common::RESYNC)
    } else {
        Duration::from_secs(2)
    }))
}

async fn adopt_providers(ctx: &Context, cluster: &Cluster, providers: &Providers) -> Result<()> {
    for (reference, object) in [
        (&cluster.spec.infrastructure_ref, &providers.infrastructure),
        (&cluster.spec.control_plane_ref, &providers.control_plane),
    ] {
        if let (Some(reference), Some(Some(object))) = (reference, object) {
            adopt(ctx, cluster, reference, object).await?;
        }
    }
    Ok(())
}

/// RemoteConnectionProbe, from what the workload cluster's health checks found.
async fn probe(ctx: &Context, cluster: &Cluster) -> NewCondition {
    let ns = cluster.namespace().unwrap_or_default();
    let health = ctx.workloads.health(&ns, &cluster.name_any()).await;
    status::remote_connection(health.map_err(|e| e.to_string()))
}
