//! `capictl manager --webhook-port` serves Cluster API's admission rules over HTTPS, as the
//! webhook configurations `capictl init` installs expect: AdmissionReviews in, verdicts and
//! JSON patches out.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine;
use capictl::pki::Pki;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

/// A manager process, killed when dropped.
struct Manager(Child);

impl Drop for Manager {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn review(operation: &str, object: Value, old: Option<Value>) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "0b5d6c1e-1111-2222-3333-444455556666",
            "kind": {"group": "controlplane.cluster.x-k8s.io", "version": "v1beta2", "kind": "KubeadmControlPlane"},
            "resource": {"group": "controlplane.cluster.x-k8s.io", "version": "v1beta2", "resource": "kubeadmcontrolplanes"},
            "operation": operation, "namespace": "default", "name": "cp",
            "object": object, "oldObject": old,
        }
    })
}

fn control_plane(replicas: i64, version: &str) -> Value {
    json!({
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
        "metadata": {"name": "cp", "namespace": "default"},
        "spec": {"replicas": replicas, "version": version,
                 "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "InMemoryMachineTemplate", "name": "cp"}}}}
    })
}

#[tokio::test]
async fn the_manager_serves_the_admission_webhooks_over_https() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = std::env::temp_dir().join(format!("capictl-webhooks-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let pki = Pki::generate("test webhook CA").unwrap();
    let serving = pki.serving_certificate(&["127.0.0.1".into()]).unwrap();
    std::fs::write(dir.join("tls.crt"), &serving.cert).unwrap();
    std::fs::write(dir.join("tls.key"), &serving.key).unwrap();
    // No management cluster answers here: the webhooks do not need one.
    std::fs::write(
        dir.join("kubeconfig"),
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n",
    )
    .unwrap();
    let port = crate::common::free_port();
    let metrics_port = crate::common::free_port();
    let _manager = Manager(
        Command::new(env!("CARGO_BIN_EXE_capictl"))
            .args(["manager", "--leader-elect=false", "--kubeconfig"])
            .arg(dir.join("kubeconfig"))
            .args(["--webhook-port", &port.to_string(), "--webhook-cert-dir"])
            .arg(&dir)
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    // A client that trusts only the webhook's CA, as the API server does through caBundle.
    let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().unwrap());
    config.root_cert = Some(
        CertificateDer::pem_slice_iter(pki.ca.cert.as_bytes())
            .map(|c| c.unwrap().to_vec())
            .collect(),
    );
    let client = kube::Client::try_from(config).unwrap();
    let post = async |path: &str, body: &Value| -> Option<Value> {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap())
            .unwrap();
        client.request::<Value>(request).await.ok()
    };
    let mut answered = None;
    for _ in 0..100 {
        answered = post(
            "/mutate",
            &review("CREATE", control_plane(3, "1.30.4"), None),
        )
        .await;
        if answered.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let defaulted = answered.expect("the manager's webhook server answers");
    let response = &defaulted["response"];
    assert_eq!(response["uid"], "0b5d6c1e-1111-2222-3333-444455556666");
    assert_eq!(response["allowed"], true);
    let patch: Value = serde_json::from_slice(
        &base64::engine::general_purpose::STANDARD
            .decode(response["patch"].as_str().expect("a JSON patch"))
            .unwrap(),
    )
    .unwrap();
    assert!(
        patch
            .as_array()
            .unwrap()
            .iter()
            .any(|op| op["path"] == "/spec/version" && op["value"] == "v1.30.4"),
        "{patch}"
    );

    // An even number of stacked-etcd control-plane Machines is refused, saying why.
    let refused = post(
        "/validate",
        &review("CREATE", control_plane(2, "v1.30.4"), None),
    )
    .await
    .unwrap();
    assert_eq!(refused["response"]["allowed"], false);
    let message = refused["response"]["status"]["message"].as_str().unwrap();
    assert!(message.contains("spec.replicas"), "{message}");

    // Skipping a minor version on upgrade is refused too.
    let skipped = post(
        "/validate",
        &review(
            "UPDATE",
            control_plane(3, "v1.32.0"),
            Some(control_plane(3, "v1.30.4")),
        ),
    )
    .await
    .unwrap();
    assert_eq!(skipped["response"]["allowed"], false);

    // A ConversionReview as kube-apiserver sends it for a CRD that converts by webhook: a
    // v1beta1 Cluster read in v1beta2, and back.
    let v1beta1 = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "c", "namespace": "default", "uid": "6f1b8c3e-0000-4000-8000-000000000001"},
        "spec": {
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster", "name": "c", "namespace": "default"},
            "topology": {"class": "quick-start", "version": "v1.30.4",
                         "controlPlane": {"replicas": 1, "nodeDrainTimeout": "1m30s"}},
        },
    });
    let conversion_review = |desired: &str, objects: Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "1c7f2a34-5555-6666-7777-888899990000", "desiredAPIVersion": desired, "objects": objects},
        })
    };
    let up = post(
        "/convert",
        &conversion_review("cluster.x-k8s.io/v1beta2", json!([v1beta1])),
    )
    .await
    .unwrap();
    let response = &up["response"];
    assert_eq!(up["kind"], "ConversionReview");
    assert_eq!(response["uid"], "1c7f2a34-5555-6666-7777-888899990000");
    assert_eq!(response["result"]["status"], "Success", "{up}");
    let hub = &response["convertedObjects"][0];
    assert_eq!(hub["apiVersion"], "cluster.x-k8s.io/v1beta2");
    assert_eq!(hub["spec"]["topology"]["classRef"]["name"], "quick-start");
    assert_eq!(
        hub["spec"]["topology"]["controlPlane"]["deletion"]["nodeDrainTimeoutSeconds"],
        90
    );
    assert_eq!(
        hub["spec"]["infrastructureRef"],
        json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "c"})
    );
    assert_eq!(hub["metadata"]["uid"], v1beta1["metadata"]["uid"]);
    let down = post(
        "/convert",
        &conversion_review("cluster.x-k8s.io/v1beta1", json!([hub])),
    )
    .await
    .unwrap();
    assert_eq!(down["response"]["convertedObjects"][0], v1beta1);
    // An object that cannot be converted fails the review, naming the field.
    let mut bad = v1beta1.clone();
    bad["spec"]["topology"]["controlPlane"]["nodeDrainTimeout"] = json!("soon");
    let failed = post(
        "/convert",
        &conversion_review("cluster.x-k8s.io/v1beta2", json!([bad])),
    )
    .await
    .unwrap();
    assert_eq!(failed["response"]["result"]["status"], "Failure");
    let message = failed["response"]["result"]["message"].as_str().unwrap();
    assert!(
        message.contains("spec.topology.controlPlane.nodeDrainTimeout"),
        "{message}"
    );

    // Each review is counted by path and code, as controller-runtime's webhook server does.
    let scraped = tokio::task::spawn_blocking(move || {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", metrics_port)).unwrap();
        write!(stream, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response
    })
    .await
    .unwrap();
    let body = scraped.split_once("\r\n\r\n").unwrap().1;
    let scrape = crate::common::prometheus::Scrape::parse(body);
    let reviews = |webhook: &str| {
        scrape.sum(
            "controller_runtime_webhook_requests_total",
            &[("webhook", webhook), ("code", "200")],
        )
    };
    assert!(reviews("/mutate") >= 1.0, "{body}");
    assert_eq!(reviews("/validate"), 2.0, "{body}");
    assert!(
        scrape.sum(
            "controller_runtime_webhook_latency_seconds_count",
            &[("webhook", "/validate")]
        ) == 2.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}
