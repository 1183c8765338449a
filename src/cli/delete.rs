//! `capictl delete`: removes providers from a management cluster, as clusterctl does: their
//! controllers, RBAC and inventory entry; their CRDs with `--include-crd` (refused while objects
//! of them exist) and their namespace with `--include-namespace`. Workload clusters are left
//! alone.

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::Provider;
use crate::init::{self, PROVIDERS, ProviderInfo};

#[derive(Debug, clap::Args)]
pub struct Args {
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

pub fn run(args: Args) -> anyhow::Result<()> {
    tokio::runtime::Runtime::new()?.block_on(delete(args))
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
            "say which providers to delete: --all, or --core, --bootstrap, --control-plane and --infrastructure with their names (not both)".into(),
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
