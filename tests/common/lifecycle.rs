//! Helpers for the tests that run controllers on an embedded management cluster.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::ApiResource;
use serde_json::Value;

use capictl::api::{self, CrdSet, Machine};
use capictl::apiserver::{self, ApiServer, store::Store};
use capictl::conditions;
use capictl::manager;

pub const NS: &str = "default";

/// An embedded management API server, empty.
pub async fn api_server() -> Client {
    api_server_on(Store::in_memory()).await
}

/// An embedded management API server on `store`.
pub async fn api_server_on(store: Store) -> Client {
    capictl::install_crypto_provider();
    let server = ApiServer::start(store, capictl::apiserver::authz::Authorization::AlwaysAllow)
        .await
        .unwrap();
    capictl::webhooks::register(&server.admission);
    Client::new(apiserver::local_router(server), NS)
}

/// An embedded management cluster with the CRDs of `sets`, no controllers running.
pub async fn management_without_controllers(sets: &[CrdSet]) -> Client {
    install_crds(api_server().await, sets).await
}

async fn install_crds(client: Client, sets: &[CrdSet]) -> Client {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in api::crds(sets) {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    client
}

/// An embedded management cluster with the CRDs of `sets` and the controllers running.
pub async fn management(sets: &[CrdSet]) -> Client {
    management_on(Store::in_memory(), sets).await
}

/// An embedded management cluster on `store`, with the CRDs of `sets` and the controllers
/// running.
pub async fn management_on(store: Store, sets: &[CrdSet]) -> Client {
    management_with(store, sets, manager::Options::default()).await
}

/// [`management_on`], the controllers run with `options`.
pub async fn management_with(store: Store, sets: &[CrdSet], options: manager::Options) -> Client {
    let client = install_crds(api_server_on(store).await, sets).await;
    let c = client.clone();
    tokio::spawn(async move { manager::run(c, options, std::future::pending()).await });
    client
}

pub async fn apply(client: &Client, object: Value) {
    let api_version = object["apiVersion"].as_str().unwrap();
    let (group, version) = api_version.rsplit_once('/').unwrap();
    let kind = object["kind"].as_str().unwrap();
    let resource = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk(group, version, kind),
        &capictl::reconcile::external::plural(kind),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &resource);
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
}

/// Waits until `check` holds, saying what it waited for on timeout.
pub async fn until<T>(what: &str, seconds: u64, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {seconds}s waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn condition_true(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    t: &str,
) -> bool {
    conditions.is_some_and(|c| conditions::is_true(c, t))
}

pub fn machine_ready(m: &Machine) -> bool {
    condition_true(
        m.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Ready",
    )
}

pub fn machine_available(m: &Machine) -> bool {
    condition_true(
        m.status.as_ref().and_then(|s| s.conditions.as_ref()),
        "Available",
    )
}

pub async fn workload(client: &Client, cluster: &str) -> Client {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = secrets.get(&format!("{cluster}-kubeconfig")).await.unwrap();
    let text = String::from_utf8(secret.data.unwrap()["value"].0.clone()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&text).unwrap(),
        &Default::default(),
    )
    .await
    .unwrap();
    Client::try_from(config).unwrap()
}
