//! MachinePool: a pool of simulated machines (DevMachinePool, in-memory back end) joining with
//! one KubeadmConfig comes up with a Machine and a Node per instance, scales up and down
//! (draining through its Machines), replaces its instances for a new version and a changed
//! back end, and takes everything with it when deleted.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use capictl::api::{CrdSet, DevMachine, DevMachinePool, KubeadmConfig, Machine, MachinePool};

use crate::common::fixtures::{apply_in_memory_cluster, in_memory_topology, until_available};
use crate::common::lifecycle::*;

pub const POOL: &str = "k1-pool-0";

pub fn pool_objects(replicas: i32) -> [Value; 3] {
    [
        json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": POOL}, "spec": {"joinConfiguration": {"nodeRegistration": {}}},
        }),
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePool",
            "metadata": {"name": POOL},
            "spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "0s"}}}}},
        }),
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": POOL},
            "spec": {
                "clusterName": "k1", "replicas": replicas,
                "template": {
                    "metadata": {"labels": {"pool": "zero"}},
                    "spec": {
                        "clusterName": "k1", "version": "v1.30.4",
                        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": POOL}},
                        "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachinePool", "name": POOL},
                    },
                },
            },
        }),
    ]
}

/// The pool's Machines, by name.
pub async fn pool_machines(client: &kube::Client) -> Vec<Machine> {
    let mut machines = Api::<Machine>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("cluster.x-k8s.io/pool-name={POOL}")))
        .await
        .unwrap()
        .items;
    machines.sort_by_key(|m| m.metadata.name.clone());
    machines
}

/// Waits until the pool runs `n` ready, up-to-date instances of `version`, each with its Node,
/// and returns its Machines.
pub async fn until_running(client: &kube::Client, n: i32, version: &str) -> Vec<Machine> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let what = format!("the pool runs {n} ready instances of {version}");
    until(&what, 90, async || {
        let status = pools.get(POOL).await.ok()?.status?;
        let machines = pool_machines(client).await;
        let settled = status.ready_replicas == Some(n)
            && status.up_to_date_replicas == Some(n)
            && status.replicas == Some(n)
            && status.node_refs.as_ref().map_or(0, Vec::len) == n as usize
            && machines.len() == n as usize
            && machines
                .iter()
                .all(|m| m.spec.version.as_deref() == Some(version) && machine_ready(m));
        settled.then_some(machines)
    })
    .await
}

/// The workload cluster's Nodes whose provider IDs are the pool's.
async fn pool_nodes(client: &kube::Client, workload: &kube::Client) -> Vec<String> {
    let pool = Api::<MachinePool>::namespaced(client.clone(), NS)
        .get(POOL)
        .await
        .unwrap();
    let ids = pool.spec.provider_id_list.unwrap_or_default();
    let mut names: Vec<String> = Api::<Node>::all(workload.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|n| {
            n.spec
                .as_ref()
                .and_then(|s| s.provider_id.as_ref())
                .is_some_and(|id| ids.contains(id))
        })
        .filter_map(|n| n.metadata.name)
        .collect();
    names.sort();
    names
}

async fn scale(client: &kube::Client, replicas: i32) {
    Api::<MachinePool>::namespaced(client.clone(), NS)
        .patch(
            POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_pool_scales_rolls_and_goes_with_its_instances() {
    let client = management(&[
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
        CrdSet::Docker,
    ])
    .await;
    apply_in_memory_cluster(&client, "k1", "v1.30.4", 1, 0).await;
    until_available(&client, "k1", 120).await;
    for object in pool_objects(2) {
        apply(&client, object).await;
    }

    // Two instances, each a DevMachine with a Machine owned by the pool, joined as Nodes
    // with the pool's one bootstrap Secret.
    let machines = until_running(&client, 2, "v1.30.4").await;
    let pool = Api::<MachinePool>::namespaced(client.clone(), NS)
        .get(POOL)
        .await
        .unwrap();
    let data = pool.spec.template.spec.bootstrap.data_secret_name.clone();
    let config = Api::<KubeadmConfig>::namespaced(client.clone(), NS)
        .get(POOL)
        .await
        .unwrap();
    assert_eq!(data, config.status.and_then(|s| s.data_secret_name));
    for m in &machines {
        assert_eq!(m.spec.bootstrap.data_secret_name, data, "{m:?}");
        let owner = &m.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.controller),
            ("MachinePool", Some(true))
        );
        assert_eq!(m.metadata.labels.as_ref().unwrap()["pool"], "zero");
    }
    let status = pool.status.unwrap();
    assert_eq!(
        serde_json::to_value(status.phase).unwrap(),
        "Running",
        "{status:?}"
    );
    let workload = workload(&client, "k1").await;
    assert_eq!(pool_nodes(&client, &workload).await.len(), 2);
    let dev_pool = Api::<DevMachinePool>::namespaced(client.clone(), NS)
        .get(POOL)
        .await
        .unwrap();
    let dev_status = dev_pool.status.unwrap();
    assert_eq!(
        dev_status.infrastructure_machine_kind.as_deref(),
        Some("DevMachine")
    );
    assert_eq!(dev_status.instances.map(|i| i.len()), Some(2));

    // Up to three, down to one: the Nodes follow.
    scale(&client, 3).await;
    until_running(&client, 3, "v1.30.4").await;
    assert_eq!(pool_nodes(&client, &workload).await.len(), 3);
    scale(&client, 1).await;
    let kept = until_running(&client, 1, "v1.30.4").await;
    until("the removed instances' Nodes are gone", 60, async || {
        (pool_nodes(&client, &workload).await.len() == 1).then_some(())
    })
    .await;

    // A new version replaces the instance, new one first.
    Api::<MachinePool>::namespaced(client.clone(), NS)
        .patch(
            POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "v1.30.5"}}}})),
        )
        .await
        .unwrap();
    let rolled = until_running(&client, 1, "v1.30.5").await;
    assert_ne!(rolled[0].metadata.name, kept[0].metadata.name);
    let versions = Api::<MachinePool>::namespaced(client.clone(), NS)
        .get(POOL)
        .await
        .unwrap()
        .status
        .unwrap()
        .versions;
    assert_eq!(
        serde_json::to_value(versions).unwrap(),
        json!([{"version": "v1.30.5", "replicas": 1}])
    );

    // A changed back end (the pool's template rolled in place) replaces it too.
    Api::<DevMachinePool>::namespaced(client.clone(), NS)
        .patch(
            POOL,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "1s"}}}}}})),
        )
        .await
        .unwrap();
    until(
        "the instance is made with the new back end",
        60,
        async || {
            let machines = pool_machines(&client).await;
            let instances = Api::<DevMachine>::namespaced(client.clone(), NS)
                .list(&ListParams::default().labels(&format!("cluster.x-k8s.io/pool-name={POOL}")))
                .await
                .ok()?
                .items;
            let replaced = machines.len() == 1
                && machines[0].metadata.name != rolled[0].metadata.name
                && machine_ready(&machines[0])
                && instances.len() == 1
                && instances[0]
                    .spec
                    .backend
                    .in_memory
                    .as_ref()
                    .and_then(|b| b.vm.as_ref())
                    .is_some_and(|vm| {
                        vm.provisioning
                            .as_ref()
                            .and_then(|p| p.startup_duration.as_deref())
                            == Some("1s")
                    });
            replaced.then_some(())
        },
    )
    .await;

    // Deleted, the pool takes its infrastructure, bootstrap config, Machines and Nodes.
    Api::<MachinePool>::namespaced(client.clone(), NS)
        .delete(POOL, &DeleteParams::default())
        .await
        .unwrap();
    until("the pool and all of its objects are gone", 60, async || {
        let gone = Api::<MachinePool>::namespaced(client.clone(), NS)
            .get_opt(POOL)
            .await
            .ok()?
            .is_none()
            && Api::<DevMachinePool>::namespaced(client.clone(), NS)
                .get_opt(POOL)
                .await
                .ok()?
                .is_none()
            && Api::<KubeadmConfig>::namespaced(client.clone(), NS)
                .get_opt(POOL)
                .await
                .ok()?
                .is_none()
            && pool_machines(&client).await.is_empty();
        gone.then_some(())
    })
    .await;
    let nodes = Api::<Node>::all(workload.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(nodes.len(), 1, "only the control plane's Node is left");
}

/// A ClusterClass with a `machinePools` class: the topology makes the pool, its KubeadmConfig
/// and DevMachinePool from the class's templates, and upgrades it after the control plane.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_pool_comes_up_and_upgrades_after_the_control_plane() {
    use capictl::api::KubeadmControlPlane;
    let client = management(&[
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
        CrdSet::Docker,
    ])
    .await;
    apply(
        &client,
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePoolTemplate",
            "metadata": {"name": "in-memory-pool"},
            "spec": {"template": {"spec": {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "0s"}}}}}}},
        }),
    )
    .await;
    for mut doc in in_memory_topology("t1", "v1.30.4") {
        if doc["kind"] == "ClusterClass" {
            doc["spec"]["workers"]["machinePools"] = json!([{
                "class": "pool",
                "bootstrap": {"templateRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate", "name": "in-memory-default-worker-bootstraptemplate"}},
                "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePoolTemplate", "name": "in-memory-pool"}},
            }]);
        }
        if doc["kind"] == "Cluster" {
            doc["spec"]["topology"]["workers"]["machinePools"] =
                json!([{"class": "pool", "name": "mp-0", "replicas": 2}]);
        }
        apply(&client, doc).await;
    }
    until_available(&client, "t1", 120).await;
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let pool = async || -> Option<MachinePool> {
        pools
            .list(&ListParams::default().labels("topology.cluster.x-k8s.io/pool-name=mp-0"))
            .await
            .ok()?
            .items
            .into_iter()
            .next()
    };
    let running = |version: &'static str| {
        let (pool, client) = (&pool, &client);
        async move || {
            let p = pool().await?;
            let status = p.status.as_ref()?;
            let machines = pool_machines_of(client, p.metadata.name.as_deref()?).await;
            if machines.len() != 2
                || machines
                    .iter()
                    .any(|m| m.spec.version.as_deref() != Some(version))
            {
                return None;
            }
            (p.spec.template.spec.version.as_deref() == Some(version)
                && status.observed_generation == p.metadata.generation
                && status.ready_replicas == Some(2)
                && status.up_to_date_replicas == Some(2)
                && status.replicas == Some(2))
            .then_some(p)
        }
    };
    let p = until(
        "the topology's pool runs 2 instances",
        90,
        running("v1.30.4"),
    )
    .await;
    let name = p.metadata.name.clone().unwrap();
    assert!(name.starts_with("t1-mp-0-"), "{name}");
    let spec = &p.spec.template.spec;
    let config = spec.bootstrap.config_ref.as_ref().unwrap();
    assert_eq!(config.kind, "KubeadmConfig");
    assert_eq!(spec.infrastructure_ref.kind, "DevMachinePool");
    let infra = Api::<DevMachinePool>::namespaced(client.clone(), NS)
        .get(&spec.infrastructure_ref.name)
        .await
        .unwrap();
    let annotations = infra.metadata.annotations.unwrap_or_default();
    assert_eq!(
        annotations["cluster.x-k8s.io/cloned-from-name"],
        "in-memory-pool"
    );

    // A pool of a class the ClusterClass lacks is refused, naming the field and the classes.
    let clusters: Api<capictl::api::Cluster> = Api::namespaced(client.clone(), NS);
    let unknown = json!({"spec": {"topology": {"workers": {"machinePools": [{"class": "nope", "name": "mp-1"}]}}}});
    let refused = clusters
        .patch("t1", &PatchParams::default(), &Patch::Merge(&unknown))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("spec.topology.workers.machinePools[0].class")
            && refused.contains("MachinePool class \"nope\" is not defined")
            && refused.contains("it has: pool"),
        "{refused}"
    );

    // A new version: the control plane first, then the pool.
    clusters
        .patch(
            "t1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"topology": {"version": "v1.31.0"}}})),
        )
        .await
        .unwrap();
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), NS);
    until(
        "the pool is at v1.31.0 only after the control plane",
        180,
        async || {
            let p = pool().await?;
            if p.spec.template.spec.version.as_deref() != Some("v1.31.0") {
                return None;
            }
            let kcp = kcps.list(&ListParams::default()).await.ok()?.items.pop()?;
            let cp_versions = serde_json::to_value(kcp.status?.versions).ok()?;
            assert_eq!(
                cp_versions,
                json!([{"version": "v1.31.0", "replicas": 1}]),
                "the pool moved while the control plane was not done"
            );
            Some(())
        },
    )
    .await;
    until(
        "the pool runs 2 instances of v1.31.0",
        120,
        running("v1.31.0"),
    )
    .await;
}

async fn pool_machines_of(client: &kube::Client, pool: &str) -> Vec<Machine> {
    Api::<Machine>::namespaced(client.clone(), NS)
        .list(&ListParams::default().labels(&format!("cluster.x-k8s.io/pool-name={pool}")))
        .await
        .unwrap()
        .items
}
