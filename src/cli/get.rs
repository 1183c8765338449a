//! `capictl get kubeconfig`: a workload cluster's kubeconfig from its `<cluster>-kubeconfig`
//! Secret, printed or written 0600. Where the infrastructure provider's address is not
//! reachable from this host (Docker's load balancer on the Docker network), the server is
//! rewritten to the address the provider publishes here.

use std::io::Write as _;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, ResourceExt};

use crate::api::Cluster;

use super::connect::ClusterArgs;

#[derive(Debug, clap::Subcommand)]
pub enum Get {
    /// A workload cluster's kubeconfig, from its `<cluster>-kubeconfig` Secret.
    Kubeconfig(KubeconfigArgs),
}

#[derive(Debug, clap::Args)]
pub struct KubeconfigArgs {
    /// The workload cluster's name.
    name: String,
    /// The namespace of the Cluster [default: the kubeconfig context's, else default]
    #[arg(short, long, value_name = "NS")]
    namespace: Option<String>,
    /// Write to this file (mode 0600) instead of stdout.
    #[arg(long, value_name = "FILE")]
    write_to: Option<PathBuf>,
    #[command(flatten)]
    cluster: ClusterArgs,
}

impl Get {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Get::Kubeconfig(args) => tokio::runtime::Runtime::new()?.block_on(kubeconfig(args)),
        }
    }
}

async fn kubeconfig(args: KubeconfigArgs) -> anyhow::Result<()> {
    let (client, default_namespace) = args.cluster.client().await?;
    let namespace = args.namespace.unwrap_or(default_namespace);
    let value = read_kubeconfig(&client, &namespace, &args.name).await?;
    match args.write_to {
        Some(path) => {
            write_private(&path, &value)?;
            eprintln!(
                "Wrote the kubeconfig of {namespace}/{} to {}",
                args.name,
                path.display()
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&value)?;
            if !value.ends_with(b"\n") {
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(())
}

/// The Cluster's kubeconfig from its Secret, its server rewritten to where this host reaches
/// the API server when the provider publishes it elsewhere.
pub(super) async fn read_kubeconfig(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> anyhow::Result<Vec<u8>> {
    let name = crate::kubeadm::certs::kubeconfig_secret_name(cluster);
    let secret = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(&name)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{name:?} not found in namespace {namespace:?}: is there a Cluster {cluster:?} there, and has its control plane written the kubeconfig yet? `kubectl get clusters -A` lists the clusters"
            )
        })?;
    let value = secret
        .data
        .and_then(|d| d.get("value").cloned())
        .ok_or_else(|| {
            anyhow::anyhow!("missing key \"value\" in the data of Secret {namespace}/{name}")
        })?;
    let object = Api::<Cluster>::namespaced(client.clone(), namespace)
        .get_opt(cluster)
        .await?;
    Ok(match local_server(object.as_ref()).await {
        Some(server) => with_server(&value.0, &server)?.into_bytes(),
        None => value.0,
    })
}

/// Writes a file only its owner may read (it holds a private key).
pub(super) fn write_private(path: &std::path::Path, contents: &[u8]) -> anyhow::Result<()> {
    crate::pki::write_private(path, contents)
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// Where this host reaches the Cluster's API server when the kubeconfig's address may not do:
/// for the Docker provider, 127.0.0.1 and the port its load balancer container publishes.
/// None keeps the kubeconfig as it is (other providers, or no such container here).
async fn local_server(cluster: Option<&Cluster>) -> Option<String> {
    let cluster = cluster?;
    // A DevCluster may be Docker-backed or simulated: it has a load balancer only if Docker-backed.
    let kind = cluster.spec.infrastructure_ref.as_ref()?.kind.as_str();
    if kind != "DockerCluster" && kind != "DevCluster" {
        return None;
    }
    let name = cluster.name_any();
    match crate::providers::docker::load_balancer_host_port(&name).await {
        Ok(Some(port)) => Some(format!("https://127.0.0.1:{port}")),
        Ok(None) | Err(_) if kind == "DevCluster" => None,
        Ok(None) => {
            eprintln!(
                "Note: no load balancer container {} publishes the API server on this host; the kubeconfig keeps the Cluster's own address",
                crate::providers::docker::load_balancer_container(&name)
            );
            None
        }
        Err(e) => {
            eprintln!("Note: {e}; the kubeconfig keeps the Cluster's own address");
            None
        }
    }
}

/// The kubeconfig with every cluster's server set to `server`.
fn with_server(kubeconfig: &[u8], server: &str) -> anyhow::Result<String> {
    let text = std::str::from_utf8(kubeconfig)
        .map_err(|_| anyhow::anyhow!("the kubeconfig Secret does not hold UTF-8 text"))?;
    let mut config: serde_json::Value = crate::yaml::from_str(text)
        .map_err(|e| anyhow::anyhow!("the kubeconfig Secret holds no valid kubeconfig: {e}"))?;
    for cluster in config["clusters"].as_array_mut().into_iter().flatten() {
        cluster["cluster"]["server"] = serde_json::json!(server);
    }
    Ok(crate::yaml::to_string(&config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_rewritten_and_the_rest_kept() {
        let original = "apiVersion: v1\nkind: Config\nclusters:\n- name: c1\n  cluster:\n    server: https://172.18.0.3:6443\n    certificate-authority-data: Q0E=\ncontexts:\n- name: c1-admin@c1\n  context: {cluster: c1, user: c1-admin}\ncurrent-context: c1-admin@c1\nusers:\n- name: c1-admin\n  user: {client-key-data: S0VZ}\n";
        let rewritten: serde_json::Value = crate::yaml::from_str(
            &with_server(original.as_bytes(), "https://127.0.0.1:32771").unwrap(),
        )
        .unwrap();
        let before: serde_json::Value = crate::yaml::from_str(original).unwrap();
        assert_eq!(
            rewritten["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:32771"
        );
        let mut expected = before.clone();
        expected["clusters"][0]["cluster"]["server"] = serde_json::json!("https://127.0.0.1:32771");
        assert_eq!(rewritten, expected);
    }
}
