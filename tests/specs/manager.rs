//! The manager and leader election.

use std::time::Duration;

use kube::api::Api;

use capictl::api::CrdSet;
use capictl::manager;

use crate::common::lifecycle::*;

#[tokio::test]
async fn one_manager_leads_at_a_time() {
    use capictl::reconcile::leader::{LeaderElection, Timings};
    let client = api_server().await;
    let timings = Timings::scaled(Duration::from_secs(1));
    let a = LeaderElection::new(client.clone(), NS, "leader", "a", timings);
    let b = LeaderElection::new(client.clone(), NS, "leader", "b", timings);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manager_stopped_while_it_starts_its_controllers_stops() {
    let client = management_without_controllers(&[CrdSet::Core, CrdSet::InMemory]).await;
    // Stopped while it is still starting its providers' controllers (as `management down`
    // right after `up` does): it must return, never hang.
    let stopped = tokio::time::timeout(
        Duration::from_secs(20),
        manager::run(client, manager::Options::default(), async {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }),
    )
    .await;
    assert!(stopped.is_ok(), "the manager did not stop within 20 s");
}

/// A manager that starts on a management cluster with objects in it (restarted, or taking
/// over from another) finds them by label from its first reconcile: a MachineSet that saw none
/// of its Machines would make its replicas again.
#[tokio::test]
async fn a_cache_finds_the_objects_of_its_first_list_by_label() {
    use capictl::cache::Cache;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::PostParams;
    let client = api_server().await;
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    for (name, cluster) in [("a", "one"), ("b", "one"), ("c", "two")] {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        }))
        .unwrap();
        config_maps
            .create(&PostParams::default(), &cm)
            .await
            .unwrap();
    }
    let cache = Cache::watch_indexed(config_maps.clone(), "cluster.x-k8s.io/cluster-name");
    let names = |listed: Vec<std::sync::Arc<ConfigMap>>| {
        let mut names: Vec<String> = listed
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect();
        names.sort();
        names
    };
    assert_eq!(
        names(cache.list_labelled(NS, "one", |_| true).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(
        names(cache.list_labelled(NS, "two", |_| true).await.unwrap()),
        ["c"]
    );
    // Objects that come later are found too, and deleted ones are not.
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "d", "labels": {"cluster.x-k8s.io/cluster-name": "two"}},
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    config_maps.delete("c", &Default::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while names(cache.list_labelled(NS, "two", |_| true).await.unwrap()) != ["d"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never showed d alone"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each provider in a manager of its own, as `init` installs them (one Deployment each): the
/// core's Cluster controller still hears of a change of the control plane it mirrors at once,
/// not at its resync ten minutes later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_controllers_hear_of_provider_objects_whose_controllers_run_elsewhere() {
    use capictl::api::{Cluster, KubeadmControlPlane};
    use capictl::apiserver::store::Store;
    use kube::api::{Patch, PatchParams};
    use serde_json::json;

    use crate::common::fixtures::{apply_in_memory_cluster, until_available};

    let running = |sets: &[CrdSet]| manager::Options {
        providers: sets
            .iter()
            .map(|s| s.provider_label().to_string())
            .collect(),
        ..Default::default()
    };
    let client = management_with(
        Store::in_memory(),
        &[
            CrdSet::Core,
            CrdSet::KubeadmBootstrap,
            CrdSet::KubeadmControlPlane,
            CrdSet::InMemory,
        ],
        running(&[CrdSet::Core]),
    )
    .await;
    let providers = running(&[
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
    ]);
    let c = client.clone();
    tokio::spawn(async move { manager::run(c, providers, std::future::pending()).await });
    apply_in_memory_cluster(&client, "split", "v1.31.2", 1, 1).await;
    until_available(&client, "split", 120).await;

    // The control plane, paused, says what only this test writes: the Cluster says it too.
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), NS);
    let name = "split-control-plane";
    kcps.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}})),
    )
    .await
    .unwrap();
    let mut status = until("the control plane is Paused", 30, async || {
        let status = kcps.get(name).await.ok()?.status?;
        condition_true(status.conditions.as_ref(), "Paused").then_some(status)
    })
    .await;
    for c in status.conditions.iter_mut().flatten() {
        if c.type_ == "Available" {
            c.status = "False".into();
            c.reason = "HeldByTest".into();
            c.message = "the test holds it".into();
        }
    }
    kcps.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"conditions": status.conditions}})),
    )
    .await
    .unwrap();
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    until(
        "the Cluster mirrors its control plane's Available",
        30,
        async || {
            let c = clusters.get("split").await.ok()?;
            c.status?
                .conditions?
                .into_iter()
                .any(|c| c.type_ == "ControlPlaneAvailable" && c.message == "the test holds it")
                .then_some(())
        },
    )
    .await;
}
