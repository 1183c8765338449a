//! Node containers started by hand on this machine's Docker Engine, bootstrapped with data the
//! project's own KubeadmConfig controller renders on an embedded management cluster (no
//! Docker provider: the test plays its part), for the node tests and the node benchmark.

use std::time::{Duration, Instant};

use bollard::Docker;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use capictl::api::{Cluster, CrdSet, KubeadmConfig, Machine};
use capictl::manager;
use capictl::providers::docker::{self, bootstrap, container, images};

use super::lifecycle::{NS, apply, management_without_controllers, until};

pub const VERSION: &str = "v1.28.13";

/// The Docker Engine, or a failure that says it is needed.
pub async fn engine() -> Docker {
    match docker::connect().await {
        Ok(d) if d.ping().await.is_ok() => d,
        other => panic!(
            "these tests need a Docker Engine and none answers ({:?}): start dockerd, or set DOCKER_HOST",
            other.err()
        ),
    }
}

/// `capictl images build` for `VERSION`, as a user runs it.
pub fn build_images() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_capictl"))
        .args(["images", "build", "--kubernetes-version", VERSION])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "capictl images build failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A cluster of node containers and the management cluster that renders their bootstrap data.
pub struct NodeCluster {
    pub docker: Docker,
    pub management: Client,
    pub name: String,
    containers: Vec<String>,
}

impl Drop for NodeCluster {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = std::process::Command::new("docker")
                .args(["rm", "-f", "-v", c])
                .output();
        }
    }
}

fn kubeadm_config_spec(control_plane: bool) -> Value {
    let mut spec = json!({
        "clusterConfiguration": {"apiServer": {"certSANs": ["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"]}},
        "initConfiguration": {"nodeRegistration": {}},
        "joinConfiguration": {"nodeRegistration": {}},
    });
    if control_plane {
        spec["joinConfiguration"]["controlPlane"] = json!({});
    }
    spec
}

impl NodeCluster {
    /// Images built, the `kind` network there, a management cluster running the KubeadmConfig
    /// controller, and a Cluster `name` whose infrastructure counts as provisioned once the
    /// first node's address is known.
    pub async fn start(name: &str) -> NodeCluster {
        NodeCluster::start_with_ca(name, None).await
    }

    /// [`NodeCluster::start`] with the cluster CA the user brought (certificate and key PEM,
    /// in the `<cluster>-ca` Secret before anything is made from it).
    pub async fn start_with_ca(name: &str, ca: Option<(&str, &str)>) -> NodeCluster {
        capictl::install_crypto_provider();
        let docker = engine().await;
        build_images();
        container::ensure_network(&docker).await.unwrap();
        let management =
            management_without_controllers(&[CrdSet::Core, CrdSet::KubeadmBootstrap]).await;
        let c = management.clone();
        let options = manager::Options {
            providers: vec![CrdSet::KubeadmBootstrap.provider_label().to_string()],
            ..Default::default()
        };
        tokio::spawn(async move { manager::run(c, options, std::future::pending()).await });
        let name = format!("{name}-{}", capictl::apiserver::object::random_suffix());
        if let Some((cert, key)) = ca {
            let secret: Secret = serde_json::from_value(json!({
                "metadata": {"name": format!("{name}-ca"), "labels": {"cluster.x-k8s.io/cluster-name": name}},
                "type": "cluster.x-k8s.io/secret",
                "stringData": {"tls.crt": cert, "tls.key": key},
            }))
            .unwrap();
            Api::<Secret>::namespaced(management.clone(), NS)
                .create(&Default::default(), &secret)
                .await
                .unwrap();
        }
        apply(&management, json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": name},
            "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": name}}
        }))
        .await;
        NodeCluster {
            docker,
            management,
            name,
            containers: Vec::new(),
        }
    }

    pub fn container(&self, machine: &str) -> String {
        format!("{}-{machine}", self.name)
    }

    /// Starts the node container of `machine` (not yet bootstrapped).
    pub async fn run_container(&mut self, machine: &str, control_plane: bool) -> String {
        let name = self.container(machine);
        let spec = container::Spec {
            name: name.clone(),
            namespace: NS.into(),
            cluster: self.name.clone(),
            role: if control_plane {
                container::Role::ControlPlane
            } else {
                container::Role::Worker
            },
            image: images::node_image(VERSION),
            privileged: false,
            labels: Default::default(),
            mounts: vec![],
        };
        self.containers.push(name.clone());
        container::create_and_start(&self.docker, &spec)
            .await
            .unwrap();
        name
    }

    pub async fn inspect(&self, machine: &str) -> bollard::models::ContainerInspectResponse {
        container::inspect(&self.docker, &self.container(machine))
            .await
            .unwrap()
            .unwrap()
    }

    pub async fn ip(&self, machine: &str) -> String {
        container::ip_of(&self.inspect(machine).await).expect("the node has an address")
    }

    /// The first control plane's address becomes the Cluster's endpoint (a load balancer's, in
    /// the Docker provider), and the infrastructure is provisioned.
    pub async fn provision(&self, endpoint_host: &str) {
        let clusters: Api<Cluster> = Api::namespaced(self.management.clone(), NS);
        clusters
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": {"host": endpoint_host, "port": 6443}}})))
            .await
            .unwrap();
        clusters
            .patch_status(
                &self.name,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"status": {"initialization": {"infrastructureProvisioned": true}}}),
                ),
            )
            .await
            .unwrap();
    }

    /// What the control plane provider does once the first control plane is up: the admin
    /// kubeconfig Secret and Cluster's ControlPlaneInitialized.
    pub async fn initialized(&self, endpoint_host: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.management.clone(), NS);
        let ca = capictl::kubeadm::certs::ca_from_secret(
            &secrets.get(&format!("{}-ca", self.name)).await.unwrap(),
        )
        .unwrap();
        let cluster = Api::<Cluster>::namespaced(self.management.clone(), NS)
            .get(&self.name)
            .await
            .unwrap();
        let owner = capictl::reconcile::common::owner_reference(&cluster, true);
        let secret = capictl::kubeadm::certs::kubeconfig_secret(
            &self.name,
            NS,
            &format!("https://{endpoint_host}:6443"),
            &ca,
            owner,
            capictl::pki::KeyAlgorithm::default(),
        )
        .unwrap();
        secrets.create(&Default::default(), &secret).await.unwrap();
        Api::<Cluster>::namespaced(self.management.clone(), NS)
            .patch_status(&self.name, &PatchParams::default(), &Patch::Merge(json!({"status": {"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": true}}})))
            .await
            .unwrap();
    }

    /// The Machine and KubeadmConfig of `machine`; the bootstrap data the controller renders.
    pub async fn bootstrap_data(&self, machine: &str, control_plane: bool) -> String {
        let mut labels = json!({"cluster.x-k8s.io/cluster-name": self.name});
        if control_plane {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
        }
        let full = self.container(machine);
        apply(&self.management, json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": full, "labels": labels},
            "spec": {
                "clusterName": self.name, "version": VERSION,
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": full}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": full}
            }
        }))
        .await;
        let m = Api::<Machine>::namespaced(self.management.clone(), NS)
            .get(&full)
            .await
            .unwrap();
        apply(&self.management, json!({
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": full, "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "name": full, "uid": m.metadata.uid, "controller": true}]},
            "spec": kubeadm_config_spec(control_plane),
        }))
        .await;
        let configs: Api<KubeadmConfig> = Api::namespaced(self.management.clone(), NS);
        let secret = until(
            &format!("the bootstrap data of {full} is rendered"),
            60,
            async || configs.get(&full).await.ok()?.status?.data_secret_name,
        )
        .await;
        let secret = Api::<Secret>::namespaced(self.management.clone(), NS)
            .get(&secret)
            .await
            .unwrap();
        String::from_utf8(secret.data.unwrap()["value"].0.clone()).unwrap()
    }

    /// Runs the bootstrap data in the node by exec, as the Docker provider does; panics with
    /// the failing command's output.
    pub async fn bootstrap(&self, machine: &str, data: &str) {
        let (commands, skipped) = bootstrap::commands(data).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        if let Err(e) = bootstrap::run(
            &self.docker,
            &self.container(machine),
            &commands,
            &|_, _, _| {},
        )
        .await
        {
            let logs = std::process::Command::new("docker")
                .args(["logs", "--tail", "40", &self.container(machine)])
                .output()
                .unwrap();
            panic!(
                "bootstrapping {machine} failed:\n{e}\nnode log:\n{}{}",
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
        }
    }

    /// The admin kubeconfig kubeadm wrote in `machine`, pointed at the port it publishes on
    /// 127.0.0.1.
    pub async fn admin_kubeconfig(&self, machine: &str) -> String {
        let out = docker::exec(
            &self.docker,
            &self.container(machine),
            &["cat".into(), "/etc/kubernetes/admin.conf".into()],
            None,
        )
        .await
        .unwrap();
        assert_eq!(out.code, 0, "{}", out.stderr);
        let port =
            container::host_port_of(&self.inspect(machine).await, container::API_SERVER_PORT)
                .unwrap();
        let ip = self.ip(machine).await;
        out.stdout.replace(
            &format!("https://{ip}:6443"),
            &format!("https://127.0.0.1:{port}"),
        )
    }

    pub async fn workload(&self, machine: &str) -> Client {
        let config =
            kube::config::Kubeconfig::from_yaml(&self.admin_kubeconfig(machine).await).unwrap();
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    }

    /// A machine from a bare container to a Ready Node: the time it took.
    pub async fn add_node(
        &mut self,
        machine: &str,
        control_plane: bool,
        workload_via: Option<&str>,
    ) -> Duration {
        let started = Instant::now();
        self.run_container(machine, control_plane).await;
        if workload_via.is_none() {
            let ip = self.ip(machine).await;
            self.provision(&ip).await;
        }
        let data = self.bootstrap_data(machine, control_plane).await;
        self.bootstrap(machine, &data).await;
        let workload = self.workload(workload_via.unwrap_or(machine)).await;
        let nodes: Api<Node> = Api::all(workload);
        let node = self.container(machine);
        until(&format!("Node {node} is Ready"), 60, async || {
            let n = nodes.get(&node).await.ok()?;
            node_ready(&n).then_some(())
        })
        .await;
        started.elapsed()
    }

    /// An etcd client of the cluster's etcd through `machine`'s member, with a client
    /// certificate from the `<cluster>-etcd` CA (as the control plane provider makes one).
    pub async fn etcd(&self, machine: &str) -> etcd_client::Client {
        self.try_etcd(machine).await.unwrap()
    }

    pub async fn try_etcd(&self, machine: &str) -> Result<etcd_client::Client, etcd_client::Error> {
        let secrets: Api<Secret> = Api::namespaced(self.management.clone(), NS);
        let ca = secrets.get(&format!("{}-etcd", self.name)).await.unwrap();
        etcd_through(&ca, &self.ip(machine).await).await
    }

    /// The memory a container uses now (MiB).
    pub async fn memory_mib(&self, machine: &str) -> f64 {
        let out = std::process::Command::new("docker")
            .args([
                "stats",
                "--no-stream",
                "--format",
                "{{.MemUsage}}",
                &self.container(machine),
            ])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let used = text.split('/').next().unwrap_or_default().trim();
        let (number, unit) = used.split_at(
            used.find(|c: char| c.is_ascii_alphabetic())
                .unwrap_or(used.len()),
        );
        let n: f64 = number.parse().unwrap_or(0.0);
        match unit {
            "GiB" => n * 1024.0,
            "KiB" => n / 1024.0,
            _ => n,
        }
    }
}

/// An etcd client of a cluster's etcd through the member at `ip`, with a client certificate
/// from the cluster's `<cluster>-etcd` CA Secret (as the control plane provider makes one).
pub async fn etcd_through(
    ca: &Secret,
    ip: &str,
) -> Result<etcd_client::Client, etcd_client::Error> {
    let ca = capictl::kubeadm::certs::ca_from_secret(ca).unwrap();
    let client = ca.client_certificate("cluster-api.x-k8s.io", &[]).unwrap();
    let tls = etcd_client::TlsOptions::new()
        .ca_certificate(etcd_client::Certificate::from_pem(&ca.ca.cert))
        .identity(etcd_client::Identity::from_pem(&client.cert, &client.key));
    let options = etcd_client::ConnectOptions::new()
        .with_tls(tls)
        .with_connect_timeout(Duration::from_secs(5))
        .with_timeout(Duration::from_secs(10));
    etcd_client::Client::connect([format!("https://{ip}:2379")], Some(options)).await
}

pub fn node_ready(n: &Node) -> bool {
    condition(n, "Ready") == Some("True".into())
}

pub fn condition(n: &Node, t: &str) -> Option<String> {
    n.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}
