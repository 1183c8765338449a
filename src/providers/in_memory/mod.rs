//! The in-memory infrastructure provider: InMemoryClusters get a real workload API server in
//! this process; InMemoryMachines "boot" after their configured start-up durations and
//! register a Node there. Nothing is run; everything a Cluster API controller looks at is real.

pub mod workload;

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use crate::api;
use crate::api::common::MachineAddress;
use crate::api::docker::ProvisionedStatus;
use crate::api::in_memory::{InMemoryMachineBehaviour, InMemoryStartup};
use crate::api::{Cluster, DevCluster, DevMachine, InMemoryCluster, InMemoryMachine, Machine};
use crate::conditions;
use crate::conditions::{NewCondition, Status};
use crate::controllers::common::{self, WithConditions};
use crate::controllers::runtime::{Watched, Wiring};
use crate::controllers::{Error, Result};
use crate::kubeadm::certs;
use workload::Workloads;

/// What the in-memory reconcilers share.
pub struct InMemory {
    pub client: Client,
    pub workloads: Arc<Workloads>,
}

impl InMemory {
    pub fn new(client: Client, workloads: Arc<Workloads>) -> Arc<InMemory> {
        Arc::new(InMemory { client, workloads })
    }
}

/// An infrastructure cluster this provider simulates: an InMemoryCluster, or a DevCluster with
/// the in-memory back end.
pub trait SimulatedCluster:
    WithConditions + Watched + serde::Serialize + Resource<Scope = NamespaceResourceScope>
{
    const FINALIZER: &'static str;
    /// Whether this object is this provider's to reconcile (a DevCluster may be Docker-backed).
    fn simulated(&self) -> bool;
    fn endpoint_port(&self) -> Option<i32>;
    /// Its status, provisioned: initialization and failure domains (conditions are added after).
    fn provisioned(&self) -> Self::Status;
}

/// A machine this provider simulates: an InMemoryMachine, or a DevMachine with the in-memory
/// back end.
pub trait SimulatedMachine:
    WithConditions + Watched + serde::Serialize + Resource<Scope = NamespaceResourceScope>
{
    const FINALIZER: &'static str;
    fn simulated(&self) -> bool;
    fn behaviour(&self) -> Option<&InMemoryMachineBehaviour>;
    fn provider_id(&self) -> Option<&str>;
    /// Records a running machine in its status: provisioned, its addresses and failure domain.
    fn running(
        status: &mut Self::Status,
        addresses: Vec<MachineAddress>,
        failure_domain: Option<String>,
    );
}

/// `SimulatedMachine::running` for a status with `initialization`, `addresses` and
/// `failureDomain` (both simulated kinds' statuses have them).
macro_rules! running_status {
    () => {
        fn running(
            status: &mut Self::Status,
            addresses: Vec<MachineAddress>,
            failure_domain: Option<String>,
        ) {
            status.initialization = Some(ProvisionedStatus {
                provisioned: Some(true),
            });
            status.addresses = Some(addresses);
            status.failure_domain = failure_domain;
        }
    };
}

impl SimulatedCluster for InMemoryCluster {
    const FINALIZER: &'static str = api::IN_MEMORY_CLUSTER_FINALIZER;
    fn simulated(&self) -> bool {
        true
    }
    fn endpoint_port(&self) -> Option<i32> {
        self.spec
            .control_plane_endpoint
            .as_ref()
            .and_then(|e| e.port)
    }
    fn provisioned(&self) -> Self::Status {
        let mut status = self.status.clone().unwrap_or_default();
        status.initialization = Some(ProvisionedStatus {
            provisioned: Some(true),
        });
        status.failure_domains = self.spec.failure_domains.clone();
        status
    }
}

impl SimulatedCluster for DevCluster {
    const FINALIZER: &'static str = api::DEV_CLUSTER_FINALIZER;
    fn simulated(&self) -> bool {
        self.spec.backend.in_memory.is_some()
    }
    fn endpoint_port(&self) -> Option<i32> {
        self.spec
            .control_plane_endpoint
            .as_ref()
            .and_then(|e| e.port)
    }
    fn provisioned(&self) -> Self::Status {
        let mut status = self.status.clone().unwrap_or_default();
        status.initialization = Some(ProvisionedStatus {
            provisioned: Some(true),
        });
        status
    }
}

impl SimulatedMachine for InMemoryMachine {
    const FINALIZER: &'static str = api::IN_MEMORY_MACHINE_FINALIZER;
    fn simulated(&self) -> bool {
        true
    }
    fn behaviour(&self) -> Option<&InMemoryMachineBehaviour> {
        self.spec.behaviour.as_ref()
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    running_status!();
}

impl SimulatedMachine for DevMachine {
    const FINALIZER: &'static str = api::DEV_MACHINE_FINALIZER;
    fn simulated(&self) -> bool {
        self.spec.backend.in_memory.is_some()
    }
    fn behaviour(&self) -> Option<&InMemoryMachineBehaviour> {
        self.spec.backend.in_memory.as_ref()
    }
    fn provider_id(&self) -> Option<&str> {
        self.spec.provider_id.as_deref()
    }
    running_status!();
}

fn key(namespace: &str, cluster: &str) -> String {
    format!("{namespace}/{cluster}")
}

/// How long one part of a machine takes to start: its duration, stretched by up to `jitter`.
fn startup(part: Option<&InMemoryStartup>, seed: f64) -> f64 {
    let Some(p) = part.and_then(|p| p.provisioning.as_ref()) else {
        return 0.0;
    };
    let d = p
        .startup_duration
        .as_deref()
        .and_then(crate::api::parse_duration)
        .unwrap_or(0.0);
    let jitter: f64 = p
        .startup_jitter
        .as_deref()
        .and_then(|j| j.parse().ok())
        .unwrap_or(0.0);
    d + seed * jitter * d
}

/// Seconds from creation until a machine is up: VM, then Node, then (control plane) the API
/// server and etcd member.
pub fn boot_seconds(
    behaviour: Option<&InMemoryMachineBehaviour>,
    control_plane: bool,
    seed: f64,
) -> f64 {
    let Some(b) = behaviour else { return 0.0 };
    let mut total = startup(b.vm.as_ref(), seed) + startup(b.node.as_ref(), seed);
    if control_plane {
        total += startup(b.api_server.as_ref(), seed).max(startup(b.etcd.as_ref(), seed));
    }
    total
}

/// The cluster CA, made when nobody brought one: workload API servers need it to serve.
async fn cluster_ca(client: &Client, cluster: &Cluster) -> Result<crate::pki::Pki> {
    let ns = cluster.namespace().unwrap_or_default();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
    let name = cluster.name_any();
    if let Some(secret) = secrets.get_opt(&certs::ca_secret_name(&name)).await? {
        return Ok(certs::ca_from_secret(&secret)?);
    }
    let (secret, pki) = certs::new_ca_secret(&name, &ns, common::owner_reference(cluster, true))?;
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok(pki),
        // Someone else made it first: use theirs.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = secrets.get(&certs::ca_secret_name(&name)).await?;
            Ok(certs::ca_from_secret(&existing)?)
        }
        Err(e) => Err(e.into()),
    }
}

/// The in-memory provider's controllers: InMemoryClusters, and InMemoryMachines woken by the
/// Machines that refer to them.
pub fn controllers(w: &Wiring, ctx: Arc<InMemory>) -> Vec<BoxFuture<'static, ()>> {
    simulations::<InMemoryCluster, InMemoryMachine>(w, ctx, ["inmemorycluster", "inmemorymachine"])
}

/// The controllers of the in-memory back end of the Dev kinds, which the Docker provider's CRDs
/// bring (as upstream's Docker provider serves both back ends).
pub fn dev_controllers(w: &Wiring, ctx: Arc<InMemory>) -> Vec<BoxFuture<'static, ()>> {
    simulations::<DevCluster, DevMachine>(w, ctx, ["devcluster-inmemory", "devmachine-inmemory"])
}

fn simulations<C: SimulatedCluster, M: SimulatedMachine>(
    w: &Wiring,
    ctx: Arc<InMemory>,
    names: [&'static str; 2],
) -> Vec<BoxFuture<'static, ()>> {
    let clusters = w.controller::<C>(names[0]);
    let machines = w.controller::<M>(names[1]).watches(
        Api::<Machine>::all(w.client.clone()),
        watcher::Config::default(),
        crate::controllers::runtime::infrastructure_machine_of::<M>,
    );
    vec![
        stop_removed_workloads::<C>(w.client.clone(), ctx.workloads.clone()),
        w.run_with(names[0], clusters, reconcile_cluster::<C>, ctx.clone()),
        w.run_with(names[1], machines, reconcile_machine::<M>, ctx),
    ]
}

/// Stops the workload API server of every InMemoryCluster that is gone from the store, however
/// it went: its finalizer removed by `capictl move` or by hand, or the whole object missed
/// while the watch was down (then the relist shows it missing).
fn stop_removed_workloads<C: SimulatedCluster>(
    client: Client,
    workloads: Arc<Workloads>,
) -> BoxFuture<'static, ()> {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    let key_of = |ic: &C| {
        if !ic.simulated() {
            return None;
        }
        ic.labels()
            .get(api::CLUSTER_NAME_LABEL)
            .map(|name| key(&ic.namespace().unwrap_or_default(), name))
    };
    // Clusters seen in the store, and those of a relist in progress: only a cluster that was
    // seen and is missing from the relist was deleted (one created since has not been seen).
    let (mut seen, mut listed) = (HashSet::new(), HashSet::new());
    Box::pin(
        watcher(Api::<C>::all(client), watcher::Config::default())
            .default_backoff()
            .for_each(move |event| {
                match event {
                    Ok(watcher::Event::Delete(ic)) => {
                        if let Some(k) = key_of(&ic) {
                            workloads.stop(&k);
                            seen.remove(&k);
                        }
                    }
                    Ok(watcher::Event::Apply(ic)) => seen.extend(key_of(&ic)),
                    Ok(watcher::Event::Init) => listed.clear(),
                    Ok(watcher::Event::InitApply(ic)) => listed.extend(key_of(&ic)),
                    Ok(watcher::Event::InitDone) => {
                        for k in seen.difference(&listed) {
                            workloads.stop(k);
                        }
                        seen = std::mem::take(&mut listed);
                    }
                    Err(_) => {}
                }
                std::future::ready(())
            }),
    )
}

pub async fn reconcile_cluster<C: SimulatedCluster>(
    ic: Arc<C>,
    ctx: Arc<InMemory>,
) -> Result<Action> {
    if !ic.simulated() {
        return Ok(Action::await_change());
    }
    let ns = ic.namespace().unwrap_or_default();
    let api: Api<C> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = common::labelled_cluster(&ctx.client, ic.as_ref()).await?;
    // Paused, a deleted InMemoryCluster keeps its workload API server until the object is gone
    // (see `stop_removed_workloads`): `capictl move` deletes it here while the cluster lives on
    // in the target.
    let (is_paused, paused) = common::paused(cluster.as_ref(), &C::kind(&()), ic.annotations());
    if is_paused {
        return common::record_paused(&api, &ic, paused).await;
    }
    if common::deleting(ic.as_ref()) {
        if let Some(name) = ic.labels().get(api::CLUSTER_NAME_LABEL) {
            ctx.workloads.stop(&key(&ns, name));
        }
        common::remove_finalizer(&api, ic.as_ref(), C::FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let Some(cluster) = cluster else {
        // The Cluster controller labels the InMemoryCluster once the Cluster refers to it.
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if common::ensure_finalizer(&api, ic.as_ref(), C::FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let ca = match cluster_ca(&ctx.client, &cluster).await {
        Ok(ca) => ca,
        // A CA the user brought that cannot sign: say which and why, and look again later.
        Err(Error::Certs(e @ certs::CertsError::UnusableCa { .. })) => {
            let mut status = ic.status().cloned().unwrap_or_default();
            common::set_conditions(
                C::conditions(&mut status),
                ic.meta().generation,
                vec![
                    paused,
                    NewCondition::new(
                        conditions::types::READY,
                        Status::False,
                        api::in_memory::reasons::CERTIFICATE_AUTHORITY_UNUSABLE,
                    )
                    .message(e.to_string()),
                ],
            );
            common::write_status(&api, &ic.name_any(), ic.status(), &status).await?;
            return Ok(Action::requeue(Duration::from_secs(30)));
        }
        Err(e) => return Err(e),
    };
    let port = ic.endpoint_port().map(|p| p as u16);
    let workload = ctx
        .workloads
        .ensure(&key(&ns, &cluster.name_any()), &ca, port)
        .await
        .map_err(|e| Error::Invalid(e.to_string()))?;
    let endpoint = json!({"host": "127.0.0.1", "port": workload.address.port()});
    if ic.endpoint_port() != Some(i32::from(workload.address.port())) {
        common::patch_merge(
            &api,
            &ic.name_any(),
            json!({"spec": {"controlPlaneEndpoint": endpoint}}),
        )
        .await?;
        return Ok(Action::await_change());
    }
    let status = cluster_status(ic.as_ref(), paused);
    common::write_status(&api, &ic.name_any(), ic.status(), &status).await?;
    Ok(Action::requeue(common::spread(ic.as_ref(), common::RESYNC)))
}

/// A running simulated cluster's status: provisioned, its failure domains, Ready.
fn cluster_status<C: SimulatedCluster>(ic: &C, paused: NewCondition) -> C::Status {
    let mut status = ic.provisioned();
    let ready = NewCondition::new(
        conditions::types::READY,
        Status::True,
        conditions::reasons::READY,
    );
    common::set_conditions(
        C::conditions(&mut status),
        ic.meta().generation,
        vec![paused, ready],
    );
    status
}

/// A stable number in [0, 1) per machine, so that its jitter does not change between reconciles.
fn seed(uid: &str) -> f64 {
    let h = uid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    f64::from(h) / f64::from(u32::MAX)
}

pub async fn reconcile_machine<M: SimulatedMachine>(
    im: Arc<M>,
    ctx: Arc<InMemory>,
) -> Result<Action> {
    if !im.simulated() {
        return Ok(Action::await_change());
    }
    let ns = im.namespace().unwrap_or_default();
    let api: Api<M> = Api::namespaced(ctx.client.clone(), &ns);
    let machine_ref = im
        .owner_references()
        .iter()
        .find(|r| r.kind == "Machine")
        .cloned();
    let cluster = common::labelled_cluster(&ctx.client, im.as_ref()).await?;
    let workload = cluster
        .as_ref()
        .and_then(|c| ctx.workloads.get(&key(&ns, &c.name_any())));
    if common::deleting(im.as_ref()) {
        // Paused (a move deleting the source's objects), the machine stays a member.
        if common::paused(cluster.as_ref(), &M::kind(&()), im.annotations()).0 {
            return Ok(Action::await_change());
        }
        if let Some(w) = &workload {
            w.etcd.leave(&im.name_any());
        }
        common::remove_finalizer(&api, im.as_ref(), M::FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let (Some(machine_ref), Some(cluster)) = (machine_ref, cluster) else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    let Some(machine) = Api::<Machine>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&machine_ref.name)
        .await?
    else {
        return Ok(Action::requeue(Duration::from_secs(1)));
    };
    if common::ensure_finalizer(&api, im.as_ref(), M::FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let (is_paused, paused) = common::paused(Some(&cluster), &M::kind(&()), im.annotations());
    let boot = boot_state(
        im.as_ref(),
        &machine,
        &cluster,
        is_paused,
        workload.is_some(),
        Timestamp::now(),
    );

    // Phases: a booted machine has its Node (and, on a control plane, its etcd member).
    if let (Boot::Running, Some(workload)) = (&boot, &workload) {
        let control_plane = machine.labels().contains_key(api::CONTROL_PLANE_LABEL);
        let provider_id = provider_id(im.as_ref());
        ensure_node(
            &workload.client,
            &im.name_any(),
            &provider_id,
            machine.spec.version.as_deref().unwrap_or_default(),
            control_plane,
        )
        .await?;
        if control_plane {
            workload.etcd.join(&im.name_any());
        }
        if im.provider_id() != Some(provider_id.as_str()) {
            common::patch_merge(
                &api,
                &im.name_any(),
                json!({"spec": {"providerID": provider_id}}),
            )
            .await?;
            return Ok(Action::await_change());
        }
    }

    // Status.
    let status = machine_status(im.as_ref(), &machine, paused, &boot);
    common::write_status(&api, &im.name_any(), im.status(), &status).await?;
    Ok(match boot {
        Boot::Waiting { requeue, .. } => Action::requeue(requeue),
        // After a restart of this process, the first reconcile of every machine finds its
        // workload cluster gone and waits for it, then makes the Node again; a running
        // machine has nothing to look at until then.
        Boot::Running => Action::requeue(common::spread(im.as_ref(), common::RESYNC)),
    })
}

/// The providerID of an in-memory machine.
fn provider_id<M: Resource>(im: &M) -> String {
    format!(
        "in-memory://{}/{}",
        im.namespace().unwrap_or_default(),
        im.name_any()
    )
}

/// Where a simulated machine stands.
#[derive(Debug, PartialEq)]
enum Boot {
    /// Not running yet: its Ready condition says what it waits for; when to look again.
    Waiting {
        condition: NewCondition,
        requeue: Duration,
    },
    Running,
}

/// What a simulated machine waits for, in order: reconciliation unpaused, the cluster's
/// infrastructure, (for workers) an initialized control plane, bootstrap data, the workload
/// API server, then its boot time (`spec.behaviour`, jittered per machine).
fn boot_state<M: SimulatedMachine>(
    im: &M,
    machine: &Machine,
    cluster: &Cluster,
    paused: bool,
    workload_running: bool,
    now: Timestamp,
) -> Boot {
    let waiting = |reason: &str, message: &str, requeue_secs: f64| Boot::Waiting {
        condition: NewCondition::new(conditions::types::READY, Status::False, reason)
            .message(message),
        requeue: Duration::from_secs_f64(requeue_secs),
    };
    let init = cluster
        .status
        .as_ref()
        .and_then(|s| s.initialization.clone())
        .unwrap_or_default();
    let control_plane = machine.labels().contains_key(api::CONTROL_PLANE_LABEL);
    if paused {
        return waiting(conditions::reasons::PAUSED, "Reconciliation is paused", 2.0);
    }
    if init.infrastructure_provisioned != Some(true) {
        return waiting(
            api::in_memory::reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY,
            "Waiting for Cluster status.initialization.infrastructureProvisioned",
            2.0,
        );
    }
    if !control_plane && init.control_plane_initialized != Some(true) {
        return waiting(
            api::in_memory::reasons::WAITING_FOR_CONTROL_PLANE_INITIALIZED,
            "Waiting for the control plane to be initialized",
            2.0,
        );
    }
    if machine.spec.bootstrap.data_secret_name.is_none() {
        return waiting(
            api::in_memory::reasons::WAITING_FOR_BOOTSTRAP_DATA,
            "Waiting for Machine spec.bootstrap.dataSecretName",
            2.0,
        );
    }
    if !workload_running {
        return waiting(
            api::in_memory::reasons::WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY,
            "Waiting for the workload API server of the InMemoryCluster",
            1.0,
        );
    }
    // Booted once (it has its providerID): after a move or a restart, the creation time says
    // nothing about when the machine came up.
    if im.provider_id().is_some() {
        return Boot::Running;
    }
    let created = im
        .meta()
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let boot = boot_seconds(
        im.behaviour(),
        control_plane,
        seed(&im.uid().unwrap_or_default()),
    );
    let elapsed = (now.as_second() - created.as_second()) as f64;
    if elapsed < boot {
        return waiting(
            api::in_memory::reasons::PROVISIONING,
            &format!(
                "The machine is booting ({:.0}s of {boot:.0}s)",
                elapsed.max(0.0)
            ),
            boot - elapsed,
        );
    }
    Boot::Running
}

/// The InMemoryMachine's status: what it waits for, or provisioned with its addresses.
fn machine_status<M: SimulatedMachine>(
    im: &M,
    machine: &Machine,
    paused: NewCondition,
    boot: &Boot,
) -> M::Status {
    let mut status = im.status().cloned().unwrap_or_default();
    let ready = match boot {
        Boot::Waiting { condition, .. } => condition.clone(),
        Boot::Running => {
            M::running(
                &mut status,
                serde_json::from_value(json!([
                    {"type": "Hostname", "address": im.name_any()},
                    {"type": "InternalIP", "address": "127.0.0.1"},
                ]))
                .expect("addresses"),
                machine.spec.failure_domain.clone(),
            );
            NewCondition::new(
                conditions::types::READY,
                Status::True,
                conditions::reasons::READY,
            )
        }
    };
    common::set_conditions(
        M::conditions(&mut status),
        im.meta().generation,
        vec![paused, ready],
    );
    status
}

/// Registers the machine's Node in its workload cluster: Ready, with the kubelet version. A
/// control plane first gets what kubeadm and kubelet would leave there: its static Pods'
/// mirror Pods, Running and Ready, and `kube-system/kubeadm-config` (which tells the control
/// plane provider the cluster is initialized). The Node comes last, so its presence means
/// everything is there.
async fn ensure_node(
    client: &Client,
    name: &str,
    provider_id: &str,
    version: &str,
    control_plane: bool,
) -> Result<()> {
    let nodes: Api<Node> = Api::all(client.clone());
    if nodes.get_opt(name).await?.is_some() {
        return Ok(());
    }
    let now = crate::apiserver::object::now();
    if control_plane {
        let pods: Api<Pod> = Api::namespaced(client.clone(), "kube-system");
        for component in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "etcd",
        ] {
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": format!("{component}-{name}"), "labels": {"component": component, "tier": "control-plane"}},
                "spec": {"nodeName": name, "containers": [{"name": component, "image": format!("registry.k8s.io/{component}:{version}")}]},
                "status": {
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
                    "containerStatuses": [{"name": component, "image": "", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {"startedAt": now}}}],
                },
            }))
            .expect("a mirror Pod");
            create_unless_there(&pods, &pod).await?;
        }
        let kubeadm_config: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "kubeadm-config"},
            "data": {"ClusterConfiguration": format!("apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: {version}\n")},
        }))
        .expect("a ConfigMap");
        create_unless_there(
            &Api::namespaced(client.clone(), "kube-system"),
            &kubeadm_config,
        )
        .await?;
    }
    let mut labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]);
    let mut taints = Vec::new();
    if control_plane {
        labels.insert(
            "node-role.kubernetes.io/control-plane".into(),
            String::new(),
        );
        taints
            .push(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}));
    }
    let condition = |t: &str, s: &str, reason: &str| json!({"type": t, "status": s, "reason": reason, "lastTransitionTime": now, "lastHeartbeatTime": now});
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"providerID": provider_id, "taints": taints},
        "status": {
            "conditions": [
                condition("Ready", "True", "KubeletReady"),
                condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                condition("PIDPressure", "False", "KubeletHasSufficientPID"),
            ],
            "nodeInfo": {
                "kubeletVersion": version, "kubeProxyVersion": version, "architecture": "amd64", "operatingSystem": "linux",
                "osImage": "capictl in-memory", "kernelVersion": "", "containerRuntimeVersion": "in-memory://", "bootID": "", "machineID": "", "systemUUID": ""
            },
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        }
    }))
    .expect("a Node");
    create_unless_there(&nodes, &node).await
}

/// Creates `object`; one that is already there (made before a restart) is kept.
async fn create_unless_there<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_simulated_machine_waits_for() {
        let now: Timestamp = "2026-12-01T00:00:30Z".parse().unwrap();
        let im: InMemoryMachine = serde_json::from_value(json!({
            "metadata": {"name": "m", "namespace": "ns", "uid": "u", "creationTimestamp": "2026-12-01T00:00:00Z"},
            "spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "60s"}}}},
        }))
        .unwrap();
        let machine = |control_plane: bool, data: bool| -> Machine {
            let labels = if control_plane {
                json!({(api::CONTROL_PLANE_LABEL): ""})
            } else {
                json!({})
            };
            let bootstrap = if data {
                json!({"dataSecretName": "m"})
            } else {
                json!({})
            };
            serde_json::from_value(json!({
                "metadata": {"name": "m", "labels": labels},
                "spec": {"clusterName": "c", "bootstrap": bootstrap, "infrastructureRef": {"apiGroup": "g", "kind": "InMemoryMachine", "name": "m"}},
            }))
            .unwrap()
        };
        let cluster = |infra: bool, cp: bool| -> Cluster {
            serde_json::from_value(json!({
                "metadata": {"name": "c"}, "spec": {},
                "status": {"initialization": {"infrastructureProvisioned": infra, "controlPlaneInitialized": cp}},
            }))
            .unwrap()
        };
        let reason = |boot: Boot| match boot {
            Boot::Waiting { condition, .. } => condition.reason,
            Boot::Running => "Running".into(),
        };
        // (case, machine, cluster, paused, workload API server running, expected reason)
        let cases = [
            (
                "paused",
                machine(true, true),
                cluster(true, true),
                true,
                true,
                "Paused",
            ),
            (
                "no infrastructure yet",
                machine(true, true),
                cluster(false, false),
                false,
                true,
                "WaitingForClusterInfrastructureReady",
            ),
            (
                "a worker waits for the control plane",
                machine(false, true),
                cluster(true, false),
                false,
                true,
                "WaitingForControlPlaneInitialized",
            ),
            (
                "a control plane does not",
                machine(true, true),
                cluster(true, false),
                false,
                true,
                "Provisioning",
            ),
            (
                "no bootstrap data",
                machine(true, false),
                cluster(true, true),
                false,
                true,
                "WaitingForBootstrapData",
            ),
            (
                "no workload API server",
                machine(true, true),
                cluster(true, true),
                false,
                false,
                "WaitingForClusterInfrastructureReady",
            ),
        ];
        for (case, m, c, paused, running, want) in cases {
            assert_eq!(
                reason(boot_state(&im, &m, &c, paused, running, now)),
                want,
                "{case}"
            );
        }
        // Booting: 30 s of about 60 s (jittered per machine) gone, so it looks again then.
        match boot_state(
            &im,
            &machine(false, true),
            &cluster(true, true),
            false,
            true,
            now,
        ) {
            Boot::Waiting { condition, requeue } => {
                assert!(
                    condition
                        .message
                        .starts_with("The machine is booting (30s of "),
                    "{}",
                    condition.message
                );
                assert!(
                    requeue > Duration::from_secs(0) && requeue <= Duration::from_secs(60),
                    "{requeue:?}"
                );
            }
            Boot::Running => panic!("booted before its startup duration"),
        }
        let later: Timestamp = "2026-12-01T00:05:00Z".parse().unwrap();
        assert_eq!(
            boot_state(
                &im,
                &machine(false, true),
                &cluster(true, true),
                false,
                true,
                later
            ),
            Boot::Running
        );
        let status = machine_status(
            &im,
            &machine(false, true),
            NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused"),
            &Boot::Running,
        );
        assert_eq!(
            status.initialization.and_then(|i| i.provisioned),
            Some(true)
        );
        assert_eq!(status.addresses.map(|a| a.len()), Some(2));
    }

    #[test]
    fn a_running_simulated_cluster_is_provisioned_and_ready() {
        let ic: InMemoryCluster = serde_json::from_value(json!({
            "metadata": {"name": "c", "generation": 2},
            "spec": {"failureDomains": [{"name": "fd-1", "controlPlane": true}]},
        }))
        .unwrap();
        let status = cluster_status(
            &ic,
            NewCondition::new(conditions::types::PAUSED, Status::False, "NotPaused"),
        );
        assert_eq!(
            status.initialization.and_then(|i| i.provisioned),
            Some(true)
        );
        assert_eq!(status.failure_domains, ic.spec.failure_domains);
        let conditions = status.conditions.unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.observed_generation),
            ("True", Some(2))
        );
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == "Paused" && c.status == "False")
        );
    }

    #[test]
    fn boot_time_adds_the_parts_a_machine_has() {
        let behaviour: InMemoryMachineBehaviour = serde_json::from_value(json!({
            "vm": {"provisioning": {"startupDuration": "10s", "startupJitter": "0.2"}},
            "node": {"provisioning": {"startupDuration": "2s"}},
            "apiServer": {"provisioning": {"startupDuration": "2s"}},
            "etcd": {"provisioning": {"startupDuration": "3s"}},
        }))
        .unwrap();
        assert_eq!(boot_seconds(Some(&behaviour), false, 0.0), 12.0);
        assert_eq!(boot_seconds(Some(&behaviour), true, 0.0), 15.0);
        assert_eq!(
            boot_seconds(Some(&behaviour), false, 1.0),
            14.0,
            "jitter stretches the VM by up to 20%"
        );
        assert_eq!(boot_seconds(None, true, 0.5), 0.0);
    }
}
