//! `capictl upgrade plan` and `capictl upgrade apply`: the providers in the inventory against
//! the versions this binary carries, and the upgrade itself: CRDs updated in place, on a real
//! cluster the controllers replaced keeping the args and environment the user set, and the
//! inventory versions written. The plan also says where each workload cluster's Kubernetes
//! version can go next.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::{self, Cluster, KubeadmControlPlane, Provider};
use crate::init::{self, ProviderInfo};
use crate::upgrade::{self, Installed, Row};

#[derive(Debug, clap::Subcommand)]
pub enum Upgrade {
    /// Which provider versions the management cluster can move to, and where each workload
    /// cluster's Kubernetes version can go next.
    Plan(PlanArgs),
    /// Upgrade the providers to the versions this capictl carries.
    Apply(ApplyArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Text,
    Json,
    Yaml,
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Text)]
    output: Output,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, clap::Args)]
pub struct ApplyArgs {
    /// Upgrade every provider to the newest version of this contract.
    #[arg(long, value_name = "CONTRACT")]
    contract: Option<String>,
    /// The core provider to upgrade, as NAME:VERSION.
    #[arg(long, value_name = "NAME:VERSION")]
    core: Option<String>,
    /// Bootstrap providers to upgrade, as NAME:VERSION.
    #[arg(short, long, value_name = "NAME:VERSION", value_delimiter = ',')]
    bootstrap: Vec<String>,
    /// Control plane providers to upgrade, as NAME:VERSION.
    #[arg(short, long, value_name = "NAME:VERSION", value_delimiter = ',')]
    control_plane: Vec<String>,
    /// Infrastructure providers to upgrade, as NAME:VERSION.
    #[arg(short, long, value_name = "NAME:VERSION", value_delimiter = ',')]
    infrastructure: Vec<String>,
    /// The image the upgraded controller Deployments run.
    #[arg(long, value_name = "IMAGE", default_value_t = crate::build_info::controller_image())]
    image: String,
    #[command(flatten)]
    wait: super::init::WaitArgs,
    #[command(flatten)]
    cluster: ClusterArgs,
}

impl Upgrade {
    pub fn run(self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Runtime::new()?;
        match self {
            Upgrade::Plan(args) => runtime.block_on(plan(args)),
            Upgrade::Apply(args) => runtime.block_on(apply(args)),
        }
    }
}

/// The inventory, empty where its CRD is not installed.
async fn inventory(client: &Client) -> anyhow::Result<Vec<Provider>> {
    match Api::<Provider>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Vec::new()),
        Err(e) => Err(anyhow::anyhow!("listing the providers: {e}")),
    }
}

fn installed(providers: &[Provider]) -> Vec<Installed> {
    providers
        .iter()
        .map(|p| Installed {
            name: p.name_any(),
            namespace: p.namespace().unwrap_or_default(),
            type_: p.spec.type_.clone().unwrap_or_default(),
            provider_name: p.spec.provider_name.clone().unwrap_or_default(),
            version: p.spec.version.clone().unwrap_or_default(),
        })
        .collect()
}

const NO_PROVIDERS: &str = "There are no providers in the cluster. Please use capictl init to initialize a Cluster API management cluster.";

/// A workload cluster's version and where it can go next.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct WorkloadRow {
    name: String,
    namespace: String,
    version: String,
    next_version: Option<String>,
    node_images: String,
}

async fn workload_rows(client: &Client) -> anyhow::Result<Vec<WorkloadRow>> {
    let clusters = match Api::<Cluster>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(s)) if s.code == 404 => Vec::new(),
        Err(e) => return Err(anyhow::anyhow!("listing the Clusters: {e}")),
    };
    // The node images on this machine's Docker Engine, when one answers.
    let node_versions = match crate::providers::docker::connect().await {
        Ok(docker) => crate::providers::docker::images::node_versions(&docker)
            .await
            .ok(),
        Err(_) => None,
    };
    let mut rows = Vec::new();
    for c in clusters {
        let ns = c.namespace().unwrap_or_default();
        let version = match (&c.spec.topology, &c.spec.control_plane_ref) {
            (Some(t), _) => Some(t.version.clone()),
            (None, Some(r)) if r.kind == "KubeadmControlPlane" => {
                Api::<KubeadmControlPlane>::namespaced(client.clone(), &ns)
                    .get_opt(&r.name)
                    .await?
                    .map(|k| k.spec.version)
            }
            _ => None,
        }
        .unwrap_or_default();
        let next = upgrade::next_minor(&version);
        let docker = c
            .spec
            .infrastructure_ref
            .as_ref()
            .is_some_and(|r| r.kind == "DockerCluster" || r.kind == "DevCluster");
        let node_images = match (&next, docker, &node_versions) {
            (None, _, _) => String::new(),
            (Some(_), false, _) => "not needed".into(),
            (Some(_), true, None) => "unknown (no Docker Engine answers)".into(),
            (Some(next), true, Some(tags)) => {
                let present: Vec<&String> = tags
                    .iter()
                    .filter(|t| t.starts_with(&format!("{next}.")))
                    .collect();
                if present.is_empty() {
                    format!("missing: capictl images build --kubernetes-version {next}.0")
                } else {
                    present
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            }
        };
        rows.push(WorkloadRow {
            name: c.name_any(),
            namespace: ns,
            version,
            next_version: next,
            node_images,
        });
    }
    Ok(rows)
}

async fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let (client, _) = args.cluster.client().await?;
    eprintln!("Checking new release availability...");
    let providers = inventory(&client).await?;
    if providers.is_empty() {
        println!("{NO_PROVIDERS}");
        return Ok(());
    }
    let rows = upgrade::plan(&installed(&providers), &upgrade::available_version())
        .map_err(anyhow::Error::msg)?;
    let workloads = workload_rows(&client).await?;
    match args.output {
        Output::Text => {
            print!("{}", upgrade::render_plan(&rows, api::CONTRACT_VERSION));
            if !workloads.is_empty() {
                let mut table = vec![
                    [
                        "CLUSTER",
                        "NAMESPACE",
                        "VERSION",
                        "NEXT VERSION",
                        "NODE IMAGES",
                    ]
                    .map(String::from)
                    .to_vec(),
                ];
                for w in &workloads {
                    table.push(vec![
                        w.name.clone(),
                        w.namespace.clone(),
                        w.version.clone(),
                        w.next_version.clone().unwrap_or_default(),
                        w.node_images.clone(),
                    ]);
                }
                print!(
                    "Workload clusters (Kubernetes goes one minor version at a time):\n\n{}\n",
                    upgrade::columns(&table)
                );
            }
        }
        Output::Json | Output::Yaml => {
            let document = json!({
                "contract": api::CONTRACT_VERSION,
                "providers": rows,
                "clusters": workloads,
            });
            if args.output == Output::Json {
                println!("{}", serde_json::to_string_pretty(&document)?);
            } else {
                print!("{}", crate::yaml::to_string(&document)?);
            }
        }
    }
    Ok(())
}

/// `name:version` (or the deprecated `namespace/name:version`) of an installed provider.
fn named<'a>(value: &str, type_: &str, rows: &'a [Row]) -> anyhow::Result<&'a Row> {
    let Some((name, version)) = value.split_once(':') else {
        return Err(UsageError(format!(
            "invalid provider name {value:?}. Provider name should be in the form namespace/provider:version or provider:version"
        ))
        .into());
    };
    if version.is_empty() {
        return Err(UsageError(format!(
            "invalid provider name {value:?}. Provider name should be in the form namespace/name:version and version cannot be empty"
        ))
        .into());
    }
    let (namespace, name) = match name.split_once('/') {
        Some((ns, n)) => (Some(ns), n),
        None => (None, name),
    };
    let available = upgrade::available_version();
    if version != available {
        return Err(UsageError(format!(
            "{name}:{version}: this capictl carries {available} of every provider; use the capictl of {version} for that version"
        ))
        .into());
    }
    rows.iter()
        .find(|r| {
            r.type_ == type_
                && (r.name == name || r.provider_name == name)
                && namespace.is_none_or(|ns| ns == r.namespace)
        })
        .ok_or_else(|| {
            anyhow::anyhow!(
                "unable to perform upgrade: the provider {}{name} in not part of the management cluster",
                namespace.map(|n| format!("{n}/")).unwrap_or_default()
            )
        })
}

async fn apply(args: ApplyArgs) -> anyhow::Result<()> {
    let custom = args.core.is_some()
        || !args.bootstrap.is_empty()
        || !args.control_plane.is_empty()
        || !args.infrastructure.is_empty();
    match (&args.contract, custom) {
        (None, false) => {
            return Err(UsageError(
                "Either the --contract flag or at least one of the following flags has to be set: --core, --bootstrap, --control-plane, --infrastructure".into(),
            )
            .into());
        }
        (Some(_), true) => {
            return Err(UsageError(
                "The --contract flag can't be used in combination with --core, --bootstrap, --control-plane, --infrastructure".into(),
            )
            .into());
        }
        (Some(c), false) if c != api::CONTRACT_VERSION => {
            return Err(UsageError(format!(
                "current version of capictl could only upgrade to {} contract, requested {c}",
                api::CONTRACT_VERSION
            ))
            .into());
        }
        _ => {}
    }
    let (client, _) = args.cluster.client().await?;
    let providers = inventory(&client).await?;
    if providers.is_empty() {
        anyhow::bail!("{NO_PROVIDERS}");
    }
    let rows = upgrade::plan(&installed(&providers), &upgrade::available_version())
        .map_err(anyhow::Error::msg)?;
    let chosen: Vec<&Row> = if custom {
        let mut chosen = Vec::new();
        for (type_, values) in [
            (
                "CoreProvider",
                args.core.iter().cloned().collect::<Vec<_>>(),
            ),
            ("BootstrapProvider", args.bootstrap.clone()),
            ("ControlPlaneProvider", args.control_plane.clone()),
            ("InfrastructureProvider", args.infrastructure.clone()),
        ] {
            for v in values {
                chosen.push(named(&v, type_, &rows)?);
            }
        }
        chosen
    } else {
        rows.iter().collect()
    };
    let chosen: Vec<&Row> = chosen
        .into_iter()
        .filter(|r| r.next_version.is_some())
        .collect();
    if let Some(blocked) = chosen.iter().find_map(|r| r.blocked.as_ref()) {
        anyhow::bail!("{blocked}");
    }
    eprintln!("Performing upgrade...");
    if chosen.is_empty() {
        eprintln!(
            "Nothing to upgrade: every provider is at {}",
            upgrade::available_version()
        );
        return Ok(());
    }
    let embedded = super::init::is_embedded(&client).await;
    let infos = chosen
        .iter()
        .map(|r| init::find(&r.type_, &r.provider_name).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<Vec<ProviderInfo>>>()?;
    // Old controllers stop first: none of them may write while the new CRDs go in.
    let mut replicas = BTreeMap::new();
    if !embedded {
        for r in &chosen {
            eprintln!(
                "Scaling down Provider={{\"name\":{:?},\"namespace\":{:?}}} providerVersion={:?}",
                r.name, r.namespace, r.current_version
            );
            replicas.insert(r.name.clone(), scale_down(&client, r).await?);
        }
    }
    for (r, p) in chosen.iter().zip(&infos) {
        let version = r.next_version.clone().expect("chosen rows have one");
        eprintln!(
            "Installing provider={:?} version={version:?} targetNamespace={:?}",
            r.name, r.namespace
        );
        let mut objects = init::components(p, &args.image, &r.namespace, !embedded);
        if !embedded {
            let deployments: Api<Deployment> = Api::namespaced(client.clone(), &r.namespace);
            for object in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                if let Some(old) = deployments.get_opt(&name).await? {
                    keep_user_settings(object, &old, replicas.get(&r.name).copied().flatten());
                }
            }
            if p.serves_webhooks() {
                let ca = super::init::webhook_ca(&client, p, &r.namespace).await?;
                objects = init::with_ca_bundle(objects, &ca);
            }
        }
        for object in &objects {
            super::init::apply(&client, object).await?;
        }
        // Objects stored in an older version are read through the provider's conversion
        // webhook, which the Deployment just applied serves: it must answer first.
        if !embedded && p.serves_webhooks() {
            super::init::wait_for_providers(
                &client,
                &[(p, &r.namespace)],
                embedded,
                MIGRATION_WAIT,
            )
            .await?;
        }
        migrate_stored_versions(&client, &objects).await?;
        super::init::apply(&client, &init::inventory(p, &version, &r.namespace)).await?;
    }
    if embedded {
        eprintln!(
            "The embedded management cluster runs the controllers of the capictl that started it; if that was an older capictl, restart it with this one (`capictl management down`, then `capictl management up`)."
        );
    }
    let waited: Vec<(&ProviderInfo, &str)> = infos
        .iter()
        .zip(&chosen)
        .map(|(p, r)| (p, r.namespace.as_str()))
        .collect();
    args.wait.wait(&client, &waited, embedded).await
}

/// Scales a provider's Deployments to zero and waits until their Pods are gone; returns the
/// replicas they had, to restore.
async fn scale_down(client: &Client, r: &Row) -> anyhow::Result<Option<i32>> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &r.namespace);
    let selector = format!(
        "{}={},{}",
        api::PROVIDER_LABEL,
        r.name,
        api::CLUSTERCTL_LABEL
    );
    let mut had = None;
    for d in deployments
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
    {
        had = had.or(d.spec.replicas);
        deployments
            .patch(
                &d.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 0}})),
            )
            .await
            .map_err(|e| anyhow::anyhow!("failed to scale down Deployment: {e}"))?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let left = deployments
                .get(&d.name_any())
                .await?
                .status
                .and_then(|s| s.replicas)
                .unwrap_or(0);
            if left == 0 {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                anyhow::bail!(
                    "failed to wait until Deployment is scaled down: Deployment still has {left} replicas"
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(had)
}

/// The new release's Deployment, keeping what the running one sets: the manager's flags and
/// environment (feature gates included), and its replicas from before the scale-down.
fn keep_user_settings(new: &mut Value, old: &Deployment, replicas: Option<i32>) {
    let Some(old_container) = old
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.iter().find(|c| c.name == "manager"))
    else {
        return;
    };
    let container = &mut new["spec"]["template"]["spec"]["containers"][0];
    let new_args: Vec<String> =
        serde_json::from_value(container["args"].clone()).unwrap_or_default();
    container["args"] = json!(upgrade::keep_args(
        old_container.args.as_deref().unwrap_or_default(),
        &new_args
    ));
    let mut env: Vec<Value> = container["env"].as_array().cloned().unwrap_or_default();
    for e in old_container.env.iter().flatten() {
        env.retain(|n| n["name"] != e.name.as_str());
        env.push(serde_json::to_value(e).expect("env serializes"));
    }
    if !env.is_empty() {
        container["env"] = json!(env);
    }
    if let Some(r) = replicas {
        new["spec"]["replicas"] = json!(r);
    }
}

/// How long `upgrade apply` waits for an upgraded provider's webhook server before migrating.
const MIGRATION_WAIT: std::time::Duration = std::time::Duration::from_secs(300);

/// Where a CRD's storage version changed, rewrites every stored object at the new one (an
/// empty patch, as upstream's crdmigrator does) and then records that only it is stored; and,
/// as the crdmigrator's clean-up, drops managedFields entries of API versions no longer served
/// (server-side apply cannot read them), leaving a placeholder where none would be left.
async fn migrate_stored_versions(client: &Client, objects: &[Value]) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for object in objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
    {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        let crd = crds.get(name).await?;
        let Some(storage) = crd
            .spec
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.clone())
        else {
            continue;
        };
        let stored = crd
            .status
            .as_ref()
            .and_then(|s| s.stored_versions.clone())
            .unwrap_or_default();
        let migrate = !(stored.is_empty() || stored == [storage.clone()]);
        let group = &crd.spec.group;
        let served: Vec<String> = crd
            .spec
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| format!("{group}/{}", v.name))
            .collect();
        if migrate {
            eprintln!("Migrating {name} from {} to {storage}", stored.join(", "));
        }
        let resource = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(group, &storage, &crd.spec.names.kind),
            &crd.spec.names.plural,
        );
        let all: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), &resource);
        // The webhook's Service may lag a moment behind its Deployment being Available.
        let started = std::time::Instant::now();
        let listed = loop {
            match all.list(&ListParams::default()).await {
                Ok(listed) => break listed,
                Err(kube::Error::Api(s))
                    if s.code >= 500 && started.elapsed() < std::time::Duration::from_secs(60) =>
                {
                    eprintln!("Waiting for {name}'s conversion webhook: {}", s.message);
                    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
                }
                Err(e) => {
                    return Err(anyhow::anyhow!(
                        "reading {name} to migrate it to {storage}: {e}"
                    ));
                }
            }
        };
        for o in listed.items {
            let api: Api<kube::api::DynamicObject> = match o.namespace() {
                Some(ns) => Api::namespaced_with(client.clone(), &ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let mut patches = Vec::new();
            if migrate {
                patches.push(Patch::Merge(json!({})));
            }
            let entries = o.metadata.managed_fields.as_deref().unwrap_or_default();
            if let Some(kept) =
                served_managed_fields(entries, &served, &format!("{group}/{storage}"))
            {
                patches.push(Patch::Json(
                    serde_json::from_value(json!([
                        {"op": "replace", "path": "/metadata/managedFields", "value": kept},
                        {"op": "replace", "path": "/metadata/resourceVersion", "value": o.resource_version()},
                    ]))
                    .expect("a JSON patch"),
                ));
            }
            for patch in patches {
                match api
                    .patch(&o.name_any(), &PatchParams::default(), &patch)
                    .await
                {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                    Err(e) => {
                        return Err(anyhow::anyhow!("migrating {name} {}: {e}", o.name_any()));
                    }
                }
            }
        }
        if migrate {
            crds.patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"storedVersions": [storage]}})),
            )
            .await?;
        }
    }
    Ok(())
}

/// An object's managedFields without the entries of API versions not in `served`, or None when
/// every entry is of a served one. Where none would be left, one entry of the first manager
/// at `storage` owning only the name, so that the next server-side apply does not make up an
/// owner of every field.
fn served_managed_fields(
    entries: &[ManagedFieldsEntry],
    served: &[String],
    storage: &str,
) -> Option<Vec<ManagedFieldsEntry>> {
    let is_served =
        |e: &ManagedFieldsEntry| e.api_version.as_ref().is_some_and(|v| served.contains(v));
    if entries.iter().all(is_served) {
        return None;
    }
    let mut kept: Vec<ManagedFieldsEntry> =
        entries.iter().filter(|e| is_served(e)).cloned().collect();
    if kept.is_empty() {
        kept.push(ManagedFieldsEntry {
            manager: entries[0].manager.clone(),
            operation: entries[0].operation.clone(),
            api_version: Some(storage.to_string()),
            time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            )),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                json!({"f:metadata": {"f:name": {}}}),
            )),
            subresource: None,
        });
    }
    Some(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_fields_of_versions_no_longer_served_are_dropped() {
        let entry = |manager: &str, version: &str| ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            api_version: Some(format!("cluster.x-k8s.io/{version}")),
            ..Default::default()
        };
        let served = [
            "cluster.x-k8s.io/v1beta1".to_string(),
            "cluster.x-k8s.io/v1beta2".to_string(),
        ];
        let storage = "cluster.x-k8s.io/v1beta2";
        let current = [
            entry("capi-topology", "v1beta2"),
            entry("kubectl", "v1beta1"),
        ];
        assert_eq!(served_managed_fields(&current, &served, storage), None);
        let mixed = [entry("capi-topology", "v1beta2"), entry("old", "v1alpha4")];
        let kept = served_managed_fields(&mixed, &served, storage).unwrap();
        assert_eq!(kept, [entry("capi-topology", "v1beta2")]);
        let all_old = [entry("old", "v1alpha4")];
        let seeded = served_managed_fields(&all_old, &served, storage).unwrap();
        assert_eq!(seeded.len(), 1);
        assert_eq!(seeded[0].manager.as_deref(), Some("old"));
        assert_eq!(seeded[0].api_version.as_deref(), Some(storage));
        assert_eq!(
            seeded[0].fields_v1.as_ref().unwrap().0,
            json!({"f:metadata": {"f:name": {}}})
        );
    }
}
