//! The mover against a source whose controllers are running.

use std::sync::atomic::{AtomicBool, Ordering};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use capictl::api::{Cluster, CrdSet, MachineDeployment};
use capictl::mover::graph::{ObjectRef, Plan};
use capictl::mover::{self, Endpoint, Options, Outcome};

use crate::common::fixtures::{apply_in_memory_cluster, available_cluster, until_available};
use crate::common::lifecycle::*;
use crate::machine_pool::{POOL, pool_machines, pool_objects, until_running};

/// Labels the CRDs as `capictl init` does, for the move to find their kinds.
async fn label_for_clusterctl(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in crds.list(&ListParams::default()).await.unwrap() {
        let labels = json!({"metadata": {"labels": {(capictl::api::CLUSTERCTL_LABEL): ""}}});
        crds.patch(
            &crd.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&labels),
        )
        .await
        .unwrap();
    }
}

/// Deletes the Secret `c1-proxy` from the source once the move has discovered it, as a
/// controller or a user may delete any object while a move starts.
struct DeletesAfterDiscovery {
    secrets: Api<Secret>,
    deleted: AtomicBool,
}

impl mover::Progress for DeletesAfterDiscovery {
    fn step(&self, line: &str) {
        if line == "Pausing the source cluster" && !self.deleted.swap(true, Ordering::SeqCst) {
            let secrets = self.secrets.clone();
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current()
                    .block_on(secrets.delete("c1-proxy", &DeleteParams::default()))
                    .unwrap();
            });
        }
    }
    fn phase(&self, _: &str, _: usize) {}
    fn object(&self, _: &str, _: &ObjectRef) {}
    fn phase_done(&self) {}
}

/// Moves Cluster `cluster` from `source` to `target`, a new move: the plan it moved.
async fn move_cluster(
    source: &Client,
    target: &Client,
    cluster: &str,
    progress: &dyn mover::Progress,
) -> Plan {
    let endpoint = |client: &Client, name: &str| Endpoint {
        client: client.clone(),
        name: name.into(),
    };
    let options = Options {
        namespace: NS.into(),
        clusters: vec![cluster.into()],
        dry_run: false,
        force: false,
    };
    let outcome = mover::move_to_cluster(
        &endpoint(source, "source"),
        &endpoint(target, "target"),
        &options,
        progress,
    )
    .await
    .unwrap_or_else(|e| panic!("the move fails: {e}"));
    let Outcome::Moved(plan) = outcome else {
        panic!("a new move moves")
    };
    plan
}

/// What went from the source between the move's first look and the pause is not read back
/// (the move used to fail with "error reading ... not found" and undo itself): the move looks
/// again once the source is paused and takes what is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_while_a_move_starts_does_not_fail_it() {
    let source = available_cluster(1).await;
    label_for_clusterctl(&source).await;
    let secrets: Api<Secret> = Api::namespaced(source.clone(), NS);
    let proxy: Secret =
        serde_json::from_value(json!({"metadata": {"name": "c1-proxy"}, "stringData": {"k": "v"}}))
            .unwrap();
    secrets
        .create(&PostParams::default(), &proxy)
        .await
        .unwrap();
    let target = management_without_controllers(&[CrdSet::Core, CrdSet::InMemory]).await;
    let progress = DeletesAfterDiscovery {
        secrets,
        deleted: AtomicBool::new(false),
    };
    let plan = move_cluster(&source, &target, "c1", &progress).await;
    assert!(
        progress.deleted.load(Ordering::SeqCst),
        "the Secret was deleted mid-move"
    );
    assert!(
        !plan.nodes().any(|n| n.object.name == "c1-proxy"),
        "the plan moved holds what the source had once paused"
    );
    let moved_cluster = Api::<Cluster>::namespaced(target.clone(), NS)
        .get_opt("c1")
        .await;
    assert!(
        moved_cluster.unwrap().is_some(),
        "the Cluster is in the target"
    );
    let moved_pool = Api::<MachineDeployment>::namespaced(target.clone(), NS)
        .get_opt("md-0")
        .await;
    assert!(moved_pool.unwrap().is_some(), "its MachineDeployment too");
    let left = Api::<Cluster>::namespaced(source, NS).get_opt("c1").await;
    assert!(
        left.unwrap().is_none(),
        "nothing of it is left in the source"
    );
}

/// A move that shows nothing.
struct Silent;

impl mover::Progress for Silent {
    fn step(&self, _: &str) {}
    fn phase(&self, _: &str, _: usize) {}
    fn object(&self, _: &str, _: &ObjectRef) {}
    fn phase_done(&self) {}
}

/// A MachinePool moves with its Cluster: its KubeadmConfig, DevMachinePool, instances and their
/// Machines go over as they are, and the target runs the same instances, none made anew.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_pool_moves_with_its_instances() {
    let sets = [
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
        CrdSet::Docker,
    ];
    let source = management(&sets).await;
    apply_in_memory_cluster(&source, "k1", "v1.30.4", 1, 0).await;
    until_available(&source, "k1", 120).await;
    for object in pool_objects(2) {
        apply(&source, object).await;
    }
    let names = |machines: Vec<capictl::api::Machine>| -> Vec<String> {
        machines.into_iter().map(|m| m.name_any()).collect()
    };
    let before = names(until_running(&source, 2, "v1.30.4").await);
    label_for_clusterctl(&source).await;
    let target = management(&sets).await;
    let plan = move_cluster(&source, &target, "k1", &Silent).await;
    for kind in [
        "MachinePool",
        "DevMachinePool",
        "KubeadmConfig",
        "DevMachine",
    ] {
        assert!(
            plan.nodes().any(|n| n.object.kind == kind),
            "the plan moves the pool's {kind}"
        );
    }
    assert!(
        pool_machines(&source).await.is_empty(),
        "nothing of the pool is left in the source"
    );
    until_available(&target, "k1", 120).await;
    let after = names(until_running(&target, 2, "v1.30.4").await);
    assert_eq!(after, before, "the same instances run in the target");
    let pool = Api::<capictl::api::MachinePool>::namespaced(target.clone(), NS)
        .get(POOL)
        .await
        .unwrap();
    assert_eq!(pool.spec.provider_id_list.map(|l| l.len()), Some(2));
}
