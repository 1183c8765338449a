//! capictl's node image on this machine's Docker Engine, without the Docker provider: node
//! containers started by hand, bootstrapped by exec with data the KubeadmConfig controller
//! renders. Three control planes on real etcd and a worker that joins by bootstrap token and
//! CertificateSigningRequest; a stopped worker goes Unknown; a restarted control plane comes
//! back. Needs a Docker Engine (and root, for `capictl images build`'s debootstrap).

use std::time::Instant;

use capictl::providers::docker::container;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, ListParams};

use crate::common::docker::{NodeCluster, VERSION, condition, node_ready};
use crate::common::lifecycle::until;

fn kubectl() -> String {
    std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

fn running_and_ready(p: &Pod) -> bool {
    let s = p.status.as_ref();
    s.and_then(|s| s.phase.as_deref()) == Some("Running")
        && s.and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_planes_on_real_etcd_a_worker_by_csr_and_recovery() {
    // The cluster CA is one the user brought as openssl writes it (RSA, PKCS#1): the nodes'
    // certificates, and the worker's kubelet certificate by CSR, are signed with it.
    let mut cluster = NodeCluster::start_with_ca(
        "nodes",
        Some((
            include_str!("../../src/apiserver/testdata/rsa-pkcs1.crt"),
            include_str!("../../src/apiserver/testdata/rsa-pkcs1.key"),
        )),
    )
    .await;

    // The first control plane: kubectl through its published port sees a Ready Node at the
    // image's version and the four static pods Running.
    let first = cluster.add_node("cp1", true, None).await;
    eprintln!("first control plane Ready after {first:.1?}");
    let kubeconfig = std::env::temp_dir().join(format!("{}-admin.conf", cluster.name));
    capictl::pki::write_private(
        &kubeconfig,
        cluster.admin_kubeconfig("cp1").await.as_bytes(),
    )
    .unwrap();
    let out = std::process::Command::new(kubectl())
        .args([
            "--kubeconfig",
            &kubeconfig.display().to_string(),
            "get",
            "nodes",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nodes: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let node = &nodes["items"][0];
    assert_eq!(node["metadata"]["name"], cluster.container("cp1"));
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], VERSION);
    assert!(
        node["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    );
    let workload = cluster.workload("cp1").await;
    let pods: Api<Pod> = Api::namespaced(workload.clone(), "kube-system");
    let cp1 = cluster.container("cp1");
    until(
        "the four static pods of cp1 are Running and Ready",
        60,
        async || {
            let listed = pods
                .list(&ListParams::default().labels("tier=control-plane"))
                .await
                .ok()?;
            let ready: Vec<String> = listed
                .items
                .iter()
                .filter(|p| running_and_ready(p))
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            [
                "etcd",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
            ]
            .iter()
            .all(|c| ready.contains(&format!("{c}-{cp1}")))
            .then_some(())
        },
    )
    .await;
    let _ = std::fs::remove_file(&kubeconfig);

    // Two more control planes join; etcd has three started voting members.
    let cp1_ip = cluster.ip("cp1").await;
    cluster.initialized(&cp1_ip).await;
    let joined = cluster.add_node("cp2", true, Some("cp1")).await;
    eprintln!("joining control plane Ready after {joined:.1?}");
    cluster.add_node("cp3", true, Some("cp1")).await;
    let mut etcd = cluster.etcd("cp1").await;
    let members = etcd.member_list().await.unwrap();
    let mut names: Vec<String> = members
        .members()
        .iter()
        .map(|m| m.name().to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["cp1", "cp2", "cp3"].map(|m| cluster.container(m)));
    assert!(
        members.members().iter().all(|m| !m.is_learner()),
        "every member votes"
    );

    // A worker joins with the bootstrap token and gets its kubelet certificate by CSR.
    let worker = cluster.add_node("w1", false, Some("cp1")).await;
    eprintln!("worker Ready after {worker:.1?}");
    let nodes: Api<Node> = Api::all(workload.clone());
    let w1 = nodes.get(&cluster.container("w1")).await.unwrap();
    assert!(
        !w1.metadata
            .labels
            .unwrap_or_default()
            .contains_key("node-role.kubernetes.io/control-plane")
    );
    let csrs: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> =
        Api::all(workload.clone());
    let signed = csrs.list(&ListParams::default()).await.unwrap();
    assert!(
        signed.items.iter().any(|c| c
            .spec
            .username
            .as_deref()
            .is_some_and(|u| u.starts_with("system:bootstrap:"))
            && c.status
                .as_ref()
                .and_then(|s| s.certificate.as_ref())
                .is_some()),
        "the worker's CSR was made with the bootstrap token and signed"
    );

    // A stopped worker's Node goes Unknown within 60 s.
    let stopped = Instant::now();
    cluster
        .docker
        .stop_container(
            &cluster.container("w1"),
            None::<bollard::query_parameters::StopContainerOptions>,
        )
        .await
        .unwrap();
    let w1 = cluster.container("w1");
    until(
        "the stopped worker's Node is Unknown and unreachable",
        60,
        async || {
            let n = nodes.get(&w1).await.ok()?;
            let unreachable = n
                .spec
                .as_ref()?
                .taints
                .as_ref()?
                .iter()
                .any(|t| t.key == "node.kubernetes.io/unreachable");
            (condition(&n, "Ready").as_deref() == Some("Unknown") && unreachable).then_some(())
        },
    )
    .await;
    eprintln!("stopped worker Unknown after {:.1?}", stopped.elapsed());

    // A restarted control plane brings its etcd member and API server back, on the address it
    // had: it is pinned, so the addresses freed by the stopped worker and by other clusters'
    // removed containers (Docker's first choice for a restarted container) are not taken.
    let cp2_address = cluster.ip("cp2").await;
    let pinned = cluster
        .inspect("cp2")
        .await
        .network_settings
        .and_then(|n| n.networks)
        .and_then(|n| n.get(container::NETWORK)?.ipam_config.clone()?.ipv4_address);
    assert_eq!(
        pinned.as_deref(),
        Some(cp2_address.as_str()),
        "cp2's address is pinned in its configuration"
    );
    cluster
        .docker
        .restart_container(
            &cluster.container("cp2"),
            None::<bollard::query_parameters::RestartContainerOptions>,
        )
        .await
        .unwrap();
    let cp2 = cluster.container("cp2");
    assert_eq!(
        cluster.ip("cp2").await,
        cp2_address,
        "cp2 came back on another address"
    );
    until(
        "cp2's API server serves again through its published port",
        90,
        async || {
            let client = cluster.workload("cp2").await;
            let n = Api::<Node>::all(client).get(&cp2).await.ok()?;
            node_ready(&n).then_some(())
        },
    )
    .await;
    until(
        "cp2's mirror Pods are Running and Ready again",
        60,
        async || {
            let api = pods.get(&format!("kube-apiserver-{cp2}")).await.ok()?;
            let etcd_pod = pods.get(&format!("etcd-{cp2}")).await.ok()?;
            (running_and_ready(&api) && running_and_ready(&etcd_pod)).then_some(())
        },
    )
    .await;
    // cp2's own member answers with a leader (a fresh connection each try: its address is
    // read again, in case the restart gave the container another one).
    let deadline = Instant::now() + std::time::Duration::from_secs(60);
    let mut last;
    loop {
        match cluster.try_etcd("cp2").await {
            Ok(mut c) => match c.status().await {
                Ok(s) if s.leader() != 0 => break,
                Ok(_) => last = "no leader yet".into(),
                Err(e) => last = format!("status: {e}"),
            },
            Err(e) => last = format!("connecting: {e}"),
        }
        assert!(
            Instant::now() < deadline,
            "cp2's etcd member did not answer with a leader within 60s after the restart: {last}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let members = etcd.member_list().await.unwrap();
    assert_eq!(members.members().len(), 3, "the restart added no member");
}

/// The controller image `capictl images build` makes, offline, runs capictl as `init`'s
/// Deployments run it: their command (`capictl`, found on PATH) as the non-root user they
/// name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_image_runs_capictl_as_inits_deployments_do() {
    use bollard::query_parameters::{
        CreateContainerOptions, LogsOptions, RemoveContainerOptions, StartContainerOptions,
        WaitContainerOptions,
    };
    use futures::StreamExt;
    crate::common::docker::build_images();
    let docker = crate::common::docker::engine().await;
    let image = capictl::build_info::controller_image();
    let config = docker.inspect_image(&image).await.unwrap().config.unwrap();
    assert_eq!(config.user.as_deref(), Some("65532:65532"));
    assert_eq!(
        config
            .labels
            .unwrap_or_default()
            .get(capictl::providers::docker::images::ROLE_LABEL)
            .map(String::as_str),
        Some("controller")
    );
    let name = format!(
        "capictl-controller-image-{}",
        &uuid::Uuid::new_v4().to_string()[..8]
    );
    let body = bollard::models::ContainerCreateBody {
        image: Some(image.clone()),
        entrypoint: Some(vec!["capictl".into()]),
        cmd: Some(vec!["version".into()]),
        network_disabled: Some(true),
        ..Default::default()
    };
    let options = CreateContainerOptions {
        name: Some(name.clone()),
        ..Default::default()
    };
    docker.create_container(Some(options), body).await.unwrap();
    docker
        .start_container(&name, None::<StartContainerOptions>)
        .await
        .unwrap();
    let waited = docker
        .wait_container(&name, None::<WaitContainerOptions>)
        .next()
        .await
        .expect("the container ends");
    let mut output = String::new();
    let options = LogsOptions {
        stdout: true,
        stderr: true,
        ..Default::default()
    };
    let mut logs = docker.logs(&name, Some(options));
    while let Some(chunk) = logs.next().await {
        output.push_str(&chunk.unwrap().to_string());
    }
    let removal = RemoveContainerOptions {
        force: true,
        ..Default::default()
    };
    docker.remove_container(&name, Some(removal)).await.unwrap();
    assert!(
        waited.is_ok(),
        "capictl version failed in {image}: {waited:?}\n{output}"
    );
    assert!(
        output.contains(capictl::build_info::VERSION),
        "capictl version in {image} says: {output}"
    );
}
