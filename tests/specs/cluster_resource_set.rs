//! ClusterResourceSet: a CNI-like manifest (a DaemonSet and the ConfigMap it mounts) held in a
//! ConfigMap of the management cluster reaches every Cluster the set's selector matches —
//! existing and new — under both strategies; the binding records it; the set's condition
//! names what is missing; deletion takes the set out of the bindings and leaves the objects.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use capictl::api::{ClusterResourceSet, ClusterResourceSetBinding};

use crate::common::fixtures::{
    available_cluster, cluster, control_plane_machine, in_memory_cluster, in_memory_machine,
};
use crate::common::lifecycle::*;

/// A CNI-like manifest: its configuration, and a DaemonSet mounting it on every Node.
fn cni_manifest(mtu: u32) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {{name: kindnet, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app: kindnet}}}}
  template:
    metadata: {{labels: {{app: kindnet}}}}
    spec:
      tolerations: [{{operator: Exists}}]
      containers:
      - name: kindnet
        image: kindnet:v1
        volumeMounts: [{{name: config, mountPath: /etc/cni}}]
      volumes: [{{name: config, configMap: {{name: kindnet-config}}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: kindnet-config, namespace: kube-system}}
data: {{mtu: "{mtu}"}}
"#
    )
}

fn set(name: &str, strategy: &str, resources: Value) -> Value {
    json!({
        "apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"matchLabels": {"cni": "kindnet"}}, "strategy": strategy, "resources": resources},
    })
}

/// A second in-memory Cluster, labelled for the sets, with one control-plane Machine.
async fn add_cluster(client: &kube::Client, name: &str) {
    let mut c = cluster(name);
    c["metadata"]["labels"] = json!({"cni": "kindnet"});
    for object in [
        c,
        in_memory_cluster(name),
        in_memory_machine(&format!("{name}-cp-0"), "1s"),
        control_plane_machine(name, &format!("{name}-cp-0")),
    ] {
        apply(client, object).await;
    }
}

async fn resources_applied(
    sets: &Api<ClusterResourceSet>,
    name: &str,
) -> Option<(String, String, String)> {
    let c = sets
        .get(name)
        .await
        .ok()?
        .status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "ResourcesApplied")?;
    Some((c.status, c.reason, c.message))
}

async fn mtu(workload: &kube::Client) -> Option<String> {
    let maps: Api<ConfigMap> = Api::namespaced(workload.clone(), "kube-system");
    maps.get_opt("kindnet-config")
        .await
        .ok()??
        .data?
        .get("mtu")
        .cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_sets_reach_existing_and_new_clusters_under_both_strategies() {
    let client = available_cluster(2).await;
    let sets: Api<ClusterResourceSet> = Api::namespaced(client.clone(), NS);
    let bindings: Api<ClusterResourceSetBinding> = Api::namespaced(client.clone(), NS);
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);

    // A set whose ConfigMap does not exist yet says what it waits for.
    apply(
        &client,
        set(
            "kindnet",
            "Reconcile",
            json!([{"name": "kindnet", "kind": "ConfigMap"}]),
        ),
    )
    .await;
    let clusters: Api<capictl::api::Cluster> = Api::namespaced(client.clone(), NS);
    clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"cni": "kindnet"}}})),
        )
        .await
        .unwrap();
    let waiting = until("the set names its missing ConfigMap", 30, async || {
        resources_applied(&sets, "kindnet")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(
        waiting,
        (
            "False".into(),
            "InternalError".into(),
            "ConfigMap kindnet not found; waiting for it to be created".into()
        )
    );

    // The ConfigMap arrives: the DaemonSet and its configuration land in the existing
    // Cluster, and the DaemonSet's Pods run on every Node.
    let config = json!({"metadata": {"name": "kindnet"}, "data": {"cni.yaml": cni_manifest(1500)}});
    maps.create(
        &Default::default(),
        &serde_json::from_value(config).unwrap(),
    )
    .await
    .unwrap();
    let c1 = workload(&client, "c1").await;
    let daemon_sets: Api<DaemonSet> = Api::namespaced(c1.clone(), "kube-system");
    until(
        "the DaemonSet's Pods run on c1's three Nodes",
        60,
        async || {
            let ds = daemon_sets.get_opt("kindnet").await.ok()??;
            let s = ds.status?;
            (s.desired_number_scheduled == 3 && s.number_ready == 3).then_some(())
        },
    )
    .await;
    assert_eq!(mtu(&c1).await.as_deref(), Some("1500"));
    let pods: Api<Pod> = Api::namespaced(c1.clone(), "kube-system");
    assert_eq!(
        pods.list(&ListParams::default().labels("app=kindnet"))
            .await
            .unwrap()
            .items
            .len(),
        3
    );
    until("the set says it applied everything", 30, async || {
        resources_applied(&sets, "kindnet")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    // The set owns its ConfigMap (which moves and goes with it), and c1's binding records
    // the data's hash.
    let owned = maps.get("kindnet").await.unwrap();
    assert!(
        owned
            .owner_references()
            .iter()
            .any(|o| o.kind == "ClusterResourceSet" && o.name == "kindnet")
    );
    let binding = bindings.get("c1").await.unwrap();
    assert_eq!(binding.spec.cluster_name, "c1");
    let entry = &binding.spec.bindings.as_ref().unwrap()[0];
    assert_eq!(entry.cluster_resource_set_name, "kindnet");
    let record = &entry.resources.as_ref().unwrap()[0];
    let first_hash = record.hash.clone().unwrap();
    assert!(first_hash.starts_with("sha256:"), "{first_hash}");
    assert_eq!(
        (record.name.as_str(), record.applied),
        ("kindnet", Some(true))
    );

    // An ApplyOnce set of a Secret of the resource-set type; one of another type is refused
    // by name.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = async |name: &str, type_: &str, body: &str| {
        let secret = json!({"metadata": {"name": name}, "type": type_, "stringData": {"objects.yaml": body}});
        secrets
            .create(
                &Default::default(),
                &serde_json::from_value(secret).unwrap(),
            )
            .await
            .unwrap();
    };
    let settings = |level: &str| {
        format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cni-settings, namespace: kube-system}}\ndata: {{level: {level}}}\n"
        )
    };
    secret(
        "settings",
        "addons.cluster.x-k8s.io/resource-set",
        &settings("one"),
    )
    .await;
    secret("opaque", "Opaque", &settings("two")).await;
    apply(
        &client,
        set(
            "settings",
            "ApplyOnce",
            json!([{"name": "settings", "kind": "Secret"}]),
        ),
    )
    .await;
    apply(
        &client,
        set(
            "opaque",
            "ApplyOnce",
            json!([{"name": "opaque", "kind": "Secret"}]),
        ),
    )
    .await;
    let refused = until(
        "the set names the Secret of the wrong type",
        30,
        async || {
            resources_applied(&sets, "opaque")
                .await
                .filter(|c| c.0 == "False")
        },
    )
    .await;
    assert_eq!(refused.1, "WrongSecretType");
    assert!(
        refused.2.contains("Secret opaque has type \"Opaque\""),
        "{}",
        refused.2
    );
    let c1_maps: Api<ConfigMap> = Api::namespaced(c1.clone(), "kube-system");
    let level = async |maps: &Api<ConfigMap>| -> Option<String> {
        maps.get_opt("cni-settings")
            .await
            .ok()??
            .data?
            .get("level")
            .cloned()
    };
    until("the ApplyOnce set's object is in c1", 30, async || {
        (level(&c1_maps).await.as_deref() == Some("one")).then_some(())
    })
    .await;

    // Both resources change: Reconcile applies the new data again, ApplyOnce does not.
    maps.patch(
        "kindnet",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"cni.yaml": cni_manifest(1450)}})),
    )
    .await
    .unwrap();
    secrets
        .patch(
            "settings",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"objects.yaml": settings("changed")}})),
        )
        .await
        .unwrap();
    until("the Reconcile set applies the new MTU", 30, async || {
        (mtu(&c1).await.as_deref() == Some("1450")).then_some(())
    })
    .await;
    let changed = until("c1's binding records the new hash", 30, async || {
        let b = bindings.get("c1").await.ok()?;
        let entry = b
            .spec
            .bindings?
            .into_iter()
            .find(|e| e.cluster_resource_set_name == "kindnet")?;
        entry
            .resources?
            .into_iter()
            .next()?
            .hash
            .filter(|h| *h != first_hash)
    })
    .await;
    assert_ne!(changed, first_hash);

    // A new Cluster with the label gets everything, the ApplyOnce set's current data included.
    add_cluster(&client, "c2").await;
    until("c2's binding records both sets applied", 60, async || {
        let b = bindings.get_opt("c2").await.ok()??;
        let applied: Vec<String> = b
            .spec
            .bindings?
            .into_iter()
            .filter(|e| {
                e.resources
                    .iter()
                    .flatten()
                    .all(|r| r.applied == Some(true))
            })
            .map(|e| e.cluster_resource_set_name)
            .collect();
        (applied.contains(&"kindnet".to_string()) && applied.contains(&"settings".to_string()))
            .then_some(())
    })
    .await;
    let c2 = workload(&client, "c2").await;
    assert_eq!(mtu(&c2).await.as_deref(), Some("1450"));
    let c2_maps: Api<ConfigMap> = Api::namespaced(c2.clone(), "kube-system");
    assert_eq!(level(&c2_maps).await.as_deref(), Some("changed"));
    // By now the ApplyOnce set has been woken by its Secret's change long since.
    assert_eq!(
        level(&c1_maps).await.as_deref(),
        Some("one"),
        "ApplyOnce applied a change"
    );

    // Deleting a set takes it out of the bindings and leaves its objects in the Clusters.
    sets.delete("settings", &DeleteParams::default())
        .await
        .unwrap();
    until("the set is gone from c1's binding", 30, async || {
        let b = bindings.get("c1").await.ok()?;
        let names: Vec<String> = b
            .spec
            .bindings?
            .into_iter()
            .map(|e| e.cluster_resource_set_name)
            .collect();
        (!names.contains(&"settings".to_string())).then_some(())
    })
    .await;
    until("the set is deleted", 30, async || {
        sets.get_opt("settings").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(level(&c1_maps).await.as_deref(), Some("one"));
    // A deleted Cluster's binding goes with it.
    clusters
        .delete("c2", &DeleteParams::default())
        .await
        .unwrap();
    until("c2's binding is deleted", 60, async || {
        bindings.get_opt("c2").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(bindings.get_opt("c1").await.unwrap().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_set_selector_must_select_and_stays_as_it_was_created() {
    let client = available_cluster(0).await;
    let sets: Api<ClusterResourceSet> = Api::namespaced(client.clone(), NS);
    let mut empty = set(
        "cni",
        "Reconcile",
        json!([{"name": "cni", "kind": "ConfigMap"}]),
    );
    empty["spec"]["clusterSelector"] = json!({});
    let refused = sets
        .create(&Default::default(), &serde_json::from_value(empty).unwrap())
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("spec.clusterSelector: Invalid value: {}: selector must not be empty"),
        "{refused}"
    );
    let mut defaulted = set(
        "cni",
        "Reconcile",
        json!([{"name": "cni", "kind": "ConfigMap"}]),
    );
    defaulted["spec"]
        .as_object_mut()
        .unwrap()
        .remove("strategy");
    let created = sets
        .create(
            &Default::default(),
            &serde_json::from_value(defaulted).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        created.spec.strategy,
        Some(capictl::api::cluster_resource_set::Strategy::ApplyOnce)
    );
    let changed = sets
        .patch(
            "cni",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"strategy": "Reconcile"}})),
        )
        .await
        .unwrap_err();
    assert!(
        changed
            .to_string()
            .contains("spec.strategy: Forbidden: field is immutable"),
        "{changed}"
    );
}
