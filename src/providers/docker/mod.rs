//! The Docker infrastructure provider: capictl's own node and load-balancer images
//! ([`images`]), the HAProxy configuration ([`haproxy`]), and what the command line needs to
//! reach a Docker workload cluster from outside the Docker network, as kind does: the
//! kubeconfig names the load balancer's address on the Docker network, which this host may not
//! route to, while the load balancer container `<cluster>-lb` also publishes the API server
//! port on 127.0.0.1.

pub mod bootstrap;
pub mod cluster;
pub mod container;
pub mod haproxy;
pub mod images;
pub mod load_balancer;
pub mod machine;

use std::sync::Arc;

use futures::future::BoxFuture;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher;

use k8s_openapi::NamespaceResourceScope;
use kube::Resource;

use crate::api::common::ApiEndpoint;
use crate::api::docker::{
    DockerClusterBackend, DockerClusterStatus, DockerMachineBackend, DockerMachineStatus,
    DockerNode,
};
use crate::api::{
    DevCluster, DevMachine, DevMachineTemplate, DockerCluster, DockerMachine,
    DockerMachineTemplate, Machine,
};
use crate::reconcile::Error;
use crate::reconcile::common::WithConditions;
use crate::reconcile::runtime::{Watched, Wiring};

use bollard::Docker;

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("cannot reach the Docker Engine: {0}")]
    Engine(#[from] bollard::errors::Error),
    #[error("{0}")]
    Exec(String),
}

/// What the Docker reconcilers share: the management cluster, the Docker Engine (connected on
/// first use, so that a manager without an Engine still runs the other providers), the
/// workload clusters and the bootstraps running in this process.
pub struct DockerProvider {
    pub client: Client,
    pub shared: Arc<crate::reconcile::Context>,
    engine: tokio::sync::OnceCell<Docker>,
    pub bootstraps: machine::Bootstraps,
}

impl DockerProvider {
    pub fn new(client: Client, shared: Arc<crate::reconcile::Context>) -> Arc<DockerProvider> {
        Arc::new(DockerProvider {
            client,
            shared,
            engine: tokio::sync::OnceCell::new(),
            bootstraps: Default::default(),
        })
    }

    /// The Docker Engine, or what to do when it does not answer.
    pub async fn docker(&self) -> Result<Docker, String> {
        self.engine
            .get_or_try_init(|| async {
                let docker = connect().await.map_err(|e| e.to_string())?;
                docker.ping().await.map_err(|e| e.to_string())?;
                Ok::<_, String>(docker)
            })
            .await
            .cloned()
            .map_err(|e| {
                format!("the Docker Engine does not answer ({e}): start it, or set DOCKER_HOST")
            })
    }
}

/// An infrastructure cluster this provider runs as containers: a DockerCluster, or a
/// DevCluster with the Docker back end.
pub trait DockerBackedCluster:
    WithConditions<Status = DockerClusterStatus>
    + Watched
    + serde::Serialize
    + Resource<Scope = NamespaceResourceScope>
{
    const FINALIZER: &'static str;
    /// Its machines' kind.
    type Machine: DockerBackedMachine;
    /// Whether this object is this provider's to reconcile (a DevCluster may be in-memory).
    fn docker_backed(&self) -> bool;
    fn docker(&self) -> &DockerClusterBackend;
    fn endpoint(&self) -> Option<&ApiEndpoint>;
}

/// A machine this provider runs as a container: a DockerMachine, or a DevMachine with the
/// Docker back end.
pub trait DockerBackedMachine:
    WithConditions<Status = DockerMachineStatus>
    + Watched
    + serde::Serialize
    + Resource<Scope = NamespaceResourceScope>
{
    const FINALIZER: &'static str;
    /// Its clusters' kind.
    type Cluster: DockerBackedCluster;
    fn docker_backed(&self) -> bool;
    fn docker(&self) -> &DockerMachineBackend;
    fn provider_id(&self) -> Option<&str>;
}

const NO_CLUSTER_BACKEND: &DockerClusterBackend = &DockerClusterBackend {
    failure_domains: None,
    load_balancer: None,
};
const NO_MACHINE_BACKEND: &DockerMachineBackend = &DockerMachineBackend {
    node: DockerNode {
        custom_image: None,
        pre_load_images: None,
        extra_mounts: None,
    },
    bootstrap_timeout: None,
};

impl DockerBackedCluster for DockerCluster {
    const FINALIZER: &'static str = crate::api::DOCKER_CLUSTER_FINALIZER;
    type Machine = DockerMachine;
    fn docker_backed(&self) -> bool {
        true
    }
    fn docker(&self) -> &DockerClusterBackend {
        &self.spec.docker
    }
    fn endpoint(&self) -> Option<&ApiEndpoint> {
        self.spec.control_plane_endpoint.as_ref()
    }
}

impl DockerBackedCluster for DevCluster {
    const FINALIZER: &'static str = crate::api::DEV_CLUSTER_FINALIZER;
    type Machine = DevMachine;
    fn docker_backed(&self) -> bool {
        self.spec.backend.docker.is_some()
    }
    fn docker(&self) -> &DockerClusterBackend {
        self.spec
            .backend
            .docker
            .as_ref()
            .unwrap_or(NO_CLUSTER_BACKEND)
    }
    fn endpoint(&self) -> Option<&ApiEndpoint> {
        self.spec.control_plane_endpoint.as_ref()
    }
}

impl DockerBackedMachine for DockerMachine {
    const FINALIZER: &'static str = crate::api::DOCKER_MACHINE_FINALIZER;
    type Cluster = DockerCluster;
    fn docker_backed(&self) -> bool {
        true
    }
    fn docker(&self) -> &DockerMachineBackend {
        &self.spec.docker
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
}

impl DockerBackedMachine for DevMachine {
    const FINALIZER: &'static str = crate::api::DEV_MACHINE_FINALIZER;
    type Cluster = DevCluster;
    fn docker_backed(&self) -> bool {
        self.spec.backend.docker.is_some()
    }
    fn docker(&self) -> &DockerMachineBackend {
        self.spec
            .backend
            .docker
            .as_ref()
            .unwrap_or(NO_MACHINE_BACKEND)
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
}

/// The Docker provider's controllers: DockerClusters, and DockerMachines woken by the Machines
/// that refer to them; and the same for the Docker back end of the Dev kinds.
pub fn controllers(w: &Wiring, ctx: Arc<DockerProvider>) -> Vec<BoxFuture<'static, ()>> {
    let mut all = containers::<DockerCluster>(w, ctx.clone(), ["dockercluster", "dockermachine"]);
    all.extend(containers::<DevCluster>(
        w,
        ctx.clone(),
        ["devcluster-docker", "devmachine-docker"],
    ));
    all.push(
        super::machine_pool::controller::<crate::api::DevMachinePool>(
            w,
            "devmachinepool-docker",
            super::machine_pool::Backend::Docker,
        ),
    );
    all.push(super::machine_pool::controller::<
        crate::api::DockerMachinePool,
    >(
        w,
        "dockermachinepool",
        super::machine_pool::Backend::Docker,
    ));
    all.push(w.template_capacity(
        "dockermachinetemplate",
        ctx.clone(),
        |_: Arc<DockerMachineTemplate>, ctx| host_capacity(ctx, true),
    ));
    all.push(w.template_capacity(
        "devmachinetemplate-docker",
        ctx,
        |t: Arc<DevMachineTemplate>, ctx| {
            host_capacity(ctx, t.spec.template.spec.backend.docker.is_some())
        },
    ));
    all
}

/// What a Docker machine template reports its machines have: the Engine's host's CPUs and
/// memory (every node container shares them), as upstream's Docker provider reports.
async fn host_capacity(
    ctx: Arc<DockerProvider>,
    on_docker: bool,
) -> crate::reconcile::Result<Option<std::collections::BTreeMap<String, String>>> {
    if !on_docker {
        return Ok(None);
    }
    let docker = ctx.docker().await.map_err(Error::Invalid)?;
    let info = docker
        .info()
        .await
        .map_err(|e| Error::Invalid(format!("reading the Docker host's resources: {e}")))?;
    let mut capacity = std::collections::BTreeMap::new();
    capacity.insert("cpu".to_string(), info.ncpu.unwrap_or(1).to_string());
    capacity.insert(
        "memory".to_string(),
        info.mem_total.unwrap_or(0).to_string(),
    );
    capacity.insert("pods".to_string(), "110".to_string());
    Ok(Some(capacity))
}

fn containers<C: DockerBackedCluster>(
    w: &Wiring,
    ctx: Arc<DockerProvider>,
    names: [&'static str; 2],
) -> Vec<BoxFuture<'static, ()>> {
    let clusters = w.controller::<C>(names[0]);
    let machines = w.controller::<C::Machine>(names[1]).watches(
        Api::<Machine>::all(w.client.clone()),
        watcher::Config::default(),
        crate::reconcile::runtime::infrastructure_machine_of::<C::Machine>,
    );
    vec![
        w.run_with(names[0], clusters, cluster::reconcile::<C>, ctx.clone()),
        w.run_with(names[1], machines, machine::reconcile::<C::Machine>, ctx),
    ]
}

/// The local Docker Engine (DOCKER_HOST, else its socket), speaking its API version, whichever
/// it is (bollard's default is newer than many Engines in use).
pub async fn connect() -> Result<Docker, bollard::errors::Error> {
    Docker::connect_with_local_defaults()?
        .negotiate_version()
        .await
}

/// The name of a Cluster's load balancer container, as upstream's Docker provider names it.
pub fn load_balancer_container(cluster: &str) -> String {
    format!("{cluster}-lb")
}

/// The port on this host that the Cluster's load balancer container publishes the API server
/// on; None when there is no such container here or it publishes nothing.
pub async fn load_balancer_host_port(cluster: &str) -> Result<Option<u16>, DockerError> {
    let docker = connect().await?;
    Ok(
        container::inspect(&docker, &load_balancer_container(cluster))
            .await?
            .and_then(|c| container::host_port_of(&c, container::API_SERVER_PORT)),
    )
}

pub use crate::node::engine::{ExecOutput, exec};
