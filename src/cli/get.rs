//! `capictl get kubeconfig`: a workload cluster's kubeconfig from its `<cluster>-kubeconfig`
//! Secret, printed or written 0600.

use std::io::Write as _;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;

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
    let name = crate::kubeadm::certs::kubeconfig_secret_name(&args.name);
    let secret = Api::<Secret>::namespaced(client, &namespace)
        .get_opt(&name)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{name:?} not found in namespace {namespace:?}: is there a Cluster {:?} there, and has its control plane written the kubeconfig yet? `kubectl get clusters -A` lists the clusters",
                args.name
            )
        })?;
    let value = secret
        .data
        .and_then(|d| d.get("value").cloned())
        .ok_or_else(|| {
            anyhow::anyhow!("missing key \"value\" in the data of Secret {namespace}/{name}")
        })?;
    match args.write_to {
        Some(path) => {
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&path)
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
            // An existing file keeps its mode on open: make sure the key is not readable by others.
            std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
            file.write_all(&value.0)?;
            eprintln!(
                "Wrote the kubeconfig of {namespace}/{} to {}",
                args.name,
                path.display()
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&value.0)?;
            if !value.0.ends_with(b"\n") {
                out.write_all(b"\n")?;
            }
        }
    }
    Ok(())
}
