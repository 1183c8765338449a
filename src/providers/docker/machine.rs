//! The DockerMachine reconciler: a node container per Machine, run as upstream's Docker
//! provider runs it (CAPD's `dockermachine_backend.go`): created once the cluster's
//! infrastructure is up and the bootstrap data is there, reported provisioned (providerID
//! `docker:////<container>`) before bootstrap as a cloud reports a VM, then bootstrapped by
//! exec of the cloud-config in the background with its progress in `BootstrapCompleted`, its
//! Node given the providerID through the workload cluster, and the container removed with its
//! volume on deletion.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Secret};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use serde_json::json;

use super::container::{self, Role};
use super::{DockerBackedMachine, DockerProvider, bootstrap, images};
use crate::api::common::{MachineAddress, MachineAddressType};
use crate::api::docker::{
    DockerMachineStatus, ProvisionedStatus, conditions as docker_conditions,
    reasons as docker_reasons,
};
use crate::api::{self, Cluster, Machine};
use crate::conditions::{self, NewCondition, Status};
use crate::reconcile::{Error, Result, common};

/// The providerID of a Docker machine: `docker:////<container>`.
pub const PROVIDER_ID_PREFIX: &str = "docker:////";
/// Left by CABPK's bootstrap when kubeadm succeeded.
pub const SUCCESS_SENTINEL: &str = "/run/cluster-api/bootstrap-success.complete";
/// `spec.bootstrapTimeout`'s default.
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(300);
/// kind's node image repository, used when an image for the version is present.
const KINDEST_NODE: &str = "kindest/node";
/// The taint an external cloud provider would remove; CAPD removes it (no cloud here).
const CLOUD_UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// A bootstrap running (or run) in the background.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bootstrap {
    Running {
        step: usize,
        of: usize,
        what: String,
    },
    Failed(String),
    Done,
}

/// The bootstraps of this process, by `<namespace>/<DockerMachine>`; they are in memory only,
/// and a restart finds a finished bootstrap by its sentinels.
#[derive(Default)]
pub struct Bootstraps {
    tasks: Mutex<HashMap<String, Task>>,
}

/// A bootstrap's shared state and the handle that stops it.
type Task = (Arc<Mutex<Bootstrap>>, tokio::task::AbortHandle);

impl Bootstraps {
    fn state(&self, key: &str) -> Option<Bootstrap> {
        self.tasks
            .lock()
            .unwrap()
            .get(key)
            .map(|(s, _)| s.lock().unwrap().clone())
    }

    fn cancel(&self, key: &str) {
        if let Some((_, handle)) = self.tasks.lock().unwrap().remove(key) {
            handle.abort();
        }
    }
}

/// What the container phase found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContainerState {
    /// Not created yet: the ContainerProvisioned condition says why.
    Waiting {
        reason: &'static str,
        message: String,
    },
    Provisioned {
        name: String,
        ip: Option<String>,
    },
}

/// Where bootstrap stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapState {
    WaitingForContainer,
    Running(String),
    Completed,
    Failed(String),
}

/// The DockerMachine's status, computed once.
pub fn compute_status<M: DockerBackedMachine>(
    dm: &M,
    machine: &Machine,
    paused: NewCondition,
    container: &ContainerState,
    bootstrap: &BootstrapState,
) -> DockerMachineStatus {
    let mut status = dm.status().cloned().unwrap_or_default();
    let provisioned = match container {
        ContainerState::Waiting { reason, message } => NewCondition::new(
            docker_conditions::CONTAINER_PROVISIONED,
            Status::False,
            reason,
        )
        .message(message.clone()),
        ContainerState::Provisioned { name, ip } => {
            status.initialization = Some(ProvisionedStatus {
                provisioned: Some(true),
            });
            let mut addresses = vec![MachineAddress {
                type_: MachineAddressType::Hostname,
                address: name.clone(),
            }];
            if let Some(ip) = ip {
                addresses.push(MachineAddress {
                    type_: MachineAddressType::InternalIp,
                    address: ip.clone(),
                });
                addresses.push(MachineAddress {
                    type_: MachineAddressType::ExternalIp,
                    address: ip.clone(),
                });
            }
            status.addresses = Some(addresses);
            status.failure_domain = machine.spec.failure_domain.clone();
            NewCondition::new(
                docker_conditions::CONTAINER_PROVISIONED,
                Status::True,
                docker_reasons::PROVISIONED,
            )
        }
    };
    let boot = match bootstrap {
        BootstrapState::WaitingForContainer => NewCondition::new(
            docker_conditions::BOOTSTRAP_COMPLETED,
            Status::False,
            docker_reasons::WAITING_FOR_CONTAINER,
        ),
        BootstrapState::Running(what) => NewCondition::new(
            docker_conditions::BOOTSTRAP_COMPLETED,
            Status::False,
            docker_reasons::NOT_COMPLETED,
        )
        .message(what.clone()),
        BootstrapState::Completed => NewCondition::new(
            docker_conditions::BOOTSTRAP_COMPLETED,
            Status::True,
            docker_reasons::COMPLETED,
        ),
        BootstrapState::Failed(why) => NewCondition::new(
            docker_conditions::BOOTSTRAP_COMPLETED,
            Status::False,
            docker_reasons::FAILED,
        )
        .message(why.clone()),
    };
    // Waiting for the container is said by ContainerProvisioned already.
    let parts: Vec<&NewCondition> = [&provisioned, &boot]
        .into_iter()
        .filter(|c| c.reason != docker_reasons::WAITING_FOR_CONTAINER)
        .collect();
    let ready = NewCondition::ready_of(&parts);
    common::set_conditions(
        &mut status.conditions,
        dm.meta().generation,
        vec![paused, provisioned, boot, ready],
    );
    status
}

/// The node image for a Machine: the DockerMachine's `customImage`, else `kindest/node` of the
/// version when it is on this Engine (it runs privileged), else capictl's; None with what to
/// do when there is none.
async fn node_image<M: DockerBackedMachine>(
    ctx: &DockerProvider,
    dm: &M,
    version: &str,
) -> std::result::Result<(String, bool), String> {
    let docker = ctx.docker().await?;
    let mut version = version.to_string();
    if let Some(image) = dm
        .docker()
        .node
        .custom_image
        .clone()
        .filter(|i| !i.is_empty())
    {
        let kind_tag = image
            .strip_prefix(&format!("{KINDEST_NODE}:"))
            .map(str::to_string);
        let present = images::exists(&docker, &image)
            .await
            .map_err(|e| e.to_string())?;
        match kind_tag {
            // kind's image for a version (what upstream's ClusterClass patches ask for) that
            // this Engine does not have and cannot pull: capictl's node image of that version
            // does the same job.
            Some(tag) if !present => {
                tracing::info!(machine = %dm.name_any(), %image, "not on this Engine; using capictl's node image of the same version");
                version = tag.replace('_', "+");
            }
            _ => {
                let privileged = !images::is_capictl_node(&docker, &image)
                    .await
                    .map_err(|e| e.to_string())?;
                return Ok((image, privileged));
            }
        }
    }
    let version = version.as_str();
    let kindest = format!("{KINDEST_NODE}:{version}");
    if images::exists(&docker, &kindest)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok((kindest, true));
    }
    let ours = images::node_image(version);
    if images::exists(&docker, &ours)
        .await
        .map_err(|e| e.to_string())?
    {
        return Ok((ours, false));
    }
    // The root filesystem is here: the node image for this version is one layer away.
    if let Some(binary) = images::own_binary()
        && images::build_node(&docker, version, &binary)
            .await
            .map_err(|e| e.to_string())?
    {
        return Ok((ours, false));
    }
    Err(format!(
        "there is no node image for {version} on this Docker Engine (neither {kindest} nor {ours}): run `capictl images build --kubernetes-version {version}`"
    ))
}

struct Scope<M: DockerBackedMachine> {
    api: Api<M>,
    machine: Machine,
    cluster: Cluster,
    docker_cluster: Option<M::Cluster>,
    container: String,
    key: String,
}

impl<M: DockerBackedMachine> Scope<M> {
    async fn gather(dm: &M, ctx: &DockerProvider) -> Result<Option<Scope<M>>> {
        let ns = dm.namespace().unwrap_or_default();
        let Some((machine, cluster)) = common::owning_machine_and_cluster(&ctx.client, dm).await?
        else {
            return Ok(None);
        };
        let docker_cluster = match cluster.spec.infrastructure_ref.as_ref() {
            Some(r) => {
                Api::<M::Cluster>::namespaced(ctx.client.clone(), &ns)
                    .get_opt(&r.name)
                    .await?
            }
            None => None,
        };
        Ok(Some(Scope {
            api: Api::namespaced(ctx.client.clone(), &ns),
            container: container::machine_container(&cluster.name_any(), &machine.name_any()),
            key: format!("{ns}/{}", dm.name_any()),
            machine,
            cluster,
            docker_cluster,
        }))
    }

    fn control_plane(&self) -> bool {
        self.machine.labels().contains_key(api::CONTROL_PLANE_LABEL)
    }

    fn owner(&self) -> String {
        container::owner(&self.namespace(), &self.cluster.name_any())
    }

    fn namespace(&self) -> String {
        self.cluster.namespace().unwrap_or_default()
    }

    fn initialization(&self) -> Option<&crate::api::cluster::ClusterInitializationStatus> {
        self.cluster
            .status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
    }
}

pub async fn reconcile<M: DockerBackedMachine>(
    dm: Arc<M>,
    ctx: Arc<DockerProvider>,
) -> Result<Action> {
    if !dm.docker_backed() {
        return Ok(Action::await_change());
    }
    let dm: &M = dm.as_ref();
    let ns = dm.namespace().unwrap_or_default();
    let api: Api<M> = Api::namespaced(ctx.client.clone(), &ns);
    let scope = Scope::gather(dm, &ctx).await?;

    // Guards; paused, not even the container of a deleted DockerMachine goes (see
    // DockerCluster). Without its Machine, the cluster label names the Cluster.
    let cluster = match &scope {
        Some(scope) => Some(scope.cluster.clone()),
        None => common::labelled_cluster(&ctx.client, dm).await?,
    };
    let (is_paused, paused) = common::paused(
        ctx.shared.management_uid(),
        cluster.as_ref(),
        &M::kind(&()),
        dm.annotations(),
    );
    if is_paused {
        return common::record_paused(&api, dm, paused).await;
    }
    if common::deleting(dm) {
        return delete(dm, &ctx, &api, scope.as_ref()).await;
    }
    let Some(scope) = scope else {
        return Ok(Action::requeue(Duration::from_secs(2)));
    };
    if common::ensure_finalizer(&api, dm, M::FINALIZER).await? {
        return Ok(Action::await_change());
    }
    if scope.cluster.spec.infrastructure_ref.is_none() {
        return Ok(Action::requeue(Duration::from_secs(5)));
    }

    // Phases: the container, its providerID, the load balancer, bootstrap, the Node.
    let container = ensure_container(&ctx, dm, &scope).await?;
    if let ContainerState::Provisioned { name, .. } = &container {
        let provider_id = format!("{PROVIDER_ID_PREFIX}{name}");
        if dm.provider_id() != Some(provider_id.as_str()) {
            common::patch_merge(
                &scope.api,
                &dm.name_any(),
                json!({"spec": {"providerID": provider_id}}),
            )
            .await?;
        }
        if scope.control_plane()
            && let Some(dc) = &scope.docker_cluster
            && let Some(lb) = load_balancer_of(&ctx, &scope).await
            && let Err(e) =
                super::load_balancer::sync_load_balancer(&ctx, dc, &scope.cluster, &lb).await
        {
            tracing::warn!(machine = %dm.name_any(), error = %e, "updating the load balancer failed; the DockerCluster retries");
        }
    }
    let bootstrap = match &container {
        ContainerState::Waiting { .. } => BootstrapState::WaitingForContainer,
        ContainerState::Provisioned { name, .. } => run_bootstrap(&ctx, dm, &scope, name).await?,
    };
    if bootstrap == BootstrapState::Completed
        && let Err(e) = set_node_provider_id(&ctx, &scope).await
    {
        tracing::debug!(machine = %dm.name_any(), error = %e, "the Node is not there yet");
    }

    // Status.
    let status = compute_status(dm, &scope.machine, paused, &container, &bootstrap);
    common::write_status(&api, &dm.name_any(), dm.status(), &status).await?;
    Ok(Action::requeue(match (&container, &bootstrap) {
        (ContainerState::Waiting { .. }, _) | (_, BootstrapState::Running(_)) => {
            Duration::from_secs(2)
        }
        (_, BootstrapState::Completed)
            if scope
                .machine
                .status
                .as_ref()
                .and_then(|s| s.node_ref.as_ref())
                .is_none() =>
        {
            Duration::from_secs(5)
        }
        _ => Duration::from_secs(30),
    }))
}

async fn load_balancer_of<M: DockerBackedMachine>(
    ctx: &DockerProvider,
    scope: &Scope<M>,
) -> Option<String> {
    let docker = ctx.docker().await.ok()?;
    container::find(
        &docker,
        &scope.namespace(),
        &scope.cluster.name_any(),
        Role::LoadBalancer,
    )
    .await
    .ok()?
    .into_iter()
    .next()
}

/// Finds or creates the Machine's container.
async fn ensure_container<M: DockerBackedMachine>(
    ctx: &DockerProvider,
    dm: &M,
    scope: &Scope<M>,
) -> Result<ContainerState> {
    let docker = ctx.docker().await.map_err(Error::Invalid)?;
    let name = scope.container.clone();
    let inspected = container::inspect(&docker, &name)
        .await
        .map_err(docker_error)?;
    let running = inspected
        .as_ref()
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.running)
        == Some(true);
    if let Some(c) = &inspected {
        let owner = c
            .config
            .as_ref()
            .and_then(|c| c.labels.as_ref())
            .and_then(|l| l.get(container::OWNER_LABEL))
            .cloned();
        if owner.is_some_and(|o| o != scope.owner()) {
            return Ok(ContainerState::Waiting {
                reason: docker_reasons::NOT_PROVISIONED,
                message: format!(
                    "a container named {name} belongs to another cluster; rename this Machine or its Cluster"
                ),
            });
        }
    }
    if dm.provider_id().is_some() && !running {
        // As upstream: a provisioned machine whose container stopped is not re-created; its
        // MachineHealthCheck replaces it.
        return Ok(ContainerState::Waiting {
            reason: docker_reasons::NOT_PROVISIONED,
            message: format!("Container {name} is not running anymore"),
        });
    }
    if running {
        let ip = inspected.as_ref().and_then(container::ip_of);
        return Ok(ContainerState::Provisioned { name, ip });
    }
    let init = scope.initialization();
    if init.and_then(|i| i.infrastructure_provisioned) != Some(true) {
        return Ok(ContainerState::Waiting {
            reason: docker_reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE,
            message: "Waiting for the Cluster's infrastructure to be provisioned".into(),
        });
    }
    if scope.machine.spec.bootstrap.data_secret_name.is_none() {
        let initialized = init.and_then(|i| i.control_plane_initialized) == Some(true);
        return Ok(if !scope.control_plane() && !initialized {
            ContainerState::Waiting {
                reason: docker_reasons::WAITING_FOR_CONTROL_PLANE_INITIALIZED,
                message: "Waiting for the control plane to be initialized".into(),
            }
        } else {
            ContainerState::Waiting {
                reason: docker_reasons::WAITING_FOR_BOOTSTRAP_DATA,
                message: "Waiting for the bootstrap data".into(),
            }
        });
    }
    if inspected.is_some() {
        // Created but not running (a crash before it started): start over.
        container::remove(&docker, &name)
            .await
            .map_err(docker_error)?;
    }
    let version = scope.machine.spec.version.clone().unwrap_or_default();
    let (image, privileged) = match node_image(ctx, dm, &version).await {
        Ok(i) => i,
        Err(message) => {
            return Ok(ContainerState::Waiting {
                reason: docker_reasons::NOT_PROVISIONED,
                message,
            });
        }
    };
    let mut labels = HashMap::new();
    if let Some(fd) = &scope.machine.spec.failure_domain {
        labels.insert("io.x-k8s.cluster.failureDomain".to_string(), fd.clone());
    }
    let mut mounts: Vec<container::Mount> = dm
        .docker()
        .node
        .extra_mounts
        .iter()
        .flatten()
        .filter_map(|m| {
            Some(container::Mount {
                source: m.host_path.clone()?,
                target: m.container_path.clone()?,
                read_only: m.read_only == Some(true),
            })
        })
        .collect();
    // capictl's nodes run their Pods on the host's Engine (kindest/node runs containerd).
    if !privileged && let Some(socket) = container::host_engine_socket() {
        mounts.push(container::Mount {
            source: socket,
            target: crate::node::image::ENGINE_SOCKET.into(),
            read_only: false,
        });
    }
    container::ensure_network(&docker)
        .await
        .map_err(docker_error)?;
    let spec = container::Spec {
        name: name.clone(),
        namespace: scope.namespace(),
        cluster: scope.cluster.name_any(),
        role: if scope.control_plane() {
            Role::ControlPlane
        } else {
            Role::Worker
        },
        image,
        privileged,
        labels,
        mounts,
    };
    if let Err(e) = container::create_and_start(&docker, &spec).await {
        return Ok(ContainerState::Waiting {
            reason: docker_reasons::NOT_PROVISIONED,
            message: format!("creating container {name}: {e}"),
        });
    }
    let ip = container::inspect(&docker, &name)
        .await
        .map_err(docker_error)?
        .as_ref()
        .and_then(container::ip_of);
    Ok(ContainerState::Provisioned { name, ip })
}

fn docker_error(e: super::DockerError) -> Error {
    Error::Invalid(e.to_string())
}

/// Starts the bootstrap in the background once, and says where it stands.
async fn run_bootstrap<M: DockerBackedMachine>(
    ctx: &DockerProvider,
    dm: &M,
    scope: &Scope<M>,
    container_name: &str,
) -> Result<BootstrapState> {
    let recorded = dm
        .status()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| conditions::is_true(c, docker_conditions::BOOTSTRAP_COMPLETED));
    if recorded
        || scope
            .machine
            .status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .is_some()
    {
        return Ok(BootstrapState::Completed);
    }
    match ctx.bootstraps.state(&scope.key) {
        Some(Bootstrap::Running { step, of, what }) => {
            return Ok(BootstrapState::Running(format!("{what} ({step} of {of})")));
        }
        Some(Bootstrap::Failed(why)) => return Ok(BootstrapState::Failed(why)),
        Some(Bootstrap::Done) => return Ok(BootstrapState::Completed),
        None => {}
    }
    let docker = ctx.docker().await.map_err(Error::Invalid)?;
    // A bootstrap that ran before this process started: never run kubeadm twice.
    let started = super::exec(
        &docker,
        container_name,
        &[
            "test".into(),
            "-f".into(),
            bootstrap::STARTED_SENTINEL.into(),
        ],
        None,
    )
    .await
    .map_err(|e| docker_error(e.into()))?;
    if started.code == 0 {
        let succeeded = super::exec(
            &docker,
            container_name,
            &["test".into(), "-f".into(), SUCCESS_SENTINEL.into()],
            None,
        )
        .await
        .map_err(|e| docker_error(e.into()))?;
        return Ok(if succeeded.code == 0 {
            BootstrapState::Completed
        } else {
            BootstrapState::Failed("the bootstrap was interrupted (capictl stopped while it ran) and kubeadm cannot run twice: delete the Machine to get a new one".into())
        });
    }
    let Some(secret_name) = scope.machine.spec.bootstrap.data_secret_name.clone() else {
        return Ok(BootstrapState::WaitingForContainer);
    };
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &dm.namespace().unwrap_or_default())
        .get(&secret_name)
        .await?;
    let data = secret.data.unwrap_or_default();
    let format = data
        .get("format")
        .map(|f| String::from_utf8_lossy(&f.0).to_string())
        .unwrap_or_else(|| "cloud-config".into());
    if format != "cloud-config" {
        return Ok(BootstrapState::Failed(format!(
            "bootstrap data format {format:?} is not supported: use cloud-config"
        )));
    }
    let value = data
        .get("value")
        .map(|v| String::from_utf8_lossy(&v.0).to_string())
        .unwrap_or_default();
    let (commands, skipped) = match bootstrap::commands(&value) {
        Ok(c) => c,
        Err(e) => return Ok(BootstrapState::Failed(e.to_string())),
    };
    for s in skipped {
        tracing::warn!(machine = %dm.name_any(), "{s}");
    }
    let timeout = dm
        .docker()
        .bootstrap_timeout
        .as_deref()
        .and_then(crate::api::parse_duration)
        .map(Duration::from_secs_f64)
        .unwrap_or(BOOTSTRAP_TIMEOUT);
    let state = Arc::new(Mutex::new(Bootstrap::Running {
        step: 0,
        of: commands.len(),
        what: "starting".into(),
    }));
    let task_state = state.clone();
    let container = container_name.to_string();
    let handle = tokio::spawn(async move {
        let progress = |step: usize, of: usize, what: &str| {
            *task_state.lock().unwrap() = Bootstrap::Running {
                step,
                of,
                what: what.to_string(),
            };
        };
        let outcome = tokio::time::timeout(
            timeout,
            bootstrap::run(&docker, &container, &commands, &progress),
        )
        .await;
        *task_state.lock().unwrap() = match outcome {
            Ok(Ok(())) => Bootstrap::Done,
            Ok(Err(e)) => Bootstrap::Failed(e),
            Err(_) => Bootstrap::Failed(format!(
                "the bootstrap did not finish within {}s (spec.bootstrapTimeout)",
                timeout.as_secs()
            )),
        };
    });
    ctx.bootstraps
        .tasks
        .lock()
        .unwrap()
        .insert(scope.key.clone(), (state, handle.abort_handle()));
    Ok(BootstrapState::Running("starting the bootstrap".into()))
}

/// Gives the Node its providerID through the workload cluster, and removes the external cloud
/// provider's taint, as CAPD does (there is no cloud provider here).
async fn set_node_provider_id<M: DockerBackedMachine>(
    ctx: &DockerProvider,
    scope: &Scope<M>,
) -> Result<()> {
    if scope.control_plane()
        || scope
            .initialization()
            .and_then(|i| i.control_plane_initialized)
            == Some(true)
        || scope.cluster.spec.control_plane_ref.is_none()
    {
        let ns = scope.cluster.namespace().unwrap_or_default();
        let Some(client) = ctx
            .shared
            .workloads
            .client(&ns, &scope.cluster.name_any())
            .await?
        else {
            return Ok(());
        };
        let nodes: Api<Node> = Api::all(client);
        let Some(node) = nodes.get_opt(&scope.container).await? else {
            return Ok(());
        };
        let spec = node.spec.clone().unwrap_or_default();
        let tainted = spec
            .taints
            .iter()
            .flatten()
            .any(|t| t.key == CLOUD_UNINITIALIZED_TAINT);
        if spec.provider_id.is_some() && !tainted {
            return Ok(());
        }
        let mut patch = json!({"spec": {}});
        if spec.provider_id.is_none() {
            patch["spec"]["providerID"] = json!(format!("{PROVIDER_ID_PREFIX}{}", scope.container));
        }
        if tainted {
            let kept: Vec<_> = spec
                .taints
                .iter()
                .flatten()
                .filter(|t| t.key != CLOUD_UNINITIALIZED_TAINT)
                .cloned()
                .collect();
            patch["spec"]["taints"] = json!(kept);
        }
        nodes
            .patch(
                &scope.container,
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await?;
    }
    Ok(())
}

/// Deletion: the bootstrap stops, the container goes with its volume, the load balancer drops
/// it, then the finalizer.
async fn delete<M: DockerBackedMachine>(
    dm: &M,
    ctx: &DockerProvider,
    api: &Api<M>,
    scope: Option<&Scope<M>>,
) -> Result<Action> {
    let ns = dm.namespace().unwrap_or_default();
    ctx.bootstraps.cancel(&format!("{ns}/{}", dm.name_any()));
    let cluster = dm.labels().get(api::CLUSTER_NAME_LABEL).cloned();
    let owner = dm
        .owner_references()
        .iter()
        .find(|r| r.kind == "Machine")
        .map(|r| r.name.clone());
    // The container, even when the Machine is gone or the container was never recorded.
    let name = match (scope, &cluster, &owner) {
        (Some(s), _, _) => Some(s.container.clone()),
        (None, Some(c), Some(m)) => Some(container::machine_container(c, m)),
        _ => None,
    };
    if let Some(name) = &name {
        let mut status = dm.status().cloned().unwrap_or_default();
        let deleting = NewCondition::new(
            conditions::types::DELETING,
            Status::True,
            conditions::types::DELETING,
        )
        .message(format!("Deleting container {name}"));
        let provisioned = NewCondition::new(
            docker_conditions::CONTAINER_PROVISIONED,
            Status::False,
            conditions::types::DELETING,
        )
        .message(format!("Deleting container {name}"));
        common::set_conditions(
            &mut status.conditions,
            dm.meta().generation,
            vec![deleting, provisioned],
        );
        common::write_status(api, &dm.name_any(), dm.status(), &status).await?;
        let docker = ctx.docker().await.map_err(Error::Invalid)?;
        container::remove(&docker, name)
            .await
            .map_err(docker_error)?;
        if let Some(s) = scope
            && s.control_plane()
            && let Some(dc) = &s.docker_cluster
            && let Some(lb) = load_balancer_of(ctx, s).await
            && let Err(e) = super::load_balancer::sync_load_balancer(ctx, dc, &s.cluster, &lb).await
        {
            tracing::warn!(error = %e, "updating the load balancer after a control plane went failed; the DockerCluster retries");
        }
    }
    common::remove_finalizer(api, dm, M::FINALIZER).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DockerMachine;

    #[test]
    fn container_names_follow_capd() {
        assert_eq!(
            container::machine_container("capi-quickstart", "capi-quickstart-md-0-abc"),
            "capi-quickstart-md-0-abc"
        );
        assert_eq!(
            container::machine_container("c1", "worker-1"),
            "c1-worker-1"
        );
    }

    fn objects() -> (DockerMachine, Machine) {
        let dm: DockerMachine =
            serde_json::from_value(json!({"metadata": {"name": "m", "generation": 1}, "spec": {}}))
                .unwrap();
        let m: Machine = serde_json::from_value(json!({"metadata": {"name": "m"}, "spec": {"clusterName": "c", "bootstrap": {}, "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "m"}, "failureDomain": "fd1"}})).unwrap();
        (dm, m)
    }

    #[test]
    fn status_from_the_container_and_the_bootstrap() {
        let (dm, m) = objects();
        let paused = NewCondition::new(
            conditions::types::PAUSED,
            Status::False,
            conditions::reasons::NOT_PAUSED,
        );
        let cases: Vec<(&str, ContainerState, BootstrapState, &str, &str, &str)> = vec![
            (
                "waiting for the control plane",
                ContainerState::Waiting {
                    reason: docker_reasons::WAITING_FOR_CONTROL_PLANE_INITIALIZED,
                    message: "Waiting for the control plane to be initialized".into(),
                },
                BootstrapState::WaitingForContainer,
                "False",
                "WaitingForContainer",
                "* ContainerProvisioned: Waiting for the control plane to be initialized",
            ),
            (
                "bootstrapping",
                ContainerState::Provisioned {
                    name: "c-m".into(),
                    ip: Some("172.18.0.4".into()),
                },
                BootstrapState::Running("run kubeadm join (12 of 14)".into()),
                "False",
                "NotCompleted",
                "* BootstrapCompleted: run kubeadm join (12 of 14)",
            ),
            (
                "failed",
                ContainerState::Provisioned {
                    name: "c-m".into(),
                    ip: None,
                },
                BootstrapState::Failed("run kubeadm join\nERROR: exit status 1".into()),
                "False",
                "Failed",
                "* BootstrapCompleted: run kubeadm join\nERROR: exit status 1",
            ),
            (
                "ready",
                ContainerState::Provisioned {
                    name: "c-m".into(),
                    ip: Some("172.18.0.4".into()),
                },
                BootstrapState::Completed,
                "True",
                "Completed",
                "",
            ),
        ];
        for (case, container, boot, boot_status, boot_reason, ready_message) in cases {
            let s = compute_status(&dm, &m, paused.clone(), &container, &boot);
            let b = common::expect_condition(
                s.conditions.as_ref(),
                docker_conditions::BOOTSTRAP_COMPLETED,
                case,
            );
            assert_eq!(
                (b.status.as_str(), b.reason.as_str()),
                (boot_status, boot_reason),
                "{case}"
            );
            let ready =
                common::expect_condition(s.conditions.as_ref(), conditions::types::READY, case);
            assert_eq!(ready.message, ready_message, "{case}");
            if let ContainerState::Provisioned { .. } = container {
                assert_eq!(
                    s.initialization.as_ref().unwrap().provisioned,
                    Some(true),
                    "{case}: provisioned before bootstrap"
                );
                assert_eq!(s.failure_domain.as_deref(), Some("fd1"));
            }
        }
    }
}
