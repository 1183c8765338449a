//! The resources the server serves, built-in kinds and CRDs alike: discovery, routing,
//! validation and Table printing all read this one registry.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use super::conversion::{Converter, Converters};
use serde_json::Value;

/// How a Table cell is computed from an object.
#[derive(Clone, Debug)]
pub enum Cell {
    /// A JSONPath as CRD printer columns write it, e.g. `.status.phase`.
    Path(String),
    /// The time since a timestamp at this path, as kubectl shows ages.
    Age(String),
    /// The number of entries of the map or list at this path.
    Count(String),
    /// Computed by a function of the object.
    Computed(fn(&Value) -> Value),
}

#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    pub cell: Cell,
}

impl Column {
    pub(super) fn new(name: &str, type_: &str, cell: Cell) -> Column {
        Column {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            cell,
        }
    }

    fn name_column() -> Column {
        let mut c = Column::new("Name", "string", Cell::Path(".metadata.name".into()));
        c.format = "name".into();
        c.description = "Name must be unique within a namespace.".into();
        c
    }

    pub(super) fn age() -> Column {
        let mut c = Column::new(
            "Age",
            "string",
            Cell::Age(".metadata.creationTimestamp".into()),
        );
        c.description = "Time since the object was created.".into();
        c
    }
}

/// The scale subresource's paths, as a CRD declares them.
#[derive(Clone, Debug, Default)]
pub struct Scale {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// One resource at one version.
#[derive(Clone, Debug)]
pub struct Resource {
    /// Empty for the core group.
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    pub status_subresource: bool,
    pub scale: Option<Scale>,
    /// Table columns after Name (and before Age, for built-ins that have no date column).
    pub columns: Vec<Column>,
    /// The OpenAPI v3 schema, for CRDs.
    pub schema: Option<Arc<Value>>,
    /// Whether `metadata.generation` counts spec changes.
    pub tracks_generation: bool,
    /// The version objects are stored at (versions of one CRD share the storage).
    pub storage_version: String,
    /// The CRD this resource comes from, if any.
    pub crd_name: Option<String>,
    /// The group whose keys hold this resource's objects, when not its own (the
    /// `events.k8s.io` Events are core Events, [`super::events`]).
    pub storage_group: Option<String>,
    /// What converts this version's objects to and from the storage version, for a CRD that
    /// converts by webhook and whose group registered one ([`Registry::register_converter`]).
    pub converter: Option<Arc<dyn Converter>>,
}

impl Resource {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// The key prefix of every object of this resource.
    pub fn prefix(&self) -> String {
        key_prefix(
            self.storage_group.as_deref().unwrap_or(&self.group),
            &self.plural,
        )
    }

    /// The key prefix of this resource's objects in one namespace (or all, for `None`).
    pub fn namespace_prefix(&self, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) if self.namespaced => format!("{}{ns}/", self.prefix()),
            _ => self.prefix(),
        }
    }

    pub fn key(&self, namespace: Option<&str>, name: &str) -> String {
        format!("{}{name}", self.namespace_prefix(namespace))
    }

    /// The verbs discovery lists.
    pub fn verbs(&self) -> Vec<&'static str> {
        if self.is_component_statuses() {
            return vec!["get", "list"];
        }
        vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ]
    }

    /// The control plane's health (`kubectl get componentstatuses`): computed, never stored.
    pub fn is_component_statuses(&self) -> bool {
        self.group.is_empty() && self.plural == "componentstatuses"
    }

    /// Table columns: Name, this resource's, and Age unless a column shows the creation time
    /// already.
    pub fn table_columns(&self) -> Vec<Column> {
        let mut columns = vec![Column::name_column()];
        columns.extend(self.columns.iter().cloned());
        let shows_creation = self.columns.iter().any(|c| match &c.cell {
            Cell::Age(p) | Cell::Path(p) => p == ".metadata.creationTimestamp",
            _ => false,
        });
        if !shows_creation {
            columns.push(Column::age());
        }
        columns
    }
}

type ResourceKey = (String, String, String);

/// The key prefix of every object of a resource, by the group it is stored under.
pub fn key_prefix(group: &str, plural: &str) -> String {
    let group = if group.is_empty() { "core" } else { group };
    format!("/registry/{group}/{plural}/")
}

/// Every resource served, by (group, version, plural).
pub struct Registry {
    resources: RwLock<BTreeMap<ResourceKey, Arc<Resource>>>,
    converters: RwLock<Converters>,
}

impl Registry {
    /// A registry serving these resources (see [`super::builtin::registry`] for the usual one).
    pub fn from_resources(resources: Vec<Resource>) -> Registry {
        let resources = resources
            .into_iter()
            .map(|r| {
                (
                    (r.group.clone(), r.version.clone(), r.plural.clone()),
                    Arc::new(r),
                )
            })
            .collect();
        Registry {
            resources: RwLock::new(resources),
            converters: RwLock::default(),
        }
    }

    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<Resource>> {
        let key = (group.to_string(), version.to_string(), plural.to_string());
        self.resources.read().unwrap().get(&key).cloned()
    }

    /// The resource whose objects are stored under `key`.
    pub fn of_key(&self, key: &str) -> Option<Arc<Resource>> {
        // Versions of one resource share its storage; the stored version describes the object
        // as it is stored (another would convert it).
        let all = self.resources.read().unwrap();
        let mut stored_under = all.values().filter(|r| key.starts_with(&r.prefix()));
        let first = stored_under.next()?;
        if first.version == first.storage_version {
            return Some(first.clone());
        }
        Some(
            stored_under
                .find(|r| r.version == r.storage_version)
                .unwrap_or(first)
                .clone(),
        )
    }

    /// Every resource, ordered by group, version and plural.
    pub fn all(&self) -> Vec<Arc<Resource>> {
        self.resources.read().unwrap().values().cloned().collect()
    }

    /// Converts the objects of `group`'s CRDs that convert by webhook with `converter`, from
    /// now on and for the CRDs served already.
    pub fn register_converter(&self, group: &str, converter: Arc<dyn Converter>) {
        self.converters
            .write()
            .unwrap()
            .insert(group.to_string(), converter.clone());
        let mut all = self.resources.write().unwrap();
        for resource in all.values_mut() {
            if resource.group == group
                && resource.crd_name.is_some()
                && converter.converts(&resource.kind)
            {
                let mut with = (**resource).clone();
                with.converter = Some(converter.clone());
                *resource = Arc::new(with);
            }
        }
    }

    /// The converters registered, by group (what the conversion webhook serves).
    pub fn converters(&self) -> Converters {
        self.converters.read().unwrap().clone()
    }

    /// The version a kind of a group is stored in, if it is served.
    pub fn storage_version(&self, group: &str, kind: &str) -> Option<String> {
        let all = self.resources.read().unwrap();
        all.values()
            .find(|r| r.group == group && r.kind == kind)
            .map(|r| r.storage_version.clone())
    }

    /// Serves the versions of a CRD (replacing what it served before). The CRD must be valid.
    pub fn install_crd(&self, crd: &Value) -> Vec<Arc<Resource>> {
        let mut resources = resources_of_crd(crd);
        if crd["spec"]["conversion"]["strategy"] == "Webhook"
            && let Some(converter) = self
                .converters
                .read()
                .unwrap()
                .get(crd["spec"]["group"].as_str().unwrap_or_default())
        {
            for resource in &mut resources {
                if converter.converts(&resource.kind) {
                    Arc::make_mut(resource).converter = Some(converter.clone());
                }
            }
        }
        let name = crd["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mut all = self.resources.write().unwrap();
        all.retain(|_, r| r.crd_name.as_deref() != Some(&name));
        for r in &resources {
            all.insert(
                (r.group.clone(), r.version.clone(), r.plural.clone()),
                r.clone(),
            );
        }
        resources
    }

    /// Serves exactly these CRDs' resources: each installed, and those of any other CRD
    /// removed.
    pub fn sync_crds(&self, crds: &[Value]) {
        let names: std::collections::HashSet<&str> = crds
            .iter()
            .filter_map(|crd| crd["metadata"]["name"].as_str())
            .collect();
        self.resources
            .write()
            .unwrap()
            .retain(|_, r| r.crd_name.as_deref().is_none_or(|n| names.contains(n)));
        for crd in crds {
            self.install_crd(crd);
        }
    }

    /// Stops serving a CRD's resources.
    pub fn remove_crd(&self, name: &str) {
        self.resources
            .write()
            .unwrap()
            .retain(|_, r| r.crd_name.as_deref() != Some(name));
    }

    /// The served group versions, each group's preferred (first) version first.
    pub fn group_versions(&self) -> Vec<(String, Vec<String>)> {
        let all = self.resources.read().unwrap();
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for r in all.values() {
            match groups.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) => {
                    if !versions.contains(&r.version) {
                        versions.push(r.version.clone());
                    }
                }
                None => groups.push((r.group.clone(), vec![r.version.clone()])),
            }
        }
        for (_, versions) in &mut groups {
            versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        groups
    }
}

/// Kubernetes' version ordering: GA above beta above alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major = digits.parse().unwrap_or(0);
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (level, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    (level, major, num.parse().unwrap_or(0))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The served versions of a CRD as resources.
pub fn resources_of_crd(crd: &Value) -> Vec<Arc<Resource>> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v["storage"] == Value::Bool(true))
        .and_then(|v| v["name"].as_str())
        .unwrap_or_default()
        .to_string();
    versions
        .iter()
        .filter(|v| v["served"] != Value::Bool(false))
        .map(|v| {
            let scale = v["subresources"].get("scale").map(|s| Scale {
                spec_replicas_path: s["specReplicasPath"].as_str().unwrap_or_default().into(),
                status_replicas_path: s["statusReplicasPath"].as_str().unwrap_or_default().into(),
                label_selector_path: s["labelSelectorPath"].as_str().map(String::from),
            });
            let columns = v["additionalPrinterColumns"]
                .as_array()
                .map(|cols| {
                    cols.iter()
                        .map(|c| {
                            let json_path = c["jsonPath"].as_str().unwrap_or_default().to_string();
                            let type_ = c["type"].as_str().unwrap_or("string");
                            Column {
                                name: c["name"].as_str().unwrap_or_default().into(),
                                type_: type_.into(),
                                format: c["format"].as_str().unwrap_or_default().into(),
                                description: c["description"].as_str().unwrap_or_default().into(),
                                priority: c["priority"].as_i64().unwrap_or(0) as i32,
                                cell: if type_ == "date" {
                                    Cell::Age(json_path)
                                } else {
                                    Cell::Path(json_path)
                                },
                            }
                        })
                        .collect()
                })
                .unwrap_or_else(|| vec![Column::age()]);
            Arc::new(Resource {
                group: spec["group"].as_str().unwrap_or_default().into(),
                version: v["name"].as_str().unwrap_or_default().into(),
                kind: names["kind"].as_str().unwrap_or_default().into(),
                plural: names["plural"].as_str().unwrap_or_default().into(),
                singular: names["singular"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| names["kind"].as_str().unwrap_or_default().to_lowercase()),
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                namespaced: spec["scope"] != "Cluster",
                status_subresource: v["subresources"].get("status").is_some(),
                scale,
                columns,
                schema: v["schema"].get("openAPIV3Schema").cloned().map(Arc::new),
                tracks_generation: true,
                storage_version: storage_version.clone(),
                crd_name: Some(name.to_string()),
                storage_group: None,
                converter: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order_is_kubernetes_order() {
        let mut v = vec![
            "v1alpha1", "v1beta1", "v1", "v2beta2", "v1beta2", "v2", "v10",
        ];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            v,
            [
                "v10", "v2", "v1", "v2beta2", "v1beta2", "v1beta1", "v1alpha1"
            ]
        );
    }

    #[test]
    fn crds_are_served_and_removed() {
        let registry = crate::apiserver::builtin::registry();
        let crd = capictl_crd();
        let served = registry.install_crd(&crd);
        assert_eq!(served.len(), 1);
        let md = registry
            .get("cluster.x-k8s.io", "v1beta2", "machinedeployments")
            .unwrap();
        assert!(md.namespaced && md.status_subresource);
        assert_eq!(
            md.scale.as_ref().unwrap().spec_replicas_path,
            ".spec.replicas"
        );
        assert_eq!(md.short_names, ["md"]);
        assert!(
            registry
                .group_versions()
                .iter()
                .any(|(g, _)| g == "cluster.x-k8s.io")
        );
        registry.remove_crd("machinedeployments.cluster.x-k8s.io");
        assert!(
            registry
                .get("cluster.x-k8s.io", "v1beta2", "machinedeployments")
                .is_none()
        );
    }

    #[test]
    fn a_sync_serves_exactly_the_crds_given() {
        let registry = crate::apiserver::builtin::registry();
        let served = |registry: &Registry| {
            registry
                .get("cluster.x-k8s.io", "v1beta2", "machinedeployments")
                .is_some()
        };
        let built_in = registry.all().len();
        registry.sync_crds(&[capictl_crd()]);
        assert!(served(&registry));
        registry.sync_crds(&[capictl_crd()]);
        assert_eq!(registry.all().len(), built_in + 1);
        registry.sync_crds(&[]);
        assert!(!served(&registry));
        assert_eq!(registry.all().len(), built_in, "the built-in types stay");
    }

    /// A CRD as a provider would install it (the API server knows no Cluster API itself).
    fn capictl_crd() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "machinedeployments.cluster.x-k8s.io"},
            "spec": {"group": "cluster.x-k8s.io", "scope": "Namespaced",
                "names": {"plural": "machinedeployments", "singular": "machinedeployment", "kind": "MachineDeployment", "shortNames": ["md"], "categories": ["cluster-api"]},
                "versions": [{"name": "v1beta2", "served": true, "storage": true,
                    "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        })
    }
}
