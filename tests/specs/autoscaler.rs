//! The cluster autoscaler (`--autoscaler`): a MachineDeployment annotated as a node group grows
//! from its minimum toward its maximum while Pods fit no Node, stops at the maximum saying so,
//! and shrinks back to its minimum once its Nodes run nothing (to zero, and up from zero by its
//! capacity annotations); a MachineDeployment written without replicas gets its minimum, and
//! keeps what the autoscaler set when written again.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use capictl::api::{Cluster, CrdSet, MachineDeployment};
use capictl::apiserver::store::Store;

use crate::common::fixtures::{apply_c1, in_memory_topology, machine_deployment, until_available};
use crate::common::lifecycle::*;

/// A management cluster with the controllers of `sets` and the autoscaler running.
async fn autoscaled_management(sets: &[CrdSet]) -> kube::Client {
    let options = capictl::manager::Options {
        autoscaler: true,
        ..Default::default()
    };
    management_with(Store::in_memory(), sets, options).await
}

/// `replicas` Pods of 20 CPUs each: one per in-memory Node of 32.
fn big(replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": "big"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "big"}},
            "template": {
                "metadata": {"labels": {"app": "big"}},
                "spec": {"containers": [{"name": "big", "image": "big:1", "resources": {"requests": {"cpu": "20"}}}]},
            },
        },
    }))
    .unwrap()
}

async fn replicas(deployments: &Api<MachineDeployment>) -> (Option<i32>, Option<i32>) {
    let md = deployments.get("md-0").await.unwrap();
    (md.spec.replicas, md.status.and_then(|s| s.ready_replicas))
}

async fn event_notes(client: &kube::Client, reason: &str) -> Vec<String> {
    Api::<Event>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter_map(|e| e.message)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_group_grows_for_pending_pods_and_shrinks_back_within_its_bounds() {
    let client = autoscaled_management(&[CrdSet::Core, CrdSet::InMemory]).await;
    // A node group of 1 to 3 workers, written without replicas.
    let mut md = machine_deployment("c1", "md-0", 1, "c1-workers-v1");
    md["spec"].as_object_mut().unwrap().remove("replicas");
    md["metadata"]["annotations"] = json!({
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3",
        "cluster.x-k8s.io/autoscaling-options-scaledownunneededtime": "5s",
    });
    apply_c1(&client, md).await;
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    assert_eq!(
        replicas(&deployments).await.0,
        Some(1),
        "defaulted to the minimum"
    );
    until_available(&client, "c1", 60).await;

    // Three Pods of 20 of a Node's 32 CPUs: one fits the worker, two wait for Nodes.
    let workload = workload(&client, "c1").await;
    let apps: Api<Deployment> = Api::namespaced(workload.clone(), "default");
    apps.create(&PostParams::default(), &big(3)).await.unwrap();
    until(
        "the group grows to 3 and the Deployment is available",
        90,
        async || {
            let ready = apps.get("big").await.ok()?.status?.available_replicas;
            (replicas(&deployments).await == (Some(3), Some(3)) && ready == Some(3)).then_some(())
        },
    )
    .await;
    let up = event_notes(&client, "TriggeredScaleUp").await;
    assert!(
        up.iter()
            .any(|n| n.contains("fit no Node: scaling from 1 to 3 replicas (max 3)")),
        "{up:?}"
    );

    // A fourth Pod finds the group at its maximum, which stays.
    apps.patch(
        "big",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    let at_max = until(
        "the autoscaler says the group is at its maximum",
        60,
        async || {
            let notes = event_notes(&client, "NotTriggerScaleUp").await;
            (!notes.is_empty()).then_some(notes)
        },
    )
    .await;
    assert!(
        at_max[0].contains("at its maximum of 3 replicas"),
        "{at_max:?}"
    );
    assert_eq!(replicas(&deployments).await.0, Some(3));

    // Re-applying the MachineDeployment without replicas (a GitOps sync) keeps the
    // autoscaler's count.
    deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": null}})),
        )
        .await
        .unwrap();
    assert_eq!(replicas(&deployments).await.0, Some(3));

    // The Pods go: the empty Nodes go, one at a time, down to the minimum and no further.
    apps.delete("big", &DeleteParams::default()).await.unwrap();
    until("the group shrinks back to 1", 120, async || {
        (replicas(&deployments).await == (Some(1), Some(1))).then_some(())
    })
    .await;
    let down = event_notes(&client, "ScaleDown").await;
    assert!(
        down.iter()
            .any(|n| n.contains("scaling from 2 to 1 replicas (min 1)")),
        "{down:?}"
    );
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    assert_eq!(
        replicas(&deployments).await.0,
        Some(1),
        "never below the minimum"
    );

    // Allowed down to zero, the group empties; a Pod that needs a Node brings one back,
    // although there is no Node left to copy, by the capacity its machine template reports.
    let templates: Api<capictl::api::InMemoryMachineTemplate> = Api::namespaced(client.clone(), NS);
    let capacity = templates
        .get("c1-workers-v1")
        .await
        .unwrap()
        .status
        .unwrap()
        .capacity
        .unwrap();
    assert_eq!(capacity["cpu"].0, "32");
    let annotations = json!({"metadata": {"annotations": {
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
    }}});
    deployments
        .patch("md-0", &PatchParams::default(), &Patch::Merge(annotations))
        .await
        .unwrap();
    until("the group shrinks to 0", 60, async || {
        (replicas(&deployments).await.0 == Some(0)).then_some(())
    })
    .await;
    apps.create(&PostParams::default(), &big(1)).await.unwrap();
    until("the group grows from 0 and the Pod runs", 90, async || {
        let ready = apps.get("big").await.ok()?.status?.available_replicas;
        (replicas(&deployments).await == (Some(1), Some(1)) && ready == Some(1)).then_some(())
    })
    .await;
    let up = event_notes(&client, "TriggeredScaleUp").await;
    assert!(
        up.iter()
            .any(|n| n.contains("scaling from 0 to 1 replicas (max 3)")),
        "{up:?}"
    );
}

/// A ClusterClass topology that leaves a MachineDeployment's replicas to the autoscaler: the
/// topology controller, applying the MachineDeployment again after a change of the Cluster,
/// keeps the count the autoscaler set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_leaves_an_autoscaled_node_group_its_replicas() {
    let sets = [
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
    ];
    let client = autoscaled_management(&sets).await;
    for mut doc in in_memory_topology("t1", "v1.30.4") {
        if doc["kind"] == "Cluster" {
            let md = &mut doc["spec"]["topology"]["workers"]["machineDeployments"][0];
            md.as_object_mut().unwrap().remove("replicas");
            md["metadata"] = json!({"annotations": {
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
                "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "2",
            }});
        }
        apply(&client, doc).await;
    }
    until_available(&client, "t1", 120).await;
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let group = async || -> Option<MachineDeployment> {
        let selector = "topology.cluster.x-k8s.io/deployment-name=md-0";
        deployments
            .list(&ListParams::default().labels(selector))
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    };
    assert_eq!(group().await.unwrap().spec.replicas, Some(1), "the minimum");

    // Two Pods of 20 CPUs: the group grows to its maximum of 2.
    let workload = workload(&client, "t1").await;
    let apps: Api<Deployment> = Api::namespaced(workload, "default");
    apps.create(&PostParams::default(), &big(2)).await.unwrap();
    until("the group grows to 2", 90, async || {
        (group().await?.spec.replicas == Some(2)).then_some(())
    })
    .await;

    // The Cluster's topology changes; the topology controller applies the MachineDeployment
    // again and leaves its replicas as the autoscaler set them.
    let labelled = json!([{"op": "add", "path": "/spec/topology/workers/machineDeployments/0/metadata/labels", "value": {"tier": "web"}}]);
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    clusters
        .patch(
            "t1",
            &PatchParams::default(),
            &Patch::<()>::Json(serde_json::from_value(labelled).unwrap()),
        )
        .await
        .unwrap();
    let md = until("the topology applied the new label", 60, async || {
        group().await.filter(|md| {
            md.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("tier"))
                .map(String::as_str)
                == Some("web")
        })
    })
    .await;
    assert_eq!(
        md.spec.replicas,
        Some(2),
        "the topology kept the autoscaler's count"
    );
}

/// A node group of `c1` (of 1 to 2), written without replicas, starts at its minimum, then
/// grows to 2 for two Pods of 20 CPUs, which both run.
async fn grows_from_one_to_two(
    client: &kube::Client,
    kind: &str,
    replicas: impl AsyncFn() -> Option<i32>,
) {
    assert_eq!(replicas().await, Some(1), "the minimum");
    until_available(client, "c1", 60).await;
    let workload = workload(client, "c1").await;
    let apps: Api<Deployment> = Api::namespaced(workload, "default");
    apps.create(&PostParams::default(), &big(2)).await.unwrap();
    let what = format!("the {kind} grows to 2 and both Pods run");
    until(&what, 90, async || {
        let ready = apps.get("big").await.ok()?.status?.available_replicas;
        (replicas().await == Some(2) && ready == Some(2)).then_some(())
    })
    .await;
}

/// A MachineSet no MachineDeployment owns is a node group too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_set_of_its_own_is_a_node_group_too() {
    let client = autoscaled_management(&[CrdSet::Core, CrdSet::InMemory]).await;
    let mut set = machine_deployment("c1", "ms-0", 1, "c1-workers-v1");
    set["kind"] = json!("MachineSet");
    set["spec"].as_object_mut().unwrap().remove("rollout");
    set["spec"].as_object_mut().unwrap().remove("replicas");
    set["metadata"]["annotations"] = json!({
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "2",
    });
    apply_c1(&client, set).await;
    let sets: Api<capictl::api::MachineSet> = Api::namespaced(client.clone(), NS);
    grows_from_one_to_two(&client, "MachineSet", async || {
        sets.get("ms-0").await.ok()?.spec.replicas
    })
    .await;
}

/// A MachinePool is a node group too: its instances' Machines are the group's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_pool_is_a_node_group_too() {
    let client = autoscaled_management(&[CrdSet::Core, CrdSet::InMemory, CrdSet::Docker]).await;
    apply(
        &client,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePool",
            "metadata": {"name": "mp-0"},
            "spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "0s"}}}}},
        }),
    )
    .await;
    let pool = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "mp-0", "annotations": {
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "1",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "2",
        }},
        "spec": {
            "clusterName": "c1",
            "template": {"spec": {
                "clusterName": "c1", "version": "v1.30.4",
                "bootstrap": {"dataSecretName": "c1-bootstrap"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachinePool", "name": "mp-0"},
            }},
        },
    });
    apply_c1(&client, pool).await;
    let pools: Api<capictl::api::MachinePool> = Api::namespaced(client.clone(), NS);
    grows_from_one_to_two(&client, "MachinePool", async || {
        pools.get("mp-0").await.ok()?.spec.replicas
    })
    .await;
}
