//! The Cluster API types, field for field with upstream's v1beta2 JSON, and the CRDs generated
//! from them.

// `#[kube(printcolumn(...))]` repeats keys such as `type_` once per column, which this lint
// mistakes for duplicated attributes.
#![allow(clippy::duplicated_attributes)]

pub mod cluster;
pub mod cluster_class;
pub mod cluster_resource_set;
pub mod clusterctl;
pub mod common;
pub mod conversion;
pub mod dev;
pub mod docker;
pub mod health_check;
pub mod in_memory;
pub mod kubeadm_config;
pub mod kubeadm_control_plane;
pub mod machine;
pub mod machine_deployment;
pub mod machine_drain_rule;
pub mod machine_health_check;
pub mod machine_pool;
pub mod machine_set;
pub mod runtime;
mod schema;

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use cluster::{CLUSTER_FINALIZER, Cluster};
pub use cluster_class::ClusterClass;
pub use cluster_resource_set::{ClusterResourceSet, ClusterResourceSetBinding};
pub use clusterctl::Provider;
pub use common::{
    CLAIMED_BY_ANNOTATION, CLONED_FROM_GROUP_KIND_ANNOTATION, CLONED_FROM_NAME_ANNOTATION,
    CLUSTER_NAME_LABEL, CLUSTER_NAMESPACE_ANNOTATION, DELETION_PROTECTION_ANNOTATION,
    MACHINE_ANNOTATION, MANAGEMENT_IDENTITY_CONFIGMAP, MANAGEMENT_IDENTITY_NAMESPACE,
    OWNER_KIND_ANNOTATION, OWNER_NAME_ANNOTATION, PAUSED_ANNOTATION, TAKE_OVER_ANNOTATION,
    parse_duration,
};
pub use dev::{DEV_CLUSTER_FINALIZER, DEV_MACHINE_FINALIZER, DEV_MACHINE_POOL_FINALIZER};
pub use dev::{
    DevCluster, DevClusterTemplate, DevMachine, DevMachinePool, DevMachinePoolTemplate,
    DevMachineTemplate,
};
pub use docker::{DOCKER_CLUSTER_FINALIZER, DOCKER_MACHINE_FINALIZER};
pub use docker::{
    DockerCluster, DockerClusterTemplate, DockerMachine, DockerMachinePool,
    DockerMachinePoolTemplate, DockerMachineTemplate,
};
pub use in_memory::{IN_MEMORY_CLUSTER_FINALIZER, IN_MEMORY_MACHINE_FINALIZER};
pub use in_memory::{
    InMemoryCluster, InMemoryClusterTemplate, InMemoryMachine, InMemoryMachineTemplate,
};
pub use kubeadm_config::{KubeadmConfig, KubeadmConfigTemplate};
pub use kubeadm_control_plane::KUBEADM_CONTROL_PLANE_FINALIZER;
pub use kubeadm_control_plane::{KubeadmControlPlane, KubeadmControlPlaneTemplate};
pub use machine::Machine;
pub use machine::{
    CERTIFICATES_EXPIRY_ANNOTATION, CONTROL_PLANE_LABEL, CONTROL_PLANE_NAME_LABEL,
    DEPLOYMENT_NAME_LABEL, EXCLUDE_DRAIN_ANNOTATION, MACHINE_FINALIZER, OWNER_REMEDIATED,
    PRE_DRAIN_HOOK, PRE_TERMINATE_HOOK, SET_NAME_LABEL,
};
pub use machine_deployment::MachineDeployment;
pub use machine_deployment::{
    AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_MIN_SIZE_ANNOTATION,
    AUTOSCALER_SCALE_DOWN_UNNEEDED_TIME_ANNOTATION, MACHINE_DEPLOYMENT_FINALIZER,
    MAX_REPLICAS_ANNOTATION, REVISION_ANNOTATION, TEMPLATE_HASH_LABEL, autoscaler_bounds,
};
pub use machine_drain_rule::{MachineDrainRule, POD_DRAIN_LABEL};
pub use machine_health_check::MachineHealthCheck;
pub use machine_health_check::{REMEDIATE_MACHINE_ANNOTATION, SKIP_REMEDIATION_ANNOTATION};
pub use machine_pool::MachinePool;
pub use machine_pool::{MACHINE_POOL_FINALIZER, MACHINE_POOL_NAME_LABEL};
pub use machine_set::MachineSet;
pub use machine_set::{
    DELETE_MACHINE_ANNOTATION, DISABLE_CREATE_ANNOTATION, MACHINE_SET_FINALIZER,
    SKIP_PREFLIGHT_ANNOTATION,
};
pub use runtime::ExtensionConfig;

/// The Cluster API contract these types implement.
pub const CONTRACT_VERSION: &str = "v1beta2";
/// The label on a provider's CRDs that names the API versions implementing a contract.
pub const CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";
/// The label on every object `capictl init` installs (clusterctl's): `capictl move` takes the
/// kinds of the CRDs carrying it.
pub const CLUSTERCTL_LABEL: &str = "clusterctl.cluster.x-k8s.io";
/// The label on every object `capictl init` installs, naming the provider it belongs to.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";

/// A kind's CRD name, and how to make its CRD.
type Kind = (&'static str, fn() -> CustomResourceDefinition);

/// The groups of CRDs that are installed together, one per provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum CrdSet {
    /// cluster.x-k8s.io: Cluster, Machine, MachineSet, MachineDeployment, MachinePool,
    /// MachineHealthCheck, MachineDrainRule, ClusterClass; addons.cluster.x-k8s.io: ClusterResourceSet,
    /// ClusterResourceSetBinding; runtime.cluster.x-k8s.io: ExtensionConfig.
    Core,
    /// bootstrap.cluster.x-k8s.io: KubeadmConfig, KubeadmConfigTemplate.
    KubeadmBootstrap,
    /// controlplane.cluster.x-k8s.io: KubeadmControlPlane, KubeadmControlPlaneTemplate.
    KubeadmControlPlane,
    /// infrastructure.cluster.x-k8s.io v1beta2: the Docker kinds, and the Dev kinds whose Docker
    /// or in-memory back end the two infrastructure providers reconcile (upstream's Docker
    /// provider serves both).
    Docker,
    /// infrastructure.cluster.x-k8s.io v1alpha1: the in-memory kinds.
    InMemory,
    /// clusterctl.cluster.x-k8s.io: the provider inventory.
    Clusterctl,
}

impl CrdSet {
    pub const ALL: [CrdSet; 6] = [
        CrdSet::Core,
        CrdSet::KubeadmBootstrap,
        CrdSet::KubeadmControlPlane,
        CrdSet::Docker,
        CrdSet::InMemory,
        CrdSet::Clusterctl,
    ];

    /// The provider name clusterctl labels this set's objects with.
    pub fn provider_label(self) -> &'static str {
        match self {
            CrdSet::Core => "cluster-api",
            CrdSet::KubeadmBootstrap => "bootstrap-kubeadm",
            CrdSet::KubeadmControlPlane => "control-plane-kubeadm",
            CrdSet::Docker => "infrastructure-docker",
            CrdSet::InMemory => "infrastructure-in-memory",
            CrdSet::Clusterctl => "clusterctl",
        }
    }

    /// The kinds of this set: each one's CRD name, and how to make its CRD.
    fn kinds(self) -> Vec<Kind> {
        fn of<K: CustomResourceExt>() -> Kind {
            (K::crd_name(), K::crd)
        }
        match self {
            CrdSet::Core => vec![
                of::<Cluster>(),
                of::<ClusterClass>(),
                of::<Machine>(),
                of::<MachineSet>(),
                of::<MachineDeployment>(),
                of::<MachinePool>(),
                of::<MachineHealthCheck>(),
                of::<MachineDrainRule>(),
                of::<ClusterResourceSet>(),
                of::<ClusterResourceSetBinding>(),
                of::<ExtensionConfig>(),
            ],
            CrdSet::KubeadmBootstrap => vec![of::<KubeadmConfig>(), of::<KubeadmConfigTemplate>()],
            CrdSet::KubeadmControlPlane => vec![
                of::<KubeadmControlPlane>(),
                of::<KubeadmControlPlaneTemplate>(),
            ],
            CrdSet::Docker => vec![
                of::<DockerCluster>(),
                of::<DockerClusterTemplate>(),
                of::<DockerMachine>(),
                of::<DockerMachineTemplate>(),
                of::<DevCluster>(),
                of::<DevClusterTemplate>(),
                of::<DevMachine>(),
                of::<DevMachineTemplate>(),
                of::<DevMachinePool>(),
                of::<DevMachinePoolTemplate>(),
                of::<DockerMachinePool>(),
                of::<DockerMachinePoolTemplate>(),
            ],
            CrdSet::InMemory => vec![
                of::<InMemoryCluster>(),
                of::<InMemoryClusterTemplate>(),
                of::<InMemoryMachine>(),
                of::<InMemoryMachineTemplate>(),
            ],
            CrdSet::Clusterctl => vec![of::<Provider>()],
        }
    }

    /// The names of this set's CRDs (`clusters.cluster.x-k8s.io`, …), without making them.
    pub fn crd_names(self) -> Vec<&'static str> {
        self.kinds().into_iter().map(|(name, _)| name).collect()
    }

    /// The CRDs of this set, labelled as an installed provider's are, each serving v1beta1
    /// beside v1beta2 where upstream still does.
    pub fn crds(self) -> Vec<CustomResourceDefinition> {
        self.kinds()
            .into_iter()
            .map(|(_, crd)| self.label(with_spoke_version(crd())))
            .collect()
    }

    fn label(self, mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
        let labels = crd.metadata.labels.get_or_insert_with(BTreeMap::new);
        if self == CrdSet::Clusterctl {
            labels.insert(
                "clusterctl.cluster.x-k8s.io/core".into(),
                "inventory".into(),
            );
        } else {
            labels.insert(PROVIDER_LABEL.into(), self.provider_label().into());
            // The contract label lists the API versions of this CRD that implement the
            // contract; core controllers read it to know which version to fetch. A version
            // kept for an older contract is labelled with that one, as upstream's are.
            let versions: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
            let (older, current): (Vec<&str>, Vec<&str>) =
                versions.iter().partition(|v| **v == conversion::SPOKE);
            labels.insert(CONTRACT_LABEL.into(), current.join("_"));
            if !older.is_empty() {
                labels.insert("cluster.x-k8s.io/v1beta1".into(), older.join("_"));
            }
        }
        crd
    }
}

/// `crd` with its kind's v1beta1 version added (served, deprecated, not stored), its schema
/// and printer columns derived from v1beta2's by the conversion rules, and conversion by
/// webhook, as upstream's CRDs declare it; `capictl init` points the webhook at the provider.
fn with_spoke_version(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let group = crd.spec.group.clone();
    let kind = crd.spec.names.kind.clone();
    if conversion::rules_of(&group, &kind).is_none() {
        return crd;
    }
    let mut value = serde_json::to_value(&crd).expect("CRDs serialize");
    let versions = value["spec"]["versions"].as_array_mut().expect("versions");
    let Some(hub) = versions
        .iter()
        .find(|v| v["name"] == conversion::HUB)
        .cloned()
    else {
        return crd;
    };
    let mut spoke = hub.clone();
    spoke["name"] = serde_json::json!(conversion::SPOKE);
    spoke["storage"] = serde_json::json!(false);
    spoke["deprecated"] = serde_json::json!(true);
    let hub_schema = &hub["schema"]["openAPIV3Schema"];
    spoke["schema"]["openAPIV3Schema"] =
        conversion::spoke_schema(&group, &kind, hub_schema).expect("rules exist");
    if spoke["schema"]["openAPIV3Schema"]["properties"]
        .get("status")
        .is_none()
        && let Some(subresources) = spoke["subresources"].as_object_mut()
    {
        subresources.remove("status");
    }
    for column in spoke["additionalPrinterColumns"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        let path = column["jsonPath"].as_str().unwrap_or_default();
        column["jsonPath"] = serde_json::json!(conversion::spoke_json_path(&group, &kind, path));
    }
    versions.insert(0, spoke);
    value["spec"]["conversion"] = serde_json::json!({
        "strategy": "Webhook",
        "webhook": {"conversionReviewVersions": ["v1"]},
    });
    serde_json::from_value(value).expect("a CRD")
}

/// The CRDs of the given sets, in install order.
pub fn crds(sets: &[CrdSet]) -> Vec<CustomResourceDefinition> {
    sets.iter().flat_map(|set| set.crds()).collect()
}
