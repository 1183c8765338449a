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
