//! ClusterResourceSetBinding: upstream's clusterresourcesetbinding controller. A binding
//! lives as long as its Cluster: it is deleted once the Cluster is being deleted or gone (what
//! the sets created inside the Cluster goes with the Cluster itself).

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;

use crate::api::cluster_resource_set::ClusterResourceSetBinding;
use crate::reconcile::common;
use crate::reconcile::runtime::Wiring;
use crate::reconcile::{Context, Result};

pub const CONTROLLER: &str = "clusterresourcesetbinding";

pub fn controller(w: &Wiring) -> BoxFuture<'static, ()> {
    let controller = w.controller::<ClusterResourceSetBinding>(CONTROLLER);
    // A binding is named after its Cluster.
    let bindings_of_clusters = w
        .ctx
        .clusters()
        .changes()
        .map(|c| ObjectRef::new(&c.name_any()).within(&c.namespace().unwrap_or_default()));
    let controller = controller.reconcile_on(bindings_of_clusters);
    w.run(CONTROLLER, controller, reconcile)
}

pub async fn reconcile(
    binding: Arc<ClusterResourceSetBinding>,
    ctx: Arc<Context>,
) -> Result<Action> {
    let namespace = binding.namespace().unwrap_or_default();
    let cluster = ctx
        .clusters()
        .ready()
        .await?
        .get(&ObjectRef::new(&binding.spec.cluster_name).within(&namespace));
    if cluster.is_some_and(|c| !common::deleting(c.as_ref())) {
        return Ok(Action::await_change());
    }
    let api: Api<ClusterResourceSetBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    match api.delete(&binding.name_any(), &Default::default()).await {
        Ok(_) => Ok(Action::await_change()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Action::await_change()),
        Err(e) => Err(e.into()),
    }
}
