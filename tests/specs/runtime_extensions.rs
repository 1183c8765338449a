//! Runtime Extensions: the example extension (`examples/runtime_extension`) served over HTTPS,
//! registered by an ExtensionConfig, its lifecycle hooks called by the topology controller —
//! holding an upgrade and a deletion until it lets them go.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use capictl::api::runtime::ExtensionConfig;
use capictl::api::{Cluster, KubeadmControlPlane, MachineDeployment};

use crate::common::fixtures::{in_memory_topology, kubeadm_management, until_available};
use crate::common::lifecycle::*;

#[path = "../../examples/runtime_extension/handlers.rs"]
mod example;

/// The example extension on a port of this host, and the CA its certificate chains to (PEM).
async fn serve_example(client: &kube::Client) -> (u16, String) {
    capictl::install_crypto_provider();
    let pki = capictl::pki::Pki::generate("example-extension-ca").unwrap();
    let serving = pki.serving_certificate(&["127.0.0.1".into()]).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let extension = example::extension(client.clone());
    tokio::spawn(async move { extension.serve(listener, &serving).await });
    (port, pki.ca.cert)
}

fn config_map(client: &kube::Client) -> Api<ConfigMap> {
    Api::namespaced(client.clone(), NS)
}

/// Sets what the example answers to `hook` for the Cluster `x1`.
async fn preload(client: &kube::Client, hook: &str, answer: Value) {
    config_map(client)
        .patch(
            "x1-hook-responses",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"data": {format!("{hook}-preloadedResponse"): answer.to_string()}}),
            ),
        )
        .await
        .unwrap();
}

async fn noted(client: &kube::Client, key: &str) -> Option<String> {
    config_map(client)
        .get("x1-hook-responses")
        .await
        .ok()?
        .data?
        .get(key)
        .cloned()
}

fn topology_reconciled(cluster: &Cluster) -> Option<(String, String)> {
    let c = cluster
        .status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "TopologyReconciled")?;
    Some((c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_hooks_hold_an_upgrade_and_a_deletion_until_the_extension_lets_go() {
    let client = kubeadm_management().await;
    let (port, ca) = serve_example(&client).await;
    let hold = json!({"status": "Success", "retryAfterSeconds": 2, "message": "the test holds it"});
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "x1-hook-responses", "namespace": NS},
        "data": {
            "BeforeClusterUpgrade-preloadedResponse": hold.to_string(),
            "AfterControlPlaneUpgrade-preloadedResponse": hold.to_string(),
            "BeforeClusterDelete-preloadedResponse": hold.to_string(),
        },
    }))
    .unwrap();
    config_map(&client)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();

    // Registered, and discovered: a handler per lifecycle hook.
    let configs: Api<ExtensionConfig> = Api::all(client.clone());
    let config: ExtensionConfig = serde_json::from_value(json!({
        "apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig",
        "metadata": {"name": "example"},
        "spec": {"clientConfig": {
            "url": format!("https://127.0.0.1:{port}"),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(&ca),
        }},
    }))
    .unwrap();
    configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let handlers = until("the ExtensionConfig is discovered", 30, async || {
        let status = configs.get("example").await.ok()?.status?;
        condition_true(status.conditions.as_ref(), "Discovered").then_some(status.handlers?)
    })
    .await;
    let names: Vec<&str> = handlers.iter().map(|h| h.name.as_str()).collect();
    assert!(
        names.contains(&"before-cluster-upgrade.example"),
        "{names:?}"
    );
    assert_eq!(names.len(), 9, "{names:?}");

    // Created (BeforeClusterCreate answers Success), AfterControlPlaneInitialized called once.
    for doc in in_memory_topology("x1", "v1.30.4") {
        apply(&client, doc).await;
    }
    until_available(&client, "x1", 120).await;
    until("AfterControlPlaneInitialized is called", 30, async || {
        (noted(&client, "AfterControlPlaneInitialized-calls").await? == "1").then_some(())
    })
    .await;
    assert_eq!(
        noted(&client, "BeforeClusterCreate-actualResponseStatus")
            .await
            .as_deref(),
        Some("Success")
    );
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let cluster = clusters.get("x1").await.unwrap();
    assert!(
        !cluster
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("runtime.cluster.x-k8s.io/pending-hooks"),
        "the hook is done"
    );

    // The upgrade waits for BeforeClusterUpgrade.
    clusters
        .patch(
            "x1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"topology": {"version": "v1.31.0"}}})),
        )
        .await
        .unwrap();
    let message = until("the upgrade is held", 30, async || {
        let (reason, message) = topology_reconciled(&clusters.get("x1").await.ok()?)?;
        (reason == "ClusterUpgrading" && message.contains("Following hooks are blocking upgrade"))
            .then_some(message)
    })
    .await;
    assert!(
        message.contains("BeforeClusterUpgrade: the test holds it"),
        "{message}"
    );
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), NS);
    let control_plane_version = async || {
        let list = kcps
            .list(&ListParams::default().labels("cluster.x-k8s.io/cluster-name=x1"))
            .await
            .unwrap();
        list.items[0].spec.version.clone()
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(control_plane_version().await, "v1.30.4", "held");
    preload(
        &client,
        "BeforeClusterUpgrade",
        json!({"status": "Success"}),
    )
    .await;
    until("the control plane upgrades once let go", 30, async || {
        (control_plane_version().await == "v1.31.0").then_some(())
    })
    .await;

    // The workers wait for AfterControlPlaneUpgrade; then the rest of the hooks are called
    // once each, in order.
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let workers_version = async || {
        let list = deployments
            .list(&ListParams::default().labels("cluster.x-k8s.io/cluster-name=x1"))
            .await
            .unwrap();
        list.items[0].spec.template.spec.version.clone()
    };
    until("the workers are held", 60, async || {
        let (_, message) = topology_reconciled(&clusters.get("x1").await.ok()?)?;
        message
            .contains(
                "Following hooks are blocking upgrade: AfterControlPlaneUpgrade: the test holds it",
            )
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(workers_version().await.as_deref(), Some("v1.30.4"), "held");
    preload(
        &client,
        "AfterControlPlaneUpgrade",
        json!({"status": "Success"}),
    )
    .await;
    until("the upgrade is over", 60, async || {
        (noted(&client, "AfterClusterUpgrade-calls").await? == "1").then_some(())
    })
    .await;
    assert_eq!(workers_version().await.as_deref(), Some("v1.31.0"));
    for hook in [
        "BeforeControlPlaneUpgrade",
        "BeforeWorkersUpgrade",
        "AfterWorkersUpgrade",
    ] {
        assert_eq!(
            noted(&client, &format!("{hook}-calls")).await.as_deref(),
            Some("1"),
            "{hook}"
        );
    }
    until("no hook is pending", 30, async || {
        let cluster = clusters.get("x1").await.ok()?;
        (!cluster
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("runtime.cluster.x-k8s.io/pending-hooks"))
        .then_some(())
    })
    .await;

    // The deletion waits for BeforeClusterDelete: nothing of the Cluster goes meanwhile.
    clusters
        .delete("x1", &DeleteParams::background())
        .await
        .unwrap();
    until("the deletion is held", 30, async || {
        let cluster = clusters.get("x1").await.ok()?;
        let deleting = cluster
            .status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .find(|c| c.type_ == "Deleting")?
            .clone();
        (deleting.reason == "WaitingForBeforeDeleteHook"
            && topology_reconciled(&cluster)?.1.contains(
                "Following hooks are blocking delete: BeforeClusterDelete: the test holds it",
            ))
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        control_plane_version().await,
        "v1.31.0",
        "the control plane is still there"
    );
    preload(&client, "BeforeClusterDelete", json!({"status": "Success"})).await;
    until("the Cluster is gone once let go", 60, async || {
        clusters.get_opt("x1").await.ok()?.is_none().then_some(())
    })
    .await;
}
