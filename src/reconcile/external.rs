//! Provider objects (infrastructure clusters and machines, bootstrap configs, control planes)
//! reached through their contract: the CRD's `cluster.x-k8s.io/v1beta2` label says which API
//! version to use, so core controllers handle any provider as unstructured objects; and
//! objects cloned from their templates (upstream's `CreateFromTemplate`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::{Context, Error, Result, Wakes, common};
use crate::api;
use crate::api::common::ContractVersionedObjectReference;
use crate::api::{CONTRACT_LABEL, CONTRACT_VERSION};

/// The plural of a kind, as upstream (flect) forms CRD names.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
    {
        format!("{lower}es")
    } else if lower.ends_with('y')
        && !lower.ends_with("ay")
        && !lower.ends_with("ey")
        && !lower.ends_with("oy")
    {
        format!("{}ies", &lower[..lower.len() - 1])
    } else {
        format!("{lower}s")
    }
}

/// The group of an `apiVersion` (`""` for the core group's `v1`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Finds the API version of provider kinds through their CRDs, and caches it; and, in a
/// manager running the core controllers, watches the provider kinds they read whose own
/// controllers run elsewhere, so that their changes wake their owners.
pub struct Resolver {
    client: Client,
    cache: Mutex<HashMap<(String, String), ApiResource>>,
    /// None until [`Resolver::watch_owners`]: a resolver that wakes nothing (the CLI's).
    owner_watches: Mutex<Option<OwnerWatches>>,
}

/// The provider kinds (by CRD name) whose changes wake their owners from here.
struct OwnerWatches {
    wakes: Wakes,
    /// Kinds whose controllers run in this process: each change of theirs wakes its owners
    /// already ([`crate::reconcile::runtime::Wiring::controller`]).
    watched_here: HashSet<String>,
    /// The watches started for the others, stopped with the resolver.
    started: HashMap<String, tokio::task::AbortHandle>,
}

impl Drop for Resolver {
    fn drop(&mut self) {
        if let Some(watches) = self.owner_watches.get_mut().unwrap().as_ref() {
            watches.started.values().for_each(|w| w.abort());
        }
    }
}

impl Resolver {
    pub fn new(client: Client) -> Resolver {
        Resolver {
            client,
            cache: Mutex::new(HashMap::new()),
            owner_watches: Mutex::new(None),
        }
    }

    /// From now on, a provider kind [`Resolver::get`] reads whose CRD is not among
    /// `watched_here` is watched, and each change of one of its objects wakes the Machine,
    /// Cluster or MachinePool that owns it: the core controllers of a manager that runs
    /// without that provider's (each provider in its own Deployment, as `init` installs
    /// them) would otherwise hear of a control plane becoming Available only at their next
    /// resync.
    pub fn watch_owners<'a>(&self, wakes: Wakes, watched_here: impl IntoIterator<Item = &'a str>) {
        *self.owner_watches.lock().unwrap() = Some(OwnerWatches {
            wakes,
            watched_here: watched_here.into_iter().map(str::to_string).collect(),
            started: HashMap::new(),
        });
    }

    /// Starts the owner watch of a kind if [`Resolver::watch_owners`] asks for one and it has
    /// none yet.
    fn ensure_owner_watch(&self, resource: &ApiResource) {
        let mut watches = self.owner_watches.lock().unwrap();
        let Some(watches) = watches.as_mut() else {
            return;
        };
        let crd = format!("{}.{}", resource.plural, resource.group);
        if watches.watched_here.contains(&crd) || watches.started.contains_key(&crd) {
            return;
        }
        tracing::info!(kind = %crd, "watching a provider kind whose controllers run elsewhere, to wake the objects' owners");
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let wakes = watches.wakes.clone();
        let task = tokio::spawn(async move {
            let changes = watcher(api, watcher::Config::default())
                .default_backoff()
                .touched_objects();
            let mut changes = std::pin::pin!(changes);
            while let Some(change) = changes.next().await {
                if let Ok(object) = change {
                    wakes.owners_of(&object.metadata);
                }
            }
        });
        watches.started.insert(crd, task.abort_handle());
    }

    /// The API resource of a kind in a group, at the newest version implementing the contract.
    pub async fn resource(&self, group: &str, kind: &str) -> Result<ApiResource> {
        self.installed(group, kind).await?.ok_or_else(|| {
            Error::Invalid(format!(
                "{kind}.{group} is not installed (no CRD {}.{group}); install its provider",
                plural(kind)
            ))
        })
    }

    /// [`Resolver::resource`], or None when the kind is not installed (no CRD).
    pub async fn installed(&self, group: &str, kind: &str) -> Result<Option<ApiResource>> {
        let key = (group.to_string(), kind.to_string());
        if let Some(r) = self.cache.lock().unwrap().get(&key) {
            return Ok(Some(r.clone()));
        }
        let crd_name = format!("{}.{group}", plural(kind));
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let Some(crd) = crds.get_opt(&crd_name).await? else {
            return Ok(None);
        };
        let versions = crd
            .labels()
            .get(CONTRACT_LABEL)
            .cloned()
            .unwrap_or_default();
        let version = versions
            .split('_')
            .filter(|v| !v.is_empty())
            .max_by_key(|v| crate::apiserver::registry::version_priority(v))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "CRD {crd_name} has no {CONTRACT_LABEL} label: it does not say which version implements the {CONTRACT_VERSION} contract"
                ))
            })?
            .to_string();
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(group, &version, &crd.spec.names.kind),
            &crd.spec.names.plural,
        );
        self.cache.lock().unwrap().insert(key, resource.clone());
        Ok(Some(resource))
    }

    /// The API for the objects of a reference, in a namespace.
    pub async fn api(
        &self,
        namespace: &str,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Api<DynamicObject>> {
        let resource = self.resource(&reference.api_group, &reference.kind).await?;
        Ok(Api::namespaced_with(
            self.client.clone(),
            namespace,
            &resource,
        ))
    }

    /// The API of the templates a ClusterClass reference names (at the version the provider
    /// serves, which may differ from the reference's), in a namespace.
    pub async fn template_api(
        &self,
        namespace: &str,
        reference: &api::common::TemplateReference,
    ) -> Result<(Api<DynamicObject>, ApiResource)> {
        let resource = self
            .resource(group_of(&reference.api_version), &reference.kind)
            .await?;
        let api = Api::namespaced_with(self.client.clone(), namespace, &resource);
        Ok((api, resource))
    }

    /// The object a reference names, if it exists.
    pub async fn get(
        &self,
        namespace: &str,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Option<DynamicObject>> {
        let resource = self.resource(&reference.api_group, &reference.kind).await?;
        self.ensure_owner_watch(&resource);
        Ok(
            Api::<DynamicObject>::namespaced_with(self.client.clone(), namespace, &resource)
                .get_opt(&reference.name)
                .await?,
        )
    }

    /// Makes `cluster` an owner of the template a reference names, as upstream's MachineSet
    /// and control plane controllers do: the template then goes with its Cluster, deleted
    /// with it and moved with it by `capictl move`. A missing template is left to the step
    /// that needs it to report.
    pub async fn adopt_template(
        &self,
        namespace: &str,
        reference: &ContractVersionedObjectReference,
        cluster: &crate::api::Cluster,
    ) -> Result<()> {
        let Some(template) = self.get(namespace, reference).await? else {
            return Ok(());
        };
        add_owner(&self.api(namespace, reference).await?, &template, cluster).await
    }

    /// Deletes the object a reference names, unless it is being deleted already (its own
    /// finalizers decide when it goes): whether it is still there to be waited for, gone, or
    /// of a kind that is not installed (so none of it can exist, and nothing is waited for).
    pub async fn delete(
        &self,
        namespace: &str,
        reference: &ContractVersionedObjectReference,
    ) -> Result<Deletion> {
        let Some(resource) = self
            .installed(&reference.api_group, &reference.kind)
            .await?
        else {
            return Ok(Deletion::NotInstalled(format!(
                "{} {:?} was not deleted: {}.{} is not installed (no CRD {}.{}), so no such object exists",
                reference.kind,
                reference.name,
                reference.kind,
                reference.api_group,
                plural(&reference.kind),
                reference.api_group
            )));
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), namespace, &resource);
        let Some(object) = api.get_opt(&reference.name).await? else {
            return Ok(Deletion::Gone);
        };
        if object.metadata.deletion_timestamp.is_none() {
            api.delete(&reference.name, &kube::api::DeleteParams::background())
                .await?;
        }
        Ok(Deletion::Waiting)
    }
}

/// Where the deletion of a referenced object stands.
#[derive(Debug, PartialEq, Eq)]
pub enum Deletion {
    /// Still there (its finalizers at work).
    Waiting,
    /// Gone, or never made.
    Gone,
    /// Its kind is not installed: nothing to delete or wait for; why, for the owner's events.
    NotInstalled(String),
}

/// Makes `owner` an owner (not the controller) of `object`, unless it is one already. The
/// resourceVersion makes the write a compare-and-swap with other owners'.
pub async fn add_owner<O, K>(api: &Api<O>, object: &O, owner: &K) -> Result<()>
where
    O: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: kube::Resource<DynamicType = ()>,
{
    let uid = owner.uid().unwrap_or_default();
    if super::common::has_owner(object.owner_references(), &uid) {
        return Ok(());
    }
    let mut refs = object.owner_references().to_vec();
    refs.push(super::common::owner_reference(owner, false));
    let patch = serde_json::json!({"metadata": {"ownerReferences": refs, "resourceVersion": object.resource_version()}});
    api.patch(
        &object.name_any(),
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// A field of an unstructured object, by path.
pub fn field<'a>(object: &'a DynamicObject, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(&object.data, |v, k| v.get(*k))
}

/// `status.initialization.<flag>` (the v1beta2 contract), false when missing.
pub fn initialization_flag(object: &DynamicObject, flag: &str) -> bool {
    field(object, &["status", "initialization", flag])
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A provider object's condition of a type.
pub fn condition(object: &DynamicObject, type_: &str) -> Option<Condition> {
    let list = field(object, &["status", "conditions"])?.as_array()?;
    list.iter()
        .find(|c| c["type"] == type_)
        .and_then(|c| serde_json::from_value(c.clone()).ok())
}

/// Creates an object from a template's `spec.template` (kind without `Template`), named after
/// the Machine, owned by `owner` (the MachineSet or control plane creating the Machine) until
/// the Machine takes it over.
pub async fn clone_template(
    ctx: &Context,
    namespace: &str,
    template: &ContractVersionedObjectReference,
    name: &str,
    labels: &BTreeMap<String, String>,
    owner: OwnerReference,
) -> Result<ContractVersionedObjectReference> {
    let source = ctx
        .external
        .get(namespace, template)
        .await?
        .ok_or_else(|| {
            Error::Invalid(format!(
                "{} {} does not exist; the MachineSet cannot create Machines from it",
                template.kind, template.name
            ))
        })?;
    let kind = template
        .kind
        .strip_suffix("Template")
        .unwrap_or(&template.kind)
        .to_string();
    let resource = ctx.external.resource(&template.api_group, &kind).await?;
    let spec = field(&source, &["spec", "template", "spec"])
        .cloned()
        .unwrap_or(json!({}));
    let mut annotations = BTreeMap::from([
        (
            api::CLONED_FROM_NAME_ANNOTATION.to_string(),
            template.name.clone(),
        ),
        (
            api::CLONED_FROM_GROUP_KIND_ANNOTATION.to_string(),
            format!("{}.{}", template.kind, template.api_group),
        ),
    ]);
    if let Some(a) =
        field(&source, &["spec", "template", "metadata", "annotations"]).and_then(Value::as_object)
    {
        for (k, v) in a {
            annotations.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
    }
    let mut object = DynamicObject::new(name, &resource).within(namespace);
    object.metadata = ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(labels.clone()),
        annotations: Some(annotations),
        owner_references: Some(vec![owner]),
        ..Default::default()
    };
    object.data = json!({"spec": spec});
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    common::create_if_absent(&api, &object).await?;
    Ok(ContractVersionedObjectReference {
        kind,
        name: name.to_string(),
        api_group: template.api_group.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_as_upstream_names_crds() {
        for (kind, want) in [
            ("DockerMachine", "dockermachines"),
            ("InMemoryMachineTemplate", "inmemorymachinetemplates"),
            ("KubeadmConfig", "kubeadmconfigs"),
            ("ClusterClass", "clusterclasses"),
            ("KubeadmControlPlane", "kubeadmcontrolplanes"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
        ] {
            assert_eq!(plural(kind), want, "{kind}");
        }
    }
}
