//! The composition root: which controllers and providers run, wired together. Runs every
//! controller of the providers installed in a management cluster, with bounded concurrency per
//! controller; providers installed later are picked up.
//!
//! The manager is a table ([`PROVIDERS`]) over [`crate::reconcile::runtime`]; each reconciler module
//! says what wakes its kind in its own `controller` function, beside its reconcile.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::controller;

use crate::api::CrdSet;
use crate::providers::docker::{self, DockerProvider};
use crate::providers::in_memory::{self, InMemory};
use crate::reconcile::Context;
use crate::reconcile::claim::ManagementIdentity;
use crate::reconcile::metrics::ControllerMetrics;
use crate::reconcile::runtime::Wiring;
use crate::workload::etcd::{EtcdClients, NetworkEtcd};

/// How the manager runs its controllers.
#[derive(Clone, Debug)]
pub struct Options {
    /// Reconciles of one controller at a time.
    pub concurrency: u16,
    /// Run only these providers' controllers (by provider label, e.g. `cluster-api`,
    /// `bootstrap-kubeadm`); all installed ones when empty.
    pub providers: Vec<String>,
    /// Where the controllers' series go; the caller registers them where it serves metrics.
    pub metrics: Arc<ControllerMetrics>,
    /// Run the cluster autoscaler for the node groups the size annotations mark
    /// ([`crate::controllers::autoscaler`]); off unless asked for.
    pub autoscaler: bool,
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
            metrics: ControllerMetrics::new(),
            autoscaler: false,
        }
    }
}

/// Whether every CRD of a provider is installed.
/// The CRDs of a provider that are not installed (all of them when they cannot be read).
async fn missing(client: &Client, set: CrdSet) -> Vec<&'static str> {
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let mut missing = Vec::new();
    for name in set.crd_names() {
        if !matches!(api.get_opt(name).await, Ok(Some(_))) {
            missing.push(name);
        }
    }
    missing
}

/// How long stopping waits for the controllers' reconciles in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A provider's controllers, started once its CRDs are installed.
struct Provider {
    crds: CrdSet,
    what: &'static str,
    controllers: fn(&Wiring, &ProviderContexts) -> Vec<BoxFuture<'static, ()>>,
}

/// The contexts of providers whose controllers keep state of their own.
struct ProviderContexts {
    in_memory: Arc<InMemory>,
    docker: Arc<DockerProvider>,
}

/// Every controller the manager runs, by provider.
const PROVIDERS: [Provider; 5] = [
    Provider {
        crds: CrdSet::Core,
        what: "the core controllers",
        controllers: |w, _| {
            vec![
                crate::controllers::cluster::controller(w),
                crate::controllers::cluster_class::controller(w),
                crate::controllers::topology::controller(w),
                crate::controllers::machine::controller(w),
                crate::controllers::machine_set::controller(w),
                crate::controllers::machine_deployment::controller(w),
                crate::controllers::machine_pool::controller(w),
                crate::controllers::machine_health_check::controller(w),
                crate::controllers::cluster_resource_set::controller(w),
                crate::controllers::cluster_resource_set_binding::controller(w),
                crate::controllers::extension_config::controller(w),
            ]
        },
    },
    Provider {
        crds: CrdSet::KubeadmBootstrap,
        what: "the kubeadm bootstrap controller",
        controllers: |w, _| vec![crate::controllers::kubeadm_config::controller(w)],
    },
    Provider {
        crds: CrdSet::KubeadmControlPlane,
        what: "the kubeadm control plane controller",
        controllers: |w, _| vec![crate::controllers::kubeadm_control_plane::controller(w)],
    },
    Provider {
        crds: CrdSet::Docker,
        what: "the Docker infrastructure controllers",
        // The Dev kinds come with the Docker provider's CRDs, as upstream's; their in-memory
        // back end is the in-memory provider's to simulate.
        controllers: |w, p| {
            let mut controllers = docker::controllers(w, p.docker.clone());
            controllers.extend(in_memory::dev_controllers(w, p.in_memory.clone()));
            controllers
        },
    },
    Provider {
        crds: CrdSet::InMemory,
        what: "the in-memory infrastructure controllers",
        controllers: |w, p| in_memory::controllers(w, p.in_memory.clone()),
    },
];

fn config(options: &Options) -> controller::Config {
    controller::Config::default()
        .concurrency(options.concurrency)
        .debounce(Duration::from_millis(50))
}

/// Runs every controller whose kinds are installed until `shutdown` resolves; providers
/// installed later are started when their CRDs appear.
pub async fn run(
    client: Client,
    options: Options,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    tokio::pin!(shutdown);
    // The in-memory provider's workload clusters, whose etcd the control plane provider reaches.
    let workloads = Arc::new(in_memory::workload::Workloads::default());
    let etcd =
        in_memory::workload::WorkloadEtcd::new(workloads.clone(), NetworkEtcd::new(client.clone()));
    let identity = loop {
        match ManagementIdentity::of(&client).await {
            Ok(identity) => break identity,
            Err(e) => {
                tracing::warn!(error = %e, "reading this management cluster's identity failed; retrying");
                tokio::select! {
                    _ = &mut shutdown => return,
                    _ = tokio::time::sleep(Duration::from_secs(2)) => {}
                }
            }
        }
    };
    tracing::info!(uid = %identity.uid, "this management cluster's identity");
    let ctx = Context::new(
        client.clone(),
        identity,
        Some(Arc::new(etcd) as Arc<dyn EtcdClients>),
        options.metrics.clone(),
    );
    if options.runs(CrdSet::Core) {
        ctx.watch_provider_owners(
            PROVIDERS
                .iter()
                .filter(|p| options.runs(p.crds))
                .flat_map(|p| p.crds.crd_names()),
        );
    }
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let wiring = Wiring {
        client: client.clone(),
        ctx,
        config: config(&options),
        concurrency: options.concurrency,
        stop: stop_rx,
    };
    let contexts = ProviderContexts {
        in_memory: InMemory::new(client.clone(), workloads),
        docker: DockerProvider::new(client.clone(), wiring.ctx.clone()),
    };
    let mut running = tokio::task::JoinSet::new();
    let mut started = [false; PROVIDERS.len()];
    let mut warned = [false; PROVIDERS.len()];
    loop {
        for ((provider, started), warned) in PROVIDERS
            .iter()
            .zip(started.iter_mut())
            .zip(warned.iter_mut())
        {
            if *started || !options.runs(provider.crds) {
                continue;
            }
            let missing = missing(&client, provider.crds).await;
            if !missing.is_empty() {
                // Some of its CRDs but not all: installed by an older capictl.
                if missing.len() < provider.crds.crd_names().len() && !*warned {
                    *warned = true;
                    tracing::warn!(
                        missing = %missing.join(", "),
                        "{} wait for CRDs this management cluster lacks (its providers were installed by an older capictl): run `capictl upgrade apply` to install them",
                        provider.what
                    );
                }
                continue;
            }
            *started = true;
            tracing::info!("starting {}", provider.what);
            for controller in (provider.controllers)(&wiring, &contexts) {
                running.spawn(controller);
            }
            if provider.crds == CrdSet::Core && options.autoscaler {
                tracing::info!("starting the cluster autoscaler");
                running.spawn(crate::controllers::autoscaler::controller(&wiring));
            }
        }
        tokio::select! {
            _ = &mut shutdown => break,
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }
    let _ = stop_tx.send(true);
    // Controllers finish the reconciles in flight; one that does not within the grace period
    // (a controller stopped while it was still starting has been seen to hang) is aborted,
    // so that stopping the manager never hangs.
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            controllers = running.len(),
            "controllers still running after {SHUTDOWN_GRACE:?}; aborting them"
        );
        running.shutdown().await;
    }
    // Another management cluster may take the workload clusters at once, not a lease later.
    wiring.ctx.claims.release_all().await;
}
