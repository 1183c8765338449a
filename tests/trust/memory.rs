//! The server's memory is bounded by what it stores, not by how often it is written: large
//! objects rewritten over and over in many kinds leave the watch history within its bound.

use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::json;

use super::common::management::Management;

/// The peak resident memory of process `pid`, in MiB.
fn peak_rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .unwrap()
        / 1024.0
}

async fn client(m: &Management) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(m.kubeconfig()).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

fn crd(plural: &str, kind: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_objects_rewritten_in_many_kinds_stay_within_the_history_bound() {
    capictl::install_crypto_provider();
    const HISTORY_MB: usize = 32;
    let m = Management::up_with_extra_args(&[&format!("--watch-history-mb={HISTORY_MB}")]);
    let pid = capictl::management::StateDir::new(Some(m.state().into()))
        .running()
        .expect("the server runs")
        .pid;
    let client = client(&m).await;
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(
                "apiextensions.k8s.io",
                "v1",
                "CustomResourceDefinition",
            ),
            "customresourcedefinitions",
        ),
    );
    let mut kinds = vec![
        ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "ConfigMap"),
            "configmaps",
        ),
        ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("", "v1", "Secret"),
            "secrets",
        ),
    ];
    for (plural, kind) in [("blobs", "Blob"), ("notes", "Note")] {
        let object: DynamicObject = serde_json::from_value(crd(plural, kind)).unwrap();
        crds.create(&PostParams::default(), &object).await.unwrap();
        kinds.push(ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("example.com", "v1", kind),
            plural,
        ));
    }
    // Let the CRDs be served.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let before = peak_rss_mib(pid);

    // 4 kinds x 50 rewrites of a 1 MiB object: unbounded, the history would hold every
    // version and the one before it (4 x 50 x 2 MiB).
    use base64::Engine;
    let blob = "z".repeat(1 << 20);
    let encoded = base64::engine::general_purpose::STANDARD.encode(&blob[..(3 << 18)]);
    let params = PatchParams::apply("flood").force();
    for round in 0..50 {
        for resource in &kinds {
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", resource);
            let body = match resource.kind.as_str() {
                "ConfigMap" => json!({"data": {"blob": blob, "round": round.to_string()}}),
                "Secret" => {
                    json!({"data": {"blob": encoded}, "stringData": {"round": round.to_string()}})
                }
                _ => json!({"spec": {"blob": blob, "round": round}}),
            };
            let mut object = body;
            object["apiVersion"] = json!(resource.api_version);
            object["kind"] = json!(resource.kind);
            object["metadata"] = json!({"name": "large"});
            api.patch("large", &params, &Patch::Apply(object))
                .await
                .unwrap();
        }
    }
    let after = peak_rss_mib(pid);
    // What it stores (4 MiB), the bounded history, and room for the requests in flight and the
    // allocator's slack: 76 MiB measured; unbounded, 80 rounds grew it by 723 MiB.
    assert!(
        after - before < 200.0,
        "the server's peak memory grew by {:.0} MiB (from {before:.0} MiB) with a {HISTORY_MB} MiB history bound",
        after - before
    );
}
