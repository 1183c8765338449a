//! `kubeadm` in a capictl node: `kubeadm init --config` and `kubeadm join --config` as
//! Cluster API's bootstrap data runs them. Each step is idempotent (a second run finds what the
//! first made and goes on), prints kubeadm-like progress on stdout, and a failure says on
//! stderr which phase failed and why — the Docker provider shows those lines to the user.
//!
//! - `init`: kubeadm's certificates and kubeconfigs from the CAs in the bootstrap data, the
//!   kubelet flags, the four static pod manifests (the node agent starts them), a wait for the
//!   API server, then the uploads ([`upload`]) with `kube-system/kubeadm-config` last.
//! - `join --control-plane`: the cluster's CA pinned by its hash, the configuration read from
//!   `kubeadm-config`, etcd's health checked, this node added as an etcd learner (a member left
//!   by an earlier attempt at this address is reused), its etcd started, promoted once in sync
//!   (the learner is removed again if the join fails), then its API server.

pub mod config;
pub mod etcd;
pub mod manifests;
pub mod pki;
pub mod upload;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use self::config::Config;
use self::pki::Identity;
use super::kubelet::KubeletFlags;
use super::{Layout, NodeError, Result, write_file};

/// How long a join keeps trying to reach the cluster (kubeadm's discovery timeout).
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(300);

/// Retries a request to the cluster being joined until it succeeds or the discovery timeout
/// passes, as kubeadm does: the load balancer may not reach a control plane yet, or the first
/// one may still be uploading. The last error is the one reported.
pub(crate) async fn patiently<T, F, Fut>(what: &str, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<T, kube::Error>>,
{
    let started = Instant::now();
    let mut said = Instant::now();
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) if started.elapsed() < DISCOVERY_TIMEOUT => {
                if said.elapsed() > Duration::from_secs(10) {
                    println!("[discovery] Still trying {what}: {e}");
                    said = Instant::now();
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(NodeError::Failed(format!(
                    "{what} failed for {}s: {e}",
                    DISCOVERY_TIMEOUT.as_secs()
                )));
            }
        }
    }
}

/// How long kubeadm waits for the control plane it started (kubeadm's default is 4 minutes).
const CONTROL_PLANE_WAIT: Duration = Duration::from_secs(240);

/// The taint kubeadm gives control-plane nodes when the configuration names none.
pub const CONTROL_PLANE_TAINT: &str = "node-role.kubernetes.io/control-plane:NoSchedule";
/// Labels kubeadm's mark-control-plane phase sets.
pub const CONTROL_PLANE_LABELS: [&str; 2] = [
    "node-role.kubernetes.io/control-plane",
    "node.kubernetes.io/exclude-from-external-load-balancers",
];

/// What the command line asked of kubeadm.
#[derive(Debug, PartialEq, Eq)]
pub struct Invocation {
    pub command: String,
    pub config: Option<PathBuf>,
    pub control_plane: bool,
}

/// Reads kubeadm's arguments; flags capictl's kubeadm has no use for (`--v`,
/// `--ignore-preflight-errors`, `--skip-phases`, …) are accepted and ignored.
pub fn parse_args(args: &[String]) -> Invocation {
    let mut invocation = Invocation {
        command: String::new(),
        config: None,
        control_plane: false,
    };
    let mut it = args.iter().peekable();
    while let Some(arg) = it.next() {
        if let Some(path) = arg.strip_prefix("--config=") {
            invocation.config = Some(path.into());
        } else if arg == "--config" {
            invocation.config = it.next().map(PathBuf::from);
        } else if arg == "--control-plane" {
            invocation.control_plane = true;
        } else if !arg.starts_with('-') && invocation.command.is_empty() {
            invocation.command = arg.clone();
        }
    }
    invocation
}

/// Runs kubeadm; the exit status is kubeadm's (0 done, 1 failed).
pub async fn run(args: &[String]) -> std::process::ExitCode {
    let invocation = parse_args(args);
    let layout = Layout::from_env();
    let result = match invocation.command.as_str() {
        "init" => init(&layout, &invocation).await,
        "join" => join(&layout, &invocation).await,
        "version" => {
            println!(
                "kubeadm version: &version.Info{{GitVersion:\"{}\", Platform:\"capictl\"}}",
                super::kubernetes_version()
            );
            Ok(())
        }
        other => Err(NodeError::Config(format!(
            "kubeadm {other:?} is not supported by capictl's kubeadm: it runs init and join"
        ))),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error execution phase {}: {e}", phase_of(&invocation));
            std::process::ExitCode::FAILURE
        }
    }
}

fn phase_of(invocation: &Invocation) -> &'static str {
    match invocation.command.as_str() {
        "init" => "init",
        "join" if invocation.control_plane => "control-plane-join",
        _ => "join",
    }
}

fn read_config(layout: &Layout, invocation: &Invocation) -> Result<Config> {
    let path = invocation
        .config
        .clone()
        .ok_or_else(|| NodeError::Config("--config is required: capictl's kubeadm reads the configuration Cluster API's bootstrap data writes".into()))?;
    let path = if path.is_absolute() {
        layout.path(&path.to_string_lossy())
    } else {
        path
    };
    config::parse(&super::read_file(&path)?)
}

/// The node facts every command needs.
struct Node {
    name: String,
    address: String,
    version: String,
}

fn node_facts(config: &Config) -> Result<Node> {
    let ip = super::node_ip().map(|i| i.to_string()).ok_or_else(|| {
        NodeError::Failed("this node has no IP address with a default route".into())
    })?;
    let version = match config.str_at("/kubernetesVersion") {
        "" => super::kubernetes_version(),
        v => v.to_string(),
    };
    Ok(Node {
        name: config.registration(&super::hostname()).name,
        address: config.advertise_address(&ip),
        version,
    })
}

fn identity(config: &Config, node: &Node, endpoint: &str) -> Identity {
    let sans = |pointer: &str| -> Vec<String> {
        config
            .cluster
            .pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    Identity {
        node_name: node.name.clone(),
        address: node.address.clone(),
        endpoint: endpoint.to_string(),
        dns_domain: config.str_at("/networking/dnsDomain").to_string(),
        service_ip: config::service_ip(config.str_at("/networking/serviceSubnet"), 1)
            .map(|ip| ip.to_string())
            .unwrap_or_default(),
        cert_sans: sans("/apiServer/certSANs"),
        etcd_server_sans: sans("/etcd/local/serverCertSANs"),
        etcd_peer_sans: sans("/etcd/local/peerCertSANs"),
    }
}

/// The kubelet flags kubeadm writes for this node.
fn kubelet_flags(config: &Config, node: &Node, control_plane: bool) -> KubeletFlags {
    let registration = config.registration(&super::hostname());
    let mut flags = KubeletFlags {
        hostname_override: (node.name != super::hostname()).then(|| node.name.clone()),
        node_ip: Some(node.address.clone()),
        ..Default::default()
    };
    if control_plane {
        for label in CONTROL_PLANE_LABELS {
            flags.node_labels.insert(label.into(), String::new());
        }
    }
    flags.taints = match &registration.taints {
        Some(taints) => taints
            .iter()
            .filter_map(|t| {
                let key = t["key"].as_str()?;
                let effect = t["effect"].as_str()?;
                Some(match t["value"].as_str() {
                    Some(v) if !v.is_empty() => format!("{key}={v}:{effect}"),
                    _ => format!("{key}:{effect}"),
                })
            })
            .collect(),
        None if control_plane => vec![CONTROL_PLANE_TAINT.into()],
        None => vec![],
    };
    for (name, value) in registration.kubelet_args {
        match name.as_str() {
            "node-labels" => {
                for pair in value.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    flags.node_labels.insert(k.into(), v.into());
                }
            }
            "provider-id" => flags.provider_id = Some(value),
            "register-with-taints" => flags.taints.extend(value.split(',').map(String::from)),
            _ => flags.other.push((name, value)),
        }
    }
    flags
}

/// Writes a file when its content differs (so that the agent sees a change only when there
/// is one).
fn write_if_changed(path: &std::path::Path, contents: &str, mode: u32) -> Result<bool> {
    if std::fs::read_to_string(path).is_ok_and(|c| c == contents) {
        return Ok(false);
    }
    write_file(path, contents.as_bytes(), mode)?;
    Ok(true)
}

fn write_manifest(layout: &Layout, file: &str, manifest: &Value) -> Result<()> {
    let text =
        crate::yaml::to_string(manifest).map_err(|e| NodeError::Failed(format!("{file}: {e}")))?;
    if write_if_changed(&layout.manifests().join(file), &text, 0o600)? {
        println!(
            "[control-plane] Wrote the static Pod manifest {}",
            layout.manifests().join(file).display()
        );
    }
    Ok(())
}

/// The etcd cluster token of this cluster: its name and a digest of its etcd CA, the same on
/// every run and every control plane, different for every cluster.
fn cluster_token(config: &Config, pki_dir: &std::path::Path) -> Result<String> {
    let ca = super::read_file(&pki_dir.join("etcd/ca.crt"))?;
    let digest = ring::digest::digest(&ring::digest::SHA256, ca.as_bytes());
    let hex = crate::pki::hex(&digest.as_ref()[..8]);
    Ok(format!("{}-{hex}", config.str_at("/clusterName")))
}

/// Certificates, kubeconfigs and kubelet flags of a control-plane node.
fn control_plane_files(
    layout: &Layout,
    config: &Config,
    node: &Node,
    endpoint: &str,
) -> Result<Identity> {
    // The flags go first: the kubelet starts once kubelet.conf exists and registers the Node
    // with the taints and labels it reads then (a joining control plane registered untainted,
    // and took workloads, when the flags came after).
    let flags = kubelet_flags(config, node, true);
    write_if_changed(&KubeletFlags::file(layout), &flags.render(), 0o644)?;
    let id = identity(config, node, endpoint);
    let pki_dir = layout.path(config.str_at("/certificatesDir"));
    let policy = config.certificate_policy()?;
    for made in pki::ensure_certificates(&pki_dir, &id, &policy)? {
        println!("[certs] Generated the {made} certificate and key");
    }
    for written in pki::ensure_kubeconfigs(layout, &id, &policy)? {
        println!("[kubeconfig] Wrote {}", written.display());
    }
    Ok(id)
}

/// Waits until `https://<address>:6443/healthz` answers.
async fn wait_for_api_server(address: &str) -> Result<()> {
    println!(
        "[wait-control-plane] Waiting for the kubelet to boot up the control plane as static Pods from directory \"/etc/kubernetes/manifests\""
    );
    let probe = super::static_pods::Probe {
        https: true,
        host: address.to_string(),
        port: config::API_SERVER_PORT,
        path: "/healthz".into(),
    };
    let started = Instant::now();
    while started.elapsed() < CONTROL_PLANE_WAIT {
        if super::probe::check(&probe, Duration::from_secs(2)).await {
            println!(
                "[apiclient] All control plane components are healthy after {:.1} seconds",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(NodeError::Failed(format!(
        "the API server at https://{address}:6443 did not become healthy within {}s: see the node's log (`docker logs <node>`) for etcd's and the API server's output",
        CONTROL_PLANE_WAIT.as_secs()
    )))
}

async fn init(layout: &Layout, invocation: &Invocation) -> Result<()> {
    let mut config = read_config(layout, invocation)?;
    if config.is_join() {
        return Err(NodeError::Config(
            "kubeadm init needs an InitConfiguration, and this is a JoinConfiguration".into(),
        ));
    }
    let node = node_facts(&config)?;
    println!("[init] Using Kubernetes version: {}", node.version);
    let endpoint = config.control_plane_endpoint(&node.address);
    control_plane_files(layout, &config, &node, &endpoint)?;
    let inputs = manifests::Inputs {
        config: &config,
        node_name: &node.name,
        address: &node.address,
        kubernetes_version: &node.version,
        initial_cluster: vec![format!(
            "{}=https://{}",
            node.name,
            pki::join_host_port(&node.address, manifests::ETCD_PEER_PORT)
        )],
        existing_cluster: false,
        cluster_token: cluster_token(&config, &layout.path(config.str_at("/certificatesDir")))?,
    };
    for (file, manifest) in manifests::control_plane(&inputs) {
        write_manifest(layout, file, &manifest)?;
    }
    wait_for_api_server(&node.address).await?;
    let client = super::kubelet::client_from(&layout.kubernetes().join("super-admin.conf")).await?;
    let ca = pki::load_ca(&layout.path(config.str_at("/certificatesDir")), "ca")?;
    let tokens = config.node["bootstrapTokens"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    upload::everything_but_kubeadm_config(
        &client,
        &upload::Inputs {
            cluster: &config.cluster,
            endpoint: &endpoint,
            ca_cert: &ca.ca.cert,
            kubernetes_version: &node.version,
            bootstrap_tokens: &tokens,
            dns_ip: config::service_ip(config.str_at("/networking/serviceSubnet"), 10)
                .map(|ip| ip.to_string())
                .unwrap_or_default(),
        },
    )
    .await?;
    config.cluster["kubernetesVersion"] = json!(node.version);
    config.cluster["controlPlaneEndpoint"] = json!(endpoint);
    upload::kubeadm_config(&client, &config.cluster).await?;
    println!("\nYour Kubernetes control-plane has initialized successfully!");
    Ok(())
}

/// Checks the cluster's CA against the pinned hashes of the join's discovery.
fn verify_ca(discovery: &config::Discovery, ca_cert: &str) -> Result<()> {
    if discovery.skip_ca_verification {
        return Ok(());
    }
    let hash = crate::kubeadm::certs::ca_cert_hash(ca_cert)
        .map_err(|e| NodeError::Failed(format!("the cluster CA: {e}")))?;
    if discovery
        .ca_cert_hashes
        .iter()
        .any(|h| h.eq_ignore_ascii_case(&hash))
    {
        Ok(())
    } else {
        Err(NodeError::Failed(format!(
            "the cluster CA's public key hash {hash} is none of the pinned caCertHashes {:?}: this node would join a cluster it was not told to trust",
            discovery.ca_cert_hashes
        )))
    }
}

async fn join(layout: &Layout, invocation: &Invocation) -> Result<()> {
    let mut config = read_config(layout, invocation)?;
    if !config.is_join() {
        return Err(NodeError::Config(
            "kubeadm join needs a JoinConfiguration".into(),
        ));
    }
    let discovery = config.discovery().ok_or_else(|| {
        NodeError::Config("the JoinConfiguration has no discovery.bootstrapToken with apiServerEndpoint and token".into())
    })?;
    if !(invocation.control_plane || config.is_control_plane_join()) {
        return join_worker(layout, &config, &discovery).await;
    }
    println!("[preflight] Running pre-flight checks");
    let pki_dir = layout.path(
        config.cluster["certificatesDir"]
            .as_str()
            .unwrap_or(config::DEFAULT_CERTIFICATES_DIR),
    );
    let ca = pki::load_ca(&pki_dir, "ca")?;
    verify_ca(&discovery, &ca.ca.cert)?;
    println!(
        "[discovery] The cluster CA matches the pinned hash; using {}",
        discovery.endpoint
    );
    // A control plane holds the CA key: it mints its own administrator to read the cluster.
    let admin = ca.client_certificate("kubernetes-super-admin", &["system:masters"])?;
    let kubeconfig = pki::kubeconfig_yaml(
        &format!("https://{}", discovery.endpoint),
        &ca.ca.cert,
        &admin,
        "kubernetes-super-admin",
    )?;
    let client = etcd::client_from_yaml(&kubeconfig).await?;
    println!(
        "[preflight] Reading configuration from the \"kubeadm-config\" ConfigMap in namespace \"kube-system\""
    );
    let cluster = etcd::cluster_configuration(&client).await?;
    config.cluster = cluster;
    config::default_cluster(&mut config.cluster);
    let node = node_facts(&config)?;
    let endpoint = discovery.endpoint.clone();
    control_plane_files(layout, &config, &node, &endpoint)?;
    let pki_dir = layout.path(config.str_at("/certificatesDir"));
    let token = cluster_token(&config, &pki_dir)?;
    let inputs = |initial_cluster| manifests::Inputs {
        config: &config,
        node_name: &node.name,
        address: &node.address,
        kubernetes_version: &node.version,
        initial_cluster,
        existing_cluster: true,
        cluster_token: token.clone(),
    };
    let initial_cluster = etcd::join_member(
        &client,
        &pki_dir,
        &node.name,
        &node.address,
        |initial_cluster| {
            write_manifest(
                layout,
                "etcd.yaml",
                &manifests::etcd(&inputs(initial_cluster)),
            )
        },
    )
    .await?;
    let inputs = inputs(initial_cluster);
    for (file, manifest) in manifests::control_plane(&inputs) {
        write_manifest(layout, file, &manifest)?;
    }
    wait_for_api_server(&node.address).await?;
    println!("\nThis node has joined the cluster and a new control plane instance was created.");
    Ok(())
}

/// How long a worker waits for its kubelet certificate to be signed.
const CSR_WAIT: Duration = Duration::from_secs(120);

/// A client of `endpoint` trusting `ca` (PEM), authenticated by the bootstrap token; without
/// the CA, an anonymous client of any server (as kubeadm's discovery, which never sends the
/// token's secret before the server has proven to hold the pinned CA).
fn token_client(endpoint: &str, token: &str, ca: Option<&str>) -> Result<kube::Client> {
    let url = format!("https://{endpoint}").parse().map_err(|e| {
        NodeError::Config(format!(
            "discovery.bootstrapToken.apiServerEndpoint {endpoint:?}: {e}"
        ))
    })?;
    let mut config = kube::Config::new(url);
    config.connect_timeout = Some(Duration::from_secs(10));
    match ca {
        Some(pem) => {
            config.auth_info.token = Some(token.to_string().into());
            use rustls::pki_types::pem::PemObject;
            let ders = rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes())
                .map(|c| c.map(|c| c.to_vec()))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| NodeError::Failed(format!("the cluster CA: {e}")))?;
            config.root_cert = Some(ders);
        }
        None => config.accept_invalid_certs = true,
    }
    Ok(kube::Client::try_from(config)?)
}

/// A worker's join: the cluster CA from `kube-public/cluster-info`, checked against the pinned
/// hash; a kubelet client certificate through a CertificateSigningRequest, authenticated by
/// the bootstrap token and signed by the control plane; then kubelet.conf and the kubelet
/// flags, from which the agent registers the Node.
async fn join_worker(
    layout: &Layout,
    config: &Config,
    discovery: &config::Discovery,
) -> Result<()> {
    use base64::Engine;
    use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
    use k8s_openapi::api::core::v1::ConfigMap;
    let b64 = base64::engine::general_purpose::STANDARD;
    println!(
        "[discovery] Reading kube-public/cluster-info from {}",
        discovery.endpoint
    );
    let insecure = token_client(&discovery.endpoint, &discovery.token, None)?;
    let info_api = kube::Api::<ConfigMap>::namespaced(insecure, "kube-public");
    let info = patiently(
        &format!(
            "reading kube-public/cluster-info from {}",
            discovery.endpoint
        ),
        || info_api.get("cluster-info"),
    )
    .await?;
    let kubeconfig = info
        .data
        .and_then(|d| d.get("kubeconfig").cloned())
        .ok_or_else(|| NodeError::Failed("kube-public/cluster-info has no kubeconfig".into()))?;
    let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig)
        .map_err(|e| NodeError::Failed(format!("kube-public/cluster-info: {e}")))?;
    let ca = parsed
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.certificate_authority_data.clone())
        .and_then(|d| b64.decode(d).ok())
        .and_then(|d| String::from_utf8(d).ok())
        .ok_or_else(|| NodeError::Failed("kube-public/cluster-info names no CA".into()))?;
    verify_ca(discovery, &ca)?;
    println!("[discovery] The cluster CA matches the pinned hash");
    let client = token_client(&discovery.endpoint, &discovery.token, Some(&ca))?;
    let name = config.registration(&super::hostname()).name;
    println!("[kubelet-start] Asking for a kubelet client certificate for system:node:{name}");
    let key = rcgen::KeyPair::generate().map_err(crate::pki::PkiError::from)?;
    let mut params =
        rcgen::CertificateParams::new(Vec::<String>::new()).map_err(crate::pki::PkiError::from)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{name}"));
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    let request = params
        .serialize_request(&key)
        .and_then(|r| r.pem())
        .map_err(crate::pki::PkiError::from)?;
    let csr_name = format!("node-csr-{}", crate::apiserver::object::random_suffix());
    let csr: CertificateSigningRequest = serde_json::from_value(json!({
        "metadata": {"name": csr_name},
        "spec": {
            "request": b64.encode(&request),
            "signerName": super::controller_manager::KUBELET_CLIENT_SIGNER,
            "usages": ["digital signature", "client auth"],
        },
    }))
    .expect("a CertificateSigningRequest");
    let csrs: kube::Api<CertificateSigningRequest> = kube::Api::all(client);
    let params = kube::api::PostParams::default();
    patiently("asking for the kubelet certificate", || {
        csrs.create(&params, &csr)
    })
    .await?;
    let started = Instant::now();
    let certificate = loop {
        let current = csrs.get(&csr_name).await?;
        if let Some(cert) = current.status.as_ref().and_then(|s| s.certificate.clone()) {
            break String::from_utf8(cert.0)
                .map_err(|_| NodeError::Failed("the signed certificate is not PEM".into()))?;
        }
        if let Some(denied) = current
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| {
                c.iter()
                    .find(|c| c.type_ == "Denied" || c.type_ == "Failed")
            })
        {
            return Err(NodeError::Failed(format!(
                "the kubelet certificate request {csr_name} was {}: {}",
                denied.type_,
                denied.message.clone().unwrap_or_default()
            )));
        }
        if started.elapsed() > CSR_WAIT {
            return Err(NodeError::Failed(format!(
                "the kubelet certificate request {csr_name} was not signed within {}s: is the control plane's controller-manager running?",
                CSR_WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    println!("[kubelet-start] The kubelet certificate was signed");
    let pki_dir = layout.path(config::DEFAULT_CERTIFICATES_DIR);
    write_file(&pki_dir.join("ca.crt"), ca.as_bytes(), 0o644)?;
    let pair = crate::pki::KeyPairPem {
        cert: certificate,
        key: key.serialize_pem(),
    };
    let user = format!("system:node:{name}");
    let kubelet_conf = pki::kubeconfig_yaml(
        &format!("https://{}", discovery.endpoint),
        &ca,
        &pair,
        &user,
    )?;
    let node = Node {
        name,
        address: super::node_ip().map(|i| i.to_string()).unwrap_or_default(),
        version: super::kubernetes_version(),
    };
    write_if_changed(
        &KubeletFlags::file(layout),
        &kubelet_flags(config, &node, false).render(),
        0o644,
    )?;
    write_file(
        &layout.kubernetes().join("kubelet.conf"),
        kubelet_conf.as_bytes(),
        0o600,
    )?;
    println!(
        "\nThis node has joined the cluster: its kubelet registers it with the control plane."
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeadm_arguments_as_cluster_api_writes_them() {
        let args: Vec<String> = "join --config /run/kubeadm/kubeadm-join-config.yaml --ignore-preflight-errors=SystemVerification,Swap --v=5 --control-plane"
            .split(' ')
            .map(String::from)
            .collect();
        assert_eq!(
            parse_args(&args),
            Invocation {
                command: "join".into(),
                config: Some("/run/kubeadm/kubeadm-join-config.yaml".into()),
                control_plane: true,
            }
        );
        assert_eq!(
            parse_args(&["init".into(), "--config=/x.yaml".into()]).config,
            Some("/x.yaml".into())
        );
    }

    #[test]
    fn control_plane_nodes_get_kubeadms_label_and_taint() {
        let config = config::parse("apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nnodeRegistration:\n  kubeletExtraArgs:\n    node-labels: tier=a\n    eviction-hard: nodefs.available<0%\n").unwrap();
        let node = Node {
            name: "cp-1".into(),
            address: "10.0.0.5".into(),
            version: "v1.28.13".into(),
        };
        let flags = kubelet_flags(&config, &node, true);
        assert_eq!(flags.taints, vec![CONTROL_PLANE_TAINT.to_string()]);
        assert_eq!(
            flags
                .node_labels
                .get("node-role.kubernetes.io/control-plane")
                .map(String::as_str),
            Some("")
        );
        assert_eq!(flags.node_labels.get("tier").map(String::as_str), Some("a"));
        assert_eq!(
            flags.other,
            vec![(
                "eviction-hard".to_string(),
                "nodefs.available<0%".to_string()
            )]
        );
        let untainted = config::parse("apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\nnodeRegistration:\n  taints: []\n").unwrap();
        assert!(
            kubelet_flags(&untainted, &node, true).taints.is_empty(),
            "an empty list means no taints"
        );
    }

    #[test]
    fn a_join_trusts_only_the_pinned_ca() {
        let ca = crate::pki::Pki::generate("kubernetes").unwrap();
        let hash = crate::kubeadm::certs::ca_cert_hash(&ca.ca.cert).unwrap();
        let discovery = config::Discovery {
            endpoint: "e:6443".into(),
            token: "t".into(),
            ca_cert_hashes: vec![hash],
            skip_ca_verification: false,
        };
        assert!(verify_ca(&discovery, &ca.ca.cert).is_ok());
        let other = crate::pki::Pki::generate("kubernetes").unwrap();
        let err = verify_ca(&discovery, &other.ca.cert)
            .unwrap_err()
            .to_string();
        assert!(err.contains("pinned"), "{err}");
    }
}
