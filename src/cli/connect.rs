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

/// The servers this process's commands resolved, so that an error reaching one names it.
static SERVERS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// An error that is a server not answering (refused, unreachable, a TLS failure), said with
/// the server's address and the root cause only, instead of the client's layers of wrapping
/// (`ServiceError: client error (Connect): tcp connect error: ...`).
pub fn explain(err: anyhow::Error) -> anyhow::Error {
    let unreachable = err.chain().any(|e| {
        matches!(
            e.downcast_ref::<kube::Error>(),
            Some(kube::Error::Service(_) | kube::Error::HyperError(_))
        )
    });
    let servers = SERVERS.lock().unwrap().clone();
    if !unreachable || servers.is_empty() {
        return err;
    }
    let root = err
        .chain()
        .last()
        .map(ToString::to_string)
        .unwrap_or_default();
    let which = match servers.as_slice() {
        [one] => format!("the management cluster at {one}"),
        several => format!("the cluster at {}", several.join(" or ")),
    };
    anyhow::anyhow!("{which} does not answer: {root}")
}

impl ClusterArgs {
    /// The client configuration, with its default namespace from the context.
    pub async fn config(&self) -> anyhow::Result<kube::Config> {
        let config = self.resolve().await?;
        let server = config.cluster_url.to_string();
        let mut servers = SERVERS.lock().unwrap();
        if !servers.contains(&server) {
            servers.push(server);
        }
        Ok(config)
    }

    async fn resolve(&self) -> anyhow::Result<kube::Config> {
        let options = KubeConfigOptions {
            context: self.kubeconfig_context.clone(),
            ..Default::default()
        };
        if let Some(path) = &self.kubeconfig {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
            let source = format!("the kubeconfig {}", path.display());
            has_context(&kubeconfig, &source, self.kubeconfig_context.as_deref())?;
            return kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("using {source}"));
        }
        if let Some(context) = &self.kubeconfig_context {
            let source = default_kubeconfig_source();
            let kubeconfig = Kubeconfig::read().with_context(|| {
                format!(
                    "--kubeconfig-context {context} needs a kubeconfig, and reading {source} failed"
                )
            })?;
            has_context(&kubeconfig, &source, Some(context))?;
            return kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .with_context(|| format!("using the context {context:?} of {source}"));
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
        if let Some(missing) = missing_kubeconfig_files() {
            anyhow::bail!(
                "no management cluster: $KUBECONFIG names {missing}, which does not exist; point it at a kubeconfig, pass --kubeconfig, or start the embedded one with `capictl management up`"
            )
        }
        anyhow::bail!(
            "no management cluster: pass --kubeconfig, set $KUBECONFIG, or start the embedded one with `capictl management up`"
        )
    }

    /// The flags as given, to repeat in a hint (` --kubeconfig PATH --kubeconfig-context NAME`).
    pub fn repeated(&self) -> String {
        let mut flags = String::new();
        if let Some(path) = &self.kubeconfig {
            flags.push_str(&format!(" --kubeconfig {}", path.display()));
        }
        if let Some(context) = &self.kubeconfig_context {
            flags.push_str(&format!(" --kubeconfig-context {context}"));
        }
        flags
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

/// Where kube reads a kubeconfig from when none is given, as a user would name it.
fn default_kubeconfig_source() -> String {
    match std::env::var("KUBECONFIG") {
        Ok(paths) if !paths.is_empty() => format!("$KUBECONFIG ({paths})"),
        _ => "~/.kube/config".into(),
    }
}

/// The files $KUBECONFIG names, when it names some and none of them exists.
fn missing_kubeconfig_files() -> Option<String> {
    let paths = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty())?;
    let named: Vec<PathBuf> = std::env::split_paths(&paths).collect();
    (!named.iter().any(|p| p.exists())).then(|| {
        named
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Refuses a context the kubeconfig does not have, naming the ones it has.
fn has_context(kubeconfig: &Kubeconfig, source: &str, wanted: Option<&str>) -> anyhow::Result<()> {
    let Some(wanted) = wanted else {
        return Ok(());
    };
    if kubeconfig.contexts.iter().any(|c| c.name == wanted) {
        return Ok(());
    }
    let names: Vec<&str> = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    if names.is_empty() {
        anyhow::bail!("{source} has no contexts, so not {wanted:?}")
    }
    anyhow::bail!(
        "{source} has no context {wanted:?}: --kubeconfig-context takes one of {}",
        names.join(", ")
    )
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
