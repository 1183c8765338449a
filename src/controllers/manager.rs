//! Runs the reconcilers: every controller of the providers installed in a management cluster,
//! with bounded concurrency per controller. Providers installed later are picked up.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use std::future::ready;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{Controller, controller, watcher};
use kube::{Client, CustomResourceExt, Resource, ResourceExt};

use super::{Context, error_policy};
use crate::api::{
    Cluster, CrdSet, InMemoryCluster, InMemoryMachine, KubeadmConfig, KubeadmControlPlane, Machine,
    MachineDeployment, MachineHealthCheck, MachineSet,
};
use crate::providers::in_memory::{self, InMemory};

/// How the manager runs its controllers.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reconciles of one controller at a time.
    pub concurrency: u16,
    /// Run only these providers' controllers (by provider label, e.g. `cluster-api`,
    /// `bootstrap-kubeadm`); all installed ones when empty.
    pub providers: Vec<String>,
}

impl Options {
    fn runs(&self, set: crate::api::CrdSet) -> bool {
        self.providers.is_empty() || self.providers.iter().any(|p| p == set.provider_label())
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            concurrency: 10,
            providers: Vec::new(),
        }
    }
}

/// Whether a kind's CRD is installed.
async fn installed<K: CustomResourceExt>(client: &Client) -> bool {
    Api::<CustomResourceDefinition>::all(client.clone())
        .get_opt(K::crd_name())
        .await
        .ok()
        .flatten()
        .is_some()
}

fn config(options: &Options) -> controller::Config {
    controller::Config::default()
        .concurrency(options.concurrency)
        .debounce(Duration::from_millis(50))
}

/// Drives one controller's stream, logging what failed.
async fn drive<K, S>(name: &'static str, stream: S)
where
    K: Resource,
    S: futures::Stream<
            Item = Result<
                (ObjectRef<K>, kube::runtime::controller::Action),
                controller::Error<super::Error, watcher::Error>,
            >,
        >,
{
    stream
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(controller = name, error = %e, "reconcile error");
            }
        })
        .await;
}

/// Runs every controller whose kinds are installed until `shutdown` resolves.
pub async fn run(
    client: Client,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    // The in-memory provider's workload clusters, whose etcd the control plane provider reaches.
    let workloads = Arc::new(in_memory::workload::Workloads::default());
    let ctx = Context::new(
        client.clone(),
        Some(workloads.clone() as Arc<dyn crate::workload::etcd::EtcdClients>),
    );
    let in_memory = InMemory::new(client.clone(), workloads);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move || {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let mut running = tokio::task::JoinSet::new();
    let mut core_started = false;
    let mut in_memory_started = false;
    let mut kubeadm_bootstrap_started = false;
    let mut kubeadm_control_plane_started = false;
    tokio::pin!(shutdown);
    loop {
        if !core_started
            && options.runs(CrdSet::Core)
            && installed::<Cluster>(&client).await
            && installed::<Machine>(&client).await
        {
            core_started = true;
            tracing::info!("starting the core controllers");
            let cfg = config(&options);
            let c = client.clone();
            running.spawn(drive(
                "cluster",
                Controller::new(Api::<Cluster>::all(c.clone()), watcher::Config::default())
                    .reconcile_on(
                        ctx.machines()
                            .changes()
                            .filter_map(|m| ready(cluster_of(m.as_ref(), &m.spec.cluster_name))),
                    )
                    .watches(
                        Api::<MachineDeployment>::all(c.clone()),
                        watcher::Config::default(),
                        |m| cluster_of(&m, &m.spec.cluster_name),
                    )
                    .with_config(cfg.clone())
                    .graceful_shutdown_on(stopped())
                    .run(
                        |o, c| tracked(o, c, super::cluster::reconcile),
                        error_policy,
                        ctx.clone(),
                    ),
            ));
            let machines =
                Controller::new(Api::<Machine>::all(c.clone()), watcher::Config::default());
            let cache = machines.store();
            running.spawn(drive(
                "machine",
                machines
                    .watches(
                        Api::<Cluster>::all(c.clone()),
                        watcher::Config::default(),
                        super::machine::machines_of_initialized_cluster(cache.clone()),
                    )
                    .reconcile_on(super::machine::machines_of_node_changes(
                        ctx.workloads.node_changes(),
                        cache,
                    ))
                    .with_config(cfg.clone())
                    .graceful_shutdown_on(stopped())
                    .run(
                        |o, c| tracked(o, c, super::machine::reconcile),
                        error_policy,
                        ctx.clone(),
                    ),
            ));
            running.spawn(drive(
                "machineset",
                Controller::new(
                    Api::<MachineSet>::all(c.clone()),
                    watcher::Config::default(),
                )
                .reconcile_on(controllers_of(ctx.machines().changes()))
                .with_config(cfg.clone())
                .graceful_shutdown_on(stopped())
                .run(
                    |o, c| tracked(o, c, super::machine_set::reconcile),
                    error_policy,
                    ctx.clone(),
                ),
            ));
            running.spawn(drive(
                "machinedeployment",
                Controller::new(
                    Api::<MachineDeployment>::all(c.clone()),
                    watcher::Config::default(),
                )
                .owns(
                    Api::<MachineSet>::all(c.clone()),
                    watcher::Config::default(),
                )
                .with_config(cfg.clone())
                .graceful_shutdown_on(stopped())
                .run(
                    |o, c| tracked(o, c, super::machine_deployment::reconcile),
                    error_policy,
                    ctx.clone(),
                ),
            ));
            running.spawn(drive(
                "machinehealthcheck",
                Controller::new(
                    Api::<MachineHealthCheck>::all(c.clone()),
                    watcher::Config::default(),
                )
                .with_config(cfg)
                .graceful_shutdown_on(stopped())
                .run(
                    |o, c| tracked(o, c, super::machine_health_check::reconcile),
                    error_policy,
                    ctx.clone(),
                ),
            ));
        }
        if !kubeadm_bootstrap_started
            && options.runs(CrdSet::KubeadmBootstrap)
            && installed::<KubeadmConfig>(&client).await
        {
            kubeadm_bootstrap_started = true;
            tracing::info!("starting the kubeadm bootstrap controller");
            let c = client.clone();
            running.spawn(drive(
                "kubeadmconfig",
                Controller::new(
                    Api::<KubeadmConfig>::all(c.clone()),
                    watcher::Config::default(),
                )
                .with_config(config(&options))
                .graceful_shutdown_on(stopped())
                .run(
                    |o, c| tracked(o, c, super::kubeadm_config::reconcile),
                    error_policy,
                    ctx.clone(),
                ),
            ));
        }
        if !kubeadm_control_plane_started
            && options.runs(CrdSet::KubeadmControlPlane)
            && installed::<KubeadmControlPlane>(&client).await
        {
            kubeadm_control_plane_started = true;
            tracing::info!("starting the kubeadm control plane controller");
            let c = client.clone();
            running.spawn(drive(
                "kubeadmcontrolplane",
                Controller::new(
                    Api::<KubeadmControlPlane>::all(c.clone()),
                    watcher::Config::default(),
                )
                .reconcile_on(controllers_of(ctx.machines().changes()))
                .with_config(config(&options))
                .graceful_shutdown_on(stopped())
                .run(
                    |o, c| tracked(o, c, super::kubeadm_control_plane::reconcile),
                    error_policy,
                    ctx.clone(),
                ),
            ));
        }
        if !in_memory_started
            && options.runs(CrdSet::InMemory)
            && installed::<InMemoryCluster>(&client).await
            && installed::<InMemoryMachine>(&client).await
        {
            in_memory_started = true;
            tracing::info!("starting the in-memory infrastructure controllers");
            let cfg = config(&options);
            let c = client.clone();
            running.spawn(drive(
                "inmemorycluster",
                Controller::new(
                    Api::<InMemoryCluster>::all(c.clone()),
                    watcher::Config::default(),
                )
                .with_config(cfg.clone())
                .graceful_shutdown_on(stopped())
                .run(
                    in_memory::reconcile_cluster,
                    in_memory_error_policy,
                    in_memory.clone(),
                ),
            ));
            running.spawn(drive(
                "inmemorymachine",
                Controller::new(
                    Api::<InMemoryMachine>::all(c.clone()),
                    watcher::Config::default(),
                )
                .watches(
                    Api::<Machine>::all(c.clone()),
                    watcher::Config::default(),
                    |m| {
                        let r = &m.spec.infrastructure_ref;
                        (r.kind == "InMemoryMachine").then(|| {
                            ObjectRef::new(&r.name).within(&m.namespace().unwrap_or_default())
                        })
                    },
                )
                .with_config(cfg)
                .graceful_shutdown_on(stopped())
                .run(
                    in_memory::reconcile_machine,
                    in_memory_error_policy,
                    in_memory.clone(),
                ),
            ));
        }
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
    let _ = stop_tx.send(true);
    while running.join_next().await.is_some() {}
}

/// Runs a reconcile and clears the object's failure backoff when it succeeds.
async fn tracked<K, F, Fut>(
    object: Arc<K>,
    ctx: Arc<Context>,
    reconcile: F,
) -> Result<kube::runtime::controller::Action, super::Error>
where
    K: Resource<DynamicType = ()>,
    F: FnOnce(Arc<K>, Arc<Context>) -> Fut,
    Fut: Future<Output = Result<kube::runtime::controller::Action, super::Error>>,
{
    let key = super::object_key(object.as_ref());
    let result = reconcile(object, ctx.clone()).await;
    if result.is_ok() {
        ctx.backoff.succeeded(&key);
    }
    result
}

/// The controllers (owners with controller: true) of kind `P` of the changed objects.
fn controllers_of<P, K>(
    changes: impl futures::Stream<Item = Arc<K>> + Send + 'static,
) -> impl futures::Stream<Item = ObjectRef<P>> + Send + 'static
where
    P: Resource<DynamicType = ()> + 'static,
    K: Resource + Send + Sync + 'static,
{
    changes.filter_map(|o| {
        let owner = super::common::controller_of(o.owner_references())
            .filter(|r| r.kind == P::kind(&()))
            .map(|r| {
                ObjectRef::new(&r.name).within(o.meta().namespace.as_deref().unwrap_or_default())
            });
        ready(owner)
    })
}

fn cluster_of<K: Resource>(object: &K, cluster: &str) -> Option<ObjectRef<Cluster>> {
    Some(ObjectRef::new(cluster).within(object.meta().namespace.as_deref().unwrap_or_default()))
}

fn in_memory_error_policy<K: Resource<DynamicType = ()>>(
    object: Arc<K>,
    error: &super::Error,
    _: Arc<InMemory>,
) -> kube::runtime::controller::Action {
    tracing::warn!(kind = %K::kind(&()), name = %object.name_any(), %error, "reconcile failed");
    kube::runtime::controller::Action::requeue(Duration::from_secs(2))
}
