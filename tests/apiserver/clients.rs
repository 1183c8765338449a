//! The embedded API server driven by kube-rs, as controllers will drive it: typed CRUD,
//! conflicts, finalizers, selectors, paging, watches, garbage collection, on the embedded store
//! and on etcd; a watch that survives a restart; two API servers on one etcd.

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, wait::await_condition, wait::conditions, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use capictl::api::{Cluster, CrdSet};
use capictl::apiserver::{self, ApiServer, store::Store};
use capictl::management::{self, ServeOptions};

/// An in-process API server on the given store, allowing everything.
async fn server_of(store: Store) -> std::sync::Arc<ApiServer> {
    capictl::install_crypto_provider();
    ApiServer::start(store, capictl::apiserver::authz::Authorization::AlwaysAllow)
        .await
        .unwrap()
}

/// A client of an in-process API server on the given store.
async fn client_of(store: Store) -> Client {
    Client::new(apiserver::local_router(server_of(store).await), "default")
}

/// Runs each behaviour test against both storage back ends: the embedded store, and a real
/// etcd the test starts (failing, saying how to get one, where there is no etcd binary).
macro_rules! on_both_back_ends {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name(super::client_of(capictl::apiserver::store::Store::in_memory()).await).await;
                }
            )*
        }
        mod etcd {
            $(
                #[tokio::test]
                async fn $name() {
                    let etcd = crate::common::Etcd::start();
                    let store = capictl::apiserver::store::Store::etcd(std::slice::from_ref(&etcd.endpoint), None).await.unwrap();
                    super::$name(super::client_of(store).await).await;
                    drop(etcd);
                }
            )*
        }
    };
}

on_both_back_ends!(
    dry_run_changes_nothing,
    typed_crud_on_custom_resources,
    finalizers_hold_deletion_until_removed,
    deleting_a_namespace_deletes_what_is_in_it,
    a_watcher_sees_changes_and_selectors_filter_them,
    a_watch_sends_initial_events_a_bookmark_then_changes_until_its_timeout,
    background_deletion_collects_dependents,
    orphan_deletion_frees_dependents,
    foreground_deletion_waits_for_blocking_dependents,
    concurrent_patches_without_a_version_all_land,
    built_in_workloads_scale_through_their_scale_subresource,
);

/// `kubectl scale deployment` (and the HorizontalPodAutoscaler) write a built-in workload's
/// replicas through its `scale` subresource, whose status carries the selector as text.
async fn built_in_workloads_scale_through_their_scale_subresource(client: Client) {
    use k8s_openapi::api::apps::v1::Deployment;
    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let web: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "busybox"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &web)
        .await
        .unwrap();
    let scale = deployments.get_scale("web").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    assert_eq!(scale.status.unwrap().selector.as_deref(), Some("app=web"));
    let scaled = deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scaled.spec.unwrap().replicas, Some(3));
    let stored = deployments.get("web").await.unwrap();
    assert_eq!(stored.spec.replicas, Some(3));
}

/// Patches that name no resourceVersion are not conflicts for their clients: 40 in flight on
/// one object all succeed, and every one of them is in the result.
async fn concurrent_patches_without_a_version_all_land(client: Client) {
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "shared", "labels": {"base": "x"}}}))
            .unwrap(),
    )
    .await
    .unwrap();
    let patches = (0..40).map(|i| {
        let maps = maps.clone();
        async move {
            let patch = if i % 2 == 0 {
                Patch::Merge::<serde_json::Value>(json!({"data": {format!("k{i}"): "v"}}))
            } else {
                Patch::Json::<serde_json::Value>(
                    serde_json::from_value(json!([{"op": "add", "path": format!("/metadata/labels/k{i}"), "value": "v"}]))
                        .unwrap(),
                )
            };
            maps.patch("shared", &PatchParams::default(), &patch).await
        }
    });
    let results = futures::future::join_all(patches).await;
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert!(
        failed.is_empty(),
        "{} of 40 failed: {failed:?}",
        failed.len()
    );
    let shared = maps.get("shared").await.unwrap();
    assert_eq!(shared.data.unwrap_or_default().len(), 20);
    assert_eq!(shared.metadata.labels.unwrap_or_default().len(), 21);
}

async fn install_crds(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in capictl::api::crds(&[CrdSet::Core]) {
        crds.create(&PostParams::default(), &crd).await.unwrap();
        let name = crd.metadata.name.clone().unwrap();
        tokio::time::timeout(
            Duration::from_secs(5),
            await_condition(crds.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .expect("the CRD is established")
        .unwrap();
    }
}

fn cluster(name: &str) -> Cluster {
    serde_json::from_value(json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Cluster",
        "metadata": {"name": name, "labels": {"env": if name.ends_with('1') { "dev" } else { "prod" }}},
        "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}}}
    }))
    .unwrap()
}

async fn typed_crud_on_custom_resources(client: Client) {
    install_crds(&client).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), "default");
    let created = clusters
        .create(&PostParams::default(), &cluster("c1"))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.creation_timestamp.is_some());
    clusters
        .create(&PostParams::default(), &cluster("c2"))
        .await
        .unwrap();

    let err = clusters
        .create(&PostParams::default(), &cluster("c1"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "AlreadyExists"),
        "{err}"
    );

    let dev = clusters
        .list(&ListParams::default().labels("env=dev"))
        .await
        .unwrap();
    assert_eq!(
        dev.items.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        ["c1"]
    );
    let page = clusters
        .list(&ListParams::default().limit(1))
        .await
        .unwrap();
    assert_eq!(page.items.len(), 1);
    let token = page.metadata.continue_.clone().expect("a continue token");
    let rest = clusters
        .list(&ListParams::default().limit(1).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(rest.items[0].name_any(), "c2");
    assert!(rest.metadata.continue_.is_none_or(|c| c.is_empty()));

    // A spec change is a new generation; status writes are not.
    let patched = clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    let status = clusters
        .patch_status(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Provisioning"}})),
        )
        .await
        .unwrap();
    assert_eq!(status.metadata.generation, Some(2));
    assert_eq!(
        status.status.unwrap().phase.as_deref(),
        Some("Provisioning")
    );
    // The main resource does not write status.
    let ignored = clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Failed"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        ignored.status.unwrap().phase.as_deref(),
        Some("Provisioning")
    );

    // A write based on a stale resourceVersion is a conflict.
    let mut stale = created.clone();
    stale.spec.paused = Some(false);
    let err = clusters
        .replace("c1", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err}"
    );
    // So is a patch that names a stale resourceVersion; one that names none applies to
    // whatever is there.
    let stale_rv = created.metadata.resource_version.clone().unwrap();
    let err = clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": stale_rv, "labels": {"a": "b"}}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err}"
    );
    let labelled = clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(labelled.labels()["a"], "b");

    let missing = clusters.get("nope").await.unwrap_err();
    assert!(
        matches!(missing, kube::Error::Api(ref s) if s.code == 404),
        "{missing}"
    );
}

async fn finalizers_hold_deletion_until_removed(client: Client) {
    install_crds(&client).await;
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), "default");
    clusters
        .create(&PostParams::default(), &cluster("c1"))
        .await
        .unwrap();

    // The JSON patch kube-rs's finalizer helper sends to add the first finalizer.
    let add = json_patch::Patch(
        serde_json::from_value(json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": ["cluster.cluster.x-k8s.io"]}
        ]))
        .unwrap(),
    );
    clusters
        .patch("c1", &PatchParams::default(), &Patch::Json::<()>(add))
        .await
        .unwrap();

    clusters
        .delete("c1", &DeleteParams::default())
        .await
        .unwrap();
    let deleting = clusters.get("c1").await.unwrap();
    assert!(deleting.metadata.deletion_timestamp.is_some());

    let err = clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["cluster.cluster.x-k8s.io", "new"]}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "adding a finalizer while deleting: {err}"
    );

    clusters
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    assert!(clusters.get_opt("c1").await.unwrap().is_none());
}

async fn deleting_a_namespace_deletes_what_is_in_it(client: Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    for i in 0..3 {
        maps.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("m{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    // A finalizer on one of them holds the namespace in Terminating until it is removed.
    maps.patch(
        "m0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["test.capictl.io/hold"]}})),
    )
    .await
    .unwrap();
    let uid = namespaces.get("team").await.unwrap().uid().unwrap();
    namespaces
        .delete("team", &DeleteParams::default())
        .await
        .unwrap();
    let err = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "late"}})).unwrap(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 403),
        "{err}"
    );
    let held = tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(maps.clone(), "m0", |m: Option<&ConfigMap>| {
            m.is_some_and(|m| m.metadata.deletion_timestamp.is_some())
        }),
    )
    .await
    .expect("the held object is marked for deletion")
    .unwrap()
    .unwrap();
    assert_eq!(held.name_any(), "m0");
    assert_eq!(
        namespaces
            .get("team")
            .await
            .unwrap()
            .status
            .unwrap()
            .phase
            .as_deref(),
        Some("Terminating")
    );
    maps.patch(
        "m0",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    tokio::time::timeout(
        Duration::from_secs(5),
        await_condition(namespaces.clone(), "team", conditions::is_deleted(&uid)),
    )
    .await
    .expect("the namespace goes")
    .unwrap();
    assert!(
        maps.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    // The initial namespaces are there.
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| n.name_any())
        .collect();
    assert_eq!(
        names,
        ["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}

async fn a_watcher_sees_changes_and_selectors_filter_them(client: Client) {
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(
        maps.clone(),
        watcher::Config::default().labels("watched=yes"),
    )
    .applied_objects()
    .boxed();
    let cm = |name: &str, watched: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"watched": watched}}}))
            .unwrap()
    };
    maps.create(&PostParams::default(), &cm("ignored", "no"))
        .await
        .unwrap();
    maps.create(&PostParams::default(), &cm("seen", "yes"))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.name_any(), "seen");
    // An object that starts matching arrives as added.
    maps.patch(
        "ignored",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"watched": "yes"}}})),
    )
    .await
    .unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(second.name_any(), "ignored");
}

/// The watch protocol as client-go's reflector uses it: the current objects (more than one
/// write's worth), the bookmark that ends them, then changes as they happen, until the
/// requested timeout ends the stream; and a watch from a resourceVersion gets what came after.
async fn a_watch_sends_initial_events_a_bookmark_then_changes_until_its_timeout(client: Client) {
    use futures::AsyncBufReadExt;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let payload = "x".repeat(1000);
    let mut versions = Vec::new();
    for i in 0..100 {
        let cm = json!({"metadata": {"name": format!("cm-{i:03}")}, "data": {"payload": payload}});
        let created = maps
            .create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
            .await
            .unwrap();
        versions.push(created.resource_version().unwrap());
    }
    let watch = |query: &str| {
        let request = http::Request::get(format!("/api/v1/namespaces/default/configmaps?{query}"))
            .body(Vec::new())
            .unwrap();
        let client = client.clone();
        async move { client.request_stream(request).await.unwrap().lines() }
    };
    let event = |line: Option<Result<String, std::io::Error>>| -> (String, serde_json::Value) {
        let event: serde_json::Value = serde_json::from_str(&line.unwrap().unwrap()).unwrap();
        (
            event["type"].as_str().unwrap().to_owned(),
            event["object"].clone(),
        )
    };

    let started = std::time::Instant::now();
    let mut lines = watch(
        "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=3",
    )
    .await;
    for i in 0..100 {
        let (kind, object) = event(lines.next().await);
        assert_eq!(kind, "ADDED");
        assert_eq!(object["metadata"]["name"], format!("cm-{i:03}"));
        assert_eq!(object["data"]["payload"], payload.as_str());
    }
    let (kind, bookmark) = event(lines.next().await);
    assert_eq!(kind, "BOOKMARK");
    assert_eq!(
        bookmark["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    maps.create(&PostParams::default(), &config_map("later", None, &[]))
        .await
        .unwrap();
    let (kind, object) = event(lines.next().await);
    assert_eq!(
        (kind.as_str(), &object["metadata"]["name"]),
        ("ADDED", &json!("later"))
    );
    assert!(
        lines.next().await.is_none(),
        "the stream ends at its timeout"
    );
    assert!(
        started.elapsed() >= Duration::from_secs(3),
        "not before its timeout: {:?}",
        started.elapsed()
    );

    let mut lines = watch(&format!(
        "watch=1&resourceVersion={}&timeoutSeconds=1",
        versions[97]
    ))
    .await;
    let mut names = Vec::new();
    while let Some(line) = lines.next().await {
        names.push(
            event(Some(line)).1["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(names, ["cm-098", "cm-099", "later"]);
}

#[tokio::test]
async fn a_watch_resumes_across_a_server_restart() {
    let (dir, options, running, client) = serve_in_tempdir().await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(maps.clone(), watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "before"}})).unwrap(),
    )
    .await
    .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(5), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(seen.name_any(), "before");

    running.stop().await;
    let running = management::start(&options).await.unwrap();
    assert!(
        maps.get_opt("before").await.unwrap().is_some(),
        "objects survive the restart"
    );
    maps.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "after"}})).unwrap(),
    )
    .await
    .unwrap();
    let next = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let o = events.try_next().await.unwrap().unwrap();
            if o.name_any() == "after" {
                return o;
            }
        }
    })
    .await
    .expect("the watcher sees a write made after the restart");
    assert_eq!(next.name_any(), "after");
    running.stop().await;
    std::fs::remove_dir_all(dir).unwrap();
}

/// A management cluster served from a new directory over real HTTPS, and its admin client.
async fn serve_in_tempdir() -> (
    std::path::PathBuf,
    ServeOptions,
    management::Running,
    Client,
) {
    serve_in_tempdir_on(Vec::new(), None).await
}

/// The same on etcd (with TLS files: CA, client certificate, key) when endpoints are given.
async fn serve_in_tempdir_on(
    etcd_endpoints: Vec<String>,
    etcd_tls: Option<[std::path::PathBuf; 3]>,
) -> (
    std::path::PathBuf,
    ServeOptions,
    management::Running,
    Client,
) {
    let (dir, options, running) =
        crate::common::serve_in_process("test", etcd_endpoints, etcd_tls).await;
    let client = crate::common::admin_client(&options).await;
    (dir, options, running, client)
}

fn tempdir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("capictl-test-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn config_map(name: &str, owner: Option<(&ConfigMap, bool)>, finalizers: &[&str]) -> ConfigMap {
    let mut meta = json!({"name": name, "finalizers": finalizers});
    if let Some((o, block)) = owner {
        meta["ownerReferences"] = json!([{
            "apiVersion": "v1", "kind": "ConfigMap", "name": o.name_any(), "uid": o.uid().unwrap(),
            "blockOwnerDeletion": block,
        }]);
    }
    serde_json::from_value(json!({"metadata": meta})).unwrap()
}

async fn eventually(what: &str, mut check: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn background_deletion_collects_dependents(client: Client) {
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = maps
        .create(&PostParams::default(), &config_map("owner", None, &[]))
        .await
        .unwrap();
    maps.create(
        &PostParams::default(),
        &config_map("child", Some((&owner, false)), &[]),
    )
    .await
    .unwrap();
    maps.delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    eventually("the child is collected", async || {
        maps.get_opt("child").await.unwrap().is_none()
    })
    .await;
}

async fn orphan_deletion_frees_dependents(client: Client) {
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = maps
        .create(&PostParams::default(), &config_map("owner", None, &[]))
        .await
        .unwrap();
    maps.create(
        &PostParams::default(),
        &config_map("child", Some((&owner, false)), &[]),
    )
    .await
    .unwrap();
    maps.delete("owner", &DeleteParams::orphan()).await.unwrap();
    eventually("the owner is gone", async || {
        maps.get_opt("owner").await.unwrap().is_none()
    })
    .await;
    let child = maps.get("child").await.unwrap();
    assert!(
        child
            .metadata
            .owner_references
            .unwrap_or_default()
            .is_empty(),
        "the child no longer points at the owner"
    );
}

async fn foreground_deletion_waits_for_blocking_dependents(client: Client) {
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let owner = maps
        .create(&PostParams::default(), &config_map("owner", None, &[]))
        .await
        .unwrap();
    maps.create(
        &PostParams::default(),
        &config_map("child", Some((&owner, true)), &["test/hold"]),
    )
    .await
    .unwrap();
    maps.delete("owner", &DeleteParams::foreground())
        .await
        .unwrap();
    let waiting = maps.get("owner").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    assert_eq!(waiting.finalizers(), ["foregroundDeletion"]);
    eventually("the child is being deleted", async || {
        maps.get("child")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    })
    .await;
    assert!(
        maps.get_opt("owner").await.unwrap().is_some(),
        "the owner waits for its blocking child"
    );
    maps.patch(
        "child",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    eventually("the owner is gone", async || {
        maps.get_opt("owner").await.unwrap().is_none()
    })
    .await;
}

#[tokio::test]
async fn dependents_of_owners_lost_while_the_server_was_down_are_collected() {
    capictl::install_crypto_provider();
    let dir = tempdir();
    let path = dir.join("state.redb");
    {
        let server = ApiServer::start(
            Store::open(&path).unwrap(),
            capictl::apiserver::authz::Authorization::AlwaysAllow,
        )
        .await
        .unwrap();
        let maps: Api<ConfigMap> = Api::namespaced(
            Client::new(apiserver::local_router(server), "default"),
            "default",
        );
        let owner = maps
            .create(&PostParams::default(), &config_map("owner", None, &[]))
            .await
            .unwrap();
        maps.create(
            &PostParams::default(),
            &config_map("child", Some((&owner, false)), &[]),
        )
        .await
        .unwrap();
        maps.create(&PostParams::default(), &config_map("unrelated", None, &[]))
            .await
            .unwrap();
    }
    // The owner disappears from the store behind the server's back.
    {
        let store = open_when_released(&path).await;
        store
            .delete("/registry/core/configmaps/default/owner".into(), None)
            .await
            .unwrap();
    }
    let server = ApiServer::start(
        open_when_released(&path).await,
        capictl::apiserver::authz::Authorization::AlwaysAllow,
    )
    .await
    .unwrap();
    let maps: Api<ConfigMap> = Api::namespaced(
        Client::new(apiserver::local_router(server), "default"),
        "default",
    );
    eventually("the orphaned child is collected", async || {
        maps.get_opt("child").await.unwrap().is_none()
    })
    .await;
    assert!(maps.get_opt("unrelated").await.unwrap().is_some());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Opens a store file once the server that had it open (and its client's tasks) let it go.
async fn open_when_released(path: &std::path::Path) -> Store {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match Store::open(path) {
            Ok(store) => return store,
            Err(e) if std::time::Instant::now() > deadline => panic!("{e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Two management clusters serving HTTPS (what `management up` starts) that keep their objects
/// in one etcd the test starts, reached over TLS with a client certificate; their admin
/// clients. Stop them with [`stop_both`].
async fn two_servers_on_one_etcd() -> (
    crate::common::Etcd,
    Vec<(std::path::PathBuf, management::Running)>,
    Client,
    Client,
) {
    // The etcd helper waits for health with a runtime of its own: not on this one's thread.
    let (etcd, tls) = std::thread::spawn(crate::common::Etcd::start_tls)
        .join()
        .unwrap();
    let mut running = Vec::new();
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (dir, _, server, client) = serve_in_tempdir_on(
            vec![etcd.endpoint.clone()],
            Some([tls.ca.clone(), tls.cert.clone(), tls.key.clone()]),
        )
        .await;
        running.push((dir, server));
        clients.push(client);
    }
    let b = clients.pop().unwrap();
    let a = clients.pop().unwrap();
    (etcd, running, a, b)
}

async fn stop_both(running: Vec<(std::path::PathBuf, management::Running)>) {
    for (dir, server) in running {
        server.stop().await;
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn two_api_servers_on_one_etcd_serve_the_same_objects() {
    let (_etcd, running, a, b) = two_servers_on_one_etcd().await;
    let maps_a: Api<ConfigMap> = Api::namespaced(a, "default");
    let maps_b: Api<ConfigMap> = Api::namespaced(b, "default");
    let mut events = watcher(maps_b.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    maps_a
        .create(&PostParams::default(), &config_map("shared", None, &[]))
        .await
        .unwrap();
    let seen = tokio::time::timeout(Duration::from_secs(10), events.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        seen.name_any(),
        "shared",
        "a write through one server reaches the other's watchers"
    );
    eventually("the other server serves it", async || {
        maps_b.get_opt("shared").await.unwrap().is_some()
    })
    .await;
    // A resourceVersion neither server has seen is a conflict, as in kube-apiserver, not a
    // wait for a revision that may never come (and then a timeout).
    let mut from_the_future = maps_b.get("shared").await.unwrap();
    from_the_future.metadata.resource_version = Some("999999999".into());
    let refused = maps_b
        .replace("shared", &PostParams::default(), &from_the_future)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 409),
        "{refused}"
    );
    stop_both(running).await;
}

/// Writers on both servers increment counters with compare-and-swap replaces; some counters
/// are shared by writers on both servers, others have one writer each. Right after each write
/// through one server, the other is sent (1) the object as it was before, unchanged — stale,
/// so it must be refused even when that server's cache has not yet seen the write and the
/// replace would change nothing there — and (2) the object as written, which is current: where
/// nobody else writes that counter it must be accepted even when the other server has not seen
/// the write yet. At the end every counter equals the number of increments acknowledged for
/// it: no acknowledged write was lost and no stale one accepted.
#[tokio::test]
async fn two_api_servers_on_one_etcd_refuse_every_stale_write_under_concurrent_writers() {
    /// Writers 0..SHARING take turns on counters 0 and 1; each later writer has its own.
    const SHARING: usize = 4;
    const WRITERS: usize = 8;
    const ROUNDS: usize = 15;
    let counter_of = |w: usize| if w < SHARING { w % 2 } else { w - SHARING + 2 };
    let (_etcd, running, a, b) = two_servers_on_one_etcd().await;
    let servers = [
        Api::<ConfigMap>::namespaced(a, "default"),
        Api::<ConfigMap>::namespaced(b, "default"),
    ];
    let counter = |i: usize| format!("counter-{i}");
    for i in 0..=counter_of(WRITERS - 1) {
        let mut map = config_map(&counter(i), None, &[]);
        map.data = Some([("count".to_string(), "0".to_string())].into());
        servers[0]
            .create(&PostParams::default(), &map)
            .await
            .unwrap();
    }
    let writers = (0..WRITERS).map(|w| {
        let (via, other) = (servers[w % 2].clone(), servers[(w + 1) % 2].clone());
        let name = counter(counter_of(w));
        let alone = w >= SHARING;
        tokio::spawn(async move {
            let mut acknowledged = 0;
            while acknowledged < ROUNDS {
                let before = via.get(&name).await.unwrap();
                let mut next = before.clone();
                let count: u64 = next.data.as_ref().unwrap()["count"].parse().unwrap();
                next.data = Some([("count".to_string(), (count + 1).to_string())].into());
                let written = match via.replace(&name, &PostParams::default(), &next).await {
                    Ok(written) => written,
                    Err(kube::Error::Api(s)) if s.code == 409 && !alone => continue,
                    Err(e) => panic!("replace {name}: {e}"),
                };
                acknowledged += 1;
                match other.replace(&name, &PostParams::default(), &before).await {
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Ok(accepted) => panic!(
                        "a stale replace of {name} (resourceVersion {:?}, already replaced at {:?}) was accepted at {:?}",
                        before.resource_version(),
                        written.resource_version(),
                        accepted.resource_version()
                    ),
                    Err(e) => panic!("replace {name}: {e}"),
                }
                match other.replace(&name, &PostParams::default(), &written).await {
                    Ok(_) => {}
                    // Another writer may have moved it on since.
                    Err(kube::Error::Api(s)) if s.code == 409 && !alone => {}
                    Err(e) => panic!(
                        "a current replace of {name} at {:?} through the other server: {e}",
                        written.resource_version()
                    ),
                }
            }
            (name, acknowledged)
        })
    });
    let mut expected = std::collections::BTreeMap::<String, usize>::new();
    for writer in futures::future::join_all(writers).await {
        let (name, acknowledged) = writer.unwrap();
        *expected.entry(name).or_default() += acknowledged;
    }
    for (name, increments) in expected {
        for server in &servers {
            eventually("both servers serve the last write", async || {
                server.get(&name).await.unwrap().data.unwrap()["count"] == increments.to_string()
            })
            .await;
        }
    }
    stop_both(running).await;
}

async fn dry_run_changes_nothing(client: Client) {
    let maps: Api<ConfigMap> = Api::namespaced(client, "default");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let would_be = maps
        .create(&dry, &config_map("ghost", None, &[]))
        .await
        .unwrap();
    assert_eq!(would_be.name_any(), "ghost");
    assert!(
        maps.get_opt("ghost").await.unwrap().is_none(),
        "a dry-run create stores nothing"
    );

    maps.create(&PostParams::default(), &config_map("real", None, &[]))
        .await
        .unwrap();
    let patched = maps
        .patch(
            "real",
            &PatchParams::default().dry_run(),
            &Patch::Merge(json!({"data": {"k": "v"}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data.unwrap()["k"], "v");
    assert!(
        maps.get("real").await.unwrap().data.is_none(),
        "a dry-run patch stores nothing"
    );
    maps.delete(
        "real",
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert!(
        maps.get_opt("real").await.unwrap().is_some(),
        "a dry-run delete deletes nothing"
    );
}

/// Labels ConfigMaps and refuses those with a `forbidden` key, as provider rules would.
struct TestRules;

impl capictl::apiserver::admission::Admission for TestRules {
    fn name(&self) -> &str {
        "configmaps.test"
    }
    fn handles(&self, group: &str, kind: &str) -> bool {
        group.is_empty() && kind == "ConfigMap"
    }
    fn default(
        &self,
        _: &capictl::apiserver::admission::Request<'_>,
        object: &mut serde_json::Value,
    ) -> Result<(), capictl::apiserver::status::ApiError> {
        object["metadata"]["labels"]["defaulted"] = json!("yes");
        Ok(())
    }
    fn validate(
        &self,
        request: &capictl::apiserver::admission::Request<'_>,
        object: &serde_json::Value,
    ) -> Result<Vec<String>, capictl::apiserver::status::ApiError> {
        if object["data"].get("forbidden").is_some() {
            return Err(capictl::apiserver::status::ApiError::invalid(
                "ConfigMap",
                "",
                request.name,
                vec![capictl::apiserver::status::FieldCause::invalid(
                    "data.forbidden",
                    "Forbidden: not here",
                )],
            ));
        }
        Ok(Vec::new())
    }
}

#[tokio::test]
async fn admission_rules_default_and_refuse_before_storage() {
    let server = server_of(Store::in_memory()).await;
    server.admission.register(std::sync::Arc::new(TestRules));
    let client = Client::new(apiserver::local_router(server), "default");
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let created = maps
        .create(&PostParams::default(), &config_map("ok", None, &[]))
        .await
        .unwrap();
    assert_eq!(created.labels()["defaulted"], "yes");
    // The built-in defaults add nothing to a kind that has no spec (they once stored
    // `"spec": null` in every ConfigMap).
    let stored = client
        .request_text(
            http::Request::get("/api/v1/namespaces/default/configmaps/ok")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let stored: serde_json::Value = serde_json::from_str(&stored).unwrap();
    assert!(stored.get("spec").is_none(), "{stored}");
    let bad: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "bad"}, "data": {"forbidden": "x"}}))
            .unwrap();
    let err = maps.create(&PostParams::default(), &bad).await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422 && s.message.contains("data.forbidden")),
        "{err}"
    );
    assert!(maps.get_opt("bad").await.unwrap().is_none());
    let err = maps
        .patch(
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"forbidden": "y"}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 422),
        "updates are checked too: {err}"
    );
}

/// `pods/portforward` over WebSocket, as kube-rs asks for it (and the control plane provider
/// reaches workload etcd): bytes go both ways to the Pod's port; a closed port is an error on
/// the port's error channel; a Pod that is not running is refused.
#[tokio::test]
async fn port_forward_reaches_a_pods_port() {
    use k8s_openapi::api::core::v1::Pod;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (dir, _, running, client) = serve_in_tempdir().await;
    // What the Pod listens on: an echo that shouts back.
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = echo.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = echo.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = tcp.read(&mut buffer).await {
                    if n == 0
                        || tcp
                            .write_all(&buffer[..n].to_ascii_uppercase())
                            .await
                            .is_err()
                    {
                        break;
                    }
                }
            });
        }
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let pod = |name: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})).unwrap()
    };
    pods.create(&PostParams::default(), &pod("echo"))
        .await
        .unwrap();
    pods.patch_status(
        "echo",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Running", "podIP": "127.0.0.1"}})),
    )
    .await
    .unwrap();

    let mut forwarder = pods.portforward("echo", &[port]).await.unwrap();
    let mut stream = forwarder.take_stream(port).unwrap();
    for word in ["hello", "etcd"] {
        stream.write_all(word.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; word.len()];
        tokio::time::timeout(Duration::from_secs(10), stream.read_exact(&mut answer))
            .await
            .expect("an answer through the forward")
            .unwrap();
        assert_eq!(answer, word.to_uppercase().as_bytes());
    }
    drop(stream);
    forwarder.abort();

    // A port nothing listens on: the error channel says so.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut forwarder = pods.portforward("echo", &[closed]).await.unwrap();
    let error = tokio::time::timeout(
        Duration::from_secs(10),
        forwarder.take_error(closed).unwrap(),
    )
    .await
    .unwrap()
    .expect("an error message");
    assert!(
        error.contains(&format!("error forwarding port {closed}")),
        "{error}"
    );

    // A Pod that does not run yet has no port to reach.
    pods.create(&PostParams::default(), &pod("pending"))
        .await
        .unwrap();
    let refused = pods
        .portforward("pending", &[port])
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("not running"), "{refused}");
    running.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}

/// kube-apiserver's limits and preconditions: a body over 3 MiB and an object over etcd's
/// 1.5 MiB are refused with 413, a replace that names another object's uid with 409; nothing
/// is stored by any of them.
#[tokio::test]
async fn oversized_writes_and_a_foreign_uid_are_refused_and_change_nothing() {
    let client = client_of(Store::in_memory()).await;
    let maps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let with = |name: &str, bytes: usize| -> ConfigMap {
        serde_json::from_value(
            json!({"metadata": {"name": name}, "data": {"big": "x".repeat(bytes)}}),
        )
        .unwrap()
    };
    for (name, bytes, says) in [
        (
            "body",
            4 << 20,
            "Request entity too large: limit is 3145728",
        ),
        ("object", 2 << 20, "too large to store"),
    ] {
        let err = maps
            .create(&PostParams::default(), &with(name, bytes))
            .await
            .unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{err}")
        };
        assert_eq!(status.code, 413, "{name}: {}", status.message);
        assert!(status.message.contains(says), "{name}: {}", status.message);
        assert!(
            maps.get_opt(name).await.unwrap().is_none(),
            "{name} was not stored"
        );
    }
    let a = maps
        .create(&PostParams::default(), &with("a", 10))
        .await
        .unwrap();
    let b = maps
        .create(&PostParams::default(), &with("b", 10))
        .await
        .unwrap();
    let mut replacement = a.clone();
    replacement.metadata.uid = b.metadata.uid.clone();
    replacement.data = Some([("big".to_string(), "changed".to_string())].into());
    let err = maps
        .replace("a", &PostParams::default(), &replacement)
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert_eq!(status.code, 409);
    assert!(
        status
            .message
            .contains("Precondition failed: UID in precondition"),
        "{}",
        status.message
    );
    assert_eq!(maps.get("a").await.unwrap().data, a.data, "nothing changed");
}

/// This process's controllers read objects without `managedFields` (their caches drop them
/// anyway) and write them back without losing them; every other client still has them.
#[tokio::test]
async fn controllers_read_and_write_without_managed_fields() {
    let server = server_of(Store::in_memory()).await;
    let controllers: Api<ConfigMap> = Api::namespaced(
        Client::new(apiserver::controller_router(server.clone()), "default"),
        "default",
    );
    let others: Api<ConfigMap> = Api::namespaced(
        Client::new(apiserver::local_router(server), "default"),
        "default",
    );
    let has_managed_fields = |map: &ConfigMap| !map.managed_fields().is_empty();
    let mut watch = controllers
        .watch(&kube::api::WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    others
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "a"}, "data": {"k": "v"}}))
                .unwrap(),
        )
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("a watch event within 5 s")
        .unwrap()
        .unwrap();
    let kube::api::WatchEvent::Added(watched) = event else {
        panic!("expected ADDED, got {event:?}");
    };
    assert_eq!(watched.data, Some([("k".into(), "v".into())].into()));
    assert!(watched.resource_version().is_some());
    assert!(!has_managed_fields(&watched));
    let listed = controllers.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert!(!has_managed_fields(&listed.items[0]));
    let got = controllers.get("a").await.unwrap();
    assert_eq!(got.data, watched.data);
    assert!(!has_managed_fields(&got));
    // A controller's write, made from what it read, keeps the fields' managers and adds its own.
    let mut changed = got;
    changed.data = Some([("k".into(), "w".into())].into());
    let written = controllers
        .replace("a", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert!(!has_managed_fields(&written));
    let stored = others.get("a").await.unwrap();
    assert_eq!(stored.data, changed.data);
    assert!(has_managed_fields(&stored));
    assert!(has_managed_fields(
        &others.list(&ListParams::default()).await.unwrap().items[0]
    ));
}
