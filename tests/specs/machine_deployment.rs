//! The MachineDeployment and MachineSet controllers.

use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use capictl::api::{Machine, MachineDeployment, MachineSet};

use crate::common::fixtures::{available_cluster, in_memory_machine_template};
use crate::common::lifecycle::*;

/// Sets md-0's replicas and waits until it has that many available replicas and live Machines.
async fn scale_to(client: &kube::Client, replicas: i32) {
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
    let workers = ListParams::default().labels("pool=md-0");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_up_and_down() {
    let client = available_cluster(2).await;
    scale_to(&client, 3).await;
    scale_to(&client, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_rolls_through_without_dropping_below_desired() {
    let client = available_cluster(2).await;
    scale_to(&client, 2).await;
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let sets: Api<MachineSet> = Api::namespaced(client.clone(), NS);
    apply(&client, in_memory_machine_template("c1-workers-v2")).await;
    // A version without its "v" gets it, as upstream's webhook defaults it.
    let md = deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "1.31.0", "infrastructureRef": {"name": "c1-workers-v2"}}}}})),
        )
        .await
        .unwrap();
    assert_eq!(md.spec.template.spec.version.as_deref(), Some("v1.31.0"));
    let workers = ListParams::default().labels("pool=md-0");
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_after_replaces_every_machine_made_before_it() {
    // What `clusterctl alpha rollout restart` writes: the node group is rolled, its template
    // unchanged.
    let client = available_cluster(2).await;
    scale_to(&client, 2).await;
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let workers = ListParams::default().labels("pool=md-0");
    let before: Vec<String> = machines
        .list(&workers)
        .await
        .unwrap()
        .items
        .iter()
        .map(|m| m.name_any())
        .collect();
    // In the future first: nothing rolls until it comes.
    let soon =
        k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(3);
    deployments
        .patch(
            "md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"rollout": {"after": soon.to_string()}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let still: Vec<String> = machines
        .list(&workers)
        .await
        .unwrap()
        .items
        .iter()
        .map(|m| m.name_any())
        .collect();
    assert_eq!(still, before, "nothing rolls before rollout.after");
    until(
        "every worker made before rollout.after is replaced",
        60,
        async || {
            let list = machines.list(&workers).await.ok()?.items;
            let live: Vec<&Machine> = list
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none())
                .collect();
            let fresh = live.len() == 2
                && live
                    .iter()
                    .all(|m| !before.contains(&m.name_any()) && machine_available(m));
            fresh.then_some(())
        },
    )
    .await;
    let md = deployments.get("md-0").await.unwrap();
    assert_eq!(md.status.unwrap().up_to_date_replicas, Some(2));
}
