//! The built-in kinds the server serves beside CRDs: their group, version, scope, whether
//! they count generations, and the columns `kubectl get` prints for them.

use serde_json::Value;

use super::registry::{Cell, Column, Registry, Resource};

/// A registry serving the built-in kinds (CRDs join it as they are created).
pub fn registry() -> Registry {
    Registry::from_resources(BUILTINS.iter().map(from_builtin).collect())
}

struct Builtin {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    status: bool,
    generation: bool,
    columns: fn() -> Vec<Column>,
}

fn no_columns() -> Vec<Column> {
    Vec::new()
}

/// A kind served and stored as kube-apiserver stores it, with no columns of its own; nothing
/// in capictl runs it (Jobs do not start, quotas are not counted), but charts and GitOps tools
/// pointed at a management cluster create them.
const fn stored(
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    short_names: &'static [&'static str],
    namespaced: bool,
    status: bool,
    generation: bool,
) -> Builtin {
    Builtin {
        group,
        version: "v1",
        kind,
        plural,
        short_names,
        namespaced,
        status,
        generation,
        columns: no_columns,
    }
}

fn path(name: &str, type_: &str, p: &str) -> Column {
    Column::new(name, type_, Cell::Path(p.into()))
}

fn computed(name: &str, f: fn(&Value) -> Value) -> Column {
    Column::new(name, "string", Cell::Computed(f))
}

fn integer(name: &str, f: fn(&Value) -> Value) -> Column {
    Column::new(name, "integer", Cell::Computed(f))
}

/// A column `-o wide` adds.
fn wide(mut column: Column) -> Column {
    column.priority = 1;
    column
}

const BUILTINS: &[Builtin] = &[
    Builtin {
        group: "",
        version: "v1",
        kind: "Namespace",
        plural: "namespaces",
        short_names: &["ns"],
        namespaced: false,
        status: true,
        generation: false,
        columns: || vec![path("Status", "string", ".status.phase")],
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: false,
        columns: || {
            vec![
                path("Type", "string", ".type"),
                Column::new("Data", "string", Cell::Count(".data".into())),
            ]
        },
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        short_names: &["cm"],
        namespaced: true,
        status: false,
        generation: false,
        columns: || vec![Column::new("Data", "string", Cell::Count(".data".into()))],
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Event",
        plural: "events",
        short_names: &["ev"],
        namespaced: true,
        status: false,
        generation: false,
        columns: || {
            vec![
                path("Type", "string", ".type"),
                path("Reason", "string", ".reason"),
                Column::new("Object", "string", Cell::Computed(involved_object)),
                path("Message", "string", ".message"),
            ]
        },
    },
    Builtin {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        short_names: &["ev"],
        namespaced: true,
        status: false,
        generation: false,
        columns: || {
            vec![
                path("Type", "string", ".type"),
                path("Reason", "string", ".reason"),
                path("Note", "string", ".note"),
            ]
        },
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "ServiceAccount",
        plural: "serviceaccounts",
        short_names: &["sa"],
        namespaced: true,
        status: false,
        generation: false,
        columns: no_columns,
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Node",
        plural: "nodes",
        short_names: &["no"],
        namespaced: false,
        status: true,
        generation: false,
        columns: || {
            vec![
                Column::new("Status", "string", Cell::Computed(node_status)),
                Column::new("Roles", "string", Cell::Computed(node_roles)),
                Column::age(),
                path("Version", "string", ".status.nodeInfo.kubeletVersion"),
                wide(computed("Internal-IP", super::printers::node_internal_ip)),
                wide(computed("External-IP", super::printers::node_external_ip)),
                wide(path("OS-Image", "string", ".status.nodeInfo.osImage")),
                wide(path(
                    "Kernel-Version",
                    "string",
                    ".status.nodeInfo.kernelVersion",
                )),
                wide(path(
                    "Container-Runtime",
                    "string",
                    ".status.nodeInfo.containerRuntimeVersion",
                )),
            ]
        },
    },
    // Deprecated in Kubernetes and still served; read-only ([`super::handlers`]).
    Builtin {
        group: "",
        version: "v1",
        kind: "ComponentStatus",
        plural: "componentstatuses",
        short_names: &["cs"],
        namespaced: false,
        status: false,
        generation: false,
        columns: || {
            vec![
                path("Status", "string", ".conditions[0].type"),
                path("Message", "string", ".conditions[0].message"),
                path("Error", "string", ".conditions[0].error"),
            ]
        },
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Pod",
        plural: "pods",
        short_names: &["po"],
        namespaced: true,
        status: true,
        generation: false,
        columns: || {
            use super::printers::*;
            vec![
                computed("Ready", pod_ready),
                computed("Status", pod_status),
                computed("Restarts", pod_restarts),
                Column::age(),
                wide(computed("IP", pod_ip)),
                wide(computed("Node", pod_node)),
                wide(computed("Nominated Node", pod_nominated_node)),
                wide(computed("Readiness Gates", pod_readiness_gates)),
            ]
        },
    },
    Builtin {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        short_names: &["svc"],
        namespaced: true,
        status: true,
        generation: false,
        columns: || {
            vec![
                path("Type", "string", ".spec.type"),
                path("Cluster-IP", "string", ".spec.clusterIP"),
                computed("External-IP", super::printers::service_external_ip),
                computed("Port(s)", super::printers::service_ports),
                Column::age(),
                wide(computed("Selector", super::printers::service_selector)),
            ]
        },
    },
    Builtin {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: false,
        columns: || vec![path("Holder", "string", ".spec.holderIdentity")],
    },
    Builtin {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        short_names: &["crd", "crds"],
        namespaced: false,
        status: true,
        generation: true,
        columns: || {
            let mut c = Column::new(
                "Created At",
                "string",
                Cell::Path(".metadata.creationTimestamp".into()),
            );
            c.description = "When the CRD was created.".into();
            vec![c]
        },
    },
    Builtin {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        short_names: &["deploy"],
        namespaced: true,
        status: true,
        generation: true,
        columns: || {
            template_columns(vec![
                Column::new("Ready", "string", Cell::Computed(deployment_ready)),
                path("Up-to-date", "integer", ".status.updatedReplicas"),
                path("Available", "integer", ".status.availableReplicas"),
            ])
        },
    },
    Builtin {
        group: "apps",
        version: "v1",
        kind: "DaemonSet",
        plural: "daemonsets",
        short_names: &["ds"],
        namespaced: true,
        status: true,
        generation: true,
        columns: || {
            use super::printers::*;
            template_columns(vec![
                integer("Desired", daemons_desired),
                integer("Current", daemons_current),
                integer("Ready", daemons_ready),
                integer("Up-to-date", daemons_updated),
                integer("Available", daemons_available),
                computed("Node Selector", daemons_node_selector),
            ])
        },
    },
    // Asked, never stored (see `reviews`).
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectAccessReview",
        plural: "selfsubjectaccessreviews",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: false,
        columns: no_columns,
    },
    // Asked, never stored (see `reviews`).
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SubjectAccessReview",
        plural: "subjectaccessreviews",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: false,
        columns: no_columns,
    },
    // Asked, never stored (see `reviews`).
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "LocalSubjectAccessReview",
        plural: "localsubjectaccessreviews",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: false,
        columns: no_columns,
    },
    // Asked, never stored (see `reviews`).
    Builtin {
        group: "authorization.k8s.io",
        version: "v1",
        kind: "SelfSubjectRulesReview",
        plural: "selfsubjectrulesreviews",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: false,
        columns: no_columns,
    },
    // Asked, never stored (see `reviews`).
    Builtin {
        group: "authentication.k8s.io",
        version: "v1",
        kind: "SelfSubjectReview",
        plural: "selfsubjectreviews",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: false,
        columns: no_columns,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRole",
        plural: "clusterroles",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: false,
        columns: no_columns,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "ClusterRoleBinding",
        plural: "clusterrolebindings",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: false,
        columns: no_columns,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "Role",
        plural: "roles",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: false,
        columns: no_columns,
    },
    Builtin {
        group: "rbac.authorization.k8s.io",
        version: "v1",
        kind: "RoleBinding",
        plural: "rolebindings",
        short_names: &[],
        namespaced: true,
        status: false,
        generation: false,
        columns: no_columns,
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "ValidatingWebhookConfiguration",
        plural: "validatingwebhookconfigurations",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: true,
        columns: no_columns,
    },
    Builtin {
        group: "admissionregistration.k8s.io",
        version: "v1",
        kind: "MutatingWebhookConfiguration",
        plural: "mutatingwebhookconfigurations",
        short_names: &[],
        namespaced: false,
        status: false,
        generation: true,
        columns: no_columns,
    },
    Builtin {
        group: "certificates.k8s.io",
        version: "v1",
        kind: "CertificateSigningRequest",
        plural: "certificatesigningrequests",
        short_names: &["csr"],
        namespaced: false,
        status: true,
        generation: false,
        columns: || {
            vec![
                path("SignerName", "string", ".spec.signerName"),
                path("Requestor", "string", ".spec.username"),
            ]
        },
    },
    Builtin {
        group: "policy",
        version: "v1",
        kind: "PodDisruptionBudget",
        plural: "poddisruptionbudgets",
        short_names: &["pdb"],
        namespaced: true,
        status: true,
        generation: true,
        columns: || {
            use super::printers::*;
            vec![
                computed("Min Available", budget_min_available),
                computed("Max Unavailable", budget_max_unavailable),
                integer("Allowed Disruptions", budget_allowed),
            ]
        },
    },
    stored(
        "",
        "ReplicationController",
        "replicationcontrollers",
        &["rc"],
        true,
        true,
        true,
    ),
    stored(
        "",
        "ResourceQuota",
        "resourcequotas",
        &["quota"],
        true,
        true,
        false,
    ),
    stored(
        "",
        "LimitRange",
        "limitranges",
        &["limits"],
        true,
        false,
        false,
    ),
    Builtin {
        columns: || vec![computed("Endpoints", super::printers::endpoints)],
        ..stored("", "Endpoints", "endpoints", &["ep"], true, false, false)
    },
    stored(
        "",
        "PersistentVolume",
        "persistentvolumes",
        &["pv"],
        false,
        true,
        false,
    ),
    stored(
        "",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        &["pvc"],
        true,
        true,
        false,
    ),
    stored("", "PodTemplate", "podtemplates", &[], true, false, false),
    Builtin {
        columns: || {
            use super::printers::*;
            template_columns(vec![
                integer("Desired", replicas_desired),
                integer("Current", replicas_current),
                integer("Ready", replicas_ready),
            ])
        },
        ..stored(
            "apps",
            "ReplicaSet",
            "replicasets",
            &["rs"],
            true,
            true,
            true,
        )
    },
    Builtin {
        columns: || {
            use super::printers::*;
            template_columns(vec![computed("Ready", stateful_ready)])
        },
        ..stored(
            "apps",
            "StatefulSet",
            "statefulsets",
            &["sts"],
            true,
            true,
            true,
        )
    },
    stored(
        "apps",
        "ControllerRevision",
        "controllerrevisions",
        &[],
        true,
        false,
        false,
    ),
    Builtin {
        columns: || {
            use super::printers::*;
            template_columns(vec![
                computed("Status", job_status),
                computed("Completions", job_completions),
                computed("Duration", job_duration),
            ])
        },
        ..stored("batch", "Job", "jobs", &[], true, true, true)
    },
    Builtin {
        columns: || {
            use super::printers::*;
            vec![
                Column::new("Schedule", "string", Cell::Path(".spec.schedule".into())),
                computed("Timezone", cron_time_zone),
                computed("Suspend", cron_suspend),
                integer("Active", cron_active),
                computed("Last Schedule", cron_last_schedule),
                Column::age(),
                wide(computed("Containers", cron_container_names)),
                wide(computed("Images", cron_images)),
            ]
        },
        ..stored("batch", "CronJob", "cronjobs", &["cj"], true, true, true)
    },
    stored(
        "networking.k8s.io",
        "Ingress",
        "ingresses",
        &["ing"],
        true,
        true,
        true,
    ),
    stored(
        "networking.k8s.io",
        "IngressClass",
        "ingressclasses",
        &[],
        false,
        false,
        true,
    ),
    stored(
        "networking.k8s.io",
        "NetworkPolicy",
        "networkpolicies",
        &["netpol"],
        true,
        false,
        true,
    ),
    stored(
        "scheduling.k8s.io",
        "PriorityClass",
        "priorityclasses",
        &["pc"],
        false,
        false,
        false,
    ),
    stored(
        "discovery.k8s.io",
        "EndpointSlice",
        "endpointslices",
        &[],
        true,
        false,
        false,
    ),
    stored(
        "storage.k8s.io",
        "StorageClass",
        "storageclasses",
        &["sc"],
        false,
        false,
        false,
    ),
    stored(
        "storage.k8s.io",
        "VolumeAttachment",
        "volumeattachments",
        &[],
        false,
        true,
        true,
    ),
    Builtin {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        plural: "apiservices",
        short_names: &[],
        namespaced: false,
        status: true,
        generation: false,
        columns: || {
            vec![
                Column::new("Service", "string", Cell::Computed(api_service_backend)),
                Column::new("Available", "string", Cell::Computed(api_service_available)),
            ]
        },
    },
];

/// Where an APIService's requests go: `Local` for a group this server serves itself.
fn api_service_backend(o: &Value) -> Value {
    let service = &o["spec"]["service"];
    Value::String(
        match (service["namespace"].as_str(), service["name"].as_str()) {
            (Some(ns), Some(name)) => format!("{ns}/{name}"),
            _ => "Local".into(),
        },
    )
}

/// `True`, or `False (reason)` as kubectl shows it.
fn api_service_available(o: &Value) -> Value {
    let available = o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"));
    Value::String(match available {
        Some(c) if c["status"] == "True" => "True".into(),
        Some(c) => format!(
            "{} ({})",
            c["status"].as_str().unwrap_or("Unknown"),
            c["reason"].as_str().unwrap_or_default()
        ),
        None => "Unknown".into(),
    })
}

fn involved_object(o: &Value) -> Value {
    let i = &o["involvedObject"];
    Value::String(format!(
        "{}/{}",
        i["kind"].as_str().unwrap_or_default().to_lowercase(),
        i["name"].as_str().unwrap_or_default()
    ))
}

/// `columns`, then Age and what `-o wide` adds for a kind with a Pod template (workloads,
/// Jobs): its containers, images and selector.
fn template_columns(mut columns: Vec<Column>) -> Vec<Column> {
    use super::printers::{template_container_names, template_images, workload_selector};
    columns.extend([
        Column::age(),
        wide(computed("Containers", template_container_names)),
        wide(computed("Images", template_images)),
        wide(computed("Selector", workload_selector)),
    ]);
    columns
}

fn node_status(o: &Value) -> Value {
    let ready = o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
        .map(|c| c["status"] == "True");
    let mut status = match ready {
        Some(true) => "Ready".to_string(),
        _ => "NotReady".to_string(),
    };
    if o["spec"]["unschedulable"] == Value::Bool(true) {
        status.push_str(",SchedulingDisabled");
    }
    Value::String(status)
}

fn node_roles(o: &Value) -> Value {
    let mut roles: Vec<&str> = o["metadata"]["labels"]
        .as_object()
        .map(|labels| {
            labels
                .keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    roles.sort_unstable();
    Value::String(if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    })
}

fn deployment_ready(o: &Value) -> Value {
    let ready = o["status"]["readyReplicas"].as_i64().unwrap_or(0);
    let want = o["spec"]["replicas"].as_i64().unwrap_or(1);
    Value::String(format!("{ready}/{want}"))
}

fn from_builtin(b: &Builtin) -> Resource {
    Resource {
        group: b.group.into(),
        version: b.version.into(),
        kind: b.kind.into(),
        plural: b.plural.into(),
        singular: b.kind.to_lowercase(),
        short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
        // `kubectl get all` lists the workload kinds.
        categories: if matches!(
            b.plural,
            "pods"
                | "services"
                | "deployments"
                | "daemonsets"
                | "replicationcontrollers"
                | "replicasets"
                | "statefulsets"
                | "jobs"
                | "cronjobs"
        ) {
            vec!["all".into()]
        } else {
            vec![]
        },
        namespaced: b.namespaced,
        status_subresource: b.status,
        // kube-apiserver's scale subresources of the built-in kinds (`kubectl scale`, the
        // HorizontalPodAutoscaler): spec.replicas and status.replicas, the selector from
        // spec.selector.
        scale: matches!(
            (b.group, b.plural),
            ("apps", "deployments" | "replicasets" | "statefulsets")
                | ("", "replicationcontrollers")
        )
        .then(|| super::registry::Scale {
            spec_replicas_path: ".spec.replicas".into(),
            status_replicas_path: ".status.replicas".into(),
            label_selector_path: None,
        }),
        columns: (b.columns)(),
        schema: None,
        tracks_generation: b.generation,
        storage_version: b.version.into(),
        crd_name: None,
        storage_group: super::events::storage_group(b.group, b.plural),
        converter: None,
    }
}
