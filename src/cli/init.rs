//! `capictl init`: installs Cluster API providers into a management cluster, as clusterctl
//! does, without cert-manager; starts the embedded management cluster when asked to and none
//! is reachable. On the embedded cluster the providers' controllers run in-process, so only
//! their CRDs, namespaces and inventory go in.

use std::time::Duration;

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::Provider;
use crate::init::{self, PROVIDERS, ProviderInfo};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The core provider [default: cluster-api on the first run]
    #[arg(long, value_name = "NAME[:VERSION]")]
    core: Option<String>,
    /// Bootstrap providers [default: kubeadm on the first run]
    #[arg(short, long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    bootstrap: Vec<String>,
    /// Control plane providers [default: kubeadm on the first run]
    #[arg(short, long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    control_plane: Vec<String>,
    /// Infrastructure providers: docker, in-memory.
    #[arg(short, long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    infrastructure: Vec<String>,
    /// One namespace for every provider installed by this run [default: each provider's own]
    #[arg(short = 'n', long, value_name = "NS")]
    target_namespace: Option<String>,
    /// The image the providers' controller Deployments run.
    #[arg(long, value_name = "IMAGE", default_value_t = format!("capictl:v{}", crate::build_info::VERSION))]
    image: String,
    /// Start the embedded management cluster if none is reachable, without asking.
    #[arg(short, long)]
    yes: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(init(args))
}

const MANAGER: &str = "capictl";

/// Server-side applies an object, whatever its kind.
async fn apply(client: &Client, object: &Value) -> anyhow::Result<()> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api = super::connect::api_for(client, object);
    api.patch(
        name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| anyhow::anyhow!("installing {kind} {name}: {e}"))?;
    Ok(())
}

/// `name[:version]`; the version, when given, must be this capictl's.
fn parse(type_: &str, value: &str) -> anyhow::Result<ProviderInfo> {
    let (name, version) = match value.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (value, None),
    };
    let provider = init::find(type_, name).map_err(UsageError)?;
    let ours = format!("v{}", crate::build_info::VERSION);
    if let Some(v) = version.filter(|v| *v != ours) {
        return Err(UsageError(format!(
            "{name}:{v}: this capictl carries {name} {ours} only; drop the version or use the capictl of {v}"
        ))
        .into());
    }
    Ok(provider)
}

/// The management cluster, started when none is reachable and the user said yes.
async fn connect(args: &Args) -> anyhow::Result<Client> {
    match args.cluster.client().await {
        Ok((client, _)) if client.apiserver_version().await.is_ok() => Ok(client),
        Ok(_) | Err(_) if args.cluster.kubeconfig.is_some() => {
            anyhow::bail!(
                "the management cluster in {} cannot be reached; check it runs, or leave --kubeconfig out to use the embedded one",
                args.cluster.kubeconfig.as_ref().unwrap().display()
            )
        }
        _ if args.yes => {
            let options = crate::management::ServeOptions {
                dir: crate::management::StateDir::new(None),
                listen: "127.0.0.1:0".into(),
                kubeconfig: Some(crate::management::kubeconfig_path(None)),
                context: crate::management::DEFAULT_CONTEXT.into(),
                etcd_endpoints: Vec::new(),
            };
            super::management::up(&options).await?;
            Ok(args.cluster.client().await?.0)
        }
        _ => anyhow::bail!(
            "no management cluster is reachable: start the embedded one with `capictl management up`, or rerun with --yes to have init start it"
        ),
    }
}

async fn init(args: Args) -> anyhow::Result<()> {
    let mut requested = Vec::new();
    if let Some(core) = &args.core {
        requested.push(parse("CoreProvider", core)?);
    }
    for (type_, values) in [
        ("BootstrapProvider", &args.bootstrap),
        ("ControlPlaneProvider", &args.control_plane),
        ("InfrastructureProvider", &args.infrastructure),
    ] {
        for v in values.iter().filter(|v| v.as_str() != "-") {
            requested.push(parse(type_, v)?);
        }
    }
    let client = connect(&args).await?;
    let embedded = client
        .apiserver_version()
        .await
        .is_ok_and(|v| v.git_version.contains("+capictl"));
    // The inventory first: it says whether this is the first run.
    for crd in crate::api::CrdSet::Clusterctl.crds() {
        apply(&client, &serde_json::to_value(crd)?).await?;
    }
    let inventory: Api<Provider> = Api::all(client.clone());
    let installed = list_with_retry(&inventory).await?;
    let first_run = !installed
        .iter()
        .any(|p| p.spec.type_.as_deref() == Some("CoreProvider"));
    eprintln!("Fetching providers");
    if first_run {
        for (type_, given) in [
            ("CoreProvider", args.core.is_some()),
            ("BootstrapProvider", !args.bootstrap.is_empty()),
            ("ControlPlaneProvider", !args.control_plane.is_empty()),
        ] {
            if !given {
                requested.push(
                    init::find(
                        type_,
                        if type_ == "CoreProvider" {
                            "cluster-api"
                        } else {
                            "kubeadm"
                        },
                    )
                    .expect("built in"),
                );
            }
        }
    }
    let order = |p: &ProviderInfo| PROVIDERS.iter().position(|q| q == p);
    requested.sort_by_key(order);
    requested.dedup();
    let version = format!("v{}", crate::build_info::VERSION);
    for p in &requested {
        let namespace = args.target_namespace.as_deref().unwrap_or(p.namespace);
        if installed.iter().any(|i| {
            i.name_any() == p.label()
                && i.namespace().as_deref() == Some(namespace)
                && i.spec.version.as_deref() == Some(version.as_str())
        }) {
            continue;
        }
        eprintln!(
            "Installing provider={:?} version={version:?} targetNamespace={namespace:?}",
            p.label()
        );
        for object in init::components(p, &args.image, namespace, !embedded) {
            apply(&client, &object).await?;
        }
        apply(&client, &init::inventory(p, &version, namespace)).await?;
    }
    if first_run {
        eprintln!("\nYour management cluster has been initialized successfully!\n");
        if embedded {
            eprintln!("The providers' controllers run inside the embedded management cluster.\n");
        }
        eprintln!("You can now create your first workload cluster by running the following:\n");
        eprintln!(
            "  capictl generate cluster [name] --kubernetes-version [version] | kubectl apply -f -\n"
        );
    }
    Ok(())
}

/// The inventory, once its CRD is served (a real API server takes a moment).
async fn list_with_retry(api: &Api<Provider>) -> anyhow::Result<Vec<Provider>> {
    let mut tries = 0;
    loop {
        match api.list(&Default::default()).await {
            Ok(list) => return Ok(list.items),
            Err(e) if tries < 50 => {
                tracing::debug!(error = %e, "waiting for the inventory CRD to be served");
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}
