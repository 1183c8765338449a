//! The Machine controller.

use k8s_openapi::api::core::v1::{Node, PersistentVolume, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use capictl::api::Machine;

use crate::common::fixtures::{available_cluster, running_pod, web_budget};
use crate::common::lifecycle::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_finds_its_node_and_runs() {
    let client = available_cluster(2).await;
    // The workload cluster answers with the Cluster's kubeconfig, and has the Nodes.
    let nodes: Api<Node> = Api::all(workload(&client, "c1").await);
    let names = until("3 Nodes are registered", 20, async || {
        let list = nodes.list(&ListParams::default()).await.ok()?;
        (list.items.len() == 3).then(|| list.items.iter().map(|n| n.name_any()).collect::<Vec<_>>())
    })
    .await;
    assert!(names.contains(&"c1-cp-0".to_string()));
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let cp = machines.get("c1-cp-0").await.unwrap();
    let status = cp.status.as_ref().unwrap();
    assert_eq!(status.node_ref.as_ref().unwrap().name, "c1-cp-0");
    assert_eq!(
        cp.spec.provider_id.as_deref(),
        Some("in-memory://default/c1-cp-0")
    );
    assert_eq!(status.phase.as_deref(), Some("Running"));
    // The Node carries the Machine's annotations, the uninitialized taint gone.
    let node = nodes.get("c1-cp-0").await.unwrap();
    assert_eq!(
        node.annotations()
            .get("cluster.x-k8s.io/machine")
            .map(String::as_str),
        Some("c1-cp-0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disruption_budget_holds_a_drain_until_the_node_drain_timeout() {
    let client = available_cluster(1).await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let workload_client = workload(&client, "c1").await;
    let (worker, node) = worker_and_node(&machines).await;
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    running_pod(&workload_client, "web", json!({"app": "web"}), &node).await;
    let budgets = web_budget(&workload_client, 1).await;
    machines
        .delete(&worker.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    // The drain goes through the Eviction API: the budget holds the Machine, and its Deleting
    // condition says which budget and which Pod.
    let held = until("the drain is held by the budget", 20, async || {
        let m = machines.get(&worker.name_any()).await.ok()?;
        let deleting = m
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Deleting")?;
        deleting
            .message
            .contains("The disruption budget web needs 1 healthy pods")
            .then_some(deleting)
    })
    .await;
    assert_eq!(held.reason, "DrainingNode");
    assert!(held.message.contains("Pod default/web"), "{}", held.message);
    assert!(
        pods.get_opt("web").await.unwrap().is_some(),
        "the Pod stays"
    );
    // The budget still refuses; once the Machine's nodeDrainTimeout has passed since the drain
    // started, the Machine goes without its Pod evicted.
    machines
        .patch(
            &worker.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deletion": {"nodeDrainTimeoutSeconds": 3}}})),
        )
        .await
        .unwrap();
    until(
        "the Machine is gone after its drain timeout",
        20,
        async || {
            machines
                .get_opt(&worker.name_any())
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
    assert!(
        budgets.get_opt("web").await.unwrap().is_some(),
        "the budget was never relaxed"
    );
    // Its Node is gone, the Pod not evicted (Pod garbage collection takes it 40 s later).
    assert!(
        pods.get_opt("web").await.unwrap().is_some(),
        "the Pod was evicted"
    );
}

/// The worker of `available_cluster` with its Node's name, once it has one.
async fn worker_and_node(machines: &Api<Machine>) -> (Machine, String) {
    let worker = until("the worker has its Node", 20, async || {
        let m = machines
            .list(&ListParams::default().labels("pool=md-0"))
            .await
            .ok()?
            .items
            .pop()?;
        m.status.as_ref()?.node_ref.is_some().then_some(m)
    })
    .await;
    let node = worker
        .status
        .as_ref()
        .unwrap()
        .node_ref
        .as_ref()
        .unwrap()
        .name
        .clone();
    (worker, node)
}

/// The Machine's Deleting condition once `check` holds for it.
async fn deleting_when(
    machines: &Api<Machine>,
    name: &str,
    what: &str,
    check: impl Fn(&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition) -> bool,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    until(what, 30, async || {
        let m = machines.get(name).await.ok()?;
        let deleting = m
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Deleting")?;
        check(&deleting).then_some(deleting)
    })
    .await
}

async fn machine_gone(machines: &Api<Machine>, name: &str) {
    until("the Machine is gone", 30, async || {
        machines.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_drain_rules_and_the_drain_label_order_and_skip_pods() {
    let client = available_cluster(1).await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let workload_client = workload(&client, "c1").await;
    let (worker, node) = worker_and_node(&machines).await;
    // Databases go last, after everything else has left the Node.
    apply(
        &client,
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDrainRule",
            "metadata": {"name": "databases-last"},
            "spec": {"drain": {"behavior": "Drain", "order": 10}, "pods": [{"selector": {"matchLabels": {"app": "db"}}}]}
        }),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    for (name, labels) in [
        ("web", json!({"app": "web"})),
        ("db", json!({"app": "db"})),
        (
            "kept",
            json!({"app": "web", "cluster.x-k8s.io/drain": "skip"}),
        ),
    ] {
        running_pod(&workload_client, name, labels, &node).await;
    }
    // Two Pods labelled app=web and a budget wanting two of them: web cannot go.
    let budgets = web_budget(&workload_client, 2).await;
    machines
        .delete(&worker.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let held = deleting_when(&machines, &worker.name_any(), "the first round is held by the budget", |c| {
        c.message.contains("* Pod default/web: cannot evict pod as it would violate the pod's disruption budget.")
    })
    .await;
    assert_eq!(held.reason, "DrainingNode");
    assert!(
        held.message.ends_with(
            "\nAfter above Pods have been removed from the Node, the following Pods will be evicted: default/db"
        ),
        "{}",
        held.message
    );
    assert!(!held.message.contains("kept"), "{}", held.message);
    for name in ["db", "kept"] {
        let pod = pods.get(name).await.unwrap();
        assert!(
            pod.metadata.deletion_timestamp.is_none(),
            "{name} was evicted in the first round"
        );
    }
    // Relaxed, the budget lets web go; then db goes; kept stays.
    budgets
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    until("db is evicted", 30, async || {
        let db = pods.get_opt("db").await.ok()?;
        db.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
            .then_some(())
    })
    .await;
    machine_gone(&machines, &worker.name_any()).await;
    let kept = pods.get("kept").await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "the skipped Pod was evicted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_waits_for_its_nodes_volumes_to_detach() {
    let client = available_cluster(1).await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let workload_client = workload(&client, "c1").await;
    let (worker, node) = worker_and_node(&machines).await;
    let volumes: Api<PersistentVolume> = Api::all(workload_client.clone());
    volumes
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "pv-data"},
                "spec": {
                    "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                    "csi": {"driver": "disk.example", "volumeHandle": "vol-1"},
                    "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "data"}
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let attachments: Api<VolumeAttachment> = Api::all(workload_client.clone());
    attachments
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "va-1"},
                "spec": {"attacher": "disk.example", "nodeName": node, "source": {"persistentVolumeName": "pv-data"}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    attachments
        .patch_status(
            "va-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"attached": true}})),
        )
        .await
        .unwrap();
    machines
        .delete(&worker.name_any(), &DeleteParams::default())
        .await
        .unwrap();
    let waiting = deleting_when(
        &machines,
        &worker.name_any(),
        "the Machine waits for the volume",
        |c| c.reason == "WaitingForVolumeDetach",
    )
    .await;
    assert!(
        waiting
            .message
            .starts_with("Waiting for Node volumes to be detached (started at ")
            && waiting
                .message
                .ends_with(")\n* PersistentVolumeClaims: default/data"),
        "{}",
        waiting.message
    );
    let machine = machines.get(&worker.name_any()).await.unwrap();
    let deletion = machine.status.unwrap().deletion.unwrap();
    assert!(deletion.wait_for_node_volume_detach_start_time.is_some());
    assert!(
        deletion.node_drain_start_time.is_some(),
        "the drain came first"
    );
    // Detached, the volume no longer holds the Machine.
    attachments
        .delete("va-1", &DeleteParams::default())
        .await
        .unwrap();
    machine_gone(&machines, &worker.name_any()).await;
}

/// The Node's taints as `key=value:Effect`, and its taints-from-machine annotation.
async fn node_taints(nodes: &Api<Node>, name: &str) -> Option<(Vec<String>, Option<String>)> {
    let node = nodes.get(name).await.ok()?;
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.clone())
        .unwrap_or_default()
        .iter()
        .map(|t| {
            format!(
                "{}={}:{}",
                t.key,
                t.value.clone().unwrap_or_default(),
                t.effect
            )
        })
        .collect();
    let owned = node
        .annotations()
        .get("cluster.x-k8s.io/taints-from-machine")
        .cloned();
    Some((taints, owned))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machines_taints_reach_its_node_and_follow_its_changes() {
    let client = available_cluster(1).await;
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let nodes: Api<Node> = Api::all(workload(&client, "c1").await);
    let (worker, node) = worker_and_node(&machines).await;
    // The Machine's nodeRef can come before its first sync of the Node; taints written before
    // that sync find a new Node, which gets the OnInitialization taint too.
    until("the Node initialized by its Machine", 30, async || {
        node_taints(&nodes, &node).await?.1.map(|_| ())
    })
    .await;
    let taints = json!({"spec": {"taints": [
        {"key": "pool", "value": "gpu", "effect": "NoSchedule", "propagation": "Always"},
        {"key": "warm", "value": "up", "effect": "NoSchedule", "propagation": "OnInitialization"},
    ]}});
    machines
        .patch(
            &worker.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&taints),
        )
        .await
        .unwrap();
    // Always taints follow the Machine; OnInitialization ones only reach a new Node.
    until("the Always taint on the Node", 60, async || {
        let (taints, owned) = node_taints(&nodes, &node).await?;
        (taints == ["pool=gpu:NoSchedule"] && owned.as_deref() == Some("pool:NoSchedule"))
            .then_some(())
    })
    .await;
    let dropped = json!({"spec": {"taints": null}});
    machines
        .patch(
            &worker.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&dropped),
        )
        .await
        .unwrap();
    until("the taint gone with the Machine's", 60, async || {
        let (taints, owned) = node_taints(&nodes, &node).await?;
        (taints.is_empty() && owned.as_deref() == Some("")).then_some(())
    })
    .await;

    // From the MachineDeployment's template the taints reach the Machine in place (no
    // rollout): its initialized Node gets the Always one only; a new Machine's new Node, both.
    let deployments: Api<capictl::api::MachineDeployment> = Api::namespaced(client.clone(), NS);
    let template_taints = json!({"spec": {"template": {"spec": taints["spec"]}}});
    deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(&template_taints),
        )
        .await
        .unwrap();
    until(
        "the Machine's taints from its template, its Node's Always taint",
        90,
        async || {
            let m = machines.get(&worker.name_any()).await.ok()?;
            let (taints, owned) = node_taints(&nodes, &node).await?;
            (m.spec.taints.as_ref()?.len() == 2
                && taints == ["pool=gpu:NoSchedule"]
                && owned.as_deref() == Some("pool:NoSchedule"))
            .then_some(())
        },
    )
    .await;
    let one_more = json!({"spec": {"replicas": 2}});
    deployments
        .patch("md-0", &PatchParams::default(), &Patch::Merge(&one_more))
        .await
        .unwrap();
    until("the new worker's Node with both taints", 120, async || {
        let list = machines
            .list(&ListParams::default().labels("pool=md-0"))
            .await
            .ok()?;
        let new = list
            .items
            .iter()
            .find(|m| m.name_any() != worker.name_any())?;
        let node = new.status.as_ref()?.node_ref.as_ref()?.name.clone();
        let (mut taints, owned) = node_taints(&nodes, &node).await?;
        taints.sort();
        (taints == ["pool=gpu:NoSchedule", "warm=up:NoSchedule"]
            && owned.as_deref() == Some("pool:NoSchedule"))
        .then_some(())
    })
    .await;
    assert_eq!(
        machines
            .list(&ListParams::default().labels("pool=md-0"))
            .await
            .unwrap()
            .items
            .len(),
        2,
        "no rollout: the first worker is still there"
    );
}
