//! The API server calls the admission webhooks that Mutating- and ValidatingWebhookConfigurations
//! register, as kube-apiserver does: behind a Service (at its endpoints, the certificate checked
//! for the Service's DNS name against the caBundle) or at a URL; patches applied, denials
//! returned in the webhook's words, `namespaceSelector`, `failurePolicy`, `timeoutSeconds` and
//! `sideEffects` honoured. This is what lets a provider's controllers run as Pods on a cluster
//! whose API server is capictl's.

use std::sync::{Arc, Mutex};

use base64::Engine;
use capictl::apiserver::{listener, tls};
use capictl::pki::Pki;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

const SERVICE: &str = "hooks";
const NAMESPACE: &str = "hooks-system";

/// What the test webhook server saw: the user and namespace of each review.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, String)>>);

/// `/mutate` stamps ConfigMaps with a label; `/validate` refuses any with a `forbidden` key;
/// `/slow` answers after two seconds.
fn webhook_router(seen: Arc<Seen>) -> axum::Router {
    use axum::Json;
    use axum::extract::State;
    async fn mutate(State(seen): State<Arc<Seen>>, Json(review): Json<Value>) -> Json<Value> {
        let request = &review["request"];
        seen.0.lock().unwrap().push((
            request["userInfo"]["username"]
                .as_str()
                .unwrap_or_default()
                .into(),
            request["namespace"].as_str().unwrap_or_default().into(),
        ));
        let patch = if request["object"]["metadata"]["labels"].is_object() {
            json!([{"op": "add", "path": "/metadata/labels/stamped", "value": "yes"}])
        } else {
            json!([{"op": "add", "path": "/metadata/labels", "value": {"stamped": "yes"}}])
        };
        let patch = base64::engine::general_purpose::STANDARD.encode(patch.to_string());
        Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": request["uid"], "allowed": true, "patchType": "JSONPatch", "patch": patch}}),
        )
    }
    async fn validate(Json(review): Json<Value>) -> Json<Value> {
        let request = &review["request"];
        let forbidden = request["object"]["data"].get("forbidden").is_some();
        let mut response = json!({"uid": request["uid"], "allowed": !forbidden});
        if forbidden {
            response["status"] =
                json!({"code": 403, "message": "data.forbidden is not allowed here"});
        }
        Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
        )
    }
    async fn slow(Json(review): Json<Value>) -> Json<Value> {
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        Json(
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": true}}),
        )
    }
    axum::Router::new()
        .route("/mutate", axum::routing::post(mutate))
        .route("/validate", axum::routing::post(validate))
        .route("/slow", axum::routing::post(slow))
        .with_state(seen)
}

/// Creates an object of any kind, by its apiVersion, kind and namespace.
async fn create(client: &kube::Client, object: Value) {
    let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
        Some((group, version)) => (group, version),
        None => ("", object["apiVersion"].as_str().unwrap()),
    };
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().unwrap());
    let resource = ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    api.create(
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

async fn delete(client: &kube::Client, kind: &str, name: &str) {
    let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ApiResource::from_gvk(&gvk));
    api.delete(name, &DeleteParams::default()).await.unwrap();
}

fn config_map(name: &str, data: Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": data})).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_go_through_the_admission_webhooks_the_cluster_registers() {
    let (dir, options, running) = crate::common::serve_in_process("hooks", vec![], None).await;
    let client = crate::common::admin_client(&options).await;

    // The webhook server, on this host, with a certificate for its Service's name and for the
    // address its URL names.
    let pki = Pki::generate("webhook CA").unwrap();
    let serving = pki
        .serving_certificate(&[format!("{SERVICE}.{NAMESPACE}.svc"), "127.0.0.1".into()])
        .unwrap();
    let seen = Arc::new(Seen::default());
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = socket.local_addr().unwrap().port();
    let server = tokio::spawn(listener::serve(
        socket,
        webhook_router(seen.clone()),
        tls::plain_server_config(&serving).unwrap(),
        std::future::pending(),
    ));
    let ca_bundle = base64::engine::general_purpose::STANDARD.encode(&pki.ca.cert);

    // Its Service has no selector: its Endpoints are written by hand, as for a server outside
    // the cluster.
    for (name, labels) in [
        (NAMESPACE, json!({})),
        ("team", json!({"webhooks": "on"})),
        ("other", json!({})),
    ] {
        create(&client, json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})).await;
    }
    create(&client, json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": "https"}]}})).await;
    create(&client, json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": port}]}]})).await;

    let rule = json!([{"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"]}]);
    create(&client, json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "stamp"},
        "webhooks": [{"name": "stamp.hooks.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "namespaceSelector": {"matchLabels": {"webhooks": "on"}}, "rules": rule,
            "clientConfig": {"service": {"name": SERVICE, "namespace": NAMESPACE, "path": "/mutate"}, "caBundle": ca_bundle}}]
    })).await;
    create(&client, json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "deny"},
        "webhooks": [{"name": "deny.hooks.test", "admissionReviewVersions": ["v1beta1", "v1"], "sideEffects": "None",
            "rules": rule,
            "clientConfig": {"url": format!("https://127.0.0.1:{port}/validate"), "caBundle": ca_bundle}}]
    })).await;

    // Through the Service: the ConfigMap is stored as the mutating webhook patched it, and the
    // webhook was told who asked.
    let team: Api<ConfigMap> = Api::namespaced(client.clone(), "team");
    let stored = team
        .create(
            &PostParams::default(),
            &config_map("settings", json!({"a": "1"})),
        )
        .await
        .unwrap();
    assert_eq!(stored.metadata.labels.unwrap()["stamped"], "yes");
    let reviews = seen.0.lock().unwrap().clone();
    assert_eq!(reviews.len(), 1, "{reviews:?}");
    assert_eq!(reviews[0].1, "team");
    assert!(!reviews[0].0.is_empty(), "the review names the requester");
    // Outside the namespaceSelector, no mutation.
    let other: Api<ConfigMap> = Api::namespaced(client.clone(), "other");
    let untouched = other
        .create(&PostParams::default(), &config_map("settings", json!({})))
        .await
        .unwrap();
    assert!(
        untouched
            .metadata
            .labels
            .is_none_or(|l| !l.contains_key("stamped"))
    );

    // At the URL: a denial is the webhook's own code and words, and nothing is stored.
    let denied = other
        .create(
            &PostParams::default(),
            &config_map("bad", json!({"forbidden": "x"})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = denied else {
        panic!("{denied:?}")
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        "admission webhook \"deny.hooks.test\" denied the request: data.forbidden is not allowed here"
    );
    assert!(other.get_opt("bad").await.unwrap().is_none());
    // Updates go through them too.
    let mut changed = other.get("settings").await.unwrap();
    changed.data = Some([("forbidden".to_string(), "y".to_string())].into());
    assert!(
        other
            .replace("settings", &PostParams::default(), &changed)
            .await
            .is_err()
    );

    // A webhook that cannot be called refuses the write unless its failurePolicy ignores
    // failures; one slower than its timeout counts as not answering.
    let secrets_rule = json!([{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["secrets"]}]);
    let broken = |name: &str, policy: &str, client_config: Value| {
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [{"name": format!("{name}.hooks.test"), "admissionReviewVersions": ["v1"], "sideEffects": "None",
                "failurePolicy": policy, "timeoutSeconds": 1, "rules": secrets_rule, "clientConfig": client_config}]
        })
    };
    let no_endpoints =
        json!({"service": {"name": "nobody", "namespace": NAMESPACE}, "caBundle": ca_bundle});
    let slow = json!({"url": format!("https://127.0.0.1:{port}/slow"), "caBundle": ca_bundle});
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "team");
    let secret = |name: &str| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": {"k": "v"}}))
            .unwrap()
    };
    for (name, policy, client_config, refusal) in [
        ("absent", "Ignore", no_endpoints.clone(), None),
        (
            "absent",
            "Fail",
            no_endpoints,
            Some("service \"nobody\" not found"),
        ),
        ("slow", "Fail", slow, Some("context deadline exceeded")),
    ] {
        create(&client, broken(name, policy, client_config)).await;
        let created = secrets
            .create(
                &PostParams::default(),
                &secret(&format!("{name}-{}", policy.to_lowercase())),
            )
            .await;
        match (refusal, created) {
            (None, Ok(_)) => {}
            (Some(why), Err(kube::Error::Api(status))) => {
                assert_eq!(status.code, 500, "{status:?}");
                assert!(
                    status
                        .message
                        .starts_with(&format!("failed calling webhook \"{name}.hooks.test\""))
                        && status.message.contains(why),
                    "{status:?}"
                );
            }
            (want, got) => panic!("{name} with {policy}: expected refusal {want:?}, got {got:?}"),
        }
        // A broken webhook never keeps its own configuration from being removed.
        delete(&client, "ValidatingWebhookConfiguration", name).await;
    }
    secrets
        .create(&PostParams::default(), &secret("after"))
        .await
        .expect("with the broken webhooks gone, writes go through");

    server.abort();
    running.stop().await;
    let _ = std::fs::remove_dir_all(dir);
}
