//! How commands reach a management cluster: `--kubeconfig` and `--kubeconfig-context` as
//! clusterctl takes them, else $KUBECONFIG or ~/.kube/config, else in-cluster config, else the
//! embedded management cluster when it runs.

use std::path::PathBuf;

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::management::StateDir;

#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// The management cluster's kubeconfig [default: $KUBECONFIG, else ~/.kube/config, else in-cluster, else the embedded management cluster]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use [default: the current one]
    #[arg(long, alias = "context", value_name = "NAME")]
    pub kubeconfig_context: Option<String>,
}

impl ClusterArgs {
    /// The client configuration, with its default namespace from the context.
    pub async fn config(&self) -> anyhow::Result<kube::Config> {
        let options = KubeConfigOptions {
            context: self.kubeconfig_context.clone(),
            ..Default::default()
        };
        if let Some(path) = &self.kubeconfig {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            return Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?);
        }
        if self.kubeconfig_context.is_some() {
            return Ok(kube::Config::from_kubeconfig(&options).await?);
        }
        // A kubeconfig that names a current context is the user's choice: when it cannot be
        // used (a client certificate file gone, say), that is the error, not a reason to try
        // the next place.
        if let Some(context) = configured_context() {
            return kube::Config::from_kubeconfig(&options).await.with_context(|| {
                format!(
                    "the kubeconfig's current context {context:?} cannot be used; fix it, or choose another with --kubeconfig or --kubeconfig-context"
                )
            });
        }
        if let Ok(config) = kube::Config::infer().await {
            return Ok(config);
        }
        let embedded = StateDir::new(None);
        if embedded.running().is_some() {
            let kubeconfig = Kubeconfig::read_from(embedded.admin_kubeconfig())?;
            return Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?);
        }
        anyhow::bail!(
            "no management cluster: pass --kubeconfig, set $KUBECONFIG, or start the embedded one with `capictl management up`"
        )
    }

    /// Whether a kubeconfig chooses the cluster: `--kubeconfig`, `--kubeconfig-context`, or
    /// $KUBECONFIG (else ~/.kube/config) with a current context.
    pub fn chooses_a_cluster(&self) -> bool {
        self.kubeconfig.is_some()
            || self.kubeconfig_context.is_some()
            || configured_context().is_some()
    }

    pub async fn client(&self) -> anyhow::Result<(kube::Client, String)> {
        let config = self.config().await?;
        let namespace = config.default_namespace.clone();
        Ok((kube::Client::try_from(config)?, namespace))
    }
}

/// The current context of $KUBECONFIG (else ~/.kube/config), when that names one.
fn configured_context() -> Option<String> {
    Kubeconfig::read()
        .ok()?
        .current_context
        .filter(|c| !c.is_empty())
}

/// The API of any object given as JSON (`apiVersion`, `kind`, `metadata.namespace`), its
/// plural formed as upstream forms CRD names (`clusterclasses`, `policies`).
pub fn api_for(
    client: &kube::Client,
    object: &serde_json::Value,
) -> kube::Api<kube::api::DynamicObject> {
    use kube::api::{ApiResource, GroupVersionKind};
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().unwrap_or_default();
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(group, version, kind),
        &crate::reconcile::external::plural(kind),
    );
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
        None => kube::Api::all_with(client.clone(), &resource),
    }
}
