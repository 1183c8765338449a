//! The Machine controller.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use capictl::api::Machine;

use crate::common::fixtures::available_cluster;
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
    let pods: Api<Pod> = Api::namespaced(workload_client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "web"}]}
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    pods.patch_status(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})),
    )
    .await
    .unwrap();
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(workload_client.clone(), "default");
    budgets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "web"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
            }))
            .unwrap(),
        )
        .await
        .unwrap();
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
