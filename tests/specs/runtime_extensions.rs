//! Runtime Extensions: the example extension (`examples/runtime_extension`) served over HTTPS,
//! registered by an ExtensionConfig, its lifecycle hooks called by the topology controller —
//! holding an upgrade and a deletion until it lets them go.

use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use capictl::api::runtime::ExtensionConfig;
use capictl::api::{Cluster, KubeadmConfigTemplate, KubeadmControlPlane, MachineDeployment};
use kube::ResourceExt;

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

/// A management cluster with the example extension served and registered, answering for the
/// Cluster `x1` what `responses` (its ConfigMap's data) says.
async fn with_example_extension(responses: Value) -> kube::Client {
    let client = kubeadm_management().await;
    let (port, ca) = serve_example(&client).await;
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "x1-hook-responses", "namespace": NS},
        "data": responses,
    }))
    .unwrap();
    config_map(&client)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    register_example(&client, port, &ca).await;
    client
}

/// Registers the example extension served on `port` and waits until it is discovered, with a
/// handler per lifecycle hook and two for external patches.
async fn register_example(client: &kube::Client, port: u16, ca: &str) {
    let configs: Api<ExtensionConfig> = Api::all(client.clone());
    let config: ExtensionConfig = serde_json::from_value(json!({
        "apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig",
        "metadata": {"name": "example"},
        "spec": {"clientConfig": {
            "url": format!("https://127.0.0.1:{port}"),
            "caBundle": base64::engine::general_purpose::STANDARD.encode(ca),
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
    assert!(names.contains(&"generate-patches.example"), "{names:?}");
    assert_eq!(names.len(), 11, "{names:?}");
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
    let hold = json!({"status": "Success", "retryAfterSeconds": 2, "message": "the test holds it"});
    // Registered, and discovered: a handler per lifecycle hook.
    let client = with_example_extension(json!({
        "BeforeClusterUpgrade-preloadedResponse": hold.to_string(),
        "AfterControlPlaneUpgrade-preloadedResponse": hold.to_string(),
        "BeforeClusterDelete-preloadedResponse": hold.to_string(),
    }))
    .await;

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

/// A ClusterClass that lists its versions lets a topology move several minors in one change:
/// the control plane goes through each minor (the newest patch of each), the workers follow
/// once it is done (three minors of skew are allowed), and the hooks are called at each step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topology_moved_three_minors_upgrades_through_each_with_the_control_plane_ahead() {
    let client = with_example_extension(json!({})).await;
    for mut doc in in_memory_topology("x1", "v1.30.4") {
        if doc["kind"] == "ClusterClass" {
            doc["spec"]["kubernetesVersions"] =
                json!(["v1.30.4", "v1.31.0", "v1.31.2", "v1.32.1", "v1.33.0"]);
            // And an external patch: the example annotates every template.
            let patch = json!({"name": "example", "external": {
                "generatePatchesExtension": "generate-patches.example",
                "validateTopologyExtension": "validate-topology.example",
            }});
            match doc["spec"]["patches"].as_array_mut() {
                Some(patches) => patches.push(patch),
                None => doc["spec"]["patches"] = json!([patch]),
            }
        }
        apply(&client, doc).await;
    }
    until_available(&client, "x1", 120).await;
    // The external patch reached the templates the topology made its objects from.
    let templates: Api<KubeadmConfigTemplate> = Api::namespaced(client.clone(), NS);
    let by_cluster = ListParams::default().labels("cluster.x-k8s.io/cluster-name=x1");
    let made = templates.list(&by_cluster).await.unwrap().items;
    assert!(!made.is_empty());
    for t in &made {
        assert_eq!(
            t.annotations()
                .get(example::PATCHED_ANNOTATION)
                .map(String::as_str),
            Some("x1"),
            "{:?}",
            t.metadata
        );
    }

    // The external validator refuses a labelled Cluster: the topology waits, and says why.
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let label = |value: Value| {
        Patch::Merge(json!({"metadata": {"labels": {(example::REFUSE_LABEL): value}}}))
    };
    clusters
        .patch("x1", &PatchParams::default(), &label(json!("yes")))
        .await
        .unwrap();
    let message = until("the validator refuses the topology", 30, async || {
        let (reason, message) = topology_reconciled(&clusters.get("x1").await.ok()?)?;
        (reason == "ReconcileFailed").then_some(message)
    })
    .await;
    assert!(
        message.contains("the topology is not valid")
            && message.contains(&format!("Cluster x1 carries {}", example::REFUSE_LABEL)),
        "{message}"
    );
    clusters
        .patch("x1", &PatchParams::default(), &label(Value::Null))
        .await
        .unwrap();
    until("the topology is valid again", 30, async || {
        let (reason, _) = topology_reconciled(&clusters.get("x1").await.ok()?)?;
        (reason == "ReconcileSucceeded").then_some(())
    })
    .await;

    let to = |version: &str| Patch::Merge(json!({"spec": {"topology": {"version": version}}}));
    let refused = clusters
        .patch("x1", &PatchParams::default(), &to("v1.32.0"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("version must match one of the versions defined in the ClusterClass"),
        "{refused}"
    );
    clusters
        .patch("x1", &PatchParams::default(), &to("v1.33.0"))
        .await
        .expect("the class's versions allow three minors at once");
    let kcps: Api<KubeadmControlPlane> = Api::namespaced(client.clone(), NS);
    let deployments: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let minor = |v: &str| capictl::api::common::kubernetes_version(v).unwrap().1;
    let mut seen = Vec::new();
    let mut workers_plans = Vec::new();
    until("every part is at v1.33.0", 180, async || {
        let cp = kcps.list(&by_cluster).await.ok()?.items[0]
            .spec
            .version
            .clone();
        let md = deployments.list(&by_cluster).await.ok()?.items[0]
            .spec
            .template
            .spec
            .version
            .clone()?;
        assert!(
            minor(&md) <= minor(&cp),
            "the workers ({md}) ahead of the control plane ({cp})"
        );
        if seen.last() != Some(&cp) {
            seen.push(cp.clone());
        }
        let status = clusters.get("x1").await.ok()?.status?;
        if let Some(plan) = status.workers.and_then(|w| w.upgrade_plan) {
            workers_plans.push(plan.into_iter().map(|s| s.version).collect::<Vec<_>>());
        }
        (cp == "v1.33.0" && md == "v1.33.0").then_some(())
    })
    .await;
    for (hook, versions) in [
        ("BeforeClusterUpgrade", "v1.31.2"),
        ("BeforeControlPlaneUpgrade", "v1.31.2,v1.32.1,v1.33.0"),
        ("AfterControlPlaneUpgrade", "v1.31.2,v1.32.1,v1.33.0"),
        ("BeforeWorkersUpgrade", "v1.33.0"),
        ("AfterWorkersUpgrade", "v1.33.0"),
        ("AfterClusterUpgrade", "v1.33.0"),
    ] {
        let noted = until(&format!("{hook} is called"), 30, async || {
            noted(&client, &format!("{hook}-versions")).await
        })
        .await;
        assert_eq!(
            noted, versions,
            "{hook} (control plane versions seen: {seen:?})"
        );
    }
    assert!(
        !workers_plans.is_empty() && workers_plans.iter().all(|p| p == &["v1.33.0"]),
        "the workers' plan in the Cluster's status: {workers_plans:?}"
    );
    until("the upgrade plan is cleared", 30, async || {
        let status = clusters.get("x1").await.ok()?.status?;
        status.control_plane?.upgrade_plan.is_none().then_some(())
    })
    .await;
}

/// The CA comes from the Secret the injection annotation names; while it cannot, the
/// ExtensionConfig says why in its Discovered condition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ca_is_injected_from_a_secret_and_a_missing_one_is_named() {
    use k8s_openapi::api::core::v1::Secret;
    let client = kubeadm_management().await;
    let (port, ca) = serve_example(&client).await;
    let configs: Api<ExtensionConfig> = Api::all(client.clone());
    let config: ExtensionConfig = serde_json::from_value(json!({
        "metadata": {"name": "injected", "annotations": {
            "runtime.cluster.x-k8s.io/inject-ca-from-secret": format!("{NS}/example-ca"),
        }},
        "spec": {"clientConfig": {"url": format!("https://127.0.0.1:{port}")}},
    }))
    .unwrap();
    configs
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let discovered = async |status: &str| {
        let config = configs.get("injected").await.ok()?;
        let c = config
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Discovered")?;
        (c.status == status).then_some(c.message)
    };
    let message = until("the missing Secret is named", 30, async || {
        discovered("False").await
    })
    .await;
    assert!(
        message.contains(&format!("secret \"{NS}/example-ca\" not found")),
        "{message}"
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "example-ca", "namespace": NS},
        "data": {"ca.crt": base64::engine::general_purpose::STANDARD.encode(&ca)},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    until("discovered with the injected CA", 90, async || {
        discovered("True").await
    })
    .await;
}
