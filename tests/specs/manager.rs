//! The manager and leader election.

use std::time::Duration;

use kube::api::Api;

use capictl::api::CrdSet;
use capictl::manager;

use crate::common::lifecycle::*;

#[tokio::test]
async fn one_manager_leads_at_a_time() {
    use capictl::reconcile::leader::LeaderElection;
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
