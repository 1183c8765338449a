//! A whole cluster lifecycle on the embedded management cluster with the in-memory provider:
//! creation up to Available, scaling, a rolling template change, remediation by a
//! MachineHealthCheck, and deletion that removes everything.

mod common;

use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use capictl::api::{Cluster, CrdSet, Machine, MachineDeployment, MachineSet};
use common::lifecycle::*;

fn machine_template(name: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachineTemplate",
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "0s"}}}}}}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_lifecycle_on_the_in_memory_provider() {
    let client = management(&[CrdSet::Core, CrdSet::InMemory]).await;
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1"},
        "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryCluster", "name": "c1"}}
    })).await;
    apply(&client, json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryCluster", "metadata": {"name": "c1"}, "spec": {}})).await;
    apply(&client, json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "InMemoryMachine", "metadata": {"name": "c1-cp-0"},
        "spec": {"behaviour": {"vm": {"provisioning": {"startupDuration": "1s"}}}}
    })).await;
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "c1-cp-0", "labels": {"cluster.x-k8s.io/control-plane": ""}},
        "spec": {
            "clusterName": "c1", "version": "v1.30.4", "bootstrap": {"dataSecretName": "c1-bootstrap"},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachine", "name": "c1-cp-0"}
        }
    })).await;
    apply(&client, machine_template("c1-workers-v1")).await;
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": "md-0"},
        "spec": {
            "clusterName": "c1", "replicas": 2,
            "rollout": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
            "selector": {"matchLabels": {"pool": "md-0"}},
            "template": {
                "metadata": {"labels": {"pool": "md-0"}},
                "spec": {
                    "clusterName": "c1", "version": "v1.30.4", "bootstrap": {"dataSecretName": "c1-bootstrap"},
                    "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachineTemplate", "name": "c1-workers-v1"}
                }
            }
        }
    })).await;

    // Creation up to Available.
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    until("the Cluster is Available", 60, async || {
        let c = clusters.get("c1").await.ok()?;
        condition_true(c.status.as_ref()?.conditions.as_ref(), "Available").then_some(())
    })
    .await;
    let cluster = clusters.get("c1").await.unwrap();
    let status = cluster.status.clone().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Provisioned"));
    assert_eq!(status.workers.as_ref().unwrap().available_replicas, Some(2));
    assert_eq!(
        status.control_plane.as_ref().unwrap().ready_replicas,
        Some(1)
    );
    let endpoint = cluster.spec.control_plane_endpoint.clone().unwrap();
    assert_eq!(endpoint.host.as_deref(), Some("127.0.0.1"));
    // The Cluster sums up its Machines and workers as upstream's v1beta2 Cluster does.
    let summary = until("the Cluster sums up its Machines", 20, async || {
        let c = clusters.get("c1").await.ok()?;
        let list = c.status?.conditions?;
        let reason = |t: &str| list.iter().find(|c| c.type_ == t).map(|c| c.reason.clone());
        let got: Vec<Option<String>> = [
            "ControlPlaneMachinesReady",
            "WorkerMachinesReady",
            "WorkerMachinesUpToDate",
            "RollingOut",
            "ScalingUp",
            "Remediating",
        ]
        .iter()
        .map(|t| reason(t))
        .collect();
        (got[1].as_deref() == Some("Ready")).then_some(got)
    })
    .await;
    assert_eq!(
        summary,
        [
            "Ready",
            "Ready",
            "UpToDate",
            "NotRollingOut",
            "NotScalingUp",
            "NotRemediating"
        ]
        .map(|r| Some(r.to_string()))
    );

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
    assert_eq!(
        cp.status.as_ref().unwrap().node_ref.as_ref().unwrap().name,
        "c1-cp-0"
    );
    assert_eq!(
        cp.spec.provider_id.as_deref(),
        Some("in-memory://default/c1-cp-0")
    );
    assert_eq!(
        cp.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );

    // Deleting a worker drains its Node through the Eviction API: a PodDisruptionBudget that
    // would be broken holds the Machine, and the Deleting condition says which one.
    let workload_client = workload(&client, "c1").await;
    let worker = machines
        .list(&ListParams::default().labels("pool=md-0"))
        .await
        .unwrap()
        .items
        .remove(0);
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
    budgets
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    until("the drained Machine is gone", 20, async || {
        machines
            .get_opt(&worker.name_any())
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(pods.get_opt("web").await.unwrap().is_none(), "evicted");

    // Scale up, then down.
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let workers = ListParams::default().labels("pool=md-0");
    for replicas in [3, 1] {
        deployments
            .patch(
                "md-0",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        until(
            &format!("md-0 has {replicas} available replicas and Machines"),
            30,
            async || {
                let md = deployments.get("md-0").await.ok()?;
                let live = machines
                    .list(&workers)
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .filter(|m| m.metadata.deletion_timestamp.is_none())
                    .count();
                let s = md.status?;
                (s.available_replicas == Some(replicas)
                    && s.replicas == Some(replicas)
                    && live == replicas as usize)
                    .then_some(())
            },
        )
        .await;
    }

    // A template change rolls through, never below the desired available count.
    deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    until("md-0 is back at 2", 30, async || {
        let s = deployments.get("md-0").await.ok()?.status?;
        (s.available_replicas == Some(2) && s.replicas == Some(2)).then_some(())
    })
    .await;
    apply(&client, machine_template("c1-workers-v2")).await;
    deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "v1.31.0", "infrastructureRef": {"name": "c1-workers-v2"}}}}})),
        )
        .await
        .unwrap();
    let sets: Api<MachineSet> = Api::namespaced(client.clone(), NS);
    let mut lowest_available = i32::MAX;
    until("the rollout replaces every worker", 60, async || {
        let list = machines.list(&workers).await.ok()?.items;
        let available = list
            .iter()
            .filter(|m| m.metadata.deletion_timestamp.is_none() && machine_available(m))
            .count() as i32;
        lowest_available = lowest_available.min(available);
        let done = list.len() == 2
            && list.iter().all(|m| {
                m.spec.version.as_deref() == Some("v1.31.0")
                    && m.status
                        .as_ref()
                        .and_then(|s| s.node_ref.as_ref())
                        .is_some()
            })
            && sets.list(&ListParams::default()).await.ok()?.items.len() == 1;
        done.then_some(())
    })
    .await;
    assert!(
        lowest_available >= 2,
        "the rollout dropped to {lowest_available} available workers"
    );
    let md = deployments.get("md-0").await.unwrap();
    assert_eq!(
        md.annotations()
            .get("machinedeployment.clusters.x-k8s.io/revision")
            .map(String::as_str),
        Some("2")
    );

    // A Node that goes NotReady is remediated by a MachineHealthCheck.
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck", "metadata": {"name": "md-0-health"},
        "spec": {
            "clusterName": "c1", "selector": {"matchLabels": {"pool": "md-0"}},
            "checks": {"unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 1}]}
        }
    })).await;
    let victim = machines.list(&workers).await.unwrap().items[0].name_any();
    let now = capictl::apiserver::object::now();
    nodes
        .patch_status(&victim, &PatchParams::default(), &Patch::Merge(json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "KubeletDown", "message": "kubelet stopped posting", "lastTransitionTime": now, "lastHeartbeatTime": now}
        ]}})))
        .await
        .unwrap();
    until("the unhealthy Machine is replaced", 60, async || {
        let list = machines.list(&workers).await.ok()?.items;
        let healthy = list.iter().filter(|m| machine_available(m)).count();
        (!list.iter().any(|m| m.name_any() == victim) && healthy == 2).then_some(())
    })
    .await;

    // Deleting the Cluster removes everything it owned.
    clusters
        .delete("c1", &DeleteParams::background())
        .await
        .unwrap();
    until("everything is gone", 60, async || {
        let left = machines
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .len()
            + sets.list(&ListParams::default()).await.ok()?.items.len()
            + deployments
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len()
            + clusters
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len()
            + Api::<Secret>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
}

#[tokio::test]
async fn one_manager_leads_at_a_time() {
    use capictl::controllers::leader::LeaderElection;
    let client = api_server().await;
    let lease = Duration::from_secs(1);
    let a = LeaderElection::new(client.clone(), NS, "leader", "a", lease);
    let b = LeaderElection::new(client.clone(), NS, "leader", "b", lease);
    assert!(a.try_acquire().await.unwrap());
    assert!(
        !b.try_acquire().await.unwrap(),
        "b waits while a holds the Lease"
    );
    assert!(a.try_acquire().await.unwrap(), "a renews");
    // a stops renewing: once the Lease expires, b takes over.
    tokio::time::timeout(Duration::from_secs(5), b.acquire())
        .await
        .expect("b leads after the Lease expires");
    assert!(!a.try_acquire().await.unwrap(), "a has lost the lead");
    // Releasing hands over at once.
    b.release().await;
    assert!(a.try_acquire().await.unwrap());
    let lease: k8s_openapi::api::coordination::v1::Lease =
        Api::namespaced(client, NS).get("leader").await.unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(2));
}
