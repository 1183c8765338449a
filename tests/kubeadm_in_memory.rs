//! The user's flow on the in-memory provider with the kubeadm bootstrap and control plane
//! providers: a cluster generated from the built-in flavor comes up with three control-plane
//! Machines and workers, its bootstrap data is real kubeadm cloud-config, a Kubernetes upgrade
//! replaces control-plane Machines one at a time without dropping below the desired count, and
//! deleting the Cluster removes everything.

mod common;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use capictl::api::{
    Cluster, CrdSet, KubeadmConfig, KubeadmControlPlane, Machine, MachineDeployment,
};
use common::lifecycle::*;

const CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";

async fn apply_generated(client: &Client, cluster: &str, version: &str) {
    let template = capictl::generate::flavor("in-memory", "").unwrap();
    let vars = |name: &str| -> Option<String> {
        match name {
            "CLUSTER_NAME" => Some(cluster.into()),
            "NAMESPACE" => Some(NS.into()),
            "KUBERNETES_VERSION" => Some(version.into()),
            "CONTROL_PLANE_MACHINE_COUNT" => Some("1".into()),
            "WORKER_MACHINE_COUNT" => Some("2".into()),
            "VM_STARTUP_DURATION" | "NODE_STARTUP_DURATION" => Some("0s".into()),
            _ => None,
        }
    };
    let text = capictl::generate::render(template, NS, &vars).unwrap();
    for doc in capictl::yaml::from_multiple::<serde_json::Value>(&text).unwrap() {
        apply(client, doc).await;
    }
}

fn bootstrap_data(secret: &Secret) -> String {
    String::from_utf8(secret.data.as_ref().unwrap()["value"].0.clone()).unwrap()
}

fn ready(m: &Machine) -> bool {
    condition_true(
        m.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Ready",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_upgrade_and_delete_a_kubeadm_cluster() {
    let client = management(&[
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::InMemory,
    ])
    .await;
    apply_generated(&client, "k1", "v1.28.13").await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);

    // Creation: one control-plane Machine and two workers; the Cluster Available.
    until("the Cluster is Available", 120, async || {
        let c = clusters.get("k1").await.ok()?;
        condition_true(c.status.as_ref()?.conditions.as_ref(), "Available").then_some(())
    })
    .await;
    // Even counts are refused (stacked etcd); three control-plane Machines join one at a time.
    let even = kcps
        .patch(
            "k1-control-plane",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap_err();
    assert!(even.to_string().contains("spec.replicas"), "{even}");
    kcps.patch(
        "k1-control-plane",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .unwrap();
    let status = until("three control-plane Machines are Ready", 60, async || {
        let s = kcps.get("k1-control-plane").await.ok()?.status?;
        (s.ready_replicas == Some(3) && s.replicas == Some(3)).then_some(s)
    })
    .await;
    assert_eq!(status.up_to_date_replicas, Some(3));
    assert_eq!(status.version.as_deref(), Some("v1.28.13"));
    assert!(condition_true(
        status.conditions.as_ref(),
        "EtcdClusterHealthy"
    ));
    let all = machines.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(all.len(), 5, "three control-plane Machines and two workers");

    // The cluster's certificates and the admin kubeconfig, kept as upstream keeps them.
    for purpose in ["ca", "etcd", "proxy", "sa", "kubeconfig"] {
        let s = secrets.get(&format!("k1-{purpose}")).await.unwrap();
        assert_eq!(s.type_.as_deref(), Some("cluster.x-k8s.io/secret"));
    }
    // Bootstrap data: exactly one Machine ran `kubeadm init`, the others joined with a token
    // that exists in the workload cluster.
    let mut inits = 0;
    let mut tokens = BTreeSet::new();
    for m in &all {
        let name = m.spec.bootstrap.data_secret_name.clone().unwrap();
        let data = bootstrap_data(&secrets.get(&name).await.unwrap());
        assert!(
            data.starts_with("## template: jinja\n#cloud-config"),
            "{data}"
        );
        let control_plane = m.labels().contains_key(CONTROL_PLANE);
        assert_eq!(
            data.contains("/etc/kubernetes/pki/ca.key"),
            control_plane,
            "only control-plane Machines get the CA key"
        );
        let cloud_config: serde_json::Value = capictl::yaml::from_str(&data).unwrap();
        let file = |path: &str| -> Option<serde_json::Value> {
            let f = cloud_config["write_files"]
                .as_array()?
                .iter()
                .find(|f| f["path"] == path)?;
            capictl::yaml::from_multiple::<serde_json::Value>(f["content"].as_str()?)
                .ok()?
                .into_iter()
                .next()
        };
        // kubeadm runs from runcmd and leaves the sentinel the infrastructure provider waits for.
        let runcmd = cloud_config["runcmd"].as_array().unwrap();
        let kubeadm = if file("/run/kubeadm/kubeadm.yaml").is_some() {
            "kubeadm init --config /run/kubeadm/kubeadm.yaml"
        } else {
            "kubeadm join --config /run/kubeadm/kubeadm-join-config.yaml"
        };
        assert!(
            runcmd.iter().any(|c| c.as_str()
                == Some(&format!(
                    "{kubeadm} && echo success > /run/cluster-api/bootstrap-success.complete"
                ))),
            "{runcmd:?}"
        );
        if let Some(init) = file("/run/kubeadm/kubeadm.yaml") {
            inits += 1;
            assert!(control_plane);
            assert_eq!(init["kind"], "ClusterConfiguration");
            assert_eq!(init["kubernetesVersion"], "v1.28.13");
            assert_eq!(
                init["apiVersion"], "kubeadm.k8s.io/v1beta3",
                "kubeadm 1.28 reads v1beta3"
            );
            assert_eq!(
                init["controlPlaneEndpoint"]
                    .as_str()
                    .map(|e| e.contains(':')),
                Some(true)
            );
        } else {
            let join = file("/run/kubeadm/kubeadm-join-config.yaml")
                .unwrap_or_else(|| panic!("neither init nor join in {data}"));
            assert_eq!(join["kind"], "JoinConfiguration");
            assert_eq!(join["apiVersion"], "kubeadm.k8s.io/v1beta3");
            assert_eq!(join.get("controlPlane").is_some(), control_plane);
            let token = join["discovery"]["bootstrapToken"]["token"]
                .as_str()
                .unwrap();
            tokens.insert(token.split('.').next().unwrap().to_string());
            // Kept in the config's spec, as upstream keeps it, to be refreshed until the Node joins.
            let config = Api::<KubeadmConfig>::namespaced(client.clone(), NS)
                .get(&m.spec.bootstrap.config_ref.as_ref().unwrap().name)
                .await
                .unwrap();
            let kept = config.spec.join_configuration.unwrap().discovery.unwrap();
            assert_eq!(kept.bootstrap_token.unwrap().token.as_deref(), Some(token));
        }
    }
    assert_eq!(inits, 1, "one Machine initializes the cluster");
    let workload_secrets: Api<Secret> =
        Api::namespaced(workload(&client, "k1").await, "kube-system");
    for id in &tokens {
        workload_secrets
            .get(&format!("bootstrap-token-{id}"))
            .await
            .unwrap();
    }
    let lock: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    until("the init lock is released", 30, async || {
        lock.get_opt("k1-lock")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let configs: Api<KubeadmConfig> = Api::namespaced(client.clone(), NS);
    for c in configs.list(&ListParams::default()).await.unwrap().items {
        let s = c.status.unwrap();
        assert!(condition_true(s.conditions.as_ref(), "DataSecretAvailable"));
    }

    // Skipping a minor version is refused, naming the version to go to first, and changes
    // nothing.
    let refused = kcps
        .patch(
            "k1-control-plane",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"version": "v1.30.4"}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("{refused}")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec.version")
            && status.message.contains("upgrade to v1.29.x first"),
        "{}",
        status.message
    );
    let kcp = kcps.get("k1-control-plane").await.unwrap();
    assert_eq!(kcp.spec.version, "v1.28.13");

    // Upgrade: one control-plane Machine at a time, never fewer Ready than desired.
    kcps.patch(
        "k1-control-plane",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"version": "v1.29.10"}})),
    )
    .await
    .unwrap();
    let mut most = 0;
    until(
        "every control-plane Machine runs v1.29.10",
        240,
        async || {
            let cps: Vec<Machine> = machines
                .list(&ListParams::default().labels(CONTROL_PLANE))
                .await
                .unwrap()
                .items;
            let live = cps
                .iter()
                .filter(|m| m.metadata.deletion_timestamp.is_none());
            let ready_live = live.clone().filter(|m| ready(m)).count();
            assert!(
                ready_live >= 3,
                "only {ready_live} Ready control-plane Machines during the upgrade"
            );
            most = most.max(cps.len());
            let done = cps.len() == 3
                && cps
                    .iter()
                    .all(|m| m.spec.version.as_deref() == Some("v1.29.10") && ready(m));
            done.then_some(())
        },
    )
    .await;
    assert_eq!(most, 4, "one Machine surged at a time");
    until(
        "the KubeadmControlPlane reports v1.29.10 and healthy etcd",
        60,
        async || {
            let s = kcps.get("k1-control-plane").await.ok()?.status?;
            (s.version.as_deref() == Some("v1.29.10")
                && s.up_to_date_replicas == Some(3)
                && condition_true(s.conditions.as_ref(), "EtcdClusterHealthy"))
            .then_some(())
        },
    )
    .await;

    let downgrade = kcps
        .patch(
            "k1-control-plane",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"version": "v1.28.13"}})),
        )
        .await
        .unwrap_err();
    assert!(
        downgrade.to_string().contains("cannot downgrade"),
        "{downgrade}"
    );

    // Workers follow when the MachineDeployment's version changes; "1.29.10" gets its "v".
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let md = mds
        .patch(
            "k1-md-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"template": {"spec": {"version": "1.29.10"}}}})),
        )
        .await
        .unwrap();
    assert_eq!(md.spec.template.spec.version.as_deref(), Some("v1.29.10"));
    until("the workers run v1.29.10", 120, async || {
        let workers: Vec<Machine> = machines
            .list(&ListParams::default().labels(&format!("!{CONTROL_PLANE}")))
            .await
            .unwrap()
            .items;
        (workers.len() == 2
            && workers
                .iter()
                .all(|m| m.spec.version.as_deref() == Some("v1.29.10") && ready(m)))
        .then_some(())
    })
    .await;

    // A control-plane Machine whose Node goes NotReady is remediated by the control plane,
    // which keeps etcd's quorum: the Machine and its etcd member go, a new Machine replaces it.
    apply(&client, json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck", "metadata": {"name": "k1-control-plane"},
        "spec": {
            "clusterName": "k1", "selector": {"matchLabels": {CONTROL_PLANE: ""}},
            "checks": {"unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 1}]}
        }
    }))
    .await;
    let control_plane = ListParams::default().labels(CONTROL_PLANE);
    let victim = machines.list(&control_plane).await.unwrap().items[0].name_any();
    let now = capictl::apiserver::object::now();
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(workload(&client, "k1").await);
    nodes
        .patch_status(&victim, &PatchParams::default(), &Patch::Merge(json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "KubeletDown", "message": "kubelet stopped posting", "lastTransitionTime": now, "lastHeartbeatTime": now}
        ]}})))
        .await
        .unwrap();
    until(
        "the unhealthy control-plane Machine is replaced",
        90,
        async || {
            let list = machines.list(&control_plane).await.ok()?.items;
            let ready_count = list.iter().filter(|m| ready(m)).count();
            (!list.iter().any(|m| m.name_any() == victim) && list.len() == 3 && ready_count == 3)
                .then_some(())
        },
    )
    .await;
    let status = until("etcd is healthy again", 30, async || {
        let s = kcps.get("k1-control-plane").await.ok()?.status?;
        condition_true(s.conditions.as_ref(), "EtcdClusterHealthy").then_some(s)
    })
    .await;
    assert_eq!(status.last_remediation.unwrap().machine, victim);

    // Deletion removes everything the cluster had.
    clusters
        .delete("k1", &DeleteParams::default())
        .await
        .unwrap();
    until("everything is gone", 120, async || {
        let left = machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len()
            + kcps.list(&ListParams::default()).await.unwrap().items.len()
            + configs
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len()
            + clusters
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .len();
        (left == 0).then_some(())
    })
    .await;
    // The Secrets (certificates, kubeconfig, bootstrap data) go with their owners.
    until("the cluster's Secrets are gone", 30, async || {
        let left: Vec<String> = secrets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|s| s.name_any())
            .collect();
        left.is_empty().then_some(())
    })
    .await;
}
