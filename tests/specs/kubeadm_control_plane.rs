//! The KubeadmControlPlane controller.

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use capictl::api::{Cluster, KubeadmConfig, KubeadmControlPlane, Machine};
use k8s_openapi::api::core::v1::Secret;

use crate::common::fixtures::{
    apply_in_memory_cluster, in_memory_flavor, kubeadm_cluster, kubeadm_management,
    machine_health_check, node_not_ready,
};
use crate::common::lifecycle::*;

const CONTROL_PLANE: &str = "cluster.x-k8s.io/control-plane";

fn kcps(client: &kube::Client) -> Api<KubeadmControlPlane> {
    Api::namespaced(client.clone(), NS)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_even_control_plane_is_refused_and_three_join_one_at_a_time() {
    let client = kubeadm_cluster(1, "v1.28.13").await;
    let kcps = kcps(&client);
    // Even counts are refused (stacked etcd).
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
    until("etcd has the three members", 30, async || {
        let s = kcps.get("k1-control-plane").await.ok()?.status?;
        (condition_true(s.conditions.as_ref(), "EtcdClusterHealthy")
            && condition_true(s.conditions.as_ref(), "ControlPlaneComponentsHealthy"))
        .then_some(())
    })
    .await;
    assert_eq!(
        status
            .initialization
            .and_then(|i| i.control_plane_initialized),
        Some(true),
        "initialized once kube-system/kubeadm-config exists"
    );
    // Each control-plane Machine says how its static Pods and etcd member are, and is Ready
    // only with them healthy (its readiness gates).
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let health = [
        "APIServerPodHealthy",
        "ControllerManagerPodHealthy",
        "SchedulerPodHealthy",
        "EtcdPodHealthy",
        "EtcdMemberHealthy",
    ];
    for m in machines
        .list(&ListParams::default().labels(CONTROL_PLANE))
        .await
        .unwrap()
    {
        let gates: Vec<String> = m
            .spec
            .readiness_gates
            .iter()
            .flatten()
            .map(|g| g.condition_type.clone())
            .collect();
        let name = m.name_any();
        assert_eq!(gates, health, "{name}");
        let conditions = m.status.and_then(|s| s.conditions);
        for t in health {
            assert!(
                condition_true(conditions.as_ref(), t),
                "{name} {t}: {conditions:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_replaces_control_plane_machines_one_at_a_time() {
    let client = kubeadm_cluster(3, "v1.28.13").await;
    let kcps = kcps(&client);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
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
    assert_eq!(
        kcps.get("k1-control-plane").await.unwrap().spec.version,
        "v1.28.13"
    );

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
            let ready_live = live.clone().filter(|m| machine_ready(m)).count();
            assert!(
                ready_live >= 3,
                "only {ready_live} Ready control-plane Machines during the upgrade"
            );
            most = most.max(cps.len());
            let done = cps.len() == 3
                && cps
                    .iter()
                    .all(|m| m.spec.version.as_deref() == Some("v1.29.10") && machine_ready(m));
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_control_plane_machine_is_remediated_keeping_etcd_quorum() {
    let client = kubeadm_cluster(3, "v1.28.13").await;
    let kcps = kcps(&client);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    // The Machine and its etcd member go, a new Machine replaces it.
    apply(
        &client,
        machine_health_check("k1", "k1-control-plane", json!({CONTROL_PLANE: ""}), 1),
    )
    .await;
    let control_plane = ListParams::default().labels(CONTROL_PLANE);
    let victim = machines.list(&control_plane).await.unwrap().items[0].name_any();
    node_not_ready(&workload(&client, "k1").await, &victim).await;
    until(
        "the unhealthy control-plane Machine is replaced",
        90,
        async || {
            let list = machines.list(&control_plane).await.ok()?.items;
            let ready_count = list.iter().filter(|m| machine_ready(m)).count();
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_kubeadm_cluster_removes_every_object_and_secret() {
    let client = kubeadm_cluster(1, "v1.28.13").await;
    let kcps = kcps(&client);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let configs: Api<KubeadmConfig> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    clusters
        .delete("k1", &DeleteParams::default())
        .await
        .unwrap();
    let all = ListParams::default();
    until("everything is gone", 120, async || {
        let left = machines.list(&all).await.unwrap().items.len()
            + kcps.list(&all).await.unwrap().items.len()
            + configs.list(&all).await.unwrap().items.len()
            + clusters.list(&all).await.unwrap().items.len();
        (left == 0).then_some(())
    })
    .await;
    // The Secrets (certificates, kubeconfig, bootstrap data) go with their owners.
    until("the cluster's Secrets are gone", 30, async || {
        let left: Vec<String> = secrets
            .list(&all)
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

/// The user's own CA, as `<cluster>-ca` with the keys upstream's Secret has.
async fn bring_ca(client: &kube::Client, cluster: &str, cert: &str, key: &str) {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{cluster}-ca"), "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"tls.crt": cert, "tls.key": key},
    }))
    .unwrap();
    secrets.create(&Default::default(), &secret).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clusters_come_up_with_brought_or_asked_for_cas_and_name_an_unusable_one() {
    use capictl::api::InMemoryCluster;
    let client = kubeadm_management().await;
    // RSA (PKCS#1, as `openssl genrsa -traditional` and kubeadm write it) and EC (SEC1, as
    // `openssl ecparam -genkey` writes it).
    let cas = [
        (
            "rsa",
            include_str!("../../src/apiserver/testdata/rsa-pkcs1.crt"),
            include_str!("../../src/apiserver/testdata/rsa-pkcs1.key"),
            "openssl-rsa-ca",
        ),
        (
            "ec",
            include_str!("../../src/apiserver/testdata/ec-sec1.crt"),
            include_str!("../../src/apiserver/testdata/ec-sec1.key"),
            "openssl-ec-ca",
        ),
    ];
    for (name, cert, key, _) in cas {
        bring_ca(&client, name, cert, key).await;
        apply_in_memory_cluster(&client, name, "v1.29.10", 1, 0).await;
    }
    bring_ca(
        &client,
        "broken",
        include_str!("../../src/apiserver/testdata/ec-sec1.crt"),
        "-----BEGIN EC PRIVATE KEY-----\nMAMCAQE=\n-----END EC PRIVATE KEY-----\n",
    )
    .await;
    apply_in_memory_cluster(&client, "broken", "v1.29.10", 1, 0).await;
    // No CA brought: the control plane makes its CAs and admin key of its encryptionAlgorithm.
    for mut doc in in_memory_flavor("rsa-made", "v1.31.2", 1, 0) {
        if doc["kind"] == "KubeadmControlPlane" {
            doc["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["encryptionAlgorithm"] =
                json!("RSA-2048");
        }
        apply(&client, doc).await;
    }

    let clusters: Api<Cluster> = Api::namespaced(client.clone(), NS);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let made = ("rsa-made", "", "", "CN=kubernetes");
    for (name, _, _, issuer) in cas.into_iter().chain([made]) {
        until(&format!("Cluster {name} is Available"), 120, async || {
            let c = clusters.get(name).await.ok()?;
            condition_true(c.status.as_ref()?.conditions.as_ref(), "Available").then_some(())
        })
        .await;
        // Its admin kubeconfig's certificate is signed by the user's CA.
        let kubeconfig = secrets.get(&format!("{name}-kubeconfig")).await.unwrap();
        let text = String::from_utf8(kubeconfig.data.unwrap()["value"].0.clone()).unwrap();
        let config: serde_json::Value = capictl::yaml::from_str(&text).unwrap();
        use base64::Engine;
        let pem = base64::engine::general_purpose::STANDARD
            .decode(
                config["users"][0]["user"]["client-certificate-data"]
                    .as_str()
                    .unwrap(),
            )
            .unwrap();
        let der = rustls::pki_types::pem::PemObject::from_pem_slice(&pem)
            .map(|c: rustls::pki_types::CertificateDer| c.to_vec())
            .unwrap();
        let (_, parsed) = x509_parser::parse_x509_certificate(&der).unwrap();
        assert!(
            parsed.issuer().to_string().contains(issuer),
            "{}",
            parsed.issuer()
        );
        if name == "rsa-made" {
            let rsa_bits = |der: &[u8], what: &str| {
                let (_, cert) = x509_parser::parse_x509_certificate(der).unwrap();
                match cert.public_key().parsed().unwrap() {
                    x509_parser::public_key::PublicKey::RSA(k) => k.key_size(),
                    other => panic!("{what}: not an RSA key: {other:?}"),
                }
            };
            assert_eq!(rsa_bits(&der, "the admin client key"), 2048);
            for purpose in ["ca", "etcd", "proxy"] {
                let ca = secrets.get(&format!("{name}-{purpose}")).await.unwrap();
                let pem = ca.data.unwrap()["tls.crt"].0.clone();
                let der = rustls::pki_types::pem::PemObject::from_pem_slice(&pem)
                    .map(|c: rustls::pki_types::CertificateDer| c.to_vec())
                    .unwrap();
                assert_eq!(rsa_bits(&der, &format!("{name}-{purpose}")), 2048);
            }
        }
    }
    // The broken one says which Secret cannot sign, and why.
    let infra: Api<InMemoryCluster> = Api::namespaced(client.clone(), NS);
    let message = until("the broken cluster says why", 60, async || {
        let ic = infra
            .list(&Default::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|i| {
                i.labels()
                    .get("cluster.x-k8s.io/cluster-name")
                    .map(String::as_str)
                    == Some("broken")
            })?;
        let ready = ic
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == "Ready")?;
        (ready.reason == "CertificateAuthorityUnusable").then_some(ready.message)
    })
    .await;
    assert!(message.contains("Secret broken-ca: tls.key"), "{message}");
}

/// The control plane provider reaches etcd through the first member that answers: a member
/// that stopped (removed, its Pod not yet gone) is passed over instead of failing the calls
/// a balanced client would send it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_is_reached_through_the_first_member_that_answers() {
    // It waits for etcd on a runtime of its own: started off this one.
    let (etcd, files) = std::thread::spawn(crate::common::Etcd::start_tls)
        .join()
        .unwrap();
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap();
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(read(&files.ca)))
        .identity(etcd_client::Identity::from_pem(
            read(&files.cert),
            read(&files.key),
        ));
    // A stopped member behind its tunnel: the connection is taken, then closed.
    let stopped = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let stopped_url = format!("https://{}", stopped.local_addr().unwrap());
    std::thread::spawn(move || {
        for connection in stopped.incoming() {
            drop(connection);
        }
    });
    let first = capictl::workload::etcd::first_answering(
        [
            (stopped_url.clone(), stopped_url.clone()),
            (etcd.endpoint.clone(), etcd.endpoint.clone()),
        ],
        &tls,
    )
    .await
    .unwrap_or_else(|e| panic!("the live member is passed over: {e}"));
    let mut client = first;
    for _ in 0..5 {
        client
            .member_list()
            .await
            .expect("every call reaches the live member");
    }
    let none = capictl::workload::etcd::first_answering(
        [(stopped_url.clone(), stopped_url.clone())],
        &tls,
    )
    .await
    .err()
    .expect("a stopped member alone does not answer");
    assert!(
        none.to_string()
            .starts_with("etcd cannot be reached: no etcd member answers: https://127.0.0.1:"),
        "{none}"
    );
    // A failure names the member by the URL it advertises, not the tunnel that reached it.
    let named = capictl::workload::etcd::first_answering(
        [("https://172.18.0.5:2379".to_string(), stopped_url)],
        &tls,
    )
    .await
    .err()
    .expect("a stopped member alone does not answer");
    assert!(
        named.to_string().starts_with(
            "etcd cannot be reached: no etcd member answers: https://172.18.0.5:2379: "
        ),
        "{named}"
    );
}
