//! The boot simulation: how long a machine takes to start (its configured start-up durations
//! and jitter), where its boot is, and the Node it registers in the workload cluster.

use super::*;
use crate::node::pods::{CONFIG_MIRROR_ANNOTATION, CONFIG_SOURCE_ANNOTATION};

/// What each simulated Node has: KWOK's node size, room for what a test schedules. Machine
/// templates report it too, for the cluster autoscaler's scaling from zero.
pub const SIMULATED_CAPACITY: [(&str, &str); 3] =
    [("cpu", "32"), ("memory", "256Gi"), ("pods", "110")];

fn simulated_capacity() -> serde_json::Value {
    SIMULATED_CAPACITY
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
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

/// How long one part of a machine takes to start: its duration, stretched by up to `jitter`.
pub(super) fn startup(part: Option<&InMemoryStartup>, seed: f64) -> f64 {
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

/// A stable number in [0, 1) per machine, so that its jitter does not change between reconciles.
pub(super) fn seed(uid: &str) -> f64 {
    let h = uid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    f64::from(h) / f64::from(u32::MAX)
}

/// Where a simulated machine stands.
#[derive(Debug, PartialEq)]
pub(super) enum Boot {
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
pub(super) fn boot_state<M: SimulatedMachine>(
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
        // When it will be up, not how far it got: the condition is written once and the
        // next look is when it is up, so a count of seconds would be stale at once.
        let up_at = created
            .checked_add(std::time::Duration::from_secs_f64(boot))
            .unwrap_or(created)
            .round(k8s_openapi::jiff::Unit::Second)
            .unwrap_or(created);
        return waiting(
            api::in_memory::reasons::PROVISIONING,
            &format!("The machine is booting ({boot:.0}s from its creation): up at {up_at}"),
            boot - elapsed,
        );
    }
    Boot::Running
}

/// Registers the machine's Node in its workload cluster: Ready, with the kubelet version. A
/// control plane first gets what kubeadm and kubelet would leave there: its static Pods'
/// mirror Pods, Running and Ready, and `kube-system/kubeadm-config` (which tells the control
/// plane provider the cluster is initialized). The Node comes last, so its presence means
/// everything is there.
pub(super) async fn ensure_node(
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
                // A mirror Pod, as kubelet marks it: not a workload (drains skip it, and it
                // does not wake the cluster's scheduler and controllers).
                "metadata": {
                    "name": format!("{component}-{name}"),
                    "labels": {"component": component, "tier": "control-plane"},
                    "annotations": {(CONFIG_MIRROR_ANNOTATION): crate::node::static_pods::hash(&format!("{component}:{version}")), (CONFIG_SOURCE_ANNOTATION): "file"},
                },
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
            "capacity": simulated_capacity(),
            "allocatable": simulated_capacity(),
        }
    }))
    .expect("a Node");
    create_unless_there(&nodes, &node).await
}

/// Creates `object`; one that is already there (made before a restart) is kept.
pub(super) async fn create_unless_there<K>(api: &Api<K>, object: &K) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
