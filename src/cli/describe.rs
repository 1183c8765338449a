//! `capictl describe cluster`: a Cluster's objects and their state as a tree.

use std::collections::BTreeMap;

use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use serde_json::Value;

use super::UsageError;
use super::connect::ClusterArgs;
use crate::api::common::ContractVersionedObjectReference;
use crate::api::{
    Cluster, ClusterResourceSet, ClusterResourceSetBinding, Machine, MachineDeployment,
    MachineHealthCheck, MachinePool, MachineSet,
};
use crate::describe::{self, ConditionFilter, Objects, Options};
use crate::reconcile::external::Resolver;

#[derive(Debug, clap::Subcommand)]
pub enum Describe {
    /// The tree of a Cluster's objects with their conditions.
    Cluster(DescribeClusterArgs),
}

#[derive(Debug, clap::Args)]
pub struct DescribeClusterArgs {
    /// The Cluster's name.
    name: String,
    /// The namespace of the Cluster [default: the kubeconfig context's, else default]
    #[arg(short, long, value_name = "NS")]
    namespace: Option<String>,
    /// A row per condition for these objects: all, KIND or KIND/NAME, comma-separated; a `+`
    /// suffix keeps only the conditions that say something.
    #[arg(long, value_name = "LIST")]
    show_conditions: Option<String>,
    /// Show the MachineSets between MachineDeployments and their Machines.
    #[arg(long)]
    show_machinesets: bool,
    /// Show the ClusterResourceSets applied to the Cluster (its ClusterResourceSetBinding's).
    #[arg(long)]
    show_resourcesets: bool,
    /// Show the templates the control plane and the MachineDeployments make Machines from.
    #[arg(long)]
    show_templates: bool,
    /// Always show Machines' infrastructure machines and bootstrap configs.
    #[arg(long)]
    echo: bool,
    /// Colour the output; `-c` alone is `--color=true`, and `--color=false` turns it off, as
    /// clusterctl's flag [default: when stdout is a terminal and NO_COLOR is unset]
    #[arg(short, long, action = clap::ArgAction::Set, value_name = "BOOL", num_args = 0..=1,
          require_equals = true, default_missing_value = "true")]
    color: Option<bool>,
    /// The output: the tree as text, or the same tree as JSON or YAML.
    #[arg(short, long, value_enum, default_value = "tree")]
    output: Output,
    /// Fold sibling Machines in the same state into one row.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
    grouping: bool,
    #[command(flatten)]
    cluster: ClusterArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    Tree,
    Json,
    Yaml,
}

impl Describe {
    pub fn run(self) -> anyhow::Result<()> {
        match self {
            Describe::Cluster(args) => tokio::runtime::Runtime::new()?.block_on(cluster(args)),
        }
    }
}

/// An object as the tree reads it: without `managedFields`, which no row shows and which a
/// Cluster of thousands of Machines would otherwise hold once per Machine as JSON trees.
fn to_value<T: serde::Serialize>(object: &T) -> Value {
    let mut value = serde_json::to_value(object).expect("API objects serialize");
    if let Some(metadata) = value["metadata"].as_object_mut() {
        metadata.remove("managedFields");
    }
    value
}

/// The objects of a kind that carry the Cluster's label, as JSON.
async fn list<K>(client: &Client, ns: &str, selector: &ListParams) -> anyhow::Result<Vec<Value>>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    Ok(Api::<K>::namespaced(client.clone(), ns)
        .list(selector)
        .await?
        .items
        .iter()
        .map(to_value)
        .collect())
}

async fn referenced(
    resolver: &Resolver,
    namespace: &str,
    reference: &ContractVersionedObjectReference,
) -> Option<Value> {
    // An object that cannot be read is left out of the tree, as clusterctl leaves it.
    resolver
        .get(namespace, reference)
        .await
        .ok()
        .flatten()
        .map(|o| to_value(&o))
}

/// The objects of the kinds `references` name that carry the Cluster's label, one list per
/// kind, by `(kind, name)`: a Cluster of a thousand Machines is read in a few requests, not two
/// thousand. Kinds that cannot be listed are left to the single reads.
async fn labelled_references(
    resolver: &Resolver,
    namespace: &str,
    selector: &ListParams,
    references: &[&ContractVersionedObjectReference],
) -> BTreeMap<(String, String), Value> {
    let mut kinds: Vec<&ContractVersionedObjectReference> = Vec::new();
    for r in references {
        if !kinds
            .iter()
            .any(|k| k.api_group == r.api_group && k.kind == r.kind)
        {
            kinds.push(r);
        }
    }
    let mut objects = BTreeMap::new();
    for kind in kinds {
        let Ok(api) = resolver.api(namespace, kind).await else {
            continue;
        };
        let Ok(list) = api.list(selector).await else {
            continue;
        };
        for o in list.items {
            objects.insert((kind.kind.clone(), o.name_any()), to_value(&o));
        }
    }
    objects
}

async fn cluster(args: DescribeClusterArgs) -> anyhow::Result<()> {
    let show_conditions = match &args.show_conditions {
        Some(v) => ConditionFilter::parse_list(v).map_err(UsageError)?,
        None => Vec::new(),
    };
    let (client, default_namespace) = args.cluster.client().await?;
    let ns = args.namespace.clone().unwrap_or(default_namespace);
    let mut objects = read(&client, &ns, &args.name, args.show_templates).await?;
    if args.show_resourcesets {
        objects.cluster_resource_sets = resource_sets(&client, &ns, &args.name).await?;
    }
    let options = Options {
        show_conditions,
        show_machine_sets: args.show_machinesets,
        show_templates: args.show_templates,
        echo: args.echo,
        grouping: args.grouping,
        now: k8s_openapi::jiff::Timestamp::now(),
        color: args.color.unwrap_or_else(color_by_default),
    };
    match args.output {
        Output::Tree => print!("{}", describe::render(&objects, &options)),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&describe::data(&objects, &options))?
        ),
        Output::Yaml => print!(
            "{}",
            crate::yaml::to_string(&describe::data(&objects, &options))?
        ),
    }
    Ok(())
}

/// Colour when stdout is a terminal and NO_COLOR is unset.
fn color_by_default() -> bool {
    use std::io::IsTerminal;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// The tree `capictl describe cluster NAME` prints, with its default options.
pub async fn tree(client: &Client, namespace: &str, name: &str) -> anyhow::Result<String> {
    let objects = read(client, namespace, name, false).await?;
    let options = Options {
        show_conditions: Vec::new(),
        show_machine_sets: false,
        show_templates: false,
        echo: false,
        grouping: true,
        now: k8s_openapi::jiff::Timestamp::now(),
        color: color_by_default(),
    };
    Ok(describe::render(&objects, &options))
}

/// The ClusterResourceSets a Cluster's binding names, in the binding's order (a set deleted
/// since is left out).
async fn resource_sets(client: &Client, ns: &str, cluster: &str) -> anyhow::Result<Vec<Value>> {
    let Some(binding) = Api::<ClusterResourceSetBinding>::namespaced(client.clone(), ns)
        .get_opt(cluster)
        .await?
    else {
        return Ok(Vec::new());
    };
    let sets: Api<ClusterResourceSet> = Api::namespaced(client.clone(), ns);
    let mut found = Vec::new();
    for entry in binding.spec.bindings.iter().flatten() {
        if let Some(set) = sets.get_opt(&entry.cluster_resource_set_name).await? {
            found.push(to_value(&set));
        }
    }
    Ok(found)
}

async fn read(
    client: &Client,
    ns: &str,
    name: &str,
    with_templates: bool,
) -> anyhow::Result<Objects> {
    let cluster = Api::<Cluster>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!(
                "there is no Cluster {name:?} in namespace {ns:?}; `kubectl get clusters -A` lists the clusters"
            )
        })?;
    let resolver = Resolver::new(client.clone());
    let selector = ListParams::default().labels(&format!("cluster.x-k8s.io/cluster-name={name}"));
    let machines = Api::<Machine>::namespaced(client.clone(), ns)
        .list(&selector)
        .await?
        .items;
    let machine_pools = Api::<MachinePool>::namespaced(client.clone(), ns)
        .list(&selector)
        .await?
        .items;
    let references: Vec<&ContractVersionedObjectReference> = machines
        .iter()
        .map(|m| &m.spec)
        .chain(machine_pools.iter().map(|p| &p.spec.template.spec))
        .flat_map(|spec| {
            [
                Some(&spec.infrastructure_ref),
                spec.bootstrap.config_ref.as_ref(),
            ]
        })
        .flatten()
        .collect();
    let mut referenced_objects = labelled_references(&resolver, ns, &selector, &references).await;
    // What the lists did not hold (an object not yet labelled by its Machine) is read alone.
    for r in references {
        let key = (r.kind.clone(), r.name.clone());
        if !referenced_objects.contains_key(&key)
            && let Some(o) = referenced(&resolver, ns, r).await
        {
            referenced_objects.insert(key, o);
        }
    }
    let infrastructure = match &cluster.spec.infrastructure_ref {
        Some(r) => referenced(&resolver, ns, r).await,
        None => None,
    };
    let control_plane = match &cluster.spec.control_plane_ref {
        Some(r) => referenced(&resolver, ns, r).await,
        None => None,
    };
    let machine_health_checks = Api::<MachineHealthCheck>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|m| m.spec.cluster_name == cluster.name_any())
        .map(|m| to_value(&m))
        .collect();
    let machine_deployments = list::<MachineDeployment>(client, ns, &selector).await?;
    if with_templates {
        for owner in control_plane.iter().chain(&machine_deployments) {
            for r in describe::template_refs(owner) {
                let Ok(reference) =
                    serde_json::from_value::<ContractVersionedObjectReference>(r.clone())
                else {
                    continue;
                };
                if let Some(o) = referenced(&resolver, ns, &reference).await {
                    referenced_objects.insert((reference.kind.clone(), reference.name.clone()), o);
                }
            }
        }
    }
    let cluster_class = match &cluster.spec.topology {
        Some(t) => {
            let class_ns = t.class_ref.namespace.clone().unwrap_or(ns.to_string());
            let class = Api::<crate::api::ClusterClass>::namespaced(client.clone(), &class_ns)
                .get_opt(&t.class_ref.name)
                .await?;
            Some(describe::cluster_class_row(
                &to_value(&cluster),
                class.as_ref().map(to_value).as_ref(),
                &class_ns,
                &t.class_ref.name,
            ))
        }
        None => None,
    };
    Ok(Objects {
        cluster_class,
        infrastructure,
        control_plane,
        machine_deployments,
        machine_sets: list::<MachineSet>(client, ns, &selector).await?,
        machine_pools: machine_pools.iter().map(to_value).collect(),
        machines: machines.iter().map(to_value).collect(),
        machine_health_checks,
        cluster_resource_sets: Vec::new(),
        referenced: referenced_objects,
        cluster: to_value(&cluster),
    })
}
