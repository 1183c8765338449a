//! `capictl delete`: removes providers from a management cluster, as clusterctl does: their
//! controllers, RBAC and inventory entry; their CRDs with `--include-crd` (refused while objects
//! of them exist) and their namespace with `--include-namespace`. Workload clusters are left
//! alone.
//!
//! `capictl delete cluster NAME` deletes one workload Cluster and everything it made, after
//! listing what will go and asking (`--yes` for scripts); a protected Cluster is refused.

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::{Cluster, Provider};
use crate::init::{self, PROVIDERS, ProviderInfo};

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    what: Option<What>,
    /// The core provider: cluster-api.
    #[arg(long, value_name = "NAME")]
    core: Option<String>,
    /// Bootstrap providers.
    #[arg(short, long, value_name = "NAME", value_delimiter = ',')]
    bootstrap: Vec<String>,
    /// Control plane providers.
    #[arg(short, long, value_name = "NAME", value_delimiter = ',')]
    control_plane: Vec<String>,
    /// Infrastructure providers.
    #[arg(short, long, value_name = "NAME", value_delimiter = ',')]
    infrastructure: Vec<String>,
    /// Every installed provider.
    #[arg(long)]
    all: bool,
    /// Also delete the providers' CRDs (refused while objects of them exist).
    #[arg(long)]
    include_crd: bool,
    /// Also delete the providers' namespaces.
    #[arg(long)]
    include_namespace: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, clap::Subcommand)]
enum What {
    /// Delete a workload Cluster and everything it made (Machines, their infrastructure,
    /// the control plane), after showing what will go and asking.
    Cluster(ClusterDeleteArgs),
}

#[derive(Debug, clap::Args)]
struct ClusterDeleteArgs {
    /// The Cluster's name.
    name: String,
    /// The namespace of the Cluster [default: the kubeconfig context's, else default]
    #[arg(short, long, value_name = "NS")]
    namespace: Option<String>,
    /// Delete without asking (for scripts; without a terminal nothing is deleted otherwise).
    #[arg(short, long)]
    yes: bool,
    /// Return once the deletion is asked for instead of when the Cluster is gone.
    #[arg(long)]
    no_wait: bool,
    /// How long to wait for the Cluster to be gone.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    timeout: u64,
    #[command(flatten)]
    cluster: ClusterArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    match args.what {
        Some(What::Cluster(cluster)) => runtime.block_on(delete_cluster(cluster)),
        None => runtime.block_on(delete(args)),
    }
}

/// Shows the Cluster's tree, asks, deletes it and waits until it is gone.
async fn delete_cluster(args: ClusterDeleteArgs) -> anyhow::Result<()> {
    let (client, default_namespace) = args.cluster.client().await?;
    let ns = args.namespace.clone().unwrap_or(default_namespace);
    let api: Api<Cluster> = Api::namespaced(client.clone(), &ns);
    // A protected Cluster is refused before its tree is read; a missing one is said by the tree.
    let live = api.get_opt(&args.name).await?;
    let protected = live.as_ref().is_some_and(|c| {
        c.annotations()
            .get(crate::api::DELETION_PROTECTION_ANNOTATION)
            .is_some_and(|v| v == "true")
    });
    // One another management cluster reconciles would wait here forever, deleting nothing.
    if let Some(paused) = live.as_ref().and_then(|c| c.waiting_for_claim(false)) {
        anyhow::bail!(
            "Cluster {ns}/{} is reconciled by another management cluster, so deleting it here would delete nothing and wait forever: {}. Delete it where it is reconciled, or take it over first (`capictl move --take-over --cluster {} -n {ns}{}`)",
            args.name,
            paused,
            args.name,
            args.cluster.repeated()
        );
    }
    if protected {
        anyhow::bail!(
            "{}",
            crate::api::common::deletion_protection_message("Cluster", "cluster", &ns, &args.name)
        );
    }
    let tree = super::describe::tree(&client, &ns, &args.name).await?;
    eprintln!(
        "Deleting Cluster {ns}/{} deletes everything it made:\n",
        args.name
    );
    eprint!("{tree}");
    eprintln!();
    if !args.yes {
        use std::io::IsTerminal;
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return Err(UsageError(
                "nothing was deleted: there is no terminal to ask on; pass --yes to delete without asking".into(),
            )
            .into());
        }
        let sure = dialoguer::Confirm::new()
            .with_prompt(format!(
                "Delete Cluster {ns}/{} and all of the above?",
                args.name
            ))
            .default(false)
            .interact()?;
        if !sure {
            eprintln!("Nothing was deleted.");
            return Ok(());
        }
    }
    api.delete(&args.name, &DeleteParams::background()).await?;
    if args.no_wait {
        eprintln!("Cluster {ns}/{} is being deleted", args.name);
        return Ok(());
    }
    let spinner = indicatif::ProgressBar::new_spinner()
        .with_message(format!("Deleting Cluster {ns}/{}", args.name));
    spinner.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    spinner.enable_steady_tick(std::time::Duration::from_millis(200));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(args.timeout);
    while let Some(c) = api.get_opt(&args.name).await? {
        // The Deleting condition says what the deletion waits for.
        if let Some(waiting) = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_deref())
            .and_then(|cs| cs.iter().find(|c| c.type_ == "Deleting"))
        {
            spinner.set_message(format!(
                "Deleting Cluster {ns}/{}: {}",
                args.name,
                waiting
                    .message
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("* ")
            ));
        }
        if std::time::Instant::now() > deadline {
            spinner.finish_and_clear();
            anyhow::bail!(
                "Cluster {ns}/{} is still being deleted after {}s; `capictl describe cluster {} -n {ns} --show-conditions all{}` says what it waits for",
                args.name,
                args.timeout,
                args.name,
                args.cluster.repeated()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    spinner.finish_and_clear();
    eprintln!("Cluster {ns}/{} deleted", args.name);
    Ok(())
}

/// Deletes an object; one already gone counts as deleted.
async fn delete_object(client: &Client, object: &Value) -> anyhow::Result<()> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api = super::connect::api_for(client, object);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(anyhow::anyhow!(
            "deleting {} {name}: {e}",
            object["kind"].as_str().unwrap_or_default()
        )),
    }
}

/// The objects of a provider's CRDs that still exist, as `Kind namespace/name`.
async fn remaining_objects(
    client: &Client,
    provider: &ProviderInfo,
) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    for crd in provider.crds.crds() {
        let version = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
            .unwrap_or_default();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&crd.spec.group, &version, &crd.spec.names.kind),
            &crd.spec.names.plural,
        );
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match api.list(&ListParams::default()).await {
            Ok(list) => found.extend(list.items.iter().map(|o| {
                format!(
                    "{} {}/{}",
                    crd.spec.names.kind,
                    o.namespace().unwrap_or_default(),
                    o.name_any()
                )
            })),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(found)
}

async fn delete(args: Args) -> anyhow::Result<()> {
    let named = args.core.is_some()
        || !args.bootstrap.is_empty()
        || !args.control_plane.is_empty()
        || !args.infrastructure.is_empty();
    if named == args.all {
        return Err(UsageError(
            "say which providers to delete: --all, or --core, --bootstrap, --control-plane and --infrastructure with their names (not both); a workload cluster goes with `capictl delete cluster NAME`".into(),
        )
        .into());
    }
    let mut wanted: Vec<ProviderInfo> = Vec::new();
    if let Some(core) = &args.core {
        wanted.push(init::find("CoreProvider", core).map_err(UsageError)?);
    }
    for (type_, names) in [
        ("BootstrapProvider", &args.bootstrap),
        ("ControlPlaneProvider", &args.control_plane),
        ("InfrastructureProvider", &args.infrastructure),
    ] {
        for n in names {
            wanted.push(init::find(type_, n).map_err(UsageError)?);
        }
    }
    let (client, _) = args.cluster.client().await?;
    let inventory = Api::<Provider>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map_err(|e| {
            anyhow::anyhow!(
                "reading the provider inventory: {e}; was `capictl init` run on this cluster?"
            )
        })?
        .items;
    let installed = |p: &ProviderInfo| {
        inventory.iter().find(|i| {
            i.spec.provider_name.as_deref() == Some(p.name)
                && i.spec.type_.as_deref() == Some(p.type_)
        })
    };
    if args.all {
        wanted = PROVIDERS
            .iter()
            .filter(|p| installed(p).is_some())
            .copied()
            .collect();
    }
    let mut targets = Vec::new();
    for p in &wanted {
        let entry = installed(p).ok_or_else(|| {
            anyhow::anyhow!(
                "the {} {:?} is not installed; `kubectl get providers -A` lists what is",
                p.type_,
                p.name
            )
        })?;
        targets.push((*p, entry.clone()));
    }
    if args.include_crd {
        let mut left = Vec::new();
        for (p, _) in &targets {
            left.extend(remaining_objects(&client, p).await?);
        }
        if !left.is_empty() {
            anyhow::bail!(
                "objects of the providers' CRDs still exist: {}; delete them first (deleting their Cluster removes most), or leave --include-crd out",
                left.join(", ")
            );
        }
    }
    for (p, entry) in targets {
        let namespace = entry.namespace().unwrap_or_default();
        eprintln!(
            "Deleting Provider={{\"name\":{:?},\"namespace\":{namespace:?}}} providerVersion={:?}",
            p.label(),
            entry.spec.version.clone().unwrap_or_default()
        );
        for object in init::components(&p, "", &namespace, true) {
            let keep = match object["kind"].as_str() {
                Some("CustomResourceDefinition") => !args.include_crd,
                Some("Namespace") => !args.include_namespace,
                _ => false,
            };
            if !keep {
                delete_object(&client, &object).await?;
            }
        }
        delete_object(&client, &init::inventory(&p, "", &namespace)).await?;
    }
    Ok(())
}
