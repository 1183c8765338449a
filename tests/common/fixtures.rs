//! Builders for the objects the specifications apply, and a cluster brought up to Available:
//! one place for what a test Cluster, Machine or MachineDeployment looks like.

use kube::Client;
use kube::api::Api;
use serde_json::{Value, json};

use capictl::api::{Cluster, CrdSet};

use super::lifecycle::{NS, apply, condition_true, management, until};

const INFRASTRUCTURE: &str = "infrastructure.cluster.x-k8s.io";

/// A Cluster on the in-memory provider.
pub fn cluster(name: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name},
        "spec": {"infrastructureRef": {"apiGroup": INFRASTRUCTURE, "kind": "InMemoryCluster", "name": name}}
    })
}

pub fn in_memory_cluster(name: &str) -> Value {
    json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryCluster", "metadata": {"name": name}, "spec": {}})
}

/// A simulated machine that boots in `startup`, e.g. `1s`.
pub fn in_memory_machine(name: &str, startup: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachine", "metadata": {"name": name},
        "spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": startup}}}}
    })
}

/// A template of simulated machines that boot at once.
pub fn in_memory_machine_template(name: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachineTemplate",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "0s"}}}}}}
    })
}

/// A stand-alone control-plane Machine (no control-plane provider) of `cluster`, on the
/// in-memory machine of the same name.
pub fn control_plane_machine(cluster: &str, name: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": name, "labels": {"cluster.x-k8s.io/control-plane": ""}},
        "spec": {
            "clusterName": cluster, "version": "v1.30.4", "bootstrap": {"dataSecretName": format!("{cluster}-bootstrap")},
            "infrastructureRef": {"apiGroup": INFRASTRUCTURE, "kind": "InMemoryMachine", "name": name}
        }
    })
}

/// A MachineDeployment of `replicas` workers labelled `pool: <name>`, rolling out one at a
/// time (maxSurge 1, maxUnavailable 0), on the in-memory machine template `template`.
pub fn machine_deployment(cluster: &str, name: &str, replicas: i32, template: &str) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": name},
        "spec": {
            "clusterName": cluster, "replicas": replicas,
            "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
            "selector": {"matchLabels": {"pool": name}},
            "template": {
                "metadata": {"labels": {"pool": name}},
                "spec": {
                    "clusterName": cluster, "version": "v1.30.4", "bootstrap": {"dataSecretName": format!("{cluster}-bootstrap")},
                    "infrastructureRef": {"apiGroup": INFRASTRUCTURE, "kind": "InMemoryMachineTemplate", "name": template}
                }
            }
        }
    })
}

/// A MachineHealthCheck of the Machines with these labels: a Node not Ready for `seconds` is
/// unhealthy.
pub fn machine_health_check(cluster: &str, name: &str, labels: Value, seconds: i64) -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck", "metadata": {"name": name},
        "spec": {
            "clusterName": cluster, "selector": {"matchLabels": labels},
            "checks": {"unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": seconds}]}
        }
    })
}

/// An embedded management cluster with the core and in-memory controllers, and on it the
/// cluster `c1`: one stand-alone control-plane Machine `c1-cp-0` and the MachineDeployment
/// `md-0` of `workers` (template `c1-workers-v1`), up to Available.
pub async fn available_cluster(workers: i32) -> Client {
    let client = management(&[CrdSet::Core, CrdSet::InMemory]).await;
    apply_c1(
        &client,
        machine_deployment("c1", "md-0", workers, "c1-workers-v1"),
    )
    .await;
    until_available(&client, "c1", 60).await;
    client
}

/// Applies the cluster `c1` (one stand-alone control-plane Machine `c1-cp-0`, the machine
/// template `c1-workers-v1`) with `workers`, a MachineDeployment or MachineSet of them.
pub async fn apply_c1(client: &Client, workers: Value) {
    for object in [
        cluster("c1"),
        in_memory_cluster("c1"),
        in_memory_machine("c1-cp-0", "1s"),
        control_plane_machine("c1", "c1-cp-0"),
        in_memory_machine_template("c1-workers-v1"),
        workers,
    ] {
        apply(client, object).await;
    }
}

/// Waits until the Cluster `name` is Available.
pub async fn until_available(client: &Client, name: &str, seconds: u64) {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    until("the Cluster is Available", seconds, async || {
        let c = clusters.get(name).await.ok()?;
        condition_true(c.status.as_ref()?.conditions.as_ref(), "Available").then_some(())
    })
    .await;
}

/// An embedded management cluster with the core, kubeadm and in-memory controllers, and on it
/// the cluster `k1` generated from the in-memory flavor at `version` with `control_planes`
/// control-plane Machines (KubeadmControlPlane `k1-control-plane`) and two workers
/// (MachineDeployment `k1-md-0`), up to Available with every control-plane Machine Ready.
/// A management cluster with the core, kubeadm and in-memory providers running.
pub async fn kubeadm_management() -> Client {
    management(&[
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
    ])
    .await
}

/// The in-memory flavor's objects for cluster `name`, machines starting at once.
pub async fn apply_in_memory_cluster(
    client: &Client,
    name: &str,
    version: &str,
    control_planes: i32,
    workers: i32,
) {
    for doc in in_memory_flavor(name, version, control_planes, workers) {
        apply(client, doc).await;
    }
}

/// The in-memory flavor's objects for cluster `name`, to change before applying.
pub fn in_memory_flavor(
    name: &str,
    version: &str,
    control_planes: i32,
    workers: i32,
) -> Vec<Value> {
    let template = capictl::generate::flavor("in-memory", "").unwrap();
    let (control_planes, workers) = (control_planes.to_string(), workers.to_string());
    let vars = |key: &str| -> Option<String> {
        match key {
            "CLUSTER_NAME" => Some(name.into()),
            "NAMESPACE" => Some(NS.into()),
            "KUBERNETES_VERSION" => Some(version.into()),
            "CONTROL_PLANE_MACHINE_COUNT" => Some(control_planes.clone()),
            "WORKER_MACHINE_COUNT" => Some(workers.clone()),
            "VM_STARTUP_DURATION" | "NODE_STARTUP_DURATION" => Some("0s".into()),
            _ => None,
        }
    };
    let text = capictl::generate::render(template, NS, &vars).unwrap();
    capictl::yaml::from_multiple(&text).unwrap()
}

/// The in-memory flavor with its ClusterClass (`--flavor topology`) for the cluster `name`:
/// one control-plane Machine and one worker of `version`, machines starting at once.
pub fn in_memory_topology(name: &str, version: &str) -> Vec<Value> {
    let template = capictl::generate::flavor_with_class("in-memory", "topology").unwrap();
    let vars = |key: &str| -> Option<String> {
        match key {
            "CLUSTER_NAME" => Some(name.into()),
            "NAMESPACE" => Some(NS.into()),
            "KUBERNETES_VERSION" => Some(version.into()),
            "CONTROL_PLANE_MACHINE_COUNT" | "WORKER_MACHINE_COUNT" => Some("1".into()),
            "VM_STARTUP_DURATION" | "NODE_STARTUP_DURATION" => Some("0s".into()),
            _ => None,
        }
    };
    let text = capictl::generate::render(&template, NS, &vars).unwrap();
    capictl::yaml::from_multiple(&text).unwrap()
}

pub async fn kubeadm_cluster(control_planes: i32, version: &str) -> Client {
    use capictl::api::KubeadmControlPlane;
    let client = kubeadm_management().await;
    apply_in_memory_cluster(&client, "k1", version, control_planes, 2).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    until("the Cluster is Available", 120, async || {
        let c = clusters.get("k1").await.ok()?;
        condition_true(c.status.as_ref()?.conditions.as_ref(), "Available").then_some(())
    })
    .await;
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), NS);
    until("every control-plane Machine is Ready", 90, async || {
        let s = kcps.get("k1-control-plane").await.ok()?.status?;
        (s.ready_replicas == Some(control_planes) && s.replicas == Some(control_planes))
            .then_some(())
    })
    .await;
    client
}

/// Marks a workload cluster's Node NotReady, as a kubelet that stopped posting leaves it.
pub async fn node_not_ready(workload: &Client, node: &str) {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let now = capictl::apiserver::object::now();
    Api::<Node>::all(workload.clone())
        .patch_status(node, &PatchParams::default(), &Patch::Merge(json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "KubeletDown", "message": "kubelet stopped posting", "lastTransitionTime": now, "lastHeartbeatTime": now}
        ]}})))
        .await
        .unwrap();
}

/// A MachineHealthCheck of the cluster's workers (`<cluster>-md-0`), which honours the
/// remediation annotation, as YAML.
pub fn worker_health_check(cluster: &str) -> String {
    format!(
        "apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineHealthCheck\nmetadata:\n  name: {cluster}-md-0\n  namespace: default\nspec:\n  clusterName: {cluster}\n  selector:\n    matchLabels:\n      cluster.x-k8s.io/deployment-name: {cluster}-md-0\n  checks:\n    unhealthyNodeConditions:\n    - type: Ready\n      status: \"False\"\n      timeoutSeconds: 300\n"
    )
}

/// The kubectl commands that ask for the cluster's control plane and workers at `version`,
/// as a user patches them.
pub fn upgrade_commands(cluster: &str, version: &str) -> [Vec<String>; 2] {
    let patch = |kind: &str, name: String, patch: String| {
        ["patch", kind, &name, "--type", "merge", "-p", &patch]
            .map(String::from)
            .to_vec()
    };
    [
        patch(
            "kcp",
            format!("{cluster}-control-plane"),
            format!(r#"{{"spec":{{"version":"{version}"}}}}"#),
        ),
        patch(
            "md",
            format!("{cluster}-md-0"),
            format!(r#"{{"spec":{{"template":{{"spec":{{"version":"{version}"}}}}}}}}"#),
        ),
    ]
}

/// A PodDisruptionBudget `web` in the workload cluster's default namespace wanting
/// `min_available` Pods labelled `app: web`.
pub async fn web_budget(
    workload: &Client,
    min_available: i32,
) -> Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> {
    let budgets = Api::namespaced(workload.clone(), "default");
    let budget = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}}
    }))
    .unwrap();
    budgets
        .create(&kube::api::PostParams::default(), &budget)
        .await
        .unwrap();
    budgets
}

/// A Pod bound to `node` in the workload cluster's default namespace, reported Running and
/// Ready as a kubelet would.
pub async fn running_pod(workload: &Client, name: &str, labels: Value, node: &str) {
    use kube::api::{Patch, PatchParams, PostParams};
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(workload.clone(), "default");
    let pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "c"}]}
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let ready = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(ready))
        .await
        .unwrap();
}
